// SPDX-License-Identifier: Apache-2.0
// Capture levels and their reasons.
#include "capture/capture_levels.hpp"

namespace gpudiag::detail {

CaptureStatus compute_capture_status(const CaptureFacts& f) {
    CaptureStatus st;
    st.cupti_library = f.cupti_loaded ? f.cupti_path : std::string();
    st.cupti_version = f.cupti_version;
    st.driver_version = !f.nvml_driver_version.empty() ? f.nvml_driver_version : f.cuda_driver_version;
    st.device_count = f.nvml_devices;

    bool nvml = f.nvml_loaded && f.nvml_devices > 0;
    bool gpu = nvml || f.cuda_driver_loaded;
    bool framework = gpu && f.nvtx_injected && f.nvtx_attached;
    bool activity = false;
    if (f.running) {
        activity = f.activity_running;
    } else {
        activity = f.capture_gpu && f.cupti_loaded && f.cuda_driver_loaded &&
                   (!f.nvml_loaded || f.nvml_devices > 0);
    }
    bool deep = activity && f.deep_running;

    st.level = deep ? CaptureLevel::kCuptiDeep
               : activity ? CaptureLevel::kCuptiActivity
               : framework ? CaptureLevel::kFramework
               : nvml ? CaptureLevel::kNvml
                      : CaptureLevel::kNoGpu;

    auto& r = st.reasons;
    if (!nvml) {
        r.push_back(!f.nvml_loaded ? "nvml: " + f.nvml_why_not
                                   : std::string("nvml: NVML loaded but reports no GPU"));
    } else {
        for (const auto& note : f.nvml_notes) r.push_back(note);
    }
    if (!framework) {
        if (!gpu) {
            r.push_back("framework: no GPU or CUDA driver in this process' view");
        } else if (!f.nvtx_injected) {
            r.push_back("framework: NVTX ranges not received (run under `gpudiag run`, or set "
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
            r.push_back("cupti_activity: libcupti " + std::to_string(f.cupti_version) + " at " +
                        f.cupti_path + " loaded, but " + f.cuda_why_not);
        } else if (f.nvml_loaded && f.nvml_devices == 0) {
            r.push_back("cupti_activity: the CUDA driver is present but NVML sees no GPU");
        } else if (f.activity_reasons.empty()) {
            r.push_back("cupti_activity: CUPTI could not be enabled");
        }
    }
    for (const auto& reason : f.activity_reasons) r.push_back(reason);
    if (!deep) {
        bool explained = false;
        for (const auto& reason : f.activity_reasons) explained |= reason.starts_with("cupti_deep:");
        if (!f.deep_requested) {
            r.push_back("cupti_deep: opt-in (SessionOptions::deep); it takes CUPTI's single "
                        "subscriber, which torch.profiler also needs");
        } else if (!activity) {
            r.push_back("cupti_deep: needs CUPTI activity capture first");
        } else if (!explained) {
            r.push_back("cupti_deep: the CUPTI subscriber could not be taken");
        }
    }
    return st;
}

}  // namespace gpudiag::detail
