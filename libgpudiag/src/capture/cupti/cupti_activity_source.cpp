// SPDX-License-Identifier: Apache-2.0
// CuptiActivitySource.
//
// Design (see the header for threads):
// * Activity only, no subscriber, by default: MEMORY2, MEMORY_POOL, CONCURRENT_KERNEL (never the
//   serialising KERNEL kind), MEMCPY (MEMCPY2 comes with it), MEMSET, SYNCHRONIZATION (with
//   cuptiActivityEnableAllSyncRecords(0): no record per not-ready cudaEventQuery poll), OVERHEAD,
//   and the runtime/driver API whitelist enabled cbid by cbid.
// * Two paths (choose_activity_path): with CUPTI 13.3+ and a driver that allows it (R610+),
//   gpudiag subscribes with allowMultipleSubscribers and uses the per-subscriber (v2) activity
//   API: its own callbacks, kinds and drop count, beside other such clients (PyTorch's CUPTI
//   monitor, Nsight Systems). Otherwise, or when CUPTI refuses (another client holds the
//   process-wide API; an older driver), the process-wide (v1) path below, as before. Records of
//   both go through the same decoder.
// * In CUPTI's process-wide (v1) activity API, buffer callbacks, per-kind enable flags,
//   attributes and the timestamp callback are shared by every client. torch.profiler (Kineto)
//   registers its own callbacks and disables kinds when it stops, so gpudiag pauses before it
//   (kinds off, buffers flushed, a kCapturePaused marker) and re-registers and re-enables after
//   it. Clients that give no such warning (libkineto in C++, on-demand tracing) are noticed by
//   the starvation watch; their buffers reaching gpudiag are counted and dropped unread.
// * Time: CUPTI's clock may be another client's (Kineto's CPU-cycle callback), so records are
//   mapped through (cupti, monotonic) pairs with slope and offset (clock_calibration.hpp).
// * Deep mode takes CUPTI's single subscriber (cuptiSubscribe_v2 names the current owner when it
//   is taken: Nsight, compute-sanitizer, Kineto) for allocation call stacks and cuMem* arguments.
// * Never: cuptiFinalize (synchronises every context, breaks other clients), a timestamp
//   callback (global), ZEROED_OUT_ACTIVITY_BUFFER (global: other clients' buffers would go
//   unzeroed), CUDA calls inside callbacks, FlushAll inside a buffer callback. By default no
//   subscriber either (one per process before CUDA 13.3: taking it would break torch.profiler's
//   later cuptiSubscribe), so a CUPTI that shut down is noticed by FlushAll failing, not by the
//   FATAL_ERROR callback, which only deep mode receives.
#include "capture/cupti/cupti_activity_source.hpp"
#include "support/own_cpu.hpp"
#include "support/quiet_thread.hpp"

#include <fmt/format.h>

#include <new>

#if GPUDIAG_HAVE_CUDA_HEADERS

#    include "capture/cupti/activity_buffer_pool.hpp"
#    include "capture/cupti/activity_decoder.hpp"
#    include "capture/cupti/api_whitelist.hpp"
#    include "capture/cupti/cupti_api.hpp"
#    include "capture/cupti/cupti_per_subscriber.hpp"
#    include "capture/cupti/deep_call_recorder.hpp"
#    include "capture/cupti/starvation_watch.hpp"
#    include "capture/platform/clock_calibration.hpp"
#    include "capture/platform/dynamic_library.hpp"
#    include "capture/platform/own_device_memory.hpp"
#    include "capture/platform/platform.hpp"
#    include "core/clock.hpp"

#    include <algorithm>
#    include <atomic>
#    include <cctype>
#    include <chrono>
#    include <condition_variable>
#    include <cstdio>
#    include <memory>
#    include <mutex>
#    include <thread>

#endif

