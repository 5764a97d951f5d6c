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

/// The framework an embedding program runs, as its integration reports it (the Python package
/// does so for PyTorch). Empty fields are unknown.
struct FrameworkInfo {
    std::string name;           ///< "torch"
    std::string version;        ///< "2.4.1+cu124"
    std::string cuda_version;   ///< the CUDA runtime it was built for ("12.4"; "" for a CPU build)
    std::string cudnn_version;  ///< "9.1.0"
    /// The folder of pip's CUDA wheels it uses (site-packages/nvidia), "" when its CUDA
    /// libraries come from elsewhere (a toolkit, conda).
    std::string cuda_wheels_dir;
    bool cupti_in_wheels = false;  ///< that folder holds the CUPTI wheel's library
};

/// Which NVIDIA software this process runs on: the parts users trip over when they disagree.
struct SoftwareStack {
    std::string driver_version;  ///< "535.104.05" (NVML), "" when unknown
    std::string driver_cuda;  ///< the newest CUDA the driver supports: "12.2" (cuDriverGetVersion)
    FrameworkInfo framework;
    std::string cupti;          ///< "CUPTI 12.4 (API version 22)", "" when none was found
    std::string cupti_cuda;     ///< the CUDA release of that CUPTI: "12.4"
    std::string cupti_library;  ///< where it was found
    std::vector<std::string> cupti_mapped;  ///< every libcupti file mapped in the process
};

/// A mismatch in the stack that breaks something, with what to do about it.
struct StackIssue {
    std::string id;       ///< "driver_too_old_for_framework", "second_cupti", ...
    std::string title;    ///< one line
    std::string problem;  ///< what is wrong and what it breaks, with the versions
    std::string fix;      ///< what to run or change
};

/// The answer to "what does gpudiag see here, and why not more?".
struct CaptureStatus {
    CaptureLevel level = CaptureLevel::kNoGpu;
    /// What gpudiag can do here, one line per capability, e.g. "framework: step times, phases,
    /// input waits and allocator figures from the framework integration".
    std::vector<std::string> available;
    /// One plain-language reason per level above `level` that is unavailable, e.g.
    /// "cupti_activity: libcupti.so.13 loaded but no CUDA driver (CUPTI_ERROR_UNKNOWN)".
    std::vector<std::string> reasons;
    bool capturing = false;  ///< a session is capturing now
    bool paused = false;     ///< yielded CUPTI to another client (torch.profiler)
    std::string paused_reason;
    std::uint64_t events = 0;   ///< delivered since start
    std::uint64_t dropped = 0;  ///< lost to full buffers since start, each loss counted once
    /// Kernels CUPTI reported without start and end (its device timestamp buffer was full):
    /// seen and counted, but absent from GPU busy time. Not included in `dropped`.
    std::uint64_t kernels_without_timing = 0;
    std::string cupti_library;  ///< path of the libcupti in use, "" when none
    std::uint32_t cupti_version = 0;
    std::string driver_version;
    int device_count = 0;
    SoftwareStack stack;
    std::vector<StackIssue> stack_issues;  ///< mismatches that break something, with the fix
};

/// Tells live capture which framework the program runs (process-wide; the latest call wins):
/// capture_status() and every live report's source then name it, and mismatches between it,
/// the driver and CUPTI become findings. A framework integration also makes the framework
/// level available without a GPU (steps, phases and input waits need none). Thread-safety:
/// safe. Errors: none.
GPUDIAG_API void set_framework_info(const FrameworkInfo& info) noexcept;

/// Adds a directory where live capture looks for an NVIDIA library that is not already in the
/// process (libcupti.so.13 or .12), after $GPUDIAG_CUPTI_PATH and before the system's places. The
/// Python package names nvidia/cu13/lib and nvidia/cuda_cupti/lib of a pip-installed CUDA here,
/// so that gpudiag loads the very file PyTorch loads, never a second copy. At most 16 directories;
/// duplicates are ignored. Thread-safety: safe. Errors: none.
GPUDIAG_API void add_library_search_dir(std::string_view directory) noexcept;

/// Probes the machine without starting capture (loads libraries, touches no CUDA context).
/// Thread-safety: safe. Errors: none; what is missing is in `reasons`.
GPUDIAG_API CaptureStatus probe_capture() noexcept;

}  // namespace gpudiag
