// SPDX-License-Identifier: Apache-2.0
// NvmlSampler.
//
// Device numbering: NVML enumerates every GPU in PCI order and ignores CUDA_VISIBLE_DEVICES,
// so NVML index != CUDA ordinal in general. Once this process has initialised CUDA, the
// sampler matches devices by UUID (cuDeviceGetUuid_v2 -> nvmlDeviceGetHandleByUUID); before,
// it follows CUDA_VISIBLE_DEVICES.
//
// Foreign memory: NVML lists compute processes with host PIDs. Inside a PID namespace
// (containers) getpid() does not appear, and every process would look foreign; so other
// processes' memory is reported only in samples where this process is found in the list (see
// attribute_processes: by any of its PIDs, as the only process on a GPU it computes on, or by
// the steps of its own memory, OwnPidFinder).
#include "capture/nvml/nvml_sampler.hpp"

#include "capture/platform/cuda_driver_api.hpp"
#include "capture/platform/platform.hpp"
#include "core/clock.hpp"
#include "support/quiet_thread.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <sstream>
#include <utility>

namespace gpudiag::detail {
namespace {

enum Metric : std::uint32_t {
    kUtil = 1u << 0,
    kMemory = 1u << 1,
    kClock = 1u << 2,
    kMaxClock = 1u << 3,
    kReasons = 1u << 4,
    kTemperature = 1u << 5,
    kPower = 1u << 6,
    kPowerLimit = 1u << 7,
    kEcc = 1u << 8,
    kProcesses = 1u << 9,
    kPcieLink = 1u << 10,
    kPcieReplays = 1u << 11,
    kRetiredPages = 1u << 12,
    kRemappedRows = 1u << 13,
    kNvlink = 1u << 14,
    kPowerDefault = 1u << 15,
    kPersistence = 1u << 16,
    kMig = 1u << 17,
    kFan = 1u << 18,
    kProcessUtil = 1u << 19,
};

// Other processes named one by one per sample, the largest first: enough to name the culprits,
// bounded whatever runs on a shared GPU.
constexpr std::size_t kMaxOtherProcesses = 8;
// Process-utilization samples read per round at most (NVML keeps about a second of them).
constexpr std::size_t kMaxUtilizationSamples = 1024;

// Card health that changes rarely (link training, retired memory) is read every 10 s: each
// reading is a driver call, and a change within seconds would not change the verdict.
constexpr std::uint64_t kSlowPeriodNs = 10'000'000'000ull;
// GPM windows of at least 100 ms: a GPM reading collects every SM's counters, the costliest
// call of a round, and windows shorter than that tell a step-level diagnosis nothing more.
constexpr std::uint64_t kGpmMinWindowNs = 100'000'000ull;
// Xid events taken from the event set per round; more wait for the next round.
constexpr int kMaxEventsPerRound = 64;

}  // namespace

void parse_visible_devices(const std::string& value, std::vector<int>& indices,
                           std::vector<std::string>& uuids) {
    indices.clear();
    uuids.clear();
    std::stringstream in(value);
    std::string token;
    while (std::getline(in, token, ',')) {
        while (!token.empty() && token.front() == ' ') token.erase(token.begin());
        while (!token.empty() && token.back() == ' ') token.pop_back();
        if (token.empty()) break;
        if (token.rfind("GPU-", 0) == 0 || token.rfind("MIG-", 0) == 0) {
            indices.push_back(-1);  // NVML finds a MIG instance by its UUID as well
            uuids.push_back(token);
            continue;
        }
        char* end = nullptr;
        long v = std::strtol(token.c_str(), &end, 10);
        // CUDA stops at the first invalid entry (e.g. -1 hides every later device).
        if (end == token.c_str() || *end != '\0' || v < 0) break;
        indices.push_back(static_cast<int>(v));
        uuids.emplace_back();
    }
}

NvmlSampler::NvmlSampler(const NvmlApi& api, const OwnDeviceMemory* own) noexcept
    : api_(api),
      pid_(platform::process_id()),
      own_pids_(platform::process_ids()),
      own_memory_(own) {}

// Whether this process holds `d`'s primary context (it computes there): known once CUDA is
// initialised and the device matched by UUID.
bool NvmlSampler::holds_context(const Device& d) const noexcept {
    const CudaDriverApi* cuda = d.cu_device >= 0 ? cuda_driver_api() : nullptr;
    if (cuda == nullptr || cuda->primary_ctx_get_state == nullptr) return false;
    unsigned flags = 0;
    int active = 0;
    return cuda->primary_ctx_get_state(d.cu_device, &flags, &active) == 0 && active != 0;
}

// Our own memory and other processes'. NVML lists processes by host PID; inside a PID namespace
// (a container) getpid() is another number. This process is found by any of its PIDs (the
// NSpid line names the outer ones where the /proc mount shows them). When none is listed but
// this process holds a context on the device, it is listed under a PID it cannot see: a single
// process listed is then this one (no other process holds memory there); with several, which
// one is ours cannot be told until OwnPidFinder recognises it by its own memory's steps; till
// then nothing is reported rather than a guess.
void NvmlSampler::attribute_processes(Device& d, std::uint64_t now, const EmitAs& emit_as) {
    recognise_self(d, now);
    double own = 0;
    double foreign = 0;
    std::size_t listed = 0;
    bool found_self = false;
    for (const nvml::ProcessInfo& p : processes_) {
        if (p.used_gpu_memory == nvml::kValueNotAvailable) continue;
        ++listed;
        const bool mine = is_own(p.pid);
        found_self = found_self || mine;
        (mine ? own : foreign) += static_cast<double>(p.used_gpu_memory);
    }
    std::uint32_t listed_self = 0;  // this process under a PID it cannot see
    if (!found_self && listed == 1 && holds_context(d)) {
        found_self = true;
        own = foreign;
        foreign = 0;
        for (const nvml::ProcessInfo& p : processes_) {
            if (p.used_gpu_memory != nvml::kValueNotAvailable) listed_self = p.pid;
        }
    }
    if (!found_self) {
        if (listed > 1 && holds_context(d)) {
            std::lock_guard<std::mutex> lock(mutex_);
            ++unattributed_rounds_;
        }
        return;
    }
    emit_as(CounterKind::kProcessMemoryUsedBytes, own, pid_);
    emit_as(CounterKind::kForeignProcessMemoryBytes, foreign, pid_);
    if (d.ordinal < shared_.size()) shared_[d.ordinal] = foreign > 0;
    others_.clear();
    for (const nvml::ProcessInfo& p : processes_) {
        if (p.used_gpu_memory == nvml::kValueNotAvailable || is_own(p.pid) ||
            p.pid == listed_self) {
            continue;
        }
        others_.push_back(p);
    }
    const std::size_t named = std::min(others_.size(), kMaxOtherProcesses);
    std::partial_sort(others_.begin(), others_.begin() + static_cast<std::ptrdiff_t>(named),
                      others_.end(), [](const nvml::ProcessInfo& a, const nvml::ProcessInfo& b) {
                          return a.used_gpu_memory > b.used_gpu_memory;
                      });
    for (std::size_t i = 0; i < named; ++i) {
        emit_as(CounterKind::kOtherProcessMemoryBytes,
                static_cast<double>(others_[i].used_gpu_memory), others_[i].pid);
    }
    sample_foreign_compute(d, listed_self, emit_as);
}

// Feeds OwnPidFinder while this process is not listed under any PID it knows, and takes the host
// PID it recognises as one of this process' PIDs (the same on every GPU).
void NvmlSampler::recognise_self(const Device& d, std::uint64_t now) {
    if (own_memory_ == nullptr || recognised_pid_ != 0) return;
    for (const nvml::ProcessInfo& p : processes_) {
        if (is_own(p.pid)) return;
    }
    finder_.observe(d.ordinal, own_memory_->read(d.ordinal), now, processes_);
    if (const std::uint32_t pid = finder_.pid(); pid != 0) {
        own_pids_.push_back(pid);
        std::lock_guard<std::mutex> lock(mutex_);
        recognised_pid_ = pid;
        recognised_matches_ = finder_.matches();
    }
}

std::vector<std::string> NvmlSampler::notes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::string> out;
    if (recognised_pid_ != 0) {
        out.push_back(fmt::format(
            "nvml: this process is PID {} in NVML's process list (a PID namespace hides that PID "
            "here): recognised by {} steps of its own memory that only that process' memory "
            "followed",
            recognised_pid_, recognised_matches_));
    }
    if (unattributed_rounds_ > 0) {
        out.push_back(fmt::format(
            "nvml: other processes' memory not reported in {} samples: NVML listed several "
            "processes under PIDs a PID namespace hides, and which one is this process was not "
            "known yet (it is recognised once its own memory has moved by {} MiB or more {} "
            "times, with that process' alone moving alike)",
            unattributed_rounds_, OwnPidFinder::kMinStepBytes >> 20, OwnPidFinder::kMatchesNeeded));
    }
    return out;
}