namespace gpudiag::detail {

std::string describe_cupti_owner(std::string_view raw_name) {
    std::string lower(raw_name);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const char* tool = nullptr;
    if (lower.find("kineto") != std::string::npos || lower.find("torch") != std::string::npos) {
        tool = "PyTorch profiler (Kineto)";
    } else if (lower.find("nsight systems") != std::string::npos ||
               lower.find("nsys") != std::string::npos) {
        tool = "Nsight Systems";
    } else if (lower.find("nsight compute") != std::string::npos ||
               lower.find("ncu") != std::string::npos) {
        tool = "Nsight Compute";
    } else if (lower.find("sanitizer") != std::string::npos ||
               lower.find("memcheck") != std::string::npos) {
        tool = "compute-sanitizer";
    } else if (lower.find("gdb") != std::string::npos ||
               lower.find("debugger") != std::string::npos) {
        tool = "cuda-gdb";
    } else if (lower.find("gpudiag") != std::string::npos) {
        tool = "another gpudiag instance";
    }
    if (raw_name.empty()) return "an unnamed CUPTI client";
    if (tool == nullptr) return "'" + std::string(raw_name) + "'";
    return std::string(tool) + " ('" + std::string(raw_name) + "')";
}

#if GPUDIAG_HAVE_CUDA_HEADERS

namespace {

constexpr std::size_t kLowWaterBuffers = 4;
constexpr CUptiResult kMultipleSubscribers = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
constexpr std::uint64_t kPairSpacingNs = 100'000'000;  // clock pairs: at most ten a second
constexpr std::uint64_t kNewRegimeBaselineMs = 20;     // second pair of a new clock regime
constexpr std::uint32_t kFlushFailuresToDegrade = 3;

struct KindToEnable {
    CUpti_ActivityKind kind;
    const char* name;
};
constexpr KindToEnable kDefaultKinds[] = {
    {CUPTI_ACTIVITY_KIND_MEMORY2, "MEMORY2"},  // first: its failure decides availability
    {CUPTI_ACTIVITY_KIND_MEMORY_POOL, "MEMORY_POOL"},
    {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL"},
    {CUPTI_ACTIVITY_KIND_MEMCPY, "MEMCPY"},
    {CUPTI_ACTIVITY_KIND_MEMSET, "MEMSET"},
    {CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "SYNCHRONIZATION"},
    {CUPTI_ACTIVITY_KIND_OVERHEAD, "OVERHEAD"},
};

const char* default_kind_name(CUpti_ActivityKind kind) noexcept {
    for (const KindToEnable& k : kDefaultKinds) {
        if (k.kind == kind) return k.name;
    }
    return "?";
}

constexpr bool sheds(std::uint64_t kinds_off, EventKind kind) noexcept {
    const auto bit = static_cast<unsigned>(kind);
    return bit < 64 && ((kinds_off >> bit) & 1u) != 0;
}

// Whether the cost budget's reduction `kinds_off` leaves this default kind off. Memory and
// overhead records are kept at every rung: they are few and carry the memory diagnosis.
bool reduction_holds(std::uint64_t kinds_off, CUpti_ActivityKind kind) noexcept {
    switch (kind) {
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return sheds(kinds_off, EventKind::kKernel);
        case CUPTI_ACTIVITY_KIND_MEMCPY: return sheds(kinds_off, EventKind::kMemcpy);
        case CUPTI_ACTIVITY_KIND_MEMSET: return sheds(kinds_off, EventKind::kMemset);
        case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: return sheds(kinds_off, EventKind::kSync);
        default: return false;
    }
}

// The same for a whitelisted API call. Allocation calls stay: the decoder makes out-of-memory
// failures and each allocation's device from them, which every rung keeps.
bool reduction_holds(std::uint64_t kinds_off, const WhitelistedApi& a) noexcept {
    if (a.role == ApiRole::kAlloc || a.role == ApiRole::kVmm) return false;
    return sheds(kinds_off, EventKind::kApiCall);
}

// The loaded API, for the plain-function callbacks and the clock reader.
std::atomic<const CuptiApi*> g_api{nullptr};

bool read_cupti_clock(std::uint64_t* out_ns) {
    const CuptiApi* api = g_api.load(std::memory_order_acquire);
    if (api == nullptr || api->get_timestamp == nullptr) return read_realtime_clock(out_ns);
    return api->get_timestamp(out_ns) == CUPTI_SUCCESS;
}

// The per-subscriber path's subscriber while gpudiag holds it (null on the process-wide path).
std::atomic<CUpti_SubscriberHandle> g_v2_subscriber{nullptr};

// The decoder's record iterator: the subscriber's parser on the per-subscriber path, the
// process-wide one otherwise (and for buffers that come back after the subscriber is released).
CUptiResult CUPTIAPI next_record(uint8_t* buffer, size_t valid, CUpti_Activity** record) {
    const CuptiApi* api = g_api.load(std::memory_order_acquire);
    if (api == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
    CUpti_SubscriberHandle subscriber = g_v2_subscriber.load(std::memory_order_acquire);
    if (subscriber != nullptr && api->get_next_record_v2 != nullptr) {
        return api->get_next_record_v2(subscriber, buffer, valid, record);
    }
    return api->get_next_record(buffer, valid, record);
}

std::string api_version_text(std::uint32_t version) {
    return fmt::format("libcupti API version {}", version);
}

}  // namespace

bool should_try_per_subscriber(std::uint32_t cupti_version,
                               std::string_view missing_functions) noexcept {
    return cupti_version >= cupti_v2::kFirstVersion && missing_functions.empty();
}

ActivityPathChoice choose_activity_path(std::uint32_t cupti_version,
                                        std::string_view missing_functions,
                                        const PerSubscriberAttempt& attempt) {
    ActivityPathChoice c;
    const std::string process_wide = "cupti_activity: process-wide activity API: ";
    if (cupti_version < cupti_v2::kFirstVersion) {
        c.note = process_wide + api_version_text(cupti_version) +
                 " predates CUPTI's per-subscriber activity API (CUPTI 13.3, API version 130300), "
                 "so another tracer (torch.profiler, Nsight Systems) and gpudiag take turns "
                 "instead of tracing side by side";
        return c;
    }
    if (!missing_functions.empty()) {
        c.note = process_wide + api_version_text(cupti_version) + " lacks " +
                 std::string(missing_functions) + " of the per-subscriber activity API";
        return c;
    }
    if (!attempt.tried) {
        c.note = process_wide + "the per-subscriber activity API was not tried";
        return c;
    }
    if (attempt.result == CUPTI_SUCCESS) {
        c.per_subscriber = true;
        c.note = "cupti_activity: per-subscriber activity API (" + api_version_text(cupti_version) +
                 "): gpudiag has its own buffers and kinds and traces side by side with other "
                 "per-subscriber clients (PyTorch's CUPTI monitor, Nsight Systems)";
        return c;
    }
    std::string refused = "CUPTI refused the per-subscriber activity API (" + attempt.call + ": " +
                          attempt.result_name + "): ";
    switch (static_cast<CUptiResult>(attempt.result)) {
        case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
        case CUPTI_ERROR_NOT_COMPATIBLE:
            refused += "another tool holds the process-wide API" +
                       (attempt.owner.empty() ? std::string() : " (" + attempt.owner + ")");
            break;
        case CUPTI_ERROR_NOT_SUPPORTED:
            refused += "driver too old for per-subscriber activity (needs R610+)";
            break;
        default: refused += "see the CUPTI result"; break;
    }
    c.note = process_wide + refused;
    return c;
}

std::string cupti_failure_hint(int result, bool per_subscriber_api) {
    auto rc = static_cast<CUptiResult>(result);
    const char* v2 = per_subscriber_api
                         ? "; this libcupti also has the per-subscriber activity API (CUPTI 13.3+ "
                           "with an R610+ driver), and a client using it (such as PyTorch's CUPTI "
                           "monitor) excludes the process-wide API gpudiag uses"
                         : "";
    switch (rc) {
        case CUPTI_ERROR_UNKNOWN:
            return " (libcupti reports this when no CUDA driver or device is usable)";
        case CUPTI_ERROR_NOT_INITIALIZED:
            return " (CUPTI could not attach to the CUDA driver: none is installed or usable, or "
                   "it is older than this CUPTI: a CUPTI needs a driver that supports its CUDA "
                   "version, R580 or newer for CUPTI 13)";
        case CUPTI_ERROR_NOT_COMPATIBLE:
            return std::string(" (CUPTI cannot enable this kind in its current state") + v2 + ")";
        case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
            return std::string(" (another CUPTI client or an NVIDIA tool owns CUPTI") + v2 + ")";
        case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
            return " (GPU performance counters or tracing are restricted for this user)";
        case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
        case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
            return " (tracing is not allowed on this virtualized GPU)";
        case CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED:
            return " (tracing is not supported on this MIG device)";
        case CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED:
            return " (tracing is not allowed in confidential computing mode)";
        default: return {};
    }
}

struct CuptiActivitySource::Impl {
    enum class State { kStopped, kActive, kPaused };

    // ---- lifecycle token: serialises start/stop/pause/resume without a held lock ----
    std::mutex lifecycle_mutex;
    std::condition_variable lifecycle_cv;
    bool busy = false;
    void enter() {
        std::unique_lock<std::mutex> lock(lifecycle_mutex);
        lifecycle_cv.wait(lock, [&] { return !busy; });
        busy = true;
    }
    void leave() {
        {
            std::lock_guard<std::mutex> lock(lifecycle_mutex);
            busy = false;
        }
        lifecycle_cv.notify_all();
    }

    std::atomic<State> state{State::kStopped};
    const CuptiApi* api = nullptr;
    bool per_subscriber_api = false;  // this libcupti has the per-subscriber functions
    bool per_subscriber = false;      // the path in use (lifecycle-token holder)
    CUpti_SubscriberHandle v2_subscriber = nullptr;  // that path's subscriber while held
    CuptiSourceOptions options;
    std::unique_ptr<ActivityBufferPool> pool;  // created once; lives as long as the process

    // ---- completed buffers (gpudiag's own only): CUPTI's threads push, the control thread pops
    struct Completed {
        std::uint8_t* buffer;
        std::size_t valid;
        bool forced;  // returned by a forced flush: records may be incomplete
    };
    std::mutex completed_mutex;
    std::condition_variable control_cv;
    std::vector<Completed> completed;  // reserved: pushing never allocates in the callback
    std::uint64_t drain_requested = 0;
    std::uint64_t drain_done = 0;
    bool stop_thread = false;
    bool thread_running = false;
    std::thread control;

    // ---- what CUPTI's callbacks tell the control thread (atomics: written on any thread) ----
    std::atomic<bool> forced_flush{false};
    std::atomic<bool> pair_requested{false};
    std::atomic<bool> watch_reset_requested{false};
    std::atomic<std::uint64_t> last_delivery_ns{0};  // a buffer asked for, or returned with records
    std::atomic<std::uint64_t> last_busy_ns{0};      // outside evidence of GPU work
    std::atomic<std::uint64_t> requests{0};          // buffer requests since the last flush
    std::atomic<std::uint64_t> flush_demand{0};      // most requests between two flushes lately

    // ---- control thread (or the stopping thread after join) ----
    EventQueue* out = nullptr;
    StringTable* strings = nullptr;
    ClockCalibration clock;
    std::uint64_t last_pair_ns = 0;
    std::unique_ptr<ActivityDecoder> decoder;
    std::unique_ptr<DeepCallRecorder> deep_recorder;  // kept once created: late callbacks
    std::uint64_t emitted_dropped = 0;
    std::uint64_t emitted_overhead = 0;
    std::uint64_t recent_demand = 0;  // buffers needed between two flushes, slowly decaying
    std::uint32_t flush_failures = 0;
    StarvationWatch watch;
    std::uint64_t emitted_untimed = 0;

    // ---- what is enabled (lifecycle-token holder only) ----
    std::vector<CUpti_ActivityKind> enabled_kinds;
    std::vector<const WhitelistedApi*> enabled_apis;
    CUpti_SubscriberHandle subscriber = nullptr;

    // ---- the cost budget's reduction (lifecycle-token holder only) ----
    std::uint64_t kinds_off = 0;                   // EventKind bits the session sheds
    std::vector<CUpti_ActivityKind> held_kinds;    // default kinds left off for it
    std::vector<const WhitelistedApi*> held_apis;  // whitelisted API records left off for it

    // ---- status ----
    mutable std::mutex status_mutex;
    CuptiSourceStatus snapshot;
    std::string stall_reason;            // under status_mutex; non-empty while starved
    std::uint64_t stalls_recovered = 0;  // under status_mutex
    std::uint64_t starved_ns = 0;        // under status_mutex: time of the stalls recovered from
    std::atomic<bool> left_settings_to_other{false};
    std::string flush_failure;  // under status_mutex; non-empty once FlushAll keeps failing
    std::atomic<std::uint64_t> cupti_dropped{0};
    std::atomic<std::uint64_t> foreign_buffers{0};
    std::atomic<std::uint64_t> lost_buffers{0};  // gpudiag's, handed to another client by CUPTI
    std::atomic<std::uint64_t> callback_failures{0};
    std::atomic<bool> stalled{false};
    std::atomic<bool> fatal{false};
    std::string fatal_message;  // under status_mutex

    // ---------------------------------------------------------------- callbacks (tier 0)
    void on_requested() noexcept {
        requests.fetch_add(1, std::memory_order_relaxed);
        last_delivery_ns.store(monotonic_now_ns(), std::memory_order_relaxed);
    }

    void on_completed(std::uint8_t* buffer, std::size_t valid) noexcept {
        if (buffer == nullptr) return;
        if (pool == nullptr || !pool->owns(buffer)) {
            // Another client's buffer (we re-registered over its callbacks): its owner may free
            // or reuse it as soon as we return, so it is counted and never read.
            foreign_buffers.fetch_add(1, std::memory_order_relaxed);
            return;
        }
        if (valid > 0) last_delivery_ns.store(monotonic_now_ns(), std::memory_order_relaxed);
        if (state.load(std::memory_order_acquire) == State::kStopped) {
            pool->release(buffer);  // a late buffer after stop: nobody to read it
            return;
        }
        bool forced = forced_flush.load(std::memory_order_acquire);
        {
            std::lock_guard<std::mutex> lock(completed_mutex);
            if (completed.size() >= completed.capacity()) {
                pool->release(buffer);  // cannot happen: the reservation exceeds the pool's cap
                return;
            }
            completed.push_back(Completed{buffer, valid, forced});
        }
        control_cv.notify_one();
    }

    void on_callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
        if (domain == CUPTI_CB_DOMAIN_STATE) {
            if (cbid == CUPTI_CBID_STATE_FATAL_ERROR && data != nullptr) {
                const auto* sd = static_cast<const CUpti_StateData*>(data);
                std::lock_guard<std::mutex> lock(status_mutex);
                fatal_message =
                    sd->notification.message != nullptr ? sd->notification.message : "no message";
                fatal.store(true, std::memory_order_release);
            }
            return;
        }
        if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
        const auto* cd = static_cast<const CUpti_CallbackData*>(data);
        if (cd == nullptr || cd->callbackSite != CUPTI_API_EXIT || deep_recorder == nullptr) return;
        last_busy_ns.store(monotonic_now_ns(), std::memory_order_relaxed);  // the program uses CUDA
        ApiDomain api_domain =
            domain == CUPTI_CB_DOMAIN_RUNTIME_API ? ApiDomain::kRuntime : ApiDomain::kDriver;
        const WhitelistedApi* entry = find_whitelisted_api(api_domain, cbid);
        if (entry == nullptr) return;
        DeepCall call;
        call.time_ns = monotonic_now_ns();
        call.correlation = cd->correlationId;
        call.cbid = cbid;
        call.domain = api_domain;
        call.thread = platform::thread_id();
        call.context = cd->contextUid;
        if (cd->functionReturnValue != nullptr) {
            call.return_code = *static_cast<const std::int32_t*>(cd->functionReturnValue);
        }
        // Parameter layouts: the argument lists of the CUDA 13.0 prototypes, in order (what
        // generated_cuda_meta.h / generated_cuda_runtime_api_meta.h declare as *_params).
        if (cd->functionParams != nullptr) {
            if (entry->role == ApiRole::kAlloc) {
                // Every whitelisted allocation call takes (out pointer, size, ...).
                struct AllocParams {
                    void* out_pointer;
                    std::size_t size;
                };
                call.size = static_cast<const AllocParams*>(cd->functionParams)->size;
            } else if (cbid == kCbidCuMemCreate) {
                struct CreateParams {  // cuMemCreate(handle*, size, prop*, flags)
                    unsigned long long* handle;
                    std::size_t size;
                    const void* prop;
                    unsigned long long flags;
                };
                struct Prop {  // CUmemAllocationProp's leading fields
                    std::int32_t type;
                    std::int32_t requested_handle_types;
                    std::int32_t location_type;  // CUmemLocationType: 1 is a device
                    std::int32_t location_id;
                };
                const auto* p = static_cast<const CreateParams*>(cd->functionParams);
                call.size = p->size;
                call.handle = (call.return_code == 0 && p->handle != nullptr) ? *p->handle : 0;
                const auto* prop = static_cast<const Prop*>(p->prop);
                if (prop != nullptr && prop->location_type == 1) call.location = prop->location_id;
            } else if (cbid == kCbidCuMemMap) {
                struct MapParams {  // cuMemMap(ptr, size, offset, handle, flags)
                    unsigned long long ptr;
                    std::size_t size;
                    std::size_t offset;
                    unsigned long long handle;
                    unsigned long long flags;
                };
                const auto* p = static_cast<const MapParams*>(cd->functionParams);
                call.address = p->ptr;
                call.size = p->size;
                call.offset = p->offset;
                call.handle = p->handle;
            } else if (cbid == kCbidCuMemUnmap) {
                struct UnmapParams {  // cuMemUnmap(ptr, size)
                    unsigned long long ptr;
                    std::size_t size;
                };
                const auto* p = static_cast<const UnmapParams*>(cd->functionParams);
                call.address = p->ptr;
                call.size = p->size;
            } else if (cbid == kCbidCuMemRelease) {
                struct ReleaseParams {  // cuMemRelease(handle)
                    unsigned long long handle;
                };
                call.handle = static_cast<const ReleaseParams*>(cd->functionParams)->handle;
            }
        }
        if (entry->role == ApiRole::kAlloc || cbid == kCbidCuMemMap) {
            int n =
                platform::stack_frames(call.frames.data(), static_cast<int>(call.frames.size()));
            call.frame_count = n > 0 ? static_cast<std::uint32_t>(n) : 0;
        }
        deep_recorder->record(call);
    }

    // ---------------------------------------------------------------- control thread
    void request_drain_and_wait() {
        std::unique_lock<std::mutex> lock(completed_mutex);
        if (!thread_running) return;
        std::uint64_t mine = ++drain_requested;
        control_cv.notify_all();
        control_cv.wait_for(lock, std::chrono::seconds(5),
                            [&] { return drain_done >= mine || !thread_running; });
    }

    void take_clock_pair() noexcept {
        std::uint64_t now = monotonic_now_ns();
        bool wanted = pair_requested.exchange(false, std::memory_order_acq_rel);
        if (!wanted && now - last_pair_ns < kPairSpacingNs) return;
        if (!clock.sample(&read_cupti_clock)) return;
        last_pair_ns = now;
        if (clock.pairs() == 1 && clock.regime_changes() > 0) {
            // CUPTI's clock just changed (a timestamp callback, a step): records of the new clock
            // are in this very drain, so give the new regime a slope before decoding them.
            std::this_thread::sleep_for(std::chrono::milliseconds(kNewRegimeBaselineMs));
            (void)clock.sample(&read_cupti_clock);
        }
    }

    void drain() noexcept {
        take_clock_pair();
        if (deep_recorder != nullptr && out != nullptr && strings != nullptr) {
            deep_recorder->drain(
                *out, *strings,
                [this](std::uint32_t correlation, StringId site, std::uint64_t bytes,
                       std::uint32_t context) {
                    if (decoder != nullptr) {
                        decoder->note_site(correlation, site, bytes, context);
                    }
                },
                [this](std::uint32_t context) {
                    return decoder != nullptr ? decoder->device_of_context(context) : kNoDevice;
                });
        }
        std::vector<Completed> batch;
        {
            std::lock_guard<std::mutex> lock(completed_mutex);
            if (completed.empty()) return;
            try {
                batch.reserve(completed.size());
            } catch (...) {
                return;
            }
            batch.assign(completed.begin(), completed.end());
            completed.clear();
        }
        for (const Completed& c : batch) {
            if (decoder != nullptr && api != nullptr) {
                decoder->decode_buffer(&next_record, c.buffer, c.valid, c.forced);
            }
            pool->release(c.buffer);
        }
    }

    // CUPTI keeps a buffer per CUDA-calling thread until a flush returns it, so the buffers
    // asked for between two flushes (granted or declined) are what the next interval needs.
    // Called just before every FlushAll. Thread-safety: safe.
    void note_flush() noexcept {
        std::uint64_t n = requests.exchange(0, std::memory_order_relaxed);
        std::uint64_t peak = flush_demand.load(std::memory_order_relaxed);
        while (n > peak &&
               !flush_demand.compare_exchange_weak(peak, n, std::memory_order_relaxed)) {
        }
    }

    // Keeps that many buffers free (at least kLowWaterBuffers): a request finding none loses
    // records.
    void top_up_pool() noexcept {
        if (pool == nullptr) return;
        std::uint64_t demand =
            std::max({recent_demand, flush_demand.load(std::memory_order_relaxed),
                      requests.load(std::memory_order_relaxed)});
        std::uint64_t want = std::max<std::uint64_t>(kLowWaterBuffers, demand + 1);
        pool->top_up(static_cast<std::size_t>(std::min<std::uint64_t>(want, options.max_buffers)));
    }

    void periodic_flush() noexcept {
        if (state.load(std::memory_order_acquire) != State::kActive ||
            fatal.load(std::memory_order_acquire)) {
            return;
        }
        // FlushAll(0) returns every buffer whose records are complete, full or not, so
        // low-rate streams (allocations) arrive within a period; no lock is held.
        note_flush();
        CUptiResult rc = api->flush_all(0);
        if (rc == CUPTI_SUCCESS) {
            flush_failures = 0;
            return;
        }
        // Without a subscriber gpudiag gets no FATAL_ERROR callback; a CUPTI that shut itself
        // down shows here instead.
        if (++flush_failures == kFlushFailuresToDegrade) {
            std::lock_guard<std::mutex> lock(status_mutex);
            try {
                flush_failure = fmt::format(
                    "cupti_activity: cuptiActivityFlushAll failed {} times in a row ({}); CUPTI "
                    "is not delivering records",
                    kFlushFailuresToDegrade, api->result_name(rc));
            } catch (...) {
            }
        }
    }

    // CUPTI resets its drop count on each read: every read is added.
    void read_dropped() noexcept {
        if (api == nullptr) return;
        // Read outside any lock and outside the buffer callbacks (Kineto's ABBA deadlock came
        // from reading it inside the completion callback under its own mutex).
        std::size_t n = 0;
        CUpti_SubscriberHandle v2 = g_v2_subscriber.load(std::memory_order_acquire);
        CUptiResult rc = v2 != nullptr && api->get_num_dropped_records_v2 != nullptr
                             ? api->get_num_dropped_records_v2(v2, nullptr, 0, &n)
                             : api->get_num_dropped_records(nullptr, 0, &n);
        if (rc == CUPTI_SUCCESS && n > 0) {
            cupti_dropped.fetch_add(n, std::memory_order_relaxed);
        }
    }

    void housekeeping() noexcept {
        if (state.load(std::memory_order_acquire) == State::kActive && api != nullptr)
            read_dropped();
        watch_tick();
        emit_counters();
        update_snapshot();
    }

    // A kCapturePaused/kCaptureResumed marker into the session's queue (any thread).
    void push_marker(EventKind kind, std::uint64_t at_ns, std::string_view reason) noexcept {
        if (out == nullptr) return;
        Event e;
        e.kind = kind;
        e.process = platform::process_id();
        e.thread = platform::thread_id();
        e.start_ns = e.end_ns = at_ns;
        e.annotation.text =
            strings != nullptr && !reason.empty() ? strings->intern(reason) : kNoString;
        (void)out->try_push(e);
    }

    void watch_tick() noexcept {
        std::uint64_t now = monotonic_now_ns();
        if (watch_reset_requested.exchange(false, std::memory_order_acq_rel)) watch.reset(now);
        if (state.load(std::memory_order_acquire) != State::kActive) return;
        StarvationWatch::Change change =
            watch.tick(now, last_delivery_ns.load(std::memory_order_relaxed),
                       last_busy_ns.load(std::memory_order_relaxed));
        if (change == StarvationWatch::Change::kNone) return;
        if (change == StarvationWatch::Change::kRecovered) {
            stalled.store(false, std::memory_order_release);
            push_marker(EventKind::kCaptureResumed, now, "CUPTI delivers records again");
            std::lock_guard<std::mutex> lock(status_mutex);
            ++stalls_recovered;
            starved_ns += now - watch.stalled_since();
            stall_reason.clear();
            return;
        }
        stalled.store(true, std::memory_order_release);
        std::uint64_t silent_s = (now - watch.stalled_since()) / 1'000'000'000ULL;
        std::string reason;
        try {
            reason = fmt::format(
                "cupti_activity: starved: no buffer request and no record from CUPTI for {} s "
                "while the GPU was busy (NVML utilization or CUDA API calls). Another CUPTI "
                "client (libkineto in this process, on-demand tracing, Nsight Systems) has "
                "probably taken the activity API, so GPU activity is not being recorded",
                silent_s);
            std::uint64_t foreign = foreign_buffers.load(std::memory_order_relaxed);
            if (foreign > 0) reason += fmt::format("; {} of its buffers reached gpudiag", foreign);
            reason += fmt::format(" (a single kernel running longer than {} s looks the same)",
                                  watch.stall_ns() / 1'000'000'000ULL);
        } catch (...) {
        }
        push_marker(EventKind::kCapturePaused, watch.stalled_since(), "CUPTI stopped delivering");
        std::lock_guard<std::mutex> lock(status_mutex);
        stall_reason = std::move(reason);
    }

    void emit_counters() noexcept {
        if (out == nullptr || decoder == nullptr) return;
        const DecoderCounters& c = decoder->counters();
        // Records CUPTI lost. Queue refusals are the session's to count (its channel does), and
        // untimed kernels were seen: each has its own figure, none is counted twice.
        std::uint64_t dropped = cupti_dropped.load();
        std::uint64_t now = monotonic_now_ns();
        auto counter = [&](CounterKind kind, double value) {
            Event e;
            e.kind = EventKind::kCounter;
            e.process = platform::process_id();
            e.start_ns = e.end_ns = now;
            e.counter.counter = kind;
            e.counter.value = value;
            (void)out->try_push(e);
        };
        if (dropped != emitted_dropped) {
            counter(CounterKind::kDroppedRecords, static_cast<double>(dropped));
            emitted_dropped = dropped;
        }
        if (c.overhead_ns != emitted_overhead) {
            counter(CounterKind::kCaptureOverheadNs, static_cast<double>(c.overhead_ns));
            emitted_overhead = c.overhead_ns;
        }
        if (c.kernels_without_timing != emitted_untimed) {
            counter(CounterKind::kUntimedKernels, static_cast<double>(c.kernels_without_timing));
            emitted_untimed = c.kernels_without_timing;
        }
    }

    void update_snapshot() noexcept {
        std::lock_guard<std::mutex> lock(status_mutex);
        try {
            if (decoder != nullptr) {
                const DecoderCounters& c = decoder->counters();
                snapshot.records = c.records;
                snapshot.events = c.events;
                snapshot.kernels_without_timing = c.kernels_without_timing;
                snapshot.overhead_ns = c.overhead_ns;
                snapshot.corrupt_buffers = c.corrupt_buffers;
                snapshot.incomplete_at_flush = c.incomplete_at_flush;
                snapshot.unreadable_bytes = c.unreadable_bytes;
                snapshot.records_by_kind = c.by_kind;
                snapshot.dropped = cupti_dropped.load();  // queue refusals: counted by the queue
            }
            if (pool != nullptr) snapshot.declined_buffers = pool->declined();
            snapshot.foreign_buffers = foreign_buffers.load();
            snapshot.clock_rate = clock.rate();
            snapshot.foreign_clock = clock.foreign_clock();
            snapshot.stalled = stalled.load();
            if (fatal.load(std::memory_order_acquire) && !snapshot.degraded) {
                snapshot.degraded = true;
                snapshot.reasons.push_back(
                    "cupti_activity: CUPTI reported a fatal error and shut itself down: " +
                    fatal_message);
            }
        } catch (...) {
        }
    }

    void control_loop() noexcept {
        using Clock = std::chrono::steady_clock;
        auto period =
            std::chrono::milliseconds(options.flush_period_ms > 0 ? options.flush_period_ms : 250);
        auto next_flush = Clock::now() + period;
        auto next_housekeeping = Clock::now() + std::chrono::seconds(1);
        for (;;) {
            std::uint64_t requested = 0;
            bool stopping = false;
            {
                std::unique_lock<std::mutex> lock(completed_mutex);
                control_cv.wait_until(lock, std::min(next_flush, next_housekeeping), [&] {
                    return stop_thread || !completed.empty() || drain_requested != drain_done;
                });
                requested = drain_requested;
                stopping = stop_thread;
            }
            auto now = Clock::now();
            if (now >= next_flush) {
                periodic_flush();
                // Demand decays by an eighth a period (half-life ~1.3 s at 250 ms): a burst of
                // threads that recurs every step keeps its buffers.
                recent_demand = std::max(flush_demand.exchange(0, std::memory_order_relaxed),
                                         recent_demand - recent_demand / 8);
                next_flush = now + period;
            }
            drain();
            top_up_pool();
            if (now >= next_housekeeping) {
                housekeeping();
                next_housekeeping = now + std::chrono::seconds(1);
            } else if (requested != drain_done) {
                update_snapshot();  // someone waits on this drain (flush, pause): show what it
                                    // brought
            }
            {
                std::lock_guard<std::mutex> lock(completed_mutex);
                drain_done = requested;
            }
            control_cv.notify_all();
            if (stopping) return;
        }
    }

    // ---------------------------------------------------------------- lifecycle helpers
    Status enable_all(std::vector<std::string>& notes) noexcept;
    Status enable_process_wide(std::vector<std::string>& notes) noexcept;
    PerSubscriberAttempt enable_per_subscriber(std::vector<std::string>& notes) noexcept;
    void enable_api_records(std::vector<std::string>& notes);
    void release_v2_subscriber() noexcept;
    Status enable_failure(const KindToEnable& k, CUptiResult rc) noexcept;
    void enable_whole_runtime_api(std::vector<std::string>& notes);
    void disable_all() noexcept;
    CUptiResult set_kind(CUpti_ActivityKind kind, bool on) noexcept;
    CUptiResult set_api(const WhitelistedApi& a, bool on) noexcept;
    Status apply_reduction() noexcept;
    void settle_and_flush() noexcept;
    void subscribe_deep(std::vector<std::string>& reasons) noexcept;
    std::string probe_owner() noexcept;
};

namespace {

CuptiActivitySource::Impl* g_impl = nullptr;  // set once, never cleared

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) noexcept {
    try {
        CuptiActivitySource::Impl* s = g_impl;
        if (s != nullptr) s->on_requested();
        std::uint8_t* b = s != nullptr && s->pool != nullptr ? s->pool->acquire() : nullptr;
        *buffer = b;
        *size = b != nullptr ? s->pool->buffer_bytes() : 0;
        *max_records = 0;  // as many as fit
    } catch (...) {
        *buffer = nullptr;
        *size = 0;
    }
}

void CUPTIAPI buffer_completed(CUcontext /*context*/, uint32_t /*stream*/, uint8_t* buffer,
                               size_t /*size*/, size_t valid) noexcept {
    try {
        const ElsewhereCpu cost;  // decoding on CUPTI's thread is gpudiag's work
        if (g_impl != nullptr) g_impl->on_completed(buffer, valid);
    } catch (...) {
    }
}

// The per-subscriber path's buffer callbacks: the same pool, the same completed queue.
void CUPTIAPI buffer_requested_v2(uint8_t** buffer, size_t* size, size_t* max_records,
                                  cupti_v2::BufferRequestInfo* /*info*/) noexcept {
    buffer_requested(buffer, size, max_records);
}

void CUPTIAPI buffer_completed_v2(uint8_t* buffer, size_t size, size_t valid,
                                  cupti_v2::BufferCompleteInfo* /*info*/) noexcept {
    buffer_completed(nullptr, 0, buffer, size, valid);
}

void CUPTIAPI deep_callback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                            const void* data) noexcept {
    // Reentrancy guard: nothing below calls CUDA, but the stack walk may load the unwinder.
    thread_local bool inside = false;
    if (inside) return;
    inside = true;
    auto* impl = static_cast<CuptiActivitySource::Impl*>(userdata);
    try {
        if (impl != nullptr) impl->on_callback(domain, cbid, data);
    } catch (...) {
        if (impl != nullptr) impl->callback_failures.fetch_add(1, std::memory_order_relaxed);
    }
    inside = false;
}

void CUPTIAPI probe_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) noexcept {}

}  // namespace

