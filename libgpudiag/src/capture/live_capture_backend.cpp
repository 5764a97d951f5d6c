// SPDX-License-Identifier: Apache-2.0
// The live CaptureBackend: composes the CUPTI activity source (process-wide), the NVML sampler
// and the NVTX receiver (process-wide), all feeding the session's EventQueue through a counting
// adapter, and probe_capture_status().
#include "capture/capture_backend.hpp"
#include "capture/capture_levels.hpp"
#include "capture/capture_owner.hpp"
#include "capture/cupti/cupti_activity_source.hpp"
#include "capture/framework_info.hpp"
#include "capture/nvml/nvml_api.hpp"
#include "capture/nvml/nvml_sampler.hpp"
#include "capture/nvtx/nvtx_receiver.hpp"
#include "capture/platform/cuda_driver_api.hpp"
#include "capture/platform/own_device_memory.hpp"
#include "capture/platform/platform.hpp"

#include <fmt/format.h>

#if GPUDIAG_HAVE_CUDA_HEADERS
#    include "capture/cupti/cupti_api.hpp"
#    include "capture/cupti/cupti_record_layouts.hpp"
#endif

#include <atomic>
#include <mutex>

namespace gpudiag::detail {
namespace {

// Counts what every source hands over, so status() has one figure for events and drops.
class CountingQueue final : public EventQueue {
public:
    void set_target(EventQueue* target) noexcept { target_.store(target); }
    bool try_push(const Event& event) noexcept override {
        EventQueue* t = target_.load(std::memory_order_acquire);
        if (t != nullptr && t->try_push(event)) {
            pushed_.fetch_add(1, std::memory_order_relaxed);
            return true;
        }
        refused_.fetch_add(1, std::memory_order_relaxed);
        return false;
    }
    [[nodiscard]] std::uint64_t pushed() const noexcept { return pushed_.load(); }
    [[nodiscard]] std::uint64_t refused() const noexcept { return refused_.load(); }

private:
    std::atomic<EventQueue*> target_{nullptr};
    std::atomic<std::uint64_t> pushed_{0};
    std::atomic<std::uint64_t> refused_{0};
};

// NVML's word that this program keeps a GPU busy, for the CUPTI source's starvation watch.
void note_gpu_busy() noexcept {
    CuptiActivitySource::instance().note_gpu_busy();
}

// Facts that do not depend on a running session.
CaptureFacts gather_static_facts() {
    CaptureFacts f;
    std::string why;
    if (const NvmlApi* nvml = nvml_api(&why); nvml != nullptr) {
        f.nvml_loaded = true;
        unsigned n = 0;
        if (nvml->device_get_count(&n) == nvml::kSuccess) f.nvml_devices = static_cast<int>(n);
        char version[96] = {};
        if (nvml->system_get_driver_version != nullptr &&
            nvml->system_get_driver_version(version, sizeof version) == nvml::kSuccess) {
            f.nvml_driver_version = version;
        }
        f.nvml_notes = nvml->notes;
    } else {
        f.nvml_why_not = why;
    }
    why.clear();
    if (const CudaDriverApi* cuda = cuda_driver_api(&why); cuda != nullptr) {
        f.cuda_driver_loaded = true;
        f.cuda_driver_version = cuda->version_string();
    } else {
        f.cuda_why_not = why;
    }
#if GPUDIAG_HAVE_CUDA_HEADERS
    why.clear();
    if (const CuptiApi* cupti = cupti_api(&why); cupti != nullptr) {
        f.cupti_loaded = true;
        f.cupti_path = cupti->path;
        f.cupti_version = cupti->version;
        f.stack.cupti = cupti->description;
        f.stack.cupti_library = cupti->path;
        if (int cuda = cupti_cuda_version(cupti->version); cuda != 0) {
            f.stack.cupti_cuda = fmt::format("{}.{}", cuda / 1000, cuda % 1000 / 10);
        }
    } else {
        f.cupti_why_not = why;
    }
#else
    f.cupti_why_not = "gpudiag was built without the CUDA toolkit headers";
#endif
    f.nvtx_injected = NvtxReceiver::instance().modules() > 0;
    f.stack.driver_version = f.nvml_driver_version;
    f.stack.driver_cuda = f.cuda_driver_version;
    f.stack.framework = current_framework(&f.framework_reported);
    f.stack.cupti_mapped = platform::mapped_libraries("libcupti.so");
    return f;
}

class LiveCaptureBackend final : public CaptureBackend {
public:
    explicit LiveCaptureBackend(const CaptureOptions& options) : options_(options) {}