bool NvmlSampler::is_own(std::uint32_t pid) const noexcept {
    return std::find(own_pids_.begin(), own_pids_.end(), pid) != own_pids_.end();
}

// The SM time other processes used since the last round (NVML's per-process utilization: a
// sample per process and NVML period; a process' share is the mean of its samples, the others'
// shares are summed). Asked only once this process was found in the list, so that "other" is
// known. No sample since the last round: no process ran kernels, 0.
void NvmlSampler::sample_foreign_compute(Device& d, std::uint32_t listed_self,
                                         const EmitAs& emit_as) {
    if (api_.device_get_process_utilization == nullptr || (d.unsupported & kProcessUtil) != 0)
        return;
    unsigned n = 0;
    nvml::Return rc = api_.device_get_process_utilization(d.handle, nullptr, &n, d.util_last_seen);
    if (rc == nvml::kErrorNotSupported || rc == nvml::kErrorFunctionNotFound) {
        d.unsupported |= kProcessUtil;
        return;
    }
    if (rc == nvml::kErrorNotFound) {
        emit_as(CounterKind::kForeignProcessSmPercent, 0, pid_);
        return;
    }
    if (rc != nvml::kErrorInsufficientSize && rc != nvml::kSuccess) return;
    util_samples_.resize(std::min<std::size_t>(std::size_t{n} + 8, kMaxUtilizationSamples));
    n = static_cast<unsigned>(util_samples_.size());
    if (api_.device_get_process_utilization(d.handle, util_samples_.data(), &n, d.util_last_seen) !=
        nvml::kSuccess) {
        return;
    }
    n = std::min(n, static_cast<unsigned>(util_samples_.size()));
    // Per process: the sum and count of its samples (a handful of processes: a flat list).
    share_.clear();
    for (unsigned i = 0; i < n; ++i) {
        const nvml::ProcessUtilizationSample& s = util_samples_[i];
        d.util_last_seen = std::max(d.util_last_seen, s.timestamp);
        if (is_own(s.pid) || s.pid == listed_self) continue;
        auto it = std::find_if(share_.begin(), share_.end(),
                               [&](const ProcessShare& x) { return x.pid == s.pid; });
        if (it == share_.end()) it = share_.insert(share_.end(), ProcessShare{s.pid, 0, 0});
        it->sum += s.sm_util;
        ++it->samples;
    }
    double foreign = 0;
    for (const ProcessShare& x : share_) foreign += x.sum / static_cast<double>(x.samples);
    emit_as(CounterKind::kForeignProcessSmPercent, std::min(foreign, 100.0), pid_);
}