std::string CuptiActivitySource::Impl::probe_owner() noexcept {
    // Subscribing and releasing at once is how CUPTI says who holds it: on error 39 it writes
    // the holder's name (13.0+: cuptiSubscribe_v2).
    try {
        if (api->subscribe_v2 == nullptr) return {};
        char old_name[128] = {};
        CUpti_SubscriberParams params{};
        params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
        params.subscriberName = "gpudiag-probe";
        params.oldSubscriberName = old_name;
        params.oldSubscriberSize = sizeof old_name;
        CUpti_SubscriberHandle handle = nullptr;
        CUptiResult rc = api->subscribe_v2(&handle, &probe_callback, nullptr, &params);
        if (rc == CUPTI_SUCCESS) {
            if (api->unsubscribe != nullptr) (void)api->unsubscribe(handle);
            return {};
        }
        if (rc == kMultipleSubscribers) {
            old_name[sizeof old_name - 1] = '\0';
            return describe_cupti_owner(old_name);
        }
    } catch (...) {
    }
    return {};
}

Status CuptiActivitySource::Impl::enable_failure(const KindToEnable& k, CUptiResult rc) noexcept {
    try {
        std::string owner = probe_owner();
        if (rc == kMultipleSubscribers) {
            return unavailable("cupti_activity: CUPTI is owned by " +
                               (owner.empty() ? std::string("another tool") : owner) +
                               " (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED" +
                               cupti_failure_hint(rc, per_subscriber_api) +
                               "); NVML and NVTX capture continue");
        }
        std::string msg = fmt::format(
            "cupti_activity: libcupti {} at {} loaded but cuptiActivityEnable({}) failed: {}{}",
            api->version, api->path, k.name, api->result_name(rc),
            cupti_failure_hint(rc, per_subscriber_api));
        if (!owner.empty()) msg += "; CUPTI's subscriber is held by " + owner;
        return unavailable(msg);
    } catch (...) {
        return unavailable("cupti_activity: cuptiActivityEnable failed");
    }
}

