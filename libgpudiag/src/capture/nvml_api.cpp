// SPDX-License-Identifier: Apache-2.0
// NvmlApi: loading and initialisation.
#include "capture/nvml_api.hpp"

#include "capture/dynamic_library.hpp"


namespace gpudiag::detail {
namespace {

using Loaded = ApiLoadResult<NvmlApi>;

Loaded load() {
    Loaded r;
    LibrarySearch search;
    search.reuse_names = {"libnvidia-ml.so.1"};
    search.env_var = "GPUDIAG_NVML_PATH";
    search.candidates = {"libnvidia-ml.so.1"};
    std::string why;
    LoadedLibrary lib = load_library(search, why);
    if (lib.handle == nullptr) {
        r.why_not = "NVML: " + why + " (it is installed with the NVIDIA driver)";
        return r;
    }
    NvmlApi& a = r.api;
    a.path = lib.path;
    void* h = lib.handle;
    using nvml::Return;
    a.init_v2 = find_symbol<Return (*)()>(h, "nvmlInit_v2");
    a.shutdown = find_symbol<Return (*)()>(h, "nvmlShutdown");
    a.error_string = find_symbol<const char* (*)(Return)>(h, "nvmlErrorString");
    a.system_get_driver_version =
        find_symbol<decltype(a.system_get_driver_version)>(h, "nvmlSystemGetDriverVersion");
    a.device_get_count_v2 = find_symbol<decltype(a.device_get_count_v2)>(h, "nvmlDeviceGetCount_v2");
    a.device_get_handle_by_index_v2 =
        find_symbol<decltype(a.device_get_handle_by_index_v2)>(h, "nvmlDeviceGetHandleByIndex_v2");
    a.device_get_handle_by_uuid =
        find_symbol<decltype(a.device_get_handle_by_uuid)>(h, "nvmlDeviceGetHandleByUUID");
    a.device_get_uuid = find_symbol<decltype(a.device_get_uuid)>(h, "nvmlDeviceGetUUID");
    a.device_get_name = find_symbol<decltype(a.device_get_name)>(h, "nvmlDeviceGetName");
    a.device_get_utilization_rates = find_symbol<decltype(a.device_get_utilization_rates)>(
        h, "nvmlDeviceGetUtilizationRates");
    a.device_get_memory_info_v2 =
        find_symbol<decltype(a.device_get_memory_info_v2)>(h, "nvmlDeviceGetMemoryInfo_v2");
    a.device_get_clock_info = find_symbol<decltype(a.device_get_clock_info)>(h, "nvmlDeviceGetClockInfo");
    a.device_get_max_clock_info =
        find_symbol<decltype(a.device_get_max_clock_info)>(h, "nvmlDeviceGetMaxClockInfo");
    a.device_get_clocks_event_reasons = find_symbol<decltype(a.device_get_clocks_event_reasons)>(
        h, "nvmlDeviceGetCurrentClocksEventReasons");
    if (a.device_get_clocks_event_reasons == nullptr) {  // drivers before the 13.0 rename
        a.device_get_clocks_event_reasons = find_symbol<decltype(a.device_get_clocks_event_reasons)>(
            h, "nvmlDeviceGetCurrentClocksThrottleReasons");
    }
    a.device_get_temperature_v =
        find_symbol<decltype(a.device_get_temperature_v)>(h, "nvmlDeviceGetTemperatureV");
    a.device_get_temperature =
        find_symbol<decltype(a.device_get_temperature)>(h, "nvmlDeviceGetTemperature");
    a.device_get_power_usage = find_symbol<decltype(a.device_get_power_usage)>(h, "nvmlDeviceGetPowerUsage");
    a.device_get_enforced_power_limit = find_symbol<decltype(a.device_get_enforced_power_limit)>(
        h, "nvmlDeviceGetEnforcedPowerLimit");
    a.device_get_total_ecc_errors =
        find_symbol<decltype(a.device_get_total_ecc_errors)>(h, "nvmlDeviceGetTotalEccErrors");
    a.device_get_compute_running_processes_v3 =
        find_symbol<decltype(a.device_get_compute_running_processes_v3)>(
            h, "nvmlDeviceGetComputeRunningProcesses_v3");
    if (a.init_v2 == nullptr || a.device_get_count_v2 == nullptr ||
        a.device_get_handle_by_index_v2 == nullptr) {
        r.why_not = "NVML at " + a.path + " lacks nvmlInit_v2/nvmlDeviceGetCount_v2";
        return r;
    }
    Return rc = a.init_v2();
    if (rc != nvml::kSuccess) {
        r.why_not = "NVML at " + a.path + ": nvmlInit_v2 failed (" + a.error_name(rc) + ")";
        return r;
    }
    r.ok = true;
    return r;
}

}  // namespace

std::string NvmlApi::error_name(nvml::Return r) const {
    const char* s = error_string != nullptr ? error_string(r) : nullptr;
    return s != nullptr ? std::string(s) : "NVML error " + std::to_string(r);
}

const NvmlApi* nvml_api(std::string* why_not) noexcept {
    return load_api<NvmlApi>(&load, "NVML", why_not);
}

}  // namespace gpudiag::detail