// A MIG instance (CUDA sees one when CUDA_VISIBLE_DEVICES names a MIG- UUID): its memory,
// processes and GPM are the instance's; clocks, temperature, power, ECC and the card's health are
// its GPU's, read through the GPU's handle. The report names the instance and its GPU.
void NvmlSampler::resolve_mig(Device& d) const noexcept {
    unsigned is_mig = 0;
    nvml::Device parent = nullptr;
    if (api_.device_is_mig_device_handle == nullptr ||
        api_.device_get_device_handle_from_mig_device_handle == nullptr ||
        api_.device_is_mig_device_handle(d.handle, &is_mig) != nvml::kSuccess || is_mig == 0 ||
        api_.device_get_device_handle_from_mig_device_handle(d.handle, &parent) != nvml::kSuccess ||
        parent == nullptr) {
        return;
    }
    d.card = parent;
    unsigned id = 0;
    if (api_.device_get_gpu_instance_id != nullptr &&
        api_.device_get_gpu_instance_id(d.handle, &id) == nvml::kSuccess) {
        d.gpu_instance = id;
        d.info.gpu_instance = static_cast<int>(id);
    }
    if (api_.device_get_compute_instance_id != nullptr &&
        api_.device_get_compute_instance_id(d.handle, &id) == nvml::kSuccess) {
        d.info.compute_instance = static_cast<int>(id);
    }
    char buf[96] = {};
    if (api_.device_get_uuid != nullptr &&
        api_.device_get_uuid(parent, buf, sizeof buf) == nvml::kSuccess) {
        d.info.parent_uuid = buf;
    }
    if (d.info.parent_uuid.empty()) d.info.parent_uuid = "GPU-?";  // still marks an instance
}

NvmlSampler::~NvmlSampler() {
    stop();
}