Status CuptiActivitySource::Impl::enable_all(std::vector<std::string>& notes) noexcept {
    try {
        held_kinds.clear();
        held_apis.clear();
        std::string missing = api->missing_per_subscriber_functions();
        PerSubscriberAttempt attempt;
        if (should_try_per_subscriber(api->version, missing)) {
            attempt = enable_per_subscriber(notes);
        }
        ActivityPathChoice choice = choose_activity_path(api->version, missing, attempt);
        per_subscriber = choice.per_subscriber;
        notes.push_back(std::move(choice.note));
        {
            std::lock_guard<std::mutex> lock(status_mutex);
            snapshot.per_subscriber = per_subscriber;
        }
        return per_subscriber ? Status::ok() : enable_process_wide(notes);
    } catch (...) {
        return internal_error("cupti_activity: out of memory while enabling CUPTI");
    }
}

PerSubscriberAttempt CuptiActivitySource::Impl::enable_per_subscriber(
    std::vector<std::string>& notes) noexcept {
    PerSubscriberAttempt a;
    a.tried = true;
    try {
        char old_name[128] = {};
        auto refused = [&](const char* call, CUptiResult rc, bool named) {
            a.call = call;
            a.result = rc;
            a.result_name = api->result_name(rc);
            old_name[sizeof old_name - 1] = '\0';
            if (named && old_name[0] != '\0') a.owner = describe_cupti_owner(old_name);
            return a;
        };
        cupti_v2::SubscriberParams params{};
        params.structSize = sizeof params;
        params.subscriberName = "gpudiag";
        params.oldSubscriberName = old_name;
        params.oldSubscriberSize = sizeof old_name;
        params.allowMultipleSubscribers = 1;
        CUpti_SubscriberHandle handle = nullptr;
        // Callbacks go to deep_callback: none is enabled but CUPTI's fatal-error notice, until
        // deep mode enables its own on this subscriber.
        CUptiResult rc = api->subscribe_multi(&handle, &deep_callback, this, &params);
        if (rc != CUPTI_SUCCESS) return refused("cuptiSubscribe_v2", rc, true);
        rc = api->register_callbacks_v2(handle, &buffer_requested_v2, &buffer_completed_v2);
        if (rc != CUPTI_SUCCESS) {
            (void)api->unsubscribe(handle);
            return refused("cuptiActivityRegisterCallbacks_v2", rc, false);
        }
        v2_subscriber = handle;
        per_subscriber = true;  // what disable_all() undoes, should a kind fail below
        g_v2_subscriber.store(handle, std::memory_order_release);
        if (api->enable_callback != nullptr) {
            (void)api->enable_callback(1, handle, CUPTI_CB_DOMAIN_STATE,
                                       CUPTI_CBID_STATE_FATAL_ERROR);
        }
        // All-sync-records is a per-subscriber attribute here, off by default: no record per
        // not-ready query poll, as cuptiActivityEnableAllSyncRecords(0) gives the other path.
        std::vector<std::string> kind_notes;
        for (const KindToEnable& k : kDefaultKinds) {
            if (reduction_holds(kinds_off, k.kind)) {
                held_kinds.push_back(k.kind);
                continue;
            }
            rc = api->enable_v2(handle, k.kind, nullptr);
            if (rc == CUPTI_SUCCESS) {
                enabled_kinds.push_back(k.kind);
                continue;
            }
            if (k.kind == CUPTI_ACTIVITY_KIND_MEMORY2) {
                disable_all();
                release_v2_subscriber();
                return refused("cuptiActivityEnable_v2(MEMORY2)", rc, false);
            }
            kind_notes.push_back(std::string("cupti_activity: ") + k.name +
                                 " records unavailable (" + api->result_name(rc) + ")");
        }
        enable_api_records(kind_notes);
        notes.insert(notes.end(), kind_notes.begin(), kind_notes.end());
        a.result = CUPTI_SUCCESS;
    } catch (...) {
        disable_all();
        release_v2_subscriber();
        a.call = "gpudiag";
        a.result = CUPTI_ERROR_UNKNOWN;
        a.result_name = "out of memory";
    }
    return a;
}