    ~LiveCaptureBackend() override { stop(); }

    Status start(EventQueue& out, StringTable& strings) noexcept override {
        // A state flag, not a held mutex, serialises start/stop: CUPTI calls run unlocked.
        Phase expected = Phase::kIdle;
        if (!phase_.compare_exchange_strong(expected, Phase::kTransition)) {
            return failed_precondition("capture already started");
        }
        try {
            counting_.set_target(&out);
            nvtx_attached_ = NvtxReceiver::instance().attach(counting_, strings);
            if (options_.nvml_hz > 0.0) {
                if (const NvmlApi* nvml = nvml_api(); nvml != nullptr) {
                    auto sampler = std::make_unique<NvmlSampler>(*nvml, &own_device_memory());
                    sampler->on_gpu_busy(&note_gpu_busy);
                    Status st = sampler->start(options_.nvml_hz, counting_);
                    std::lock_guard<std::mutex> lock(state_mutex_);
                    if (st.is_ok()) {
                        sampler_ = std::move(sampler);
                    } else {
                        notes_.push_back("nvml: " + st.message());
                    }
                }
            }
            if (options_.capture_gpu) start_cupti(strings);
            running_ = true;
            phase_.store(Phase::kRunning);
            return Status::ok();
        } catch (...) {
            phase_.store(Phase::kIdle);
            return internal_error("capture: out of memory while starting");
        }
    }

    void start_cupti(StringTable& strings) {
        // Another gpudiag copy in the process (the injected library, the Python module) may
        // capture already: CUPTI's callbacks are process-global, so this one must not.
        Status st = claim_capture_ownership();
        if (st.is_ok()) {
            CuptiSourceOptions o;
            o.deep = options_.deep;
            o.flush_period_ms = options_.flush_period_ms > 0 ? options_.flush_period_ms : 250;
            o.kinds_off = kinds_off_.load();
            st = CuptiActivitySource::instance().start(o, counting_, strings);  // unlocked
            // Refused for another session of this copy: the claim is that session's too.
            if (!st.is_ok() && !CuptiActivitySource::instance().status().active) {
                release_capture_ownership();
            }
        } else {
            st = Status(st.code(), "cupti_activity: " + st.message());
        }
        cupti_started_ = st.is_ok();
        if (!cupti_started_) {
            std::lock_guard<std::mutex> lock(state_mutex_);
            cupti_failure_ = st.message();
        }
    }

    void flush() noexcept override {
        if (cupti_started_) CuptiActivitySource::instance().flush(false);
    }

    void stop() noexcept override {
        Phase expected = Phase::kRunning;
        if (!phase_.compare_exchange_strong(expected, Phase::kTransition)) return;
        // CUPTI first: its forced flush still delivers into the session's queue.
        if (cupti_started_) {
            CuptiActivitySource::instance().stop();  // no gpudiag lock held
            release_capture_ownership();
            CuptiSourceStatus last = CuptiActivitySource::instance().status();
            std::lock_guard<std::mutex> lock(state_mutex_);
            last_cupti_ = std::move(last);
            cupti_stopped_ = true;
            cupti_started_ = false;
        }
        {
            std::lock_guard<std::mutex> lock(state_mutex_);
            if (sampler_ != nullptr) sampler_->stop();  // NVML only: no CUPTI call
        }
        if (nvtx_attached_) NvtxReceiver::instance().detach();
        nvtx_attached_ = false;
        counting_.set_target(nullptr);
        running_ = false;
        phase_.store(Phase::kStopped);
    }

    Status pause(std::string_view reason) noexcept override {
        if (!cupti_started_) {
            return failed_precondition("CUPTI capture is not running; nothing to yield");
        }
        return CuptiActivitySource::instance().pause(reason);
    }