void NvmlSampler::resolve_devices() noexcept {
    if (mapped_by_uuid_) return;
    try {
        std::vector<Device> found;
        bool by_uuid = false;
        const CudaDriverApi* cuda = cuda_driver_api();
        int count = 0;
        if (cuda != nullptr && cuda->device_get_count != nullptr && cuda->device_get != nullptr &&
            cuda->device_get_uuid != nullptr && api_.device_get_handle_by_uuid != nullptr &&
            cuda->device_get_count(&count) == 0) {
            // CUDA is initialised in this process (cuDeviceGetCount fails before cuInit).
            by_uuid = true;
            for (int ordinal = 0; ordinal < count; ++ordinal) {
                int dev = 0;
                std::array<unsigned char, 16> uuid{};
                if (cuda->device_get(&dev, ordinal) != 0 ||
                    cuda->device_get_uuid(&uuid, dev) != 0) {
                    continue;
                }
                Device d;
                d.info.uuid = format_gpu_uuid(uuid);
                if (api_.device_get_handle_by_uuid(d.info.uuid.c_str(), &d.handle) !=
                    nvml::kSuccess) {
                    // A MIG instance: the same bytes under NVML's MIG- prefix.
                    d.info.uuid.replace(0, 4, "MIG-");
                    if (api_.device_get_handle_by_uuid(d.info.uuid.c_str(), &d.handle) !=
                        nvml::kSuccess) {
                        continue;
                    }
                }
                d.ordinal = static_cast<std::uint16_t>(ordinal);
                d.cu_device = dev;
                found.push_back(std::move(d));
            }
        } else {
            unsigned n = 0;
            if (api_.device_get_count(&n) != nvml::kSuccess) n = 0;
            std::vector<int> indices;
            std::vector<std::string> uuids;
            const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
            if (visible == nullptr) {
                for (unsigned i = 0; i < n; ++i) {
                    indices.push_back(static_cast<int>(i));
                    uuids.emplace_back();
                }
            } else {
                parse_visible_devices(visible, indices, uuids);
            }
            for (std::size_t k = 0; k < indices.size(); ++k) {
                Device d;
                nvml::Return rc = nvml::kErrorNotSupported;
                if (indices[k] >= 0 && static_cast<unsigned>(indices[k]) < n) {
                    rc = api_.device_get_handle_by_index(static_cast<unsigned>(indices[k]),
                                                         &d.handle);
                } else if (!uuids[k].empty() && api_.device_get_handle_by_uuid != nullptr) {
                    rc = api_.device_get_handle_by_uuid(uuids[k].c_str(), &d.handle);
                }
                if (rc != nvml::kSuccess) continue;
                d.ordinal = static_cast<std::uint16_t>(found.size());
                found.push_back(std::move(d));
            }
        }
        for (Device& d : found) {
            d.info.ordinal = d.ordinal;
            d.card = d.handle;
            resolve_mig(d);
            char buf[128] = {};
            if (api_.device_get_name != nullptr &&
                api_.device_get_name(d.handle, buf, sizeof buf) == nvml::kSuccess) {
                d.info.name = buf;
            }
            if (d.info.uuid.empty() && api_.device_get_uuid != nullptr &&
                api_.device_get_uuid(d.handle, buf, sizeof buf) == nvml::kSuccess) {
                d.info.uuid = buf;
            }
            nvml::PciInfo pci{};
            if (api_.device_get_pci_info != nullptr &&
                api_.device_get_pci_info(d.card, &pci) == nvml::kSuccess) {
                pci.bus_id[sizeof pci.bus_id - 1] = '\0';
                d.info.pci_bus_id = pci.bus_id;
            }
            nvml::MemoryFigures mem;
            if (api_.memory_info(d.handle, mem) == nvml::kSuccess)
                d.info.total_memory_bytes = mem.total;
        }
        std::lock_guard<std::mutex> lock(mutex_);
        // Keep what NVML refused before, and what was done once, for devices we already knew.
        for (Device& d : found) {
            for (const Device& old : devices_) {
                if (old.handle != d.handle) continue;
                d.unsupported = old.unsupported;
                d.next_slow_ns = old.next_slow_ns;
                d.xid_registration_tried = old.xid_registration_tried;
                d.util_last_seen = old.util_last_seen;
            }
        }
        devices_ = std::move(found);
        mapped_by_uuid_ = by_uuid;
    } catch (...) {
    }
}