// Enables each whitelisted API callback this CUPTI has on the path in use (set_api: the
// per-subscriber or the process-wide call), and holds those the cost budget keeps off.
void CuptiActivitySource::Impl::enable_api_records(std::vector<std::string>& notes) {
    std::size_t failed = 0;
    for (const WhitelistedApi& a : api_whitelist()) {
        if (!api_in_cupti(a, api->version)) continue;  // a cbid this CUPTI lacks
        if (reduction_holds(kinds_off, a)) {
            held_apis.push_back(&a);
            continue;
        }
        if (set_api(a, true) == CUPTI_SUCCESS) {
            enabled_apis.push_back(&a);
        } else {
            ++failed;
        }
    }
    if (failed > 0) {
        notes.push_back(fmt::format(
            "cupti_activity: {} whitelisted API callbacks could not be enabled", failed));
    }
}

void CuptiActivitySource::Impl::release_v2_subscriber() noexcept {
    if (v2_subscriber == nullptr) return;
    // per_subscriber stays as chosen: the status says which path the session took.
    g_v2_subscriber.store(nullptr, std::memory_order_release);
    (void)api->unsubscribe(v2_subscriber);
    v2_subscriber = nullptr;
    if (subscriber != nullptr) {  // deep mode's callbacks rode on it
        subscriber = nullptr;
        std::lock_guard<std::mutex> lock(status_mutex);
        snapshot.deep_active = false;
    }
}