    Status resume() noexcept override {
        if (!cupti_started_) return failed_precondition("CUPTI capture is not running");
        return CuptiActivitySource::instance().resume();
    }

    void reduce(const CaptureReduction& reduction) noexcept override {
        kinds_off_.store(reduction.kinds_off);  // for a start still to come
        if (!cupti_started_) return;
        // A refusal to record GPU kinds again marks the source degraded: status() says so.
        (void)CuptiActivitySource::instance().reduce(reduction.kinds_off, counting_);
    }

    [[nodiscard]] std::vector<DeviceInfo> devices() const noexcept override {
        if (sampler_ == nullptr) return {};
        try {
            return sampler_->devices();
        } catch (...) {  // host memory ran out: the report names no GPU, nothing else is lost
            return {};
        }
    }

    [[nodiscard]] CaptureStatus status() const noexcept override {
        try {
            CaptureFacts f = gather_static_facts();
            f.capture_gpu = options_.capture_gpu;
            f.running = true;
            f.deep_requested = options_.deep;
            std::lock_guard<std::mutex> lock(state_mutex_);
            CuptiSourceStatus cupti;
            if (cupti_started_) {
                cupti = CuptiActivitySource::instance().status();  // its own lock, no CUPTI call
            } else if (cupti_stopped_) {
                cupti = last_cupti_;
            }
            f.activity_running = (cupti_started_ || cupti_stopped_) && !cupti.degraded;
            f.deep_running = cupti.deep_active;
            if (!cupti_failure_.empty()) f.activity_reasons.push_back(cupti_failure_);
            for (const auto& r : cupti.reasons) f.activity_reasons.push_back(r);
            for (const auto& n : cupti.notes) f.activity_reasons.push_back(n);
            for (const auto& n : notes_) f.activity_reasons.push_back(n);
            if (sampler_ != nullptr) {
                for (auto& n : sampler_->notes()) f.nvml_notes.push_back(std::move(n));
            }
            f.nvtx_attached = nvtx_attached_ || !running_;
            CaptureStatus st = compute_capture_status(f);
            st.capturing = running_;
            st.paused = cupti.paused;
            st.paused_reason = cupti.paused_reason;
            st.events = counting_.pushed();
            // Lost inside CUPTI and NVTX ranges deeper or more numerous than tracked. Refusals
            // of the session's queue are not added here: the queue counts those itself, and
            // the session adds its own count (counting_.refused() would count them twice).
            st.dropped = cupti.dropped + NvtxReceiver::instance().dropped();
            st.kernels_without_timing = cupti.kernels_without_timing;
            if (sampler_ != nullptr && st.device_count == 0) {
                st.device_count = static_cast<int>(sampler_->devices().size());
            }
            return st;
        } catch (...) {
            return {};
        }
    }

private:
    const CaptureOptions options_;
    enum class Phase { kIdle, kTransition, kRunning, kStopped };
    std::atomic<Phase> phase_{Phase::kIdle};
    CountingQueue counting_;
    // Guards what status() reads while start/stop write it; never held across a CUPTI call.
    mutable std::mutex state_mutex_;
    std::unique_ptr<NvmlSampler> sampler_;
    std::atomic<bool> running_{false};
    std::atomic<bool> nvtx_attached_{false};
    std::atomic<bool> cupti_started_{false};
    std::atomic<std::uint64_t> kinds_off_{0};  // the cost budget's rung (CaptureReduction)
    bool cupti_stopped_ = false;
    CuptiSourceStatus last_cupti_;
    std::string cupti_failure_;
    std::vector<std::string> notes_;
};

}  // namespace

std::unique_ptr<CaptureBackend> make_capture_backend(const CaptureOptions& options) {
    return std::make_unique<LiveCaptureBackend>(options);
}

CaptureStatus probe_capture_status() noexcept {
    try {
        return compute_capture_status(gather_static_facts());
    } catch (...) {
        CaptureStatus st;
        st.reasons.push_back("probe: out of memory");
        return st;
    }
}

}  // namespace gpudiag::detail