void NvmlSampler::sample_device(Device& d, EventQueue& out, std::uint64_t now) noexcept {
    auto emit_as = [&](CounterKind kind, double value, std::uint32_t process) {
        Event e;
        e.kind = EventKind::kCounter;
        e.device = d.ordinal;
        e.process = process;
        e.start_ns = e.end_ns = now;
        e.counter.counter = kind;
        e.counter.value = value;
        (void)out.try_push(e);
    };
    auto emit = [&](CounterKind kind, double value) { emit_as(kind, value, pid_); };
    // Calls `fn`; remembers a device that does not support the metric.
    auto ask = [&](Metric m, auto&& fn) -> bool {
        if ((d.unsupported & m) != 0) return false;
        nvml::Return rc = fn();
        if (rc == nvml::kErrorNotSupported || rc == nvml::kErrorFunctionNotFound)
            d.unsupported |= m;
        return rc == nvml::kSuccess;
    };
    nvml::Utilization util{};
    if (api_.device_get_utilization_rates != nullptr &&
        ask(kUtil, [&] { return api_.device_get_utilization_rates(d.handle, &util); })) {
        emit(CounterKind::kGpuUtilizationPercent, util.gpu);
        emit(CounterKind::kMemoryUtilizationPercent, util.memory);
        const bool shared = d.ordinal >= shared_.size() || shared_[d.ordinal];
        if (util.gpu > 0 && !shared && busy_listener_ != nullptr) busy_listener_();
    }
    sample_gpm(d, emit, now);
    nvml::MemoryFigures mem;
    bool have_memory = ask(kMemory, [&] { return api_.memory_info(d.handle, mem); });
    if (have_memory) {
        // v2 "used" excludes the driver's reservation; v1's includes it (NvmlApi::notes says so).
        emit(CounterKind::kDeviceMemoryUsedBytes, static_cast<double>(mem.used));
        emit(CounterKind::kDeviceMemoryTotalBytes, static_cast<double>(mem.total));
    }
    unsigned mhz = 0;
    if (api_.device_get_clock_info != nullptr &&
        ask(kClock, [&] { return api_.device_get_clock_info(d.card, nvml::kClockSm, &mhz); })) {
        emit(CounterKind::kSmClockMhz, mhz);
    }
    if (api_.device_get_max_clock_info != nullptr && ask(kMaxClock, [&] {
            return api_.device_get_max_clock_info(d.card, nvml::kClockSm, &mhz);
        })) {
        emit(CounterKind::kSmClockMaxMhz, mhz);
    }
    // Temperature before the reasons: the health analysis reads a hardware slowdown in the
    // light of the temperature of the same sample.
    if (api_.device_get_temperature_v != nullptr) {
        nvml::TemperatureV1 t{};
        t.version = nvml::kTemperatureV1Version;
        t.sensor_type = nvml::kTemperatureGpu;
        if (ask(kTemperature, [&] { return api_.device_get_temperature_v(d.card, &t); })) {
            emit(CounterKind::kTemperatureC, t.temperature);
        }
    } else if (api_.device_get_temperature != nullptr) {
        unsigned c = 0;
        if (ask(kTemperature,
                [&] { return api_.device_get_temperature(d.card, nvml::kTemperatureGpu, &c); })) {
            emit(CounterKind::kTemperatureC, c);
        }
    }
    unsigned mw = 0;
    if (api_.device_get_power_usage != nullptr &&
        ask(kPower, [&] { return api_.device_get_power_usage(d.card, &mw); })) {
        emit(CounterKind::kPowerWatts, mw / 1000.0);
    }
    if (api_.device_get_enforced_power_limit != nullptr &&
        ask(kPowerLimit, [&] { return api_.device_get_enforced_power_limit(d.card, &mw); })) {
        emit(CounterKind::kPowerLimitWatts, mw / 1000.0);
    }
    unsigned fan = 0;
    if (api_.device_get_fan_speed != nullptr &&
        ask(kFan, [&] { return api_.device_get_fan_speed(d.card, &fan); })) {
        emit(CounterKind::kFanSpeedPercent, fan);
    }
    if (now >= d.next_slow_ns) {
        d.next_slow_ns = now + kSlowPeriodNs;
        sample_card(d, emit, ask);
    }
    unsigned long long reasons = 0;
    if (api_.device_get_clocks_event_reasons != nullptr &&
        ask(kReasons, [&] { return api_.device_get_clocks_event_reasons(d.card, &reasons); })) {
        emit(CounterKind::kThrottleReasons, static_cast<double>(reasons));
    }
    if (api_.device_get_total_ecc_errors != nullptr) {
        unsigned long long corrected = 0;
        unsigned long long uncorrected = 0;
        if (ask(kEcc,
                [&] {
                    return api_.device_get_total_ecc_errors(d.card, nvml::kEccCorrected,
                                                            nvml::kVolatileEcc, &corrected);
                }) &&
            ask(kEcc, [&] {
                return api_.device_get_total_ecc_errors(d.card, nvml::kEccUncorrected,
                                                        nvml::kVolatileEcc, &uncorrected);
            })) {
            emit(CounterKind::kEccCorrectedErrors, static_cast<double>(corrected));
            emit(CounterKind::kEccUncorrectedErrors, static_cast<double>(uncorrected));
        }
    }
    if ((d.unsupported & kProcesses) == 0) {
        try {
            nvml::Return rc = api_.running_processes(d.handle, processes_);
            if (rc == nvml::kErrorNotSupported || rc == nvml::kErrorFunctionNotFound) {
                d.unsupported |= kProcesses;
            }
            if (rc == nvml::kSuccess) attribute_processes(d, now, emit_as);
        } catch (...) {
        }
    }
}