Status CuptiActivitySource::Impl::enable_process_wide(std::vector<std::string>& notes) noexcept {
    try {
        CUptiResult rc = api->register_callbacks(&buffer_requested, &buffer_completed);
        if (rc != CUPTI_SUCCESS) {
            return unavailable("cupti_activity: cuptiActivityRegisterCallbacks failed: " +
                               api->result_name(rc) + cupti_failure_hint(rc, per_subscriber_api));
        }
        // CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER stays unset: it is process-wide, and
        // another client's buffers (Kineto's are not zeroed) would then be filled unzeroed.
        if (api->enable_all_sync_records != nullptr) {
            (void)api->enable_all_sync_records(0);  // no record per not-ready query poll
        } else {
            notes.push_back(
                "cupti_activity: cuptiActivityEnableAllSyncRecords missing: "
                "every cudaEventQuery/cudaStreamQuery poll makes a sync record");
        }
        for (const KindToEnable& k : kDefaultKinds) {
            if (reduction_holds(kinds_off, k.kind)) {
                held_kinds.push_back(k.kind);
                continue;
            }
            rc = api->enable(k.kind);
            if (rc == CUPTI_SUCCESS) {
                enabled_kinds.push_back(k.kind);
                continue;
            }
            if (k.kind == CUPTI_ACTIVITY_KIND_MEMORY2) return enable_failure(k, rc);
            notes.push_back(std::string("cupti_activity: ") + k.name + " records unavailable (" +
                            api->result_name(rc) + cupti_failure_hint(rc, per_subscriber_api) +
                            ")");
        }
        if (api->enable_runtime_api == nullptr || api->enable_driver_api == nullptr) {
            enable_whole_runtime_api(notes);
        } else {
            enable_api_records(notes);
        }
        if (api->version == 130000) {
            notes.push_back(
                "cupti_activity: CUPTI 13.0 GA misses sync records for "
                "cudaDeviceSynchronize and cuCtxSynchronize (fixed in 13.0 Update 1)");
        }
        return Status::ok();
    } catch (...) {
        return internal_error("cupti_activity: out of memory while enabling CUPTI");
    }
}

void CuptiActivitySource::Impl::enable_whole_runtime_api(std::vector<std::string>& notes) {
    // CUPTI before 12.5 records API calls only kind by kind. The runtime kind carries what the
    // analyses use (launches, allocations, copies, syncs, and out-of-memory returns); the
    // decoder drops every other call. The driver kind would double each runtime call's record.
    CUptiResult rc = api->enable(CUPTI_ACTIVITY_KIND_RUNTIME);
    if (rc == CUPTI_SUCCESS) {
        enabled_kinds.push_back(CUPTI_ACTIVITY_KIND_RUNTIME);
        notes.push_back("cupti_activity: " + api->description +
                        " cannot record single API calls (cuptiActivityEnableRuntimeApi came "
                        "with CUPTI 12.5): the whole runtime API is recorded and all but the "
                        "calls gpudiag uses are dropped while decoding; driver API calls "
                        "(cuLaunchKernel from Triton, cuMemCreate/cuMemMap outside deep mode) "
                        "are not recorded");
    } else {
        notes.push_back(
            "cupti_activity: no API call records or correlation ids (this CUPTI "
            "lacks cuptiActivityEnableRuntimeApi and the RUNTIME kind failed: " +
            api->result_name(rc) + ")");
    }
}

void CuptiActivitySource::Impl::disable_all() noexcept {
    // While starved, another client holds the activity API and may use any of these kinds and
    // API records (a per-cbid disable cuts holes into its trace even when it enabled the whole
    // RUNTIME kind); gpudiag then leaves CUPTI's settings to it.
    // On the per-subscriber path they are gpudiag's own: always turned off.
    bool leave_to_other = !per_subscriber && stalled.load(std::memory_order_acquire);
    if (per_subscriber && v2_subscriber != nullptr) {
        for (CUpti_ActivityKind k : enabled_kinds) (void)api->disable_v2(v2_subscriber, k, nullptr);
        for (const WhitelistedApi* a : enabled_apis) {
            auto fn = a->domain == ApiDomain::kRuntime ? api->enable_runtime_api_v2
                                                       : api->enable_driver_api_v2;
            (void)fn(v2_subscriber, a->cbid, 0);
        }
    } else if (!leave_to_other) {
        for (CUpti_ActivityKind k : enabled_kinds) (void)api->disable(k);
        for (const WhitelistedApi* a : enabled_apis) {
            auto fn =
                a->domain == ApiDomain::kRuntime ? api->enable_runtime_api : api->enable_driver_api;
            if (fn != nullptr) (void)fn(a->cbid, 0);
        }
    } else {
        left_settings_to_other.store(true, std::memory_order_relaxed);
    }
    enabled_kinds.clear();
    enabled_apis.clear();
    held_kinds.clear();  // not enabled: the next enable_all holds them again
    held_apis.clear();
    if (subscriber != nullptr && subscriber == v2_subscriber) {
        // Deep mode's callbacks ride on the activity subscriber, released after the last flush.
        for (const WhitelistedApi& a : api_whitelist()) {
            if (a.role != ApiRole::kAlloc && a.role != ApiRole::kVmm) continue;
            (void)api->enable_callback(0, subscriber,
                                       a.domain == ApiDomain::kRuntime ? CUPTI_CB_DOMAIN_RUNTIME_API
                                                                       : CUPTI_CB_DOMAIN_DRIVER_API,
                                       a.cbid);
        }
        subscriber = nullptr;
        std::lock_guard<std::mutex> lock(status_mutex);
        snapshot.deep_active = false;
    } else if (subscriber != nullptr && api->unsubscribe != nullptr) {
        (void)api->unsubscribe(subscriber);
        subscriber = nullptr;
        std::lock_guard<std::mutex> lock(status_mutex);
        snapshot.deep_active = false;
    }
}

CUptiResult CuptiActivitySource::Impl::set_kind(CUpti_ActivityKind kind, bool on) noexcept {
    if (per_subscriber) {
        if (v2_subscriber == nullptr) return CUPTI_ERROR_INVALID_OPERATION;
        return on ? api->enable_v2(v2_subscriber, kind, nullptr)
                  : api->disable_v2(v2_subscriber, kind, nullptr);
    }
    return on ? api->enable(kind) : api->disable(kind);
}

CUptiResult CuptiActivitySource::Impl::set_api(const WhitelistedApi& a, bool on) noexcept {
    const bool runtime = a.domain == ApiDomain::kRuntime;
    const std::uint8_t flag = on ? 1 : 0;
    if (per_subscriber) {
        if (v2_subscriber == nullptr) return CUPTI_ERROR_INVALID_OPERATION;
        auto fn = runtime ? api->enable_runtime_api_v2 : api->enable_driver_api_v2;
        return fn(v2_subscriber, a.cbid, flag);
    }
    auto fn = runtime ? api->enable_runtime_api : api->enable_driver_api;
    return fn != nullptr ? fn(a.cbid, flag) : CUPTI_ERROR_NOT_SUPPORTED;
}

// Moves each default kind and whitelisted API record between enabled and held to match
// kinds_off: off first, then on again what the rung no longer holds. A GPU kind CUPTI will not
// make again leaves the timeline with holes, so capture is marked degraded rather than trusted.
Status CuptiActivitySource::Impl::apply_reduction() noexcept {
    // Starved on the process-wide path: these settings are another client's now (disable_all).
    if (!per_subscriber && stalled.load(std::memory_order_acquire)) return Status::ok();
    try {
        std::vector<CUpti_ActivityKind> kinds;
        for (CUpti_ActivityKind k : enabled_kinds) {
            bool hold = reduction_holds(kinds_off, k);
            if (hold) (void)set_kind(k, false);
            (hold ? held_kinds : kinds).push_back(k);
        }
        enabled_kinds.swap(kinds);
        kinds.clear();
        std::string refused;
        for (CUpti_ActivityKind k : held_kinds) {
            if (reduction_holds(kinds_off, k)) {
                kinds.push_back(k);
                continue;
            }
            CUptiResult rc = set_kind(k, true);
            if (rc == CUPTI_SUCCESS) {
                enabled_kinds.push_back(k);
            } else {
                refused += fmt::format("{}{} ({})", refused.empty() ? "" : ", ",
                                       default_kind_name(k), api->result_name(rc));
            }
        }
        held_kinds.swap(kinds);

        std::vector<const WhitelistedApi*> apis;
        for (const WhitelistedApi* a : enabled_apis) {
            bool hold = reduction_holds(kinds_off, *a);
            if (hold) (void)set_api(*a, false);
            (hold ? held_apis : apis).push_back(a);
        }
        enabled_apis.swap(apis);
        apis.clear();
        std::size_t apis_refused = 0;
        for (const WhitelistedApi* a : held_apis) {
            if (reduction_holds(kinds_off, *a)) {
                apis.push_back(a);
            } else if (set_api(*a, true) == CUPTI_SUCCESS) {
                enabled_apis.push_back(a);
            } else {
                ++apis_refused;
            }
        }
        held_apis.swap(apis);

        if (refused.empty() && apis_refused == 0) return Status::ok();
        std::lock_guard<std::mutex> lock(status_mutex);
        if (apis_refused > 0) {
            snapshot.notes.push_back(fmt::format(
                "cupti_activity: {} whitelisted API callbacks could not be enabled again after "
                "the cost budget left them out",
                apis_refused));
        }
        if (refused.empty()) return Status::ok();
        std::string reason =
            "cupti_activity: CUPTI refused to record " + refused +
            " again after the cost budget left them out: GPU activity since then is incomplete";
        snapshot.degraded = true;
        snapshot.reasons.push_back(reason);
        return unavailable(reason);
    } catch (...) {
        return internal_error("cupti_activity: out of memory while changing CUPTI's kinds");
    }
}

