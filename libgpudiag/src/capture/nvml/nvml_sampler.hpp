// SPDX-License-Identifier: Apache-2.0
// NvmlSampler: GPU health at a fixed rate from NVML (no CUPTI, no CUDA context): utilization,
// memory, SM clock against its maximum, clock-event ("throttle") reasons, temperature, power
// against the enforced limit, volatile ECC counts, memory held by other processes on the
// same GPU, the card's health (PCIe, retired memory, NVLink, Xid) and, on Hopper and newer, SM,
// tensor and DRAM activity (GPM). Every value becomes a kCounter event (CounterKind), device = CUDA
// ordinal.
#pragma once

#include <gpudiag/source_info.hpp>
#include <gpudiag/status.hpp>

#include "capture/nvml/nvml_api.hpp"
#include "capture/nvml/own_pid_finder.hpp"
#include "capture/platform/own_device_memory.hpp"
#include "core/event_queue.hpp"

#include <array>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gpudiag::detail {

class NvmlSampler {
public:
    /// `own`: this process' device memory as CUPTI sees it, which recognises this process in
    /// NVML's list inside a PID namespace (none: only its PIDs do).
    explicit NvmlSampler(const NvmlApi& api, const OwnDeviceMemory* own = nullptr) noexcept;
    ~NvmlSampler();
    NvmlSampler(const NvmlSampler&) = delete;
    NvmlSampler& operator=(const NvmlSampler&) = delete;

    /// Called, on the sampler's thread, each time a sample says this program keeps a GPU busy:
    /// utilization above zero on a device no other process holds memory on. NVML's utilization
    /// is the whole device's, so on a shared device it is no evidence of this program's kernels;
    /// before the processes are known it counts (inside a PID namespace they may never be, and
    /// silence there would otherwise never be questioned). Set before start().
    using BusyListener = void (*)() noexcept;
    void on_gpu_busy(BusyListener listener) noexcept { busy_listener_ = listener; }

    /// Samples every `1/hz` seconds on its own thread until stop(). Errors: kInvalidArgument
    /// for hz <= 0 or > 100 (NVML itself updates most values at ~10-100 Hz).
    Status start(double hz, EventQueue& out) noexcept;
    void stop() noexcept;
    /// One round over every device (the thread's body; tests call it directly).
    void sample_once(EventQueue& out) noexcept;
    /// The same at a given time on the session clock (tests step time without sleeping).
    void sample_once(EventQueue& out, std::uint64_t now_ns) noexcept;

    /// Devices sampled, in CUDA ordinal order. Thread-safety: safe.
    [[nodiscard]] std::vector<DeviceInfo> devices() const;
    [[nodiscard]] std::uint64_t samples() const noexcept;
    /// Plain-language lines on what the sampler could not attribute, or how it did (this
    /// process recognised under a host PID). Thread-safety: safe.
    [[nodiscard]] std::vector<std::string> notes() const;

private:
    struct Device {
        nvml::Device handle = nullptr;  // the GPU, or the MIG instance CUDA sees
        nvml::Device card = nullptr;    // the whole GPU (a MIG instance's parent): its health
        unsigned gpu_instance = ~0u;    // a MIG instance's GPU instance id (GPM per instance)
        std::uint16_t ordinal = 0;
        std::uint32_t unsupported = 0;          // bit per metric that NVML refused: not asked again
        std::uint64_t next_slow_ns = 0;         // when the PCIe and memory-health readings are due
        int cu_device = -1;                     // the CUDA device, once matched by UUID
        bool xid_registration_tried = false;    // registered for Xid events (or refused) once
        unsigned long long util_last_seen = 0;  // newest process-utilization sample read (µs)
        DeviceInfo info;
    };
    void resolve_devices() noexcept;
    void resolve_mig(Device& d) const noexcept;
    void sample_device(Device& d, EventQueue& out, std::uint64_t now) noexcept;
    template <typename Emit, typename Ask>
    void sample_card(Device& d, Emit& emit, Ask& ask) noexcept;
    template <typename Emit, typename Ask>
    void sample_nvlink(Device& d, Emit& emit, Ask& ask) noexcept;
    void drain_xid_events(std::vector<Device>& devices, EventQueue& out,
                          std::uint64_t now) noexcept;
    template <typename Emit>
    void sample_gpm(const Device& d, Emit& emit, std::uint64_t now) noexcept;
    void free_gpm() noexcept;

    const NvmlApi& api_;
    mutable std::mutex mutex_;  // devices_ (the sampler thread writes, devices() reads)
    std::vector<Device> devices_;
    bool mapped_by_uuid_ = false;  // CUDA ordinals known exactly (libcuda initialised)
    std::vector<nvml::ProcessInfo> processes_;
    std::uint64_t samples_ = 0;
    std::uint32_t pid_;
    std::vector<std::uint32_t> own_pids_;  // this process' PIDs (platform::process_ids)
    [[nodiscard]] bool holds_context(const Device& d) const noexcept;
    [[nodiscard]] bool is_own(std::uint32_t pid) const noexcept;
    using EmitAs = std::function<void(CounterKind, double, std::uint32_t)>;  // value, process
    void attribute_processes(Device& d, std::uint64_t now, const EmitAs& emit_as);
    void recognise_self(const Device& d, std::uint64_t now);
    const OwnDeviceMemory* own_memory_;
    OwnPidFinder finder_;                    // the sampler thread alone touches it
    std::uint32_t recognised_pid_ = 0;       // under mutex_: this process' host PID, once known
    std::uint32_t recognised_matches_ = 0;   // under mutex_: the steps that recognised it
    std::uint64_t unattributed_rounds_ = 0;  // under mutex_: several listed, none known ours
    void sample_foreign_compute(Device& d, std::uint32_t listed_self, const EmitAs& emit_as);
    std::vector<nvml::ProcessInfo> others_;  // scratch: other processes of one sample
    std::vector<nvml::ProcessUtilizationSample> util_samples_;
    struct ProcessShare {
        std::uint32_t pid;
        double sum;
        std::uint32_t samples;
    };
    std::vector<ProcessShare> share_;
    BusyListener busy_listener_ = nullptr;
    // By CUDA ordinal: another process held memory there at the last sample that could tell.
    // The sampler thread alone touches it.
    std::array<bool, 64> shared_{};
    nvml::EventSet event_set_ = nullptr;  // Xid events (the sampler thread alone touches it)
    bool event_set_failed_ = false;
    // GPM: a window's averages come from two readings; the later one starts the next window.
    // The sampler thread alone touches these; stop() frees the buffers.
    struct GpmWindow {
        nvml::GpmSample previous = nullptr;
        nvml::GpmSample current = nullptr;
        std::uint64_t previous_ns = 0;
        bool started = false;  // `previous` holds a reading
        bool refused = false;  // this GPU has no GPM, or NVML gave no buffers
    };
    std::map<nvml::Device, GpmWindow> gpm_;  // by handle: as many as the GPUs
    std::unique_ptr<nvml::GpmMetricsGet> gpm_request_;

    std::thread thread_;
    std::mutex stop_mutex_;
    std::condition_variable stop_cv_;
    bool stop_requested_ = false;
};

/// NVML devices as CUDA would number them, from CUDA_VISIBLE_DEVICES (indices, or full GPU- or
/// MIG- UUIDs); "" selects every device in NVML order. Returns NVML indices, or the UUIDs to
/// look up in `uuids` (same length; "" where an index was given).
void parse_visible_devices(const std::string& value, std::vector<int>& indices,
                           std::vector<std::string>& uuids);

}  // namespace gpudiag::detail
