// SPDX-License-Identifier: Apache-2.0
// NvmlApi: loading and initialisation, with each call's older name where a driver lacks the newer.
#include "capture/nvml_api.hpp"

#include "capture/dynamic_library.hpp"

#include <initializer_list>

namespace gpudiag::detail {
namespace {

using Loaded = ApiLoadResult<NvmlApi>;

// The first of `names` the library has, newest first.
template <typename Fn>
Fn first_symbol(void* handle, std::initializer_list<const char*> names) {
    for (const char* name : names) {
        if (Fn fn = find_symbol<Fn>(handle, name); fn != nullptr) return fn;
    }
    return nullptr;
}

// Reasons for the features this NVML cannot give, each naming the calls it lacks.
void note_gaps(NvmlApi& a) {
    auto lost = [&](bool missing, const char* what, const char* calls) {
        if (missing) {
            a.notes.push_back(std::string("nvml: ") + what +
                              " unavailable: this driver's NVML has no " + calls);
        }
    };
    lost(a.device_get_utilization_rates == nullptr, "GPU utilization",
         "nvmlDeviceGetUtilizationRates");
    lost(a.device_get_memory_info_v2 == nullptr && a.device_get_memory_info_v1 == nullptr,
         "device memory", "nvmlDeviceGetMemoryInfo_v2 or nvmlDeviceGetMemoryInfo");
    lost(a.device_get_clock_info == nullptr, "SM clock", "nvmlDeviceGetClockInfo");
    lost(a.device_get_clocks_event_reasons == nullptr, "clock-event (throttle) reasons",
         "nvmlDeviceGetCurrentClocksEventReasons or nvmlDeviceGetCurrentClocksThrottleReasons");
    lost(a.device_get_temperature_v == nullptr && a.device_get_temperature == nullptr,
         "temperature", "nvmlDeviceGetTemperatureV or nvmlDeviceGetTemperature");
    lost(a.device_get_power_usage == nullptr, "power draw", "nvmlDeviceGetPowerUsage");
    lost(a.device_get_enforced_power_limit == nullptr, "power limit",
         "nvmlDeviceGetEnforcedPowerLimit");
    lost(a.device_get_total_ecc_errors == nullptr, "ECC error counts",
         "nvmlDeviceGetTotalEccErrors");
    lost(a.device_get_compute_running_processes == nullptr &&
             a.device_get_compute_running_processes_v1 == nullptr,
         "other processes' GPU memory", "nvmlDeviceGetComputeRunningProcesses (v1-v3)");
    lost(a.device_get_curr_pcie_link_generation == nullptr ||
             a.device_get_max_pcie_link_generation == nullptr ||
             a.device_get_curr_pcie_link_width == nullptr ||
             a.device_get_max_pcie_link_width == nullptr,
         "PCIe link generation and width", "nvmlDeviceGetCurrPcieLinkGeneration/Width");
    lost(a.device_get_pcie_replay_counter == nullptr, "PCIe replays",
         "nvmlDeviceGetPcieReplayCounter");
    lost(a.device_get_retired_pages == nullptr, "retired pages", "nvmlDeviceGetRetiredPages");
    lost(a.device_get_remapped_rows == nullptr, "remapped rows", "nvmlDeviceGetRemappedRows");
    lost(a.device_get_nvlink_state == nullptr || a.device_get_nvlink_error_counter == nullptr,
         "NVLink state and errors", "nvmlDeviceGetNvLinkState or nvmlDeviceGetNvLinkErrorCounter");
    lost(a.event_set_create == nullptr || a.device_register_events == nullptr ||
             a.event_set_wait == nullptr,
         "Xid events", "nvmlEventSetCreate, nvmlDeviceRegisterEvents or nvmlEventSetWait");
    lost(!a.has_gpm(), "SM activity, occupancy, tensor and DRAM activity (GPM)",
         "nvmlGpmSampleGet or nvmlGpmMetricsGet (drivers before R525)");
    if (a.device_get_memory_info_v2 == nullptr && a.device_get_memory_info_v1 != nullptr) {
        a.notes.push_back(
            "nvml: memory used includes the driver's reserved memory (this NVML has "
            "only nvmlDeviceGetMemoryInfo, not _v2)");
    }
}

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
    a.init = first_symbol<Return (*)()>(h, {"nvmlInit_v2", "nvmlInit"});
    a.shutdown = find_symbol<Return (*)()>(h, "nvmlShutdown");
    a.error_string = find_symbol<const char* (*)(Return)>(h, "nvmlErrorString");
    a.system_get_driver_version =
        find_symbol<decltype(a.system_get_driver_version)>(h, "nvmlSystemGetDriverVersion");
    a.device_get_count = first_symbol<decltype(a.device_get_count)>(
        h, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"});
    a.device_get_handle_by_index = first_symbol<decltype(a.device_get_handle_by_index)>(
        h, {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"});
    a.device_get_handle_by_uuid =
        find_symbol<decltype(a.device_get_handle_by_uuid)>(h, "nvmlDeviceGetHandleByUUID");
    a.device_get_uuid = find_symbol<decltype(a.device_get_uuid)>(h, "nvmlDeviceGetUUID");
    a.device_get_name = find_symbol<decltype(a.device_get_name)>(h, "nvmlDeviceGetName");
    a.device_get_pci_info = first_symbol<decltype(a.device_get_pci_info)>(
        h, {"nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2"});
    a.device_get_utilization_rates =
        find_symbol<decltype(a.device_get_utilization_rates)>(h, "nvmlDeviceGetUtilizationRates");
    a.device_get_memory_info_v2 =
        find_symbol<decltype(a.device_get_memory_info_v2)>(h, "nvmlDeviceGetMemoryInfo_v2");
    if (a.device_get_memory_info_v2 == nullptr) {
        a.device_get_memory_info_v1 =
            find_symbol<decltype(a.device_get_memory_info_v1)>(h, "nvmlDeviceGetMemoryInfo");
    }
    a.device_get_clock_info =
        find_symbol<decltype(a.device_get_clock_info)>(h, "nvmlDeviceGetClockInfo");
    a.device_get_max_clock_info =
        find_symbol<decltype(a.device_get_max_clock_info)>(h, "nvmlDeviceGetMaxClockInfo");
    // Renamed in the CUDA 13.0 NVML; drivers before it have only the ThrottleReasons name.
    a.device_get_clocks_event_reasons = first_symbol<decltype(a.device_get_clocks_event_reasons)>(
        h, {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"});
    a.device_get_temperature_v =
        find_symbol<decltype(a.device_get_temperature_v)>(h, "nvmlDeviceGetTemperatureV");
    a.device_get_temperature =
        find_symbol<decltype(a.device_get_temperature)>(h, "nvmlDeviceGetTemperature");
    a.device_get_power_usage =
        find_symbol<decltype(a.device_get_power_usage)>(h, "nvmlDeviceGetPowerUsage");
    a.device_get_enforced_power_limit = find_symbol<decltype(a.device_get_enforced_power_limit)>(
        h, "nvmlDeviceGetEnforcedPowerLimit");
    a.device_get_total_ecc_errors =
        find_symbol<decltype(a.device_get_total_ecc_errors)>(h, "nvmlDeviceGetTotalEccErrors");
    a.device_get_compute_running_processes =
        first_symbol<decltype(a.device_get_compute_running_processes)>(
            h,
            {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"});
    if (a.device_get_compute_running_processes == nullptr) {
        a.device_get_compute_running_processes_v1 =
            find_symbol<decltype(a.device_get_compute_running_processes_v1)>(
                h, "nvmlDeviceGetComputeRunningProcesses");
    }
    a.device_get_curr_pcie_link_generation =
        find_symbol<decltype(a.device_get_curr_pcie_link_generation)>(
            h, "nvmlDeviceGetCurrPcieLinkGeneration");
    a.device_get_max_pcie_link_generation =
        find_symbol<decltype(a.device_get_max_pcie_link_generation)>(
            h, "nvmlDeviceGetMaxPcieLinkGeneration");
    a.device_get_curr_pcie_link_width = find_symbol<decltype(a.device_get_curr_pcie_link_width)>(
        h, "nvmlDeviceGetCurrPcieLinkWidth");
    a.device_get_max_pcie_link_width =
        find_symbol<decltype(a.device_get_max_pcie_link_width)>(h, "nvmlDeviceGetMaxPcieLinkWidth");
    a.device_get_pcie_replay_counter = find_symbol<decltype(a.device_get_pcie_replay_counter)>(
        h, "nvmlDeviceGetPcieReplayCounter");
    a.device_get_retired_pages =
        find_symbol<decltype(a.device_get_retired_pages)>(h, "nvmlDeviceGetRetiredPages");
    a.device_get_retired_pages_pending_status =
        find_symbol<decltype(a.device_get_retired_pages_pending_status)>(
            h, "nvmlDeviceGetRetiredPagesPendingStatus");
    a.device_get_remapped_rows =
        find_symbol<decltype(a.device_get_remapped_rows)>(h, "nvmlDeviceGetRemappedRows");
    a.device_get_nvlink_state =
        find_symbol<decltype(a.device_get_nvlink_state)>(h, "nvmlDeviceGetNvLinkState");
    a.device_get_nvlink_error_counter = find_symbol<decltype(a.device_get_nvlink_error_counter)>(
        h, "nvmlDeviceGetNvLinkErrorCounter");
    a.device_get_power_default_limit = find_symbol<decltype(a.device_get_power_default_limit)>(
        h, "nvmlDeviceGetPowerManagementDefaultLimit");
    a.device_get_persistence_mode =
        find_symbol<decltype(a.device_get_persistence_mode)>(h, "nvmlDeviceGetPersistenceMode");
    a.device_get_mig_mode = find_symbol<decltype(a.device_get_mig_mode)>(h, "nvmlDeviceGetMigMode");
    a.device_get_process_utilization = find_symbol<decltype(a.device_get_process_utilization)>(
        h, "nvmlDeviceGetProcessUtilization");
    a.device_get_fan_speed =
        find_symbol<decltype(a.device_get_fan_speed)>(h, "nvmlDeviceGetFanSpeed");
    a.device_is_mig_device_handle =
        find_symbol<decltype(a.device_is_mig_device_handle)>(h, "nvmlDeviceIsMigDeviceHandle");
    a.device_get_device_handle_from_mig_device_handle =
        find_symbol<decltype(a.device_get_device_handle_from_mig_device_handle)>(
            h, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle");
    a.device_get_gpu_instance_id =
        find_symbol<decltype(a.device_get_gpu_instance_id)>(h, "nvmlDeviceGetGpuInstanceId");
    a.device_get_compute_instance_id = find_symbol<decltype(a.device_get_compute_instance_id)>(
        h, "nvmlDeviceGetComputeInstanceId");
    a.gpm_mig_sample_get = find_symbol<decltype(a.gpm_mig_sample_get)>(h, "nvmlGpmMigSampleGet");
    a.gpm_query_device_support =
        find_symbol<decltype(a.gpm_query_device_support)>(h, "nvmlGpmQueryDeviceSupport");
    a.gpm_sample_alloc = find_symbol<decltype(a.gpm_sample_alloc)>(h, "nvmlGpmSampleAlloc");
    a.gpm_sample_free = find_symbol<decltype(a.gpm_sample_free)>(h, "nvmlGpmSampleFree");
    a.gpm_sample_get = find_symbol<decltype(a.gpm_sample_get)>(h, "nvmlGpmSampleGet");
    a.gpm_metrics_get = find_symbol<decltype(a.gpm_metrics_get)>(h, "nvmlGpmMetricsGet");
    a.event_set_create = find_symbol<decltype(a.event_set_create)>(h, "nvmlEventSetCreate");
    a.device_register_events =
        find_symbol<decltype(a.device_register_events)>(h, "nvmlDeviceRegisterEvents");
    a.event_set_wait =
        first_symbol<decltype(a.event_set_wait)>(h, {"nvmlEventSetWait_v2", "nvmlEventSetWait"});
    a.event_set_free = find_symbol<decltype(a.event_set_free)>(h, "nvmlEventSetFree");
    if (a.init == nullptr || a.device_get_count == nullptr ||
        a.device_get_handle_by_index == nullptr) {
        r.why_not = "NVML at " + a.path +
                    " lacks nvmlInit, nvmlDeviceGetCount or "
                    "nvmlDeviceGetHandleByIndex (in every version)";
        return r;
    }
    Return rc = a.init();
    if (rc != nvml::kSuccess) {
        r.why_not = "NVML at " + a.path + ": nvmlInit failed (" + a.error_name(rc) + ")";
        return r;
    }
    note_gaps(a);
    r.ok = true;
    return r;
}

template <typename Info, typename Fn>
nvml::Return list_processes(Fn fn, nvml::Device device, std::vector<Info>& buf, unsigned& count) {
    count = static_cast<unsigned>(buf.size());
    nvml::Return rc = fn(device, &count, buf.empty() ? nullptr : buf.data());
    if (rc == nvml::kErrorInsufficientSize && count < 4096) {
        buf.resize(count + 8);  // processes may start between the two calls
        count = static_cast<unsigned>(buf.size());
        rc = fn(device, &count, buf.data());
    }
    if (count > buf.size()) count = static_cast<unsigned>(buf.size());
    return rc;
}

}  // namespace

std::string NvmlApi::error_name(nvml::Return r) const {
    const char* s = error_string != nullptr ? error_string(r) : nullptr;
    return s != nullptr ? std::string(s) : "NVML error " + std::to_string(r);
}

nvml::Return NvmlApi::memory_info(nvml::Device device, nvml::MemoryFigures& out) const {
    if (device_get_memory_info_v2 != nullptr) {
        nvml::MemoryV2 mem{};
        mem.version = nvml::kMemoryV2Version;
        nvml::Return rc = device_get_memory_info_v2(device, &mem);
        out.total = mem.total;
        out.used = mem.used;  // v2 "used" excludes the driver's reservation
        return rc;
    }
    if (device_get_memory_info_v1 == nullptr) return nvml::kErrorFunctionNotFound;
    nvml::MemoryV1 mem{};
    nvml::Return rc = device_get_memory_info_v1(device, &mem);
    out.total = mem.total;
    out.used = mem.used;
    return rc;
}

nvml::Return NvmlApi::running_processes(nvml::Device device,
                                        std::vector<nvml::ProcessInfo>& out) const {
    unsigned count = 0;
    const std::size_t room = out.capacity() > 8 ? out.capacity() : 8;  // reuse what was grown
    if (device_get_compute_running_processes != nullptr) {
        out.resize(room);
        nvml::Return rc = list_processes(device_get_compute_running_processes, device, out, count);
        out.resize(rc == nvml::kSuccess ? count : 0);
        return rc;
    }
    if (device_get_compute_running_processes_v1 == nullptr) return nvml::kErrorFunctionNotFound;
    std::vector<nvml::ProcessInfoV1> v1(room);
    nvml::Return rc = list_processes(device_get_compute_running_processes_v1, device, v1, count);
    out.clear();
    if (rc != nvml::kSuccess) return rc;
    for (unsigned i = 0; i < count; ++i) out.push_back({v1[i].pid, v1[i].used_gpu_memory, 0, 0});
    return rc;
}

const NvmlApi* nvml_api(std::string* why_not) noexcept {
    return load_api<NvmlApi>(&load, "NVML", why_not);
}

}  // namespace gpudiag::detail