// PCIe link and retired memory (Device::next_slow_ns says when). Retired pages exist before
// Ampere, remapped rows from Ampere on: each board answers one and refuses the other.
template <typename Emit, typename Ask>
void NvmlSampler::sample_card(Device& d, Emit& emit, Ask& ask) noexcept {
    unsigned gen = 0, gen_max = 0, width = 0, width_max = 0;
    if (api_.device_get_curr_pcie_link_generation != nullptr &&
        api_.device_get_max_pcie_link_generation != nullptr &&
        api_.device_get_curr_pcie_link_width != nullptr &&
        api_.device_get_max_pcie_link_width != nullptr && ask(kPcieLink, [&] {
            nvml::Return rc = api_.device_get_curr_pcie_link_generation(d.card, &gen);
            if (rc == nvml::kSuccess)
                rc = api_.device_get_max_pcie_link_generation(d.card, &gen_max);
            if (rc == nvml::kSuccess) rc = api_.device_get_curr_pcie_link_width(d.card, &width);
            if (rc == nvml::kSuccess) rc = api_.device_get_max_pcie_link_width(d.card, &width_max);
            return rc;
        })) {
        emit(CounterKind::kPcieLinkGeneration, gen);
        emit(CounterKind::kPcieLinkGenerationMax, gen_max);
        emit(CounterKind::kPcieLinkWidth, width);
        emit(CounterKind::kPcieLinkWidthMax, width_max);
    }
    unsigned replays = 0;
    if (api_.device_get_pcie_replay_counter != nullptr &&
        ask(kPcieReplays, [&] { return api_.device_get_pcie_replay_counter(d.card, &replays); })) {
        emit(CounterKind::kPcieReplays, replays);
    }
    unsigned single = 0, dual = 0;
    if (api_.device_get_retired_pages != nullptr && ask(kRetiredPages, [&] {
            // A count only: no addresses asked for (INSUFFICIENT_SIZE then carries the count).
            nvml::Return rc =
                api_.device_get_retired_pages(d.card, nvml::kRetiredForSingleBit, &single, nullptr);
            if (rc == nvml::kErrorInsufficientSize) rc = nvml::kSuccess;
            if (rc != nvml::kSuccess) return rc;
            rc = api_.device_get_retired_pages(d.card, nvml::kRetiredForDoubleBit, &dual, nullptr);
            return rc == nvml::kErrorInsufficientSize ? nvml::kSuccess : rc;
        })) {
        emit(CounterKind::kRetiredPagesSingleBit, single);
        emit(CounterKind::kRetiredPagesDoubleBit, dual);
        int pending = 0;
        if (api_.device_get_retired_pages_pending_status != nullptr &&
            api_.device_get_retired_pages_pending_status(d.card, &pending) == nvml::kSuccess) {
            emit(CounterKind::kRetiredPagesPending, pending != 0 ? 1 : 0);
        }
    }
    sample_nvlink(d, emit, ask);
    unsigned mw = 0;
    if (api_.device_get_power_default_limit != nullptr &&
        ask(kPowerDefault, [&] { return api_.device_get_power_default_limit(d.card, &mw); })) {
        emit(CounterKind::kPowerLimitDefaultWatts, mw / 1000.0);
    }
    int persistence = 0;
    if (api_.device_get_persistence_mode != nullptr &&
        ask(kPersistence, [&] { return api_.device_get_persistence_mode(d.card, &persistence); })) {
        emit(CounterKind::kPersistenceMode, persistence != 0 ? 1 : 0);
    }
    unsigned mig = 0, mig_pending = 0;
    if (api_.device_get_mig_mode != nullptr &&
        ask(kMig, [&] { return api_.device_get_mig_mode(d.card, &mig, &mig_pending); })) {
        emit(CounterKind::kMigMode, mig != 0 ? 1 : 0);
    }
    unsigned corrected = 0, uncorrected = 0, pending = 0, failed = 0;
    if (api_.device_get_remapped_rows != nullptr && ask(kRemappedRows, [&] {
            return api_.device_get_remapped_rows(d.card, &corrected, &uncorrected, &pending,
                                                 &failed);
        })) {
        emit(CounterKind::kRemappedRowsCorrectable, corrected);
        emit(CounterKind::kRemappedRowsUncorrectable, uncorrected);
        emit(CounterKind::kRowRemapPending, pending != 0 ? 1 : 0);
        emit(CounterKind::kRowRemapFailed, failed != 0 ? 1 : 0);
    }
}

