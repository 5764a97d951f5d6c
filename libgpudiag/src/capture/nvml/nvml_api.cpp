// SPDX-License-Identifier: Apache-2.0
// NvmlApi: loading and initialisation, with each call's older name where a driver lacks the newer.
#include "capture/nvml/nvml_api.hpp"

#include "capture/platform/dynamic_library.hpp"

#include <fmt/format.h>

#include <vector>

namespace gpudiag::detail {
namespace {

using Loaded = ApiLoadResult<NvmlApi>;

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

// Each call newest name first: a driver before the rename has only the older one. Optional ones
// lose a feature each (note_gaps says which); v1 memory info and process lists are used only
// where no newer version exists.
std::vector<LibraryFunction> functions(NvmlApi& a) {
    constexpr Need kRequired = Need::kRequired;
    using F = FunctionSlot;
    return {
        {{"nvmlInit_v2", "nvmlInit"}, F(a.init), kRequired},
        {{"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"}, F(a.device_get_count), kRequired},
        {{"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"},
         F(a.device_get_handle_by_index),
         kRequired},
        {{"nvmlShutdown"}, F(a.shutdown)},
        {{"nvmlErrorString"}, F(a.error_string)},
        {{"nvmlSystemGetDriverVersion"}, F(a.system_get_driver_version)},
        {{"nvmlDeviceGetHandleByUUID"}, F(a.device_get_handle_by_uuid)},
        {{"nvmlDeviceGetUUID"}, F(a.device_get_uuid)},
        {{"nvmlDeviceGetName"}, F(a.device_get_name)},
        {{"nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2"}, F(a.device_get_pci_info)},
        {{"nvmlDeviceGetUtilizationRates"}, F(a.device_get_utilization_rates)},
        {{"nvmlDeviceGetMemoryInfo_v2"}, F(a.device_get_memory_info_v2)},
        {{"nvmlDeviceGetMemoryInfo"}, F(a.device_get_memory_info_v1)},
        {{"nvmlDeviceGetClockInfo"}, F(a.device_get_clock_info)},
        {{"nvmlDeviceGetMaxClockInfo"}, F(a.device_get_max_clock_info)},
        // Renamed in the CUDA 13.0 NVML; drivers before it have only the ThrottleReasons name.
        {{"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"},
         F(a.device_get_clocks_event_reasons)},
        {{"nvmlDeviceGetTemperatureV"}, F(a.device_get_temperature_v)},
        {{"nvmlDeviceGetTemperature"}, F(a.device_get_temperature)},
        {{"nvmlDeviceGetPowerUsage"}, F(a.device_get_power_usage)},
        {{"nvmlDeviceGetEnforcedPowerLimit"}, F(a.device_get_enforced_power_limit)},
        {{"nvmlDeviceGetTotalEccErrors"}, F(a.device_get_total_ecc_errors)},
        {{"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"},
         F(a.device_get_compute_running_processes)},
        {{"nvmlDeviceGetComputeRunningProcesses"}, F(a.device_get_compute_running_processes_v1)},
        {{"nvmlDeviceGetCurrPcieLinkGeneration"}, F(a.device_get_curr_pcie_link_generation)},
        {{"nvmlDeviceGetMaxPcieLinkGeneration"}, F(a.device_get_max_pcie_link_generation)},
        {{"nvmlDeviceGetCurrPcieLinkWidth"}, F(a.device_get_curr_pcie_link_width)},
        {{"nvmlDeviceGetMaxPcieLinkWidth"}, F(a.device_get_max_pcie_link_width)},
        {{"nvmlDeviceGetPcieReplayCounter"}, F(a.device_get_pcie_replay_counter)},
        {{"nvmlDeviceGetRetiredPages"}, F(a.device_get_retired_pages)},
        {{"nvmlDeviceGetRetiredPagesPendingStatus"}, F(a.device_get_retired_pages_pending_status)},
        {{"nvmlDeviceGetRemappedRows"}, F(a.device_get_remapped_rows)},
        {{"nvmlDeviceGetNvLinkState"}, F(a.device_get_nvlink_state)},
        {{"nvmlDeviceGetNvLinkErrorCounter"}, F(a.device_get_nvlink_error_counter)},
        {{"nvmlDeviceGetPowerManagementDefaultLimit"}, F(a.device_get_power_default_limit)},
        {{"nvmlDeviceGetPersistenceMode"}, F(a.device_get_persistence_mode)},
        {{"nvmlDeviceGetMigMode"}, F(a.device_get_mig_mode)},
        {{"nvmlDeviceGetProcessUtilization"}, F(a.device_get_process_utilization)},
        {{"nvmlDeviceGetFanSpeed"}, F(a.device_get_fan_speed)},
        {{"nvmlDeviceIsMigDeviceHandle"}, F(a.device_is_mig_device_handle)},
        {{"nvmlDeviceGetDeviceHandleFromMigDeviceHandle"},
         F(a.device_get_device_handle_from_mig_device_handle)},
        {{"nvmlDeviceGetGpuInstanceId"}, F(a.device_get_gpu_instance_id)},
        {{"nvmlDeviceGetComputeInstanceId"}, F(a.device_get_compute_instance_id)},
        {{"nvmlGpmMigSampleGet"}, F(a.gpm_mig_sample_get)},
        {{"nvmlGpmQueryDeviceSupport"}, F(a.gpm_query_device_support), Need::kOptional, "R525"},
        {{"nvmlGpmSampleAlloc"}, F(a.gpm_sample_alloc), Need::kOptional, "R525"},
        {{"nvmlGpmSampleFree"}, F(a.gpm_sample_free), Need::kOptional, "R525"},
        {{"nvmlGpmSampleGet"}, F(a.gpm_sample_get), Need::kOptional, "R525"},
        {{"nvmlGpmMetricsGet"}, F(a.gpm_metrics_get), Need::kOptional, "R525"},
        {{"nvmlEventSetCreate"}, F(a.event_set_create)},
        {{"nvmlDeviceRegisterEvents"}, F(a.device_register_events)},
        {{"nvmlEventSetWait_v2", "nvmlEventSetWait"}, F(a.event_set_wait)},
        {{"nvmlEventSetFree"}, F(a.event_set_free)},
    };
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
    if (MissingFunctions missing = load_functions(lib.handle, functions(a));
        !missing.required.empty()) {
        r.why_not = "NVML at " + a.path + " lacks " + missing.required_list();
        return r;
    }
    using nvml::Return;
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
    return s != nullptr ? std::string(s) : fmt::format("NVML error {}", r);
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
