// SPDX-License-Identifier: Apache-2.0
// What each capture level needs, and the one level (with reasons) that the facts give.
#pragma once

#include <gpudiag/capture.hpp>

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

}  // namespace gpudiag::detail
