// SPDX-License-Identifier: Apache-2.0
// NvmlApi: the NVML functions the health sampler calls, resolved with dlsym from
// libnvidia-ml.so.1 (installed with the driver). The CUDA toolkit ships no nvml.h, so the few
// types used are declared here from the NVML API reference (names and layouts as documented).
// Drivers from R535 on are supported: each call falls back to its older name where a newer one
// is missing (ClocksEventReasons/ClocksThrottleReasons, TemperatureV/Temperature, memory info
// v2/v1, running processes v3/v2/v1, the _v2 init and enumeration calls), and what has no
// fallback is reported unavailable with its reason (NvmlApi::notes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpudiag::detail {

namespace nvml {
using Return = int;                   // nvmlReturn_t
using Device = struct DeviceOpaque*;  // nvmlDevice_t
constexpr Return kSuccess = 0;
constexpr Return kErrorNotSupported = 3;
constexpr Return kErrorNotFound = 6;
constexpr Return kErrorInsufficientSize = 7;
constexpr Return kErrorTimeout = 10;
constexpr Return kErrorFunctionNotFound = 13;
constexpr unsigned kClockSm = 1;         // NVML_CLOCK_SM
constexpr unsigned kTemperatureGpu = 0;  // NVML_TEMPERATURE_GPU
constexpr unsigned kEccCorrected = 0;    // NVML_MEMORY_ERROR_TYPE_CORRECTED
constexpr unsigned kEccUncorrected = 1;  // NVML_MEMORY_ERROR_TYPE_UNCORRECTED
constexpr unsigned kVolatileEcc = 0;     // NVML_VOLATILE_ECC: since the last driver load
constexpr unsigned long long kValueNotAvailable = ~0ULL;  // NVML_VALUE_NOT_AVAILABLE
constexpr unsigned kRetiredForSingleBit = 0;  // NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_...
constexpr unsigned kRetiredForDoubleBit = 1;  // NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
constexpr unsigned long long kEventXidCritical = 0x8;  // nvmlEventTypeXidCriticalError
constexpr unsigned kNvlinkMaxLinks = 18;               // NVML_NVLINK_MAX_LINKS
constexpr unsigned kNvlinkReplay = 0;                  // NVML_NVLINK_ERROR_DL_REPLAY
constexpr unsigned kNvlinkRecovery = 1;                // NVML_NVLINK_ERROR_DL_RECOVERY
constexpr unsigned kNvlinkCrcFlit = 2;                 // NVML_NVLINK_ERROR_DL_CRC_FLIT
constexpr unsigned kNvlinkCrcData = 3;                 // NVML_NVLINK_ERROR_DL_CRC_DATA

// GPU performance monitoring (nvmlGpm*, R525 on, Hopper and newer GPUs).
using GpmSample = struct GpmSampleOpaque*;  // nvmlGpmSample_t
constexpr unsigned kGpmSmActive = 2;        // NVML_GPM_METRIC_SM_UTIL
constexpr unsigned kGpmSmOccupancy = 3;     // NVML_GPM_METRIC_SM_OCCUPANCY
constexpr unsigned kGpmAnyTensor = 5;       // NVML_GPM_METRIC_ANY_TENSOR_UTIL
constexpr unsigned kGpmDramBandwidth = 10;  // NVML_GPM_METRIC_DRAM_BW_UTIL
constexpr unsigned kGpmMetricsGetVersion = 1;
constexpr unsigned kGpmSupportVersion = 1;
struct GpmSupport {  // nvmlGpmSupport_t
    unsigned version;
    unsigned is_supported_device;
};
struct GpmMetric {  // nvmlGpmMetric_t
    unsigned metric_id;
    Return result;
    double value;
    const char* short_name;
    const char* long_name;
    const char* unit;
};
// nvmlGpmMetricsGet_t ends in NVML_GPM_METRIC_MAX metrics, a number that grows with each driver
// (98, then 333, ...). NVML reads only num_metrics of them, but the array is kept larger than
// any header's maximum so that a driver that copies its whole struct stays inside ours.
constexpr unsigned kGpmMetricSlots = 512;
struct GpmMetricsGet {  // nvmlGpmMetricsGet_t
    unsigned version;
    unsigned num_metrics;
    GpmSample sample1;
    GpmSample sample2;
    GpmMetric metrics[kGpmMetricSlots];
};

using EventSet = struct EventSetOpaque*;  // nvmlEventSet_t
struct EventData {                        // nvmlEventData_t
    Device device;
    unsigned long long event_type;
    unsigned long long event_data;  // the Xid for nvmlEventTypeXidCriticalError (999: unknown)
    unsigned gpu_instance_id;
    unsigned compute_instance_id;
};

struct Utilization {  // nvmlUtilization_t
    unsigned gpu;     // % of time one or more kernels ran
    unsigned memory;  // % of time device memory was read or written
};
struct MemoryV2 {  // nvmlMemory_v2_t
    unsigned version;
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;
};
// NVML_STRUCT_VERSION(Memory, 2): the struct size in the low bits, the version in the top byte.
constexpr unsigned kMemoryV2Version = static_cast<unsigned>(sizeof(MemoryV2)) | (2u << 24);
struct TemperatureV1 {  // nvmlTemperature_v1_t
    unsigned version;
    unsigned sensor_type;
    int temperature;
};
constexpr unsigned kTemperatureV1Version =
    static_cast<unsigned>(sizeof(TemperatureV1)) | (1u << 24);
struct MemoryV1 {  // nvmlMemory_t (nvmlDeviceGetMemoryInfo): used includes the reservation
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
};
struct ProcessInfo {  // nvmlProcessInfo_t (_v3) = nvmlProcessInfo_v2_t (_v2): same layout
    unsigned pid;
    unsigned long long used_gpu_memory;
    unsigned gpu_instance_id;
    unsigned compute_instance_id;
};
struct ProcessUtilizationSample {  // nvmlProcessUtilizationSample_t
    unsigned pid;
    unsigned long long timestamp;  // CPU time, microseconds
    unsigned sm_util;              // percent of the SMs' time
    unsigned mem_util;
    unsigned enc_util;
    unsigned dec_util;
};
struct ProcessInfoV1 {  // nvmlProcessInfo_v1_t (nvmlDeviceGetComputeRunningProcesses)
    unsigned pid;
    unsigned long long used_gpu_memory;
};

struct PciInfo {  // nvmlPciInfo_t of nvmlDeviceGetPciInfo_v3 and _v2 (the same layout)
    char bus_id_legacy[16];
    unsigned domain;
    unsigned bus;
    unsigned device;
    unsigned pci_device_id;
    unsigned pci_subsystem_id;
    char bus_id[32];  // "00000000:18:00.0", the form dcgm-exporter's pci_bus_id label takes
};

/// A device's memory as the sampler reports it.
struct MemoryFigures {
    unsigned long long total = 0;
    unsigned long long used = 0;
};

}  // namespace nvml

