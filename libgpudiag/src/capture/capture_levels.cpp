// SPDX-License-Identifier: Apache-2.0
// Capture levels, what each gives here, and why the others are not available.
#include "capture/capture_levels.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace gpudiag::detail {
namespace {

// What works, in the order of the levels; "framework" counts without a GPU, since steps,
// phases and input waits need none.
void add_available(const CaptureFacts& f, bool nvml, bool activity, bool deep,
                   std::vector<std::string>& out) {
    out.emplace_back("analysis: recordings, Kineto and Nsight traces, torch memory snapshots");
    if (nvml) {
        out.push_back(fmt::format(
            "nvml: GPU health on {} device(s): utilization, memory, clocks and clock-event "
            "reasons, temperature, power, ECC, other processes' memory",
            f.nvml_devices));
    }
    out.emplace_back(f.framework_reported
                         ? "framework: step times, phases, input waits and allocator figures from "
                           "the framework integration (no GPU needed)"
                         : "framework: steps, phases and annotations from the session API");
    if (f.nvtx_injected && f.nvtx_attached) {
        out.emplace_back("framework: NVTX ranges (torch.cuda.nvtx, NCCL, user ranges)");
    }
    if (activity) {
        out.push_back("cupti_activity: GPU activity (kernels, copies, syncs, allocations) from " +
                      (f.stack.cupti.empty() ? std::string("CUPTI") : f.stack.cupti) + " at " +
                      f.cupti_path);
    }
    if (deep)
        out.emplace_back("cupti_deep: allocation call sites and virtual-memory mapping sizes");
    if (!activity) {
        out.emplace_back(
            "findings without GPU activity: input_bound, step times, memory and "
            "health (gpu_idle, host_sync_stall, launch_bound, pageable_memcpy and "
            "comm_bound need CUPTI)");
    }
}

}  // namespace

CaptureStatus compute_capture_status(const CaptureFacts& f) {
    CaptureStatus st;
    st.cupti_library = f.cupti_loaded ? f.cupti_path : std::string();
    st.cupti_version = f.cupti_version;
    st.driver_version =
        !f.nvml_driver_version.empty() ? f.nvml_driver_version : f.cuda_driver_version;
    st.device_count = f.nvml_devices;
    st.stack = f.stack;  // judged by the stack rules above capture (analysis/health)

    bool nvml = f.nvml_loaded && f.nvml_devices > 0;
    bool gpu = nvml || f.cuda_driver_loaded;
    bool nvtx = gpu && f.nvtx_injected && f.nvtx_attached;
    // Framework events (steps, phases, input waits, the allocator) come from the integration
    // whether or not there is a GPU; NVTX ranges need one to mean anything.
    bool framework = f.framework_reported || nvtx;
    bool activity = false;
    if (f.running) {
        activity = f.activity_running;
    } else {
        activity = f.capture_gpu && f.cupti_loaded && f.cuda_driver_loaded &&
                   (!f.nvml_loaded || f.nvml_devices > 0);
    }
    bool deep = activity && f.deep_running;

    st.level = deep        ? CaptureLevel::kCuptiDeep
               : activity  ? CaptureLevel::kCuptiActivity
               : framework ? CaptureLevel::kFramework
               : nvml      ? CaptureLevel::kNvml
                           : CaptureLevel::kNoGpu;
    add_available(f, nvml, activity, deep, st.available);

    auto& r = st.reasons;
    if (!nvml) {
        r.push_back(!f.nvml_loaded ? "nvml: " + f.nvml_why_not
                                   : std::string("nvml: NVML loaded but reports no GPU"));
    } else {
        for (const auto& note : f.nvml_notes) r.push_back(note);
    }
    if (!nvtx) {
        if (!gpu) {
            r.push_back("framework: NVTX ranges need a GPU; steps, phases and input waits do not");
        } else if (!f.nvtx_injected) {
            r.push_back(
                "framework: NVTX ranges not received (run under `gpudiag run`, or set "
                "NVTX_INJECTION64_PATH to libgpudiag.so before the first NVTX call); "
                "torch allocator events come from the Python integration");
        } else if (!f.nvtx_attached) {
            r.push_back("framework: NVTX ranges go to another gpudiag session in this process");
        }
    }
    if (!activity) {
        if (!f.capture_gpu) {
            r.push_back("cupti_activity: off (SessionOptions::capture_gpu is false)");
        } else if (!f.cupti_loaded) {
            r.push_back("cupti_activity: " + f.cupti_why_not);
        } else if (!f.cuda_driver_loaded) {
            r.push_back(fmt::format("cupti_activity: libcupti {} at {} loaded, but {}",
                                    f.cupti_version, f.cupti_path, f.cuda_why_not));
        } else if (f.nvml_loaded && f.nvml_devices == 0) {
            r.push_back("cupti_activity: the CUDA driver is present but NVML sees no GPU");
        } else if (f.activity_reasons.empty()) {
            r.push_back("cupti_activity: CUPTI could not be enabled");
        }
    }
    // A failed start repeats the loader's reason; each reason is said once.
    for (const auto& reason : f.activity_reasons) {
        if (std::find(r.begin(), r.end(), reason) == r.end()) r.push_back(reason);
    }
    if (!deep) {
        bool explained = false;
        for (const auto& reason : f.activity_reasons)
            explained |= reason.starts_with("cupti_deep:");
        if (!f.deep_requested) {
            r.push_back(
                "cupti_deep: opt-in (SessionOptions::deep); it takes CUPTI's single "
                "subscriber, which torch.profiler also needs");
        } else if (!activity) {
            r.push_back("cupti_deep: needs CUPTI activity capture first");
        } else if (!explained) {
            r.push_back("cupti_deep: the CUPTI subscriber could not be taken");
        }
    }
    return st;
}

namespace {

constexpr std::uint64_t bit(EventKind kind) {
    return std::uint64_t{1} << static_cast<unsigned>(kind);
}

constexpr std::uint64_t kApiOff = bit(EventKind::kApiCall);
constexpr std::uint64_t kGpuOff = kApiOff | bit(EventKind::kKernel) | bit(EventKind::kMemcpy) |
                                  bit(EventKind::kMemset) | bit(EventKind::kSync);

// Copies go with kernels, not before them: a copy is GPU busy time, and a timeline that kept the
// kernels without the copies would call the copies' time idle (a false gpu_idle).
constexpr std::array<CaptureReduction, 3> kReductions{{
    {"full", 0, "", false},
    {"api_calls_off", kApiOff,
     "runtime and driver API calls (the host side of GPU gaps: launch_bound and host causes)",
     false},
    {"gpu_activity_off", kGpuOff,
     "kernels, copies, memsets and synchronisations (GPU busy and idle time: gpu_idle, "
     "host_sync_stall, pageable_memcpy, comm_bound)",
     true},
}};

}  // namespace

std::span<const CaptureReduction> capture_reductions() noexcept {
    return kReductions;
}

}  // namespace gpudiag::detail