// NVLink: which links are up, and their error counters summed over those (a board without
// NVLink refuses link 0 and is not asked again; the first refused link ends the list).
template <typename Emit, typename Ask>
void NvmlSampler::sample_nvlink(Device& d, Emit& emit, Ask& ask) noexcept {
    if (api_.device_get_nvlink_state == nullptr) return;
    int state = 0;
    if (!ask(kNvlink, [&] { return api_.device_get_nvlink_state(d.card, 0, &state); })) return;
    unsigned active = 0;
    unsigned long long replay = 0, recovery = 0, crc = 0;
    for (unsigned link = 0; link < nvml::kNvlinkMaxLinks; ++link) {
        if (link > 0 && api_.device_get_nvlink_state(d.card, link, &state) != nvml::kSuccess) {
            break;
        }
        if (state == 0) continue;
        ++active;
        if (api_.device_get_nvlink_error_counter == nullptr) continue;
        auto count = [&](unsigned counter) -> unsigned long long {
            unsigned long long v = 0;
            return api_.device_get_nvlink_error_counter(d.card, link, counter, &v) == nvml::kSuccess
                       ? v
                       : 0;
        };
        replay += count(nvml::kNvlinkReplay);
        recovery += count(nvml::kNvlinkRecovery);
        crc += count(nvml::kNvlinkCrcFlit) + count(nvml::kNvlinkCrcData);
    }
    emit(CounterKind::kNvlinkLinksActive, active);
    if (api_.device_get_nvlink_error_counter == nullptr) return;
    emit(CounterKind::kNvlinkReplayErrors, static_cast<double>(replay));
    emit(CounterKind::kNvlinkRecoveryErrors, static_cast<double>(recovery));
    emit(CounterKind::kNvlinkCrcErrors, static_cast<double>(crc));
}

// SM, tensor and DRAM activity over the window since the last GPM reading: the GPU's, or a MIG
// instance's own (nvmlGpmMigSampleGet). Asked once per GPU whether it has GPM (Hopper on); a
// failed reading starts a new window rather than averaging over a gap.
template <typename Emit>
void NvmlSampler::sample_gpm(const Device& d, Emit& emit, std::uint64_t now) noexcept {
    if (!api_.has_gpm()) return;
    GpmWindow* w = nullptr;
    try {
        w = &gpm_[d.handle];
        if (!gpm_request_) gpm_request_ = std::make_unique<nvml::GpmMetricsGet>();
    } catch (...) {
        return;
    }
    if (w->refused || (w->started && now - w->previous_ns < kGpmMinWindowNs)) return;
    if (w->previous == nullptr) {
        nvml::GpmSupport support{nvml::kGpmSupportVersion, 0};
        w->refused = (d.card != d.handle && api_.gpm_mig_sample_get == nullptr) ||
                     api_.gpm_query_device_support(d.card, &support) != nvml::kSuccess ||
                     support.is_supported_device == 0 ||
                     api_.gpm_sample_alloc(&w->previous) != nvml::kSuccess ||
                     api_.gpm_sample_alloc(&w->current) != nvml::kSuccess;
        if (w->refused) return;
    }
    const nvml::Return got = d.card != d.handle
                                 ? api_.gpm_mig_sample_get(d.card, d.gpu_instance, w->current)
                                 : api_.gpm_sample_get(d.handle, w->current);
    if (got != nvml::kSuccess) {
        w->started = false;
        return;
    }
    if (w->started) {
        static constexpr std::pair<unsigned, CounterKind> kMetrics[] = {
            {nvml::kGpmSmActive, CounterKind::kSmActivePercent},
            {nvml::kGpmSmOccupancy, CounterKind::kSmOccupancyPercent},
            {nvml::kGpmAnyTensor, CounterKind::kTensorActivePercent},
            {nvml::kGpmDramBandwidth, CounterKind::kDramActivePercent},
        };
        nvml::GpmMetricsGet& q = *gpm_request_;
        q.version = nvml::kGpmMetricsGetVersion;
        q.num_metrics = static_cast<unsigned>(std::size(kMetrics));
        q.sample1 = w->previous;
        q.sample2 = w->current;
        for (unsigned i = 0; i < q.num_metrics; ++i) {
            q.metrics[i] = nvml::GpmMetric{};
            q.metrics[i].metric_id = kMetrics[i].first;
            q.metrics[i].result = -1;
        }
        if (api_.gpm_metrics_get(&q) == nvml::kSuccess) {
            for (unsigned i = 0; i < q.num_metrics; ++i) {
                if (q.metrics[i].result == nvml::kSuccess)
                    emit(kMetrics[i].second, q.metrics[i].value);
            }
        }
    }
    std::swap(w->previous, w->current);
    w->previous_ns = now;
    w->started = true;
}