struct NvmlApi {
    nvml::Return (*init)() = nullptr;  ///< nvmlInit_v2, else nvmlInit
    nvml::Return (*shutdown)() = nullptr;
    const char* (*error_string)(nvml::Return) = nullptr;
    nvml::Return (*system_get_driver_version)(char*, unsigned) = nullptr;
    nvml::Return (*device_get_count)(unsigned*) = nullptr;  ///< _v2, else the first name
    nvml::Return (*device_get_handle_by_index)(unsigned,
                                               nvml::Device*) = nullptr;  ///< _v2, else v1
    nvml::Return (*device_get_handle_by_uuid)(const char*, nvml::Device*) = nullptr;
    nvml::Return (*device_get_uuid)(nvml::Device, char*, unsigned) = nullptr;
    nvml::Return (*device_get_name)(nvml::Device, char*, unsigned) = nullptr;
    /// nvmlDeviceGetPciInfo_v3, else _v2 (v1's struct differs: not used).
    nvml::Return (*device_get_pci_info)(nvml::Device, nvml::PciInfo*) = nullptr;
    nvml::Return (*device_get_utilization_rates)(nvml::Device, nvml::Utilization*) = nullptr;
    nvml::Return (*device_get_memory_info_v2)(nvml::Device, nvml::MemoryV2*) = nullptr;
    nvml::Return (*device_get_memory_info_v1)(nvml::Device, nvml::MemoryV1*) = nullptr;
    nvml::Return (*device_get_clock_info)(nvml::Device, unsigned, unsigned*) = nullptr;
    nvml::Return (*device_get_max_clock_info)(nvml::Device, unsigned, unsigned*) = nullptr;
    /// nvmlDeviceGetCurrentClocksEventReasons, else the ThrottleReasons name deprecated in 13.0.
    nvml::Return (*device_get_clocks_event_reasons)(nvml::Device, unsigned long long*) = nullptr;
    nvml::Return (*device_get_temperature_v)(nvml::Device, nvml::TemperatureV1*) = nullptr;
    /// Deprecated in 13.0; used only when nvmlDeviceGetTemperatureV is absent (older drivers).
    nvml::Return (*device_get_temperature)(nvml::Device, unsigned, unsigned*) = nullptr;
    nvml::Return (*device_get_power_usage)(nvml::Device, unsigned*) = nullptr;           // mW
    nvml::Return (*device_get_enforced_power_limit)(nvml::Device, unsigned*) = nullptr;  // mW
    nvml::Return (*device_get_total_ecc_errors)(nvml::Device, unsigned, unsigned,
                                                unsigned long long*) = nullptr;
    /// nvmlDeviceGetComputeRunningProcesses_v3, else _v2 (the same struct).
    nvml::Return (*device_get_compute_running_processes)(nvml::Device, unsigned*,
                                                         nvml::ProcessInfo*) = nullptr;
    // Card health read every few seconds (each may be missing: older drivers, other boards).
    nvml::Return (*device_get_curr_pcie_link_generation)(nvml::Device, unsigned*) = nullptr;
    nvml::Return (*device_get_max_pcie_link_generation)(nvml::Device, unsigned*) = nullptr;
    nvml::Return (*device_get_curr_pcie_link_width)(nvml::Device, unsigned*) = nullptr;
    nvml::Return (*device_get_max_pcie_link_width)(nvml::Device, unsigned*) = nullptr;
    nvml::Return (*device_get_pcie_replay_counter)(nvml::Device, unsigned*) = nullptr;
    nvml::Return (*device_get_retired_pages)(nvml::Device, unsigned, unsigned*,
                                             unsigned long long*) = nullptr;
    nvml::Return (*device_get_retired_pages_pending_status)(nvml::Device, int*) = nullptr;
    nvml::Return (*device_get_remapped_rows)(nvml::Device, unsigned*, unsigned*, unsigned*,
                                             unsigned*) = nullptr;
    nvml::Return (*device_get_nvlink_state)(nvml::Device, unsigned, int*) = nullptr;
    nvml::Return (*device_get_nvlink_error_counter)(nvml::Device, unsigned, unsigned,
                                                    unsigned long long*) = nullptr;
    nvml::Return (*device_get_power_default_limit)(nvml::Device, unsigned*) = nullptr;  // mW
    nvml::Return (*device_get_persistence_mode)(nvml::Device, int*) = nullptr;
    nvml::Return (*device_get_mig_mode)(nvml::Device, unsigned*, unsigned*) = nullptr;
    nvml::Return (*device_get_fan_speed)(nvml::Device, unsigned*) = nullptr;  // % of maximum
    /// Each process' share of the SMs, per NVML sample newer than the timestamp given (µs).
    nvml::Return (*device_get_process_utilization)(nvml::Device, nvml::ProcessUtilizationSample*,
                                                   unsigned*, unsigned long long) = nullptr;
    // MIG: an instance's handle (from its MIG- UUID), its GPU and its instance ids.
    nvml::Return (*device_is_mig_device_handle)(nvml::Device, unsigned*) = nullptr;
    nvml::Return (*device_get_device_handle_from_mig_device_handle)(nvml::Device,
                                                                    nvml::Device*) = nullptr;
    nvml::Return (*device_get_gpu_instance_id)(nvml::Device, unsigned*) = nullptr;
    nvml::Return (*device_get_compute_instance_id)(nvml::Device, unsigned*) = nullptr;
    // GPU performance monitoring: two samples a window apart give the window's averages.
    nvml::Return (*gpm_query_device_support)(nvml::Device, nvml::GpmSupport*) = nullptr;
    nvml::Return (*gpm_sample_alloc)(nvml::GpmSample*) = nullptr;
    nvml::Return (*gpm_sample_free)(nvml::GpmSample) = nullptr;
    nvml::Return (*gpm_sample_get)(nvml::Device, nvml::GpmSample) = nullptr;
    nvml::Return (*gpm_metrics_get)(nvml::GpmMetricsGet*) = nullptr;
    /// A MIG instance's GPM sample: the GPU's handle and the instance's GPU instance id.
    nvml::Return (*gpm_mig_sample_get)(nvml::Device, unsigned, nvml::GpmSample) = nullptr;
    // Xid events: a set the sampler drains every round.
    nvml::Return (*event_set_create)(nvml::EventSet*) = nullptr;
    nvml::Return (*device_register_events)(nvml::Device, unsigned long long,
                                           nvml::EventSet) = nullptr;
    /// nvmlEventSetWait_v2, else nvmlEventSetWait (the same arguments).
    nvml::Return (*event_set_wait)(nvml::EventSet, nvml::EventData*, unsigned) = nullptr;
    nvml::Return (*event_set_free)(nvml::EventSet) = nullptr;
    /// The first version, used only when neither _v3 nor _v2 exists.
    nvml::Return (*device_get_compute_running_processes_v1)(nvml::Device, unsigned*,
                                                            nvml::ProcessInfoV1*) = nullptr;