void CuptiActivitySource::Impl::settle_and_flush() noexcept {
    // FlushAll(0) returns only buffers whose records are complete; kernels still running keep
    // theirs back. Give them settle_ms, then force: incomplete records come back counted.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options.settle_ms);
    for (;;) {
        note_flush();
        CUptiResult rc = api->flush_all(0);
        request_drain_and_wait();
        if (rc != CUPTI_SUCCESS || pool->outstanding() == 0 ||
            std::chrono::steady_clock::now() >= deadline) {
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (pool->outstanding() == 0) return;
    forced_flush.store(true, std::memory_order_release);
    (void)api->flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    forced_flush.store(false, std::memory_order_release);
    request_drain_and_wait();
    // A forced flush returns every buffer to the registered callbacks: any of gpudiag's still
    // out went to another client's, which registered over gpudiag's. Not waited for again.
    lost_buffers.fetch_add(pool->mark_outstanding_lost(), std::memory_order_relaxed);
}

void CuptiActivitySource::Impl::subscribe_deep(std::vector<std::string>& reasons) noexcept {
    try {
        if ((api->subscribe == nullptr && api->subscribe_v2 == nullptr) ||
            api->enable_callback == nullptr || api->unsubscribe == nullptr) {
            reasons.push_back("cupti_deep: libcupti lacks cuptiSubscribe/cuptiEnableCallback");
            return;
        }
        if (deep_recorder == nullptr) {
            deep_recorder = std::make_unique<DeepCallRecorder>();
            deep_recorder->count_own_memory(&own_device_memory());
        }
        platform::warm_stack_walk();  // the unwinder loads now, not inside the first callback
        char old_name[128] = {};
        CUpti_SubscriberHandle handle = nullptr;
        CUptiResult rc;
        if (per_subscriber && v2_subscriber != nullptr) {
            // The activity subscriber is this client's own: its callbacks need no other slot.
            handle = v2_subscriber;
            rc = CUPTI_SUCCESS;
        } else if (api->subscribe_v2 != nullptr) {
            CUpti_SubscriberParams params{};
            params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
            params.subscriberName = "gpudiag";
            params.oldSubscriberName = old_name;
            params.oldSubscriberSize = sizeof old_name;
            rc = api->subscribe_v2(&handle, &deep_callback, this, &params);
        } else {
            rc = api->subscribe(&handle, &deep_callback, this);
        }
        if (rc == kMultipleSubscribers) {
            old_name[sizeof old_name - 1] = '\0';
            reasons.push_back("cupti_deep: CUPTI's single subscriber slot is held by " +
                              describe_cupti_owner(old_name) +
                              "; allocation call sites are off, activity records continue");
            return;
        }
        if (rc != CUPTI_SUCCESS) {
            reasons.push_back("cupti_deep: cuptiSubscribe failed: " + api->result_name(rc) +
                              cupti_failure_hint(rc, per_subscriber_api));
            return;
        }
        subscriber = handle;
        std::size_t failed = 0;
        for (const WhitelistedApi& a : api_whitelist()) {
            if (a.role != ApiRole::kAlloc && a.role != ApiRole::kVmm) continue;
            auto domain = a.domain == ApiDomain::kRuntime ? CUPTI_CB_DOMAIN_RUNTIME_API
                                                          : CUPTI_CB_DOMAIN_DRIVER_API;
            if (api->enable_callback(1, handle, domain, a.cbid) != CUPTI_SUCCESS) ++failed;
        }
        (void)api->enable_callback(1, handle, CUPTI_CB_DOMAIN_STATE, CUPTI_CBID_STATE_FATAL_ERROR);
        if (failed > 0) {
            reasons.push_back(
                fmt::format("cupti_deep: {} allocation callbacks could not be enabled", failed));
        }
        std::lock_guard<std::mutex> lock(status_mutex);
        snapshot.deep_active = true;
    } catch (...) {
        reasons.push_back("cupti_deep: out of memory while subscribing");
    }
}

// The source and its state are built in static storage and never destroyed: CUPTI may call back
// until the process exits, and building them cannot fail for want of memory.
namespace {
alignas(CuptiActivitySource::Impl) unsigned char g_source_state[sizeof(CuptiActivitySource::Impl)];
}  // namespace

CuptiActivitySource::CuptiActivitySource()
    : impl_(::new (static_cast<void*>(g_source_state)) Impl) {
    g_impl = impl_;
}

CuptiActivitySource& CuptiActivitySource::instance() noexcept {
    alignas(CuptiActivitySource) static unsigned char storage[sizeof(CuptiActivitySource)];
    static auto* source = ::new (static_cast<void*>(storage)) CuptiActivitySource;
    return *source;
}

Status CuptiActivitySource::start(const CuptiSourceOptions& options, EventQueue& out,
                                  StringTable& strings) noexcept {
    Impl& s = *impl_;
    s.enter();
    Status result;
    try {
        if (s.state.load() != Impl::State::kStopped) {
            s.leave();
            return failed_precondition(
                "CUPTI activity capture already runs in this process (another gpudiag session)");
        }
        std::string why;
        s.api = cupti_api(&why);
        if (s.api == nullptr) {
            s.leave();
            return unavailable("cupti_activity: " + why);
        }
        g_api.store(s.api, std::memory_order_release);
        s.per_subscriber_api = s.api->missing_per_subscriber_functions().empty();
        s.per_subscriber = false;
        s.options = options;
        if (s.pool == nullptr) {
            s.pool = std::make_unique<ActivityBufferPool>(
                options.buffer_bytes, options.initial_buffers, options.max_buffers);
            s.completed.reserve(options.max_buffers + 64);
        }
        {
            // Buffers CUPTI returned after the previous session's final drain: not this one's.
            std::lock_guard<std::mutex> lock(s.completed_mutex);
            for (const Impl::Completed& c : s.completed) s.pool->release(c.buffer);
            s.completed.clear();
        }
        s.pool->top_up(kLowWaterBuffers);
        s.out = &out;
        s.strings = &strings;
        s.clock = ClockCalibration();
        (void)s.clock.sample(&read_cupti_clock);
        s.last_pair_ns = monotonic_now_ns();
        s.decoder = std::make_unique<ActivityDecoder>(out, strings, s.clock, s.api->version);
        s.decoder->count_own_memory(&own_device_memory());
        // Without per-call enables the whole runtime kind is on (enable_whole_runtime_api).
        s.decoder->keep_whitelisted_api_only(s.api->enable_runtime_api == nullptr ||
                                             s.api->enable_driver_api == nullptr);
        s.cupti_dropped.store(0);
        s.foreign_buffers.store(0);
        s.lost_buffers.store(0);
        s.recent_demand = 0;
        s.requests.store(0);
        s.flush_demand.store(0);
        s.flush_failures = 0;
        s.emitted_dropped = 0;
        s.emitted_overhead = 0;
        s.watch = StarvationWatch(std::uint64_t{options.stall_seconds} * 1'000'000'000ULL);
        s.watch.reset(monotonic_now_ns());
        s.stalled.store(false);
        s.last_busy_ns.store(0);
        s.emitted_untimed = 0;
        {
            std::lock_guard<std::mutex> lock(s.status_mutex);
            s.snapshot = CuptiSourceStatus();
            s.snapshot.library = s.api->path;
            s.snapshot.version = s.api->version;
            s.stall_reason.clear();
            s.flush_failure.clear();
            s.stalls_recovered = 0;
            s.starved_ns = 0;
        }
        s.left_settings_to_other.store(false);
        s.kinds_off = options.kinds_off;
        std::vector<std::string> notes;
        result = s.enable_all(notes);
        if (!result.is_ok()) {
            s.disable_all();
            s.release_v2_subscriber();
            s.decoder.reset();
            s.out = nullptr;
            s.strings = nullptr;
            s.pool->trim();
            std::lock_guard<std::mutex> lock(s.status_mutex);
            s.snapshot.reasons.push_back(result.message());
            s.leave();
            return result;
        }
        std::vector<std::string> reasons;
        if (options.deep) s.subscribe_deep(reasons);
        {
            std::lock_guard<std::mutex> lock(s.status_mutex);
            s.snapshot.active = true;
            s.snapshot.notes = std::move(notes);
            for (auto& r : reasons) s.snapshot.reasons.push_back(std::move(r));
        }
        // The decoder runs only on the control thread from here on.
        s.state.store(Impl::State::kActive, std::memory_order_release);
        {
            std::lock_guard<std::mutex> lock(s.completed_mutex);
            s.stop_thread = false;
            s.thread_running = true;
        }
        s.control = quiet_thread("gpudiag-cupti", [&s] { s.control_loop(); });
    } catch (...) {
        s.disable_all();
        s.release_v2_subscriber();
        s.state.store(Impl::State::kStopped);
        result = internal_error("cupti_activity: could not start the control thread");
    }
    s.leave();
    return result;
}

void CuptiActivitySource::flush(bool forced) noexcept {
    Impl& s = *impl_;
    if (s.state.load(std::memory_order_acquire) == Impl::State::kActive) {
        s.note_flush();
        if (forced) s.forced_flush.store(true, std::memory_order_release);
        (void)s.api->flush_all(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
        if (forced) s.forced_flush.store(false, std::memory_order_release);
    }
    s.request_drain_and_wait();
}

void CuptiActivitySource::stop() noexcept {
    Impl& s = *impl_;
    s.enter();
    if (s.state.load() == Impl::State::kStopped) {
        s.leave();
        return;
    }
    // Kinds off first, then the flushes: everything recorded until now comes back.
    bool was_active = s.state.load() == Impl::State::kActive;
    s.disable_all();
    if (was_active) {
        s.settle_and_flush();
        s.read_dropped();  // the last period's drops
    }
    {
        std::lock_guard<std::mutex> lock(s.completed_mutex);
        s.stop_thread = true;
    }
    s.control_cv.notify_all();
    if (s.control.joinable()) s.control.join();
    {
        std::lock_guard<std::mutex> lock(s.completed_mutex);
        s.thread_running = false;
    }
    s.drain();         // the control thread is gone: this thread is the only decoder now
    s.read_dropped();  // the last second's drops, since the last housekeeping
    s.emit_counters();
    s.update_snapshot();
    s.state.store(Impl::State::kStopped, std::memory_order_release);
    s.drain();                  // anything that slipped in before the state changed
    s.release_v2_subscriber();  // after the last decode: the subscriber's parser read them
    s.decoder.reset();
    s.out = nullptr;
    s.strings = nullptr;
    s.pool->trim();
    {
        std::lock_guard<std::mutex> lock(s.status_mutex);
        s.snapshot.active = false;
        s.snapshot.paused = false;
    }
    s.leave();
}

Status CuptiActivitySource::pause(std::string_view reason) noexcept {
    Impl& s = *impl_;
    s.enter();
    if (s.state.load() != Impl::State::kActive) {
        s.leave();
        return failed_precondition("CUPTI capture is not running, or already paused");
    }
    s.disable_all();
    s.settle_and_flush();
    // A client that announced itself (torch.profiler) may use the process-wide API, which CUPTI
    // refuses while any per-subscriber client is subscribed: yield the subscriber too.
    s.release_v2_subscriber();
    s.push_marker(EventKind::kCapturePaused, monotonic_now_ns(), reason);
    s.state.store(Impl::State::kPaused, std::memory_order_release);
    {
        std::lock_guard<std::mutex> lock(s.status_mutex);
        s.snapshot.paused = true;
        try {
            s.snapshot.paused_reason = std::string(reason);
        } catch (...) {
        }
    }
    s.leave();
    return Status::ok();
}

Status CuptiActivitySource::resume() noexcept {
    Impl& s = *impl_;
    s.enter();
    if (s.state.load() != Impl::State::kPaused) {
        s.leave();
        return failed_precondition("CUPTI capture is not paused");
    }
    std::uint64_t resumed_at = monotonic_now_ns();
    std::vector<std::string> notes;
    Status st = s.enable_all(notes);  // re-registers our callbacks: the other client replaced them
    if (!st.is_ok()) {
        s.disable_all();
        s.release_v2_subscriber();
        std::lock_guard<std::mutex> lock(s.status_mutex);
        try {
            s.snapshot.paused_reason = "resume failed: " + st.message();
        } catch (...) {
        }
        s.leave();
        return st;
    }
    std::vector<std::string> reasons;
    if (s.options.deep) s.subscribe_deep(reasons);
    {
        std::lock_guard<std::mutex> lock(s.status_mutex);
        s.snapshot.paused = false;
        s.snapshot.paused_reason.clear();
        s.stall_reason.clear();
        try {
            // Deep-mode reasons describe the latest attempt only.
            auto& r = s.snapshot.reasons;
            r.erase(
                std::remove_if(r.begin(), r.end(),
                               [](const std::string& x) { return x.starts_with("cupti_deep:"); }),
                r.end());
            for (auto& x : reasons) r.push_back(std::move(x));
        } catch (...) {
        }
    }
    s.stalled.store(false, std::memory_order_release);
    s.watch_reset_requested.store(true, std::memory_order_release);
    s.push_marker(EventKind::kCaptureResumed, resumed_at, "");
    s.state.store(Impl::State::kActive, std::memory_order_release);
    // A clock pair now: the other client may have installed a timestamp callback meanwhile.
    s.pair_requested.store(true, std::memory_order_release);
    s.request_drain_and_wait();
    s.leave();
    return Status::ok();
}

Status CuptiActivitySource::reduce(std::uint64_t kinds_off, const EventQueue& session) noexcept {
    Impl& s = *impl_;
    s.enter();
    const Impl::State state = s.state.load();
    if (state == Impl::State::kStopped || s.out != &session) {
        s.leave();
        return failed_precondition("CUPTI capture is not running for this session");
    }
    s.kinds_off = kinds_off;
    // Paused: resume's enable_all makes only what the reduction allows.
    Status st = state == Impl::State::kActive ? s.apply_reduction() : Status::ok();
    s.leave();
    return st;
}

void CuptiActivitySource::note_gpu_busy() noexcept {
    impl_->last_busy_ns.store(monotonic_now_ns(), std::memory_order_relaxed);
}

CuptiSourceStatus CuptiActivitySource::status() const noexcept {
    Impl& s = *impl_;
    std::lock_guard<std::mutex> lock(s.status_mutex);
    try {
        CuptiSourceStatus copy = s.snapshot;
        copy.last_gpu_busy_ns = s.last_busy_ns.load(std::memory_order_relaxed);
        if (!s.stall_reason.empty()) {
            copy.degraded = true;
            copy.reasons.push_back(s.stall_reason);
        }
        if (!s.flush_failure.empty()) {
            copy.degraded = true;
            copy.reasons.push_back(s.flush_failure);
        }
        if (s.callback_failures.load() > 0 && !copy.degraded) {
            copy.notes.push_back(
                fmt::format("cupti_deep: {} callbacks failed internally and were skipped",
                            s.callback_failures.load()));
        }
        if (s.stalls_recovered > 0) {
            copy.notes.push_back(
                fmt::format("cupti_activity: CUPTI delivered nothing while the GPU was busy {} "
                            "time(s), {} s in all; those windows are marked unobserved",
                            s.stalls_recovered, s.starved_ns / 1'000'000'000ULL));
        }
        if (s.left_settings_to_other.load()) {
            copy.notes.push_back(
                "cupti_activity: left CUPTI's activity kinds and API records "
                "enabled: another client holds the activity API and may use "
                "them");
        }
        if (s.lost_buffers.load() > 0) {
            copy.notes.push_back(fmt::format(
                "cupti_activity: {} of gpudiag's activity buffers went to another CUPTI client's "
                "callbacks and never came back (their records are lost)",
                s.lost_buffers.load()));
        }
        if (s.foreign_buffers.load() > 0) {
            copy.notes.push_back(fmt::format(
                "cupti_activity: {} activity buffers of another CUPTI client reached gpudiag and "
                "were dropped unread",
                s.foreign_buffers.load()));
        }
        if (copy.foreign_clock) {
            char rate[32];
            std::snprintf(rate, sizeof rate, "%.4g", copy.clock_rate);
            copy.notes.push_back(std::string("cupti_activity: CUPTI's clock runs at ") + rate +
                                 " ns per tick, not in nanoseconds: another client registered a "
                                 "timestamp callback (PyTorch's Kineto installs a CPU-cycle one "
                                 "and never removes it); gpudiag maps record times with a fitted "
                                 "slope and offset");
        }
        if (copy.incomplete_at_flush > 0) {
            copy.notes.push_back(fmt::format(
                "cupti_activity: {} records were still in flight at a pause or stop and came back "
                "incomplete{}",
                copy.incomplete_at_flush,
                copy.unreadable_bytes > 0
                    ? fmt::format("; up to {} bytes behind them could not be read",
                                  copy.unreadable_bytes)
                    : std::string()));
        }
        return copy;
    } catch (...) {
        return {};
    }
}

#else  // !GPUDIAG_HAVE_CUDA_HEADERS

struct CuptiActivitySource::Impl {};
CuptiActivitySource::CuptiActivitySource() : impl_(nullptr) {}
CuptiActivitySource& CuptiActivitySource::instance() noexcept {
    alignas(CuptiActivitySource) static unsigned char storage[sizeof(CuptiActivitySource)];
    static auto* source = ::new (static_cast<void*>(storage)) CuptiActivitySource;
    return *source;
}
Status CuptiActivitySource::start(const CuptiSourceOptions&, EventQueue&, StringTable&) noexcept {
    return unavailable("cupti_activity: gpudiag was built without the CUDA toolkit headers");
}
void CuptiActivitySource::flush(bool) noexcept {}
void CuptiActivitySource::stop() noexcept {}
Status CuptiActivitySource::pause(std::string_view) noexcept {
    return failed_precondition("CUPTI capture is not running");
}
Status CuptiActivitySource::resume() noexcept {
    return failed_precondition("CUPTI capture is not paused");
}
Status CuptiActivitySource::reduce(std::uint64_t, const EventQueue&) noexcept {
    return failed_precondition("CUPTI capture is not running");
}
CuptiSourceStatus CuptiActivitySource::status() const noexcept {
    return {};
}
void CuptiActivitySource::note_gpu_busy() noexcept {}

#endif  // GPUDIAG_HAVE_CUDA_HEADERS

}  // namespace gpudiag::detail
