// SPDX-License-Identifier: Apache-2.0
// What live capture can do on this machine, and why not more.
#pragma once

#include <gpudiag/export.hpp>
#include <gpudiag/names.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpudiag {

/// Capability levels, lowest to highest. Exactly one applies at a time.
enum class CaptureLevel : std::uint8_t {
    kNoGpu = 0,          ///< no driver or device: analysis of recordings and traces only
    kNvml = 1,           ///< NVML health sampling (utilization, clocks, power, memory)
    kFramework = 2,      ///< + framework events (torch allocator, steps, phases, NVTX)
    kCuptiActivity = 3,  ///< + CUPTI activity records (kernels, copies, syncs, memory)
    kCuptiDeep = 4,      ///< + CUPTI callbacks (allocation call sites)
};
template <>
GPUDIAG_API EnumNames<CaptureLevel> enum_names<CaptureLevel>() noexcept;
GPUDIAG_API const char* capture_level_name(CaptureLevel level) noexcept;  ///< "no_gpu", ...

/// The answer to "what does gpudiag see here, and why not more?".
struct CaptureStatus {
    CaptureLevel level = CaptureLevel::kNoGpu;
    /// One plain-language reason per level above `level` that is unavailable, e.g.
    /// "cupti_activity: libcupti.so.13 loaded but no CUDA driver (CUPTI_ERROR_UNKNOWN)".
    std::vector<std::string> reasons;
    bool capturing = false;        ///< a session is capturing now
    bool paused = false;           ///< yielded CUPTI to another client (torch.profiler)
    std::string paused_reason;
    std::uint64_t events = 0;      ///< delivered since start
    std::uint64_t dropped = 0;     ///< lost to full buffers since start, each loss counted once
    /// Kernels CUPTI reported without start and end (its device timestamp buffer was full):
    /// seen and counted, but absent from GPU busy time. Not included in `dropped`.
    std::uint64_t kernels_without_timing = 0;
    std::string cupti_library;     ///< path of the libcupti in use, "" when none
    std::uint32_t cupti_version = 0;
    std::string driver_version;
    int device_count = 0;
};

/// Adds a directory where live capture looks for an NVIDIA library that is not already in the
/// process (libcupti.so.13 or .12), after $GPUDIAG_CUPTI_PATH and before the system's places. The
/// Python package names nvidia/cu13/lib and nvidia/cuda_cupti/lib of a pip-installed CUDA here,
/// so that gpudiag loads the very file PyTorch loads, never a second copy. At most 16 directories; duplicates are
/// ignored. Thread-safety: safe. Errors: none.
GPUDIAG_API void add_library_search_dir(std::string_view directory) noexcept;

/// Probes the machine without starting capture (loads libraries, touches no CUDA context).
/// Thread-safety: safe. Errors: none; what is missing is in `reasons`.
GPUDIAG_API CaptureStatus probe_capture() noexcept;

}  // namespace gpudiag