void NvmlSampler::free_gpm() noexcept {
    for (auto& [handle, w] : gpm_) {
        if (w.previous != nullptr) (void)api_.gpm_sample_free(w.previous);
        if (w.current != nullptr) (void)api_.gpm_sample_free(w.current);
    }
    gpm_.clear();
}

// Registers each device for Xid events once (a device that refuses is not asked again), then
// takes what the driver queued since the last round without waiting.
void NvmlSampler::drain_xid_events(std::vector<Device>& devices, EventQueue& out,
                                   std::uint64_t now) noexcept {
    if (api_.event_set_create == nullptr || api_.device_register_events == nullptr ||
        api_.event_set_wait == nullptr) {
        return;
    }
    if (event_set_ == nullptr && !event_set_failed_) {
        event_set_failed_ = api_.event_set_create(&event_set_) != nvml::kSuccess;
        if (event_set_failed_) event_set_ = nullptr;
    }
    if (event_set_ == nullptr) return;
    for (Device& d : devices) {
        if (d.xid_registration_tried) continue;
        d.xid_registration_tried = true;
        (void)api_.device_register_events(d.card, nvml::kEventXidCritical, event_set_);
    }
    for (int i = 0; i < kMaxEventsPerRound; ++i) {
        nvml::EventData data{};
        if (api_.event_set_wait(event_set_, &data, 0) != nvml::kSuccess) break;
        if ((data.event_type & nvml::kEventXidCritical) == 0) continue;
        for (const Device& d : devices) {
            if (d.card != data.device) continue;
            Event e;
            e.kind = EventKind::kCounter;
            e.device = d.ordinal;
            e.process = pid_;
            e.start_ns = e.end_ns = now;
            e.counter.counter = CounterKind::kXidError;
            e.counter.value = static_cast<double>(data.event_data);
            (void)out.try_push(e);
        }
    }
}

void NvmlSampler::sample_once(EventQueue& out) noexcept {
    sample_once(out, monotonic_now_ns());
}

void NvmlSampler::sample_once(EventQueue& out, std::uint64_t now) noexcept {
    resolve_devices();
    std::vector<Device> devices;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        devices = devices_;  // a handful of devices: copy rather than hold the lock over NVML
    }
    drain_xid_events(devices, out, now);
    for (Device& d : devices) sample_device(d, out, now);
    std::lock_guard<std::mutex> lock(mutex_);
    for (Device& d : devices) {
        for (Device& mine : devices_) {
            if (mine.handle != d.handle) continue;
            mine.unsupported = d.unsupported;
            mine.next_slow_ns = d.next_slow_ns;
            mine.xid_registration_tried = d.xid_registration_tried;
            mine.util_last_seen = d.util_last_seen;
        }
    }
    ++samples_;
}

Status NvmlSampler::start(double hz, EventQueue& out) noexcept {
    if (!(hz > 0.0) || hz > 100.0) {
        // {:f}: six decimals, as this message has always printed them.
        return invalid_argument(fmt::format("nvml_hz must be in (0, 100], got {:f}", hz));
    }
    if (thread_.joinable()) return failed_precondition("the NVML sampler is already running");
    try {
        stop_requested_ = false;
        auto period = std::chrono::nanoseconds(static_cast<std::int64_t>(1e9 / hz));
        thread_ = quiet_thread("gpudiag-nvml", [this, period, &out] {
            auto next = std::chrono::steady_clock::now();
            for (;;) {
                sample_once(out);
                next += period;
                auto now = std::chrono::steady_clock::now();
                if (next < now) next = now;  // NVML was slow: skip, do not burst to catch up
                std::unique_lock<std::mutex> lock(stop_mutex_);
                if (stop_cv_.wait_until(lock, next, [this] { return stop_requested_; })) return;
            }
        });
    } catch (...) {
        return internal_error("could not start the NVML sampler thread");
    }
    return Status::ok();
}

void NvmlSampler::stop() noexcept {
    {
        std::lock_guard<std::mutex> lock(stop_mutex_);
        stop_requested_ = true;
    }
    stop_cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    if (event_set_ != nullptr && api_.event_set_free != nullptr)
        (void)api_.event_set_free(event_set_);
    event_set_ = nullptr;
    event_set_failed_ = false;
    free_gpm();
    std::lock_guard<std::mutex> lock(mutex_);
    for (Device& d : devices_) d.xid_registration_tried = false;  // a new set on the next start
}

std::vector<DeviceInfo> NvmlSampler::devices() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<DeviceInfo> out;
    for (const Device& d : devices_) out.push_back(d.info);
    return out;
}

std::uint64_t NvmlSampler::samples() const noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    return samples_;
}

}  // namespace gpudiag::detail