    std::string path;
    /// What this driver's NVML lacks and what that costs: "nvml: power limit unavailable: ...".
    std::vector<std::string> notes;
    [[nodiscard]] std::string error_name(nvml::Return r) const;

    /// Total and used memory: v2 ("used" without the driver's reservation), else v1. NVML's
    /// result code (kErrorFunctionNotFound when this NVML has neither).
    nvml::Return memory_info(nvml::Device device, nvml::MemoryFigures& out) const;
    /// The compute processes on `device` (v3, v2 or v1; v1 leaves the instance ids 0), into
    /// `out`, whose capacity is reused. NVML's result code.
    nvml::Return running_processes(nvml::Device device, std::vector<nvml::ProcessInfo>& out) const;
    /// Whether this NVML has the whole GPM family (each GPU may still refuse it).
    [[nodiscard]] bool has_gpm() const noexcept {
        return gpm_query_device_support != nullptr && gpm_sample_alloc != nullptr &&
               gpm_sample_free != nullptr && gpm_sample_get != nullptr &&
               gpm_metrics_get != nullptr;
    }
};

/// The process' NVML, loaded and initialised once ($GPUDIAG_NVML_PATH, else
/// libnvidia-ml.so.1). Null when unusable, with the reason in `why_not`. Never shut down: other
/// users in the process share NVML's reference count, and shutting down at exit races them.
/// Thread-safety: safe. Callback-safe: no.
const NvmlApi* nvml_api(std::string* why_not = nullptr) noexcept;

}  // namespace gpudiag::detail
