// SPDX-License-Identifier: Apache-2.0
// What each capture level needs, and the one level (with reasons) that the facts give.
#pragma once

#include <gpudiag/capture.hpp>
#include <gpudiag/event.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace gpudiag::detail {

/// Everything the level depends on, gathered by probe_capture() or by a running backend.
struct CaptureFacts {
    bool nvml_loaded = false;
    std::string nvml_why_not;
    int nvml_devices = 0;
    std::string nvml_driver_version;
    std::vector<std::string> nvml_notes;  ///< what this driver's NVML lacks (NvmlApi::notes)

    bool cuda_driver_loaded = false;
    std::string cuda_why_not;
    std::string cuda_driver_version;  ///< "13.0"

    bool cupti_loaded = false;
    std::string cupti_why_not;
    std::string cupti_path;
    std::uint32_t cupti_version = 0;

    SoftwareStack stack;              ///< driver, framework, CUPTI, as found
    bool framework_reported = false;  ///< a framework integration called set_framework_info

    bool nvtx_injected = false;  ///< some NVTX instance installed gpudiag's handlers
    bool nvtx_attached = true;   ///< (backend) ranges reach this session

    bool capture_gpu = true;  ///< (backend) SessionOptions::capture_gpu
    bool running = false;     ///< (backend) a session started the sources
    bool activity_running = false;
    std::vector<std::string> activity_reasons;  ///< why CUPTI activity failed or what it lost
    bool deep_requested = false;
    bool deep_running = false;
};

/// The level the facts support and one reason per unavailable level (lower ones included when
/// they are missing too, e.g. NVML absent under working CUPTI). Without `running`, CUPTI levels
/// are judged by what is loadable (libcupti 13 and a driver) rather than by enabling them.
CaptureStatus compute_capture_status(const CaptureFacts& facts);

/// One rung of the ladder a session steps down when its cost passes SessionOptions::cost_budget:
/// the event kinds it no longer takes in, each rung keeping the ones above it off. Rung 0 is full
/// capture. The capture stops making them (CaptureBackend::reduce: CUPTI's records of the kinds
/// and API calls are disabled, so CUPTI and the decoder stop paying), and those already in flight
/// are counted and not handed on, so the hand-off, the analyses, the recording and every sink
/// stop paying for them too.
struct CaptureReduction {
    const char* name;         ///< "api_calls_off"
    std::uint64_t kinds_off;  ///< bit (1 << EventKind) per kind not taken in, this rung's and above
    const char* lost;         ///< what a report no longer sees at this rung (this rung's own)
    /// Whether this rung stops GPU activity as a whole: the session marks the time unobserved
    /// (kCapturePaused .. kCaptureResumed), so no analysis takes it for an idle GPU.
    bool gpu_activity_off;
};

/// The ladder, mildest first: API call detail (as many records as kernels, and the least needed),
/// then GPU activity as a whole. NVML samples, framework events and memory events stay at every
/// rung: they are few and carry the memory diagnosis. Deep mode and the NVML rate are set when
/// capture starts and cannot change while it runs: they are not rungs yet.
std::span<const CaptureReduction> capture_reductions() noexcept;

/// Whether `kinds_off` (a CaptureReduction's) leaves `kind` out.
constexpr bool reduction_drops(std::uint64_t kinds_off, EventKind kind) noexcept {
    const auto k = static_cast<unsigned>(kind);
    return k < 64 && ((kinds_off >> k) & 1u) != 0;
}

}  // namespace gpudiag::detail
