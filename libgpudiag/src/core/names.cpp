// SPDX-License-Identifier: Apache-2.0
// The names of every public enum, one table each (kineto's ActivityType.cpp does the same). The
// names are stable: JSON reports, recordings' debug dumps, the C API, Python and the docs use
// them. The *_name() functions, enum_names<E>() and the Python bindings read these tables;
// tools/gen_names.py writes python/gpudiag/_core.pyi's enums and the docs' tables from them.
//
// Each table is checked when this file compiles: one row per enumerator the enum declares, in
// value order (GCC and Clang; see core/enum_check.hpp), names unique and snake_case. Adding an
// enumerator without naming it fails the build.
#include <gpudiag/analyze.hpp>
#include <gpudiag/capture.hpp>
#include <gpudiag/compare.hpp>
#include <gpudiag/event.hpp>
#include <gpudiag/memory.hpp>
#include <gpudiag/names.hpp>
#include <gpudiag/report.hpp>
#include <gpudiag/status.hpp>
#include <gpudiag/whatif.hpp>

#include "core/enum_check.hpp"

#include <cstddef>
#include <string_view>

namespace gpudiag {
namespace {

constexpr EnumName<EventKind> kEventKindNames[] = {
    {EventKind::kInvalid, "invalid"},
    {EventKind::kDeviceAlloc, "device_alloc"},
    {EventKind::kDeviceFree, "device_free"},
    {EventKind::kPoolAlloc, "pool_alloc"},
    {EventKind::kPoolFree, "pool_free"},
    {EventKind::kPoolResize, "pool_resize"},
    {EventKind::kVmMap, "vm_map"},
    {EventKind::kVmUnmap, "vm_unmap"},
    {EventKind::kSegmentAlloc, "segment_alloc"},
    {EventKind::kSegmentFree, "segment_free"},
    {EventKind::kBlockAlloc, "block_alloc"},
    {EventKind::kBlockFree, "block_free"},
    {EventKind::kHostAlloc, "host_alloc"},
    {EventKind::kHostFree, "host_free"},
    {EventKind::kManagedAlloc, "managed_alloc"},
    {EventKind::kManagedFree, "managed_free"},
    {EventKind::kKernel, "kernel"},
    {EventKind::kMemcpy, "memcpy"},
    {EventKind::kMemset, "memset"},
    {EventKind::kSync, "sync"},
    {EventKind::kApiCall, "api_call"},
    {EventKind::kCollective, "collective"},
    {EventKind::kRangeBegin, "range_begin"},
    {EventKind::kRangeEnd, "range_end"},
    {EventKind::kRange, "range"},
    {EventKind::kStepBegin, "step_begin"},
    {EventKind::kStepEnd, "step_end"},
    {EventKind::kOutOfMemory, "out_of_memory"},
    {EventKind::kAnnotation, "annotation"},
    {EventKind::kCounter, "counter"},
    {EventKind::kCapturePaused, "capture_paused"},
    {EventKind::kCaptureResumed, "capture_resumed"},
};

constexpr EnumName<MemoryKind> kMemoryKindNames[] = {
    {MemoryKind::kUnknown, "unknown"},   {MemoryKind::kDevice, "device"},
    {MemoryKind::kPageable, "pageable"}, {MemoryKind::kPinned, "pinned"},
    {MemoryKind::kManaged, "managed"},   {MemoryKind::kArray, "array"},
};

constexpr EnumName<MemoryCategory> kMemoryCategoryNames[] = {
    {MemoryCategory::kOther, "other"},
    {MemoryCategory::kParameters, "parameters"},
    {MemoryCategory::kGradients, "gradients"},
    {MemoryCategory::kOptimizerState, "optimizer_state"},
    {MemoryCategory::kActivations, "activations"},
};

constexpr EnumName<CopyDirection> kCopyDirectionNames[] = {
    {CopyDirection::kUnknown, "unknown"},
    {CopyDirection::kHostToDevice, "host_to_device"},
    {CopyDirection::kDeviceToHost, "device_to_host"},
    {CopyDirection::kDeviceToDevice, "device_to_device"},
    {CopyDirection::kHostToHost, "host_to_host"},
    {CopyDirection::kPeerToPeer, "peer_to_peer"},
};

constexpr EnumName<SyncKind> kSyncKindNames[] = {
    {SyncKind::kUnknown, "unknown"},
    {SyncKind::kEvent, "event"},
    {SyncKind::kStreamWaitEvent, "stream_wait_event"},
    {SyncKind::kStream, "stream"},
    {SyncKind::kDevice, "device"},
    {SyncKind::kImplicit, "implicit"},
};

constexpr EnumName<RangeCategory> kRangeCategoryNames[] = {
    {RangeCategory::kGeneric, "generic"},
    {RangeCategory::kPhase, "phase"},
    {RangeCategory::kInputWait, "input_wait"},
    {RangeCategory::kCpuOp, "cpu_op"},
    {RangeCategory::kStep, "step"},
    {RangeCategory::kCommunication, "communication"},
    {RangeCategory::kUserAnnotation, "user_annotation"},
    {RangeCategory::kOsRuntime, "os_runtime"},
};

constexpr EnumName<ApiDomain> kApiDomainNames[] = {
    {ApiDomain::kUnknown, "unknown"},
    {ApiDomain::kRuntime, "runtime"},
    {ApiDomain::kDriver, "driver"},
};

constexpr EnumName<CounterKind> kCounterKindNames[] = {
    {CounterKind::kUnknown, "unknown"},
    {CounterKind::kGpuUtilizationPercent, "gpu_utilization_percent"},
    {CounterKind::kMemoryUtilizationPercent, "memory_utilization_percent"},
    {CounterKind::kDeviceMemoryUsedBytes, "device_memory_used_bytes"},
    {CounterKind::kDeviceMemoryTotalBytes, "device_memory_total_bytes"},
    {CounterKind::kProcessMemoryUsedBytes, "process_memory_used_bytes"},
    {CounterKind::kForeignProcessMemoryBytes, "foreign_process_memory_bytes"},
    {CounterKind::kSmClockMhz, "sm_clock_mhz"},
    {CounterKind::kSmClockMaxMhz, "sm_clock_max_mhz"},
    {CounterKind::kTemperatureC, "temperature_c"},
    {CounterKind::kPowerWatts, "power_watts"},
    {CounterKind::kPowerLimitWatts, "power_limit_watts"},
    {CounterKind::kThrottleReasons, "throttle_reasons"},
    {CounterKind::kEccCorrectedErrors, "ecc_corrected_errors"},
    {CounterKind::kEccUncorrectedErrors, "ecc_uncorrected_errors"},
    {CounterKind::kPcieLinkGeneration, "pcie_link_generation"},
    {CounterKind::kPcieLinkGenerationMax, "pcie_link_generation_max"},
    {CounterKind::kPcieLinkWidth, "pcie_link_width"},
    {CounterKind::kPcieLinkWidthMax, "pcie_link_width_max"},
    {CounterKind::kPcieReplays, "pcie_replays"},
    {CounterKind::kFrameworkAllocatedBytes, "framework_allocated_bytes"},
    {CounterKind::kFrameworkReservedBytes, "framework_reserved_bytes"},
    {CounterKind::kFrameworkAllocRetries, "framework_alloc_retries"},
    {CounterKind::kFrameworkOoms, "framework_ooms"},
    {CounterKind::kFrameworkInactiveSplitBytes, "framework_inactive_split_bytes"},
    {CounterKind::kDroppedRecords, "dropped_records"},
    {CounterKind::kCaptureOverheadNs, "capture_overhead_ns"},
    {CounterKind::kUntimedKernels, "untimed_kernels"},
    {CounterKind::kRetiredPagesSingleBit, "retired_pages_single_bit"},
    {CounterKind::kRetiredPagesDoubleBit, "retired_pages_double_bit"},
    {CounterKind::kRetiredPagesPending, "retired_pages_pending"},
    {CounterKind::kRemappedRowsCorrectable, "remapped_rows_correctable"},
    {CounterKind::kRemappedRowsUncorrectable, "remapped_rows_uncorrectable"},
    {CounterKind::kRowRemapPending, "row_remap_pending"},
    {CounterKind::kRowRemapFailed, "row_remap_failed"},
    {CounterKind::kXidError, "xid_error"},
    {CounterKind::kNvlinkLinksActive, "nvlink_links_active"},
    {CounterKind::kNvlinkReplayErrors, "nvlink_replay_errors"},
    {CounterKind::kNvlinkRecoveryErrors, "nvlink_recovery_errors"},
    {CounterKind::kNvlinkCrcErrors, "nvlink_crc_errors"},
    {CounterKind::kPowerLimitDefaultWatts, "power_limit_default_watts"},
    {CounterKind::kPersistenceMode, "persistence_mode"},
    {CounterKind::kMigMode, "mig_mode"},
    {CounterKind::kSmActivePercent, "sm_active_percent"},
    {CounterKind::kSmOccupancyPercent, "sm_occupancy_percent"},
    {CounterKind::kTensorActivePercent, "tensor_active_percent"},
    {CounterKind::kDramActivePercent, "dram_active_percent"},
    {CounterKind::kFanSpeedPercent, "fan_speed_percent"},
    {CounterKind::kOtherProcessMemoryBytes, "other_process_memory_bytes"},
    {CounterKind::kForeignProcessSmPercent, "foreign_process_sm_percent"},
};

constexpr EnumName<StatusCode> kStatusCodeNames[] = {
    {StatusCode::kOk, "ok"},
    {StatusCode::kInvalidArgument, "invalid_argument"},
    {StatusCode::kNotFound, "not_found"},
    {StatusCode::kUnavailable, "unavailable"},
    {StatusCode::kCorruptData, "corrupt_data"},
    {StatusCode::kUnsupported, "unsupported"},
    {StatusCode::kIoError, "io_error"},
    {StatusCode::kResourceExhausted, "resource_exhausted"},
    {StatusCode::kFailedPrecondition, "failed_precondition"},
    {StatusCode::kInternal, "internal"},
};

constexpr EnumName<Evidence> kEvidenceNames[] = {
    {Evidence::kSteps, "steps"},
    {Evidence::kInputWaits, "input_waits"},
    {Evidence::kGpuActivity, "gpu_activity"},
    {Evidence::kDeviceMemory, "device_memory"},
    {Evidence::kDeviceHealth, "device_health"},
};

constexpr EnumName<Severity> kSeverityNames[] = {
    {Severity::kInfo, "info"},
    {Severity::kWarning, "warning"},
    {Severity::kCritical, "critical"},
};

// The spellings of the JSON report, not snake_case (a report says "bytes/step").
constexpr EnumName<Unit> kUnitNames[] = {
    {Unit::kUnknown, "unknown"},
    {Unit::kNumber, ""},
    {Unit::kCount, "count"},
    {Unit::kBytes, "bytes"},
    {Unit::kNanoseconds, "ns"},
    {Unit::kMicroseconds, "us"},
    {Unit::kMilliseconds, "ms"},
    {Unit::kSeconds, "s"},
    {Unit::kFraction, "fraction"},
    {Unit::kPercent, "percent"},
    {Unit::kBytesPerStep, "bytes/step"},
    {Unit::kBytesPerSecond, "bytes/s"},
    {Unit::kBytesPerHour, "bytes/hour"},
    {Unit::kCelsius, "celsius"},
    {Unit::kWatts, "W"},
    {Unit::kMegahertz, "MHz"},
    {Unit::kStep, "step"},
    {Unit::kCode, "enum"},
    {Unit::kDevice, "ordinal"},
    {Unit::kRank, "rank"},
};

constexpr EnumName<FigureKind> kFigureKindNames[] = {
    {FigureKind::kGauge, "gauge"},
    {FigureKind::kTotal, "total"},
    {FigureKind::kPeak, "peak"},
};

constexpr EnumName<TableKind> kTableKindNames[] = {
    {TableKind::kRows, "rows"},
    {TableKind::kPartition, "partition"},
    {TableKind::kData, "data"},
};

constexpr EnumName<CaptureLevel> kCaptureLevelNames[] = {
    {CaptureLevel::kNoGpu, "no_gpu"},         {CaptureLevel::kNvml, "nvml"},
    {CaptureLevel::kFramework, "framework"},  {CaptureLevel::kCuptiActivity, "cupti_activity"},
    {CaptureLevel::kCuptiDeep, "cupti_deep"},
};

constexpr EnumName<AnalysisWindow> kAnalysisWindowNames[] = {
    {AnalysisWindow::kSteps, "steps"},
    {AnalysisWindow::kHta, "hta"},
    {AnalysisWindow::kAll, "all"},
};

constexpr EnumName<InputFormat> kInputFormatNames[] = {
    {InputFormat::kUnknown, "unknown"},
    {InputFormat::kRecording, "recording"},
    {InputFormat::kKinetoJson, "kineto_json"},
    {InputFormat::kTorchSnapshot, "torch_snapshot"},
    {InputFormat::kReportJson, "report_json"},
    {InputFormat::kNsightSqlite, "nsight_sqlite"},
    {InputFormat::kFlightRecorder, "flight_recorder"},
};

constexpr EnumName<MemoryMetric> kMemoryMetricNames[] = {
    {MemoryMetric::kAllocated, "allocated"},
    {MemoryMetric::kReserved, "reserved"},
    {MemoryMetric::kDeviceUsed, "device_used"},
};

constexpr EnumName<OomCause> kOomCauseNames[] = {
    {OomCause::kUnknown, "unknown"},
    {OomCause::kFragmentation, "fragmentation"},
    {OomCause::kBloatedCache, "bloated_cache"},
    {OomCause::kOutsideFramework, "memory_outside_framework"},
    {OomCause::kTooLittleMemory, "too_little_memory"},
    {OomCause::kFreeBlockAvailable, "free_block_available"},
    {OomCause::kOtherProcess, "other_process"},
};

constexpr EnumName<WhatIfStart> kWhatIfStartNames[] = {
    {WhatIfStart::kRecordedState, "recorded_state"},
    {WhatIfStart::kLiveBlocks, "live_blocks"},
};

constexpr EnumName<CompareVerdict> kCompareVerdictNames[] = {
    {CompareVerdict::kImprovement, "improvement"},
    {CompareVerdict::kRegression, "regression"},
    {CompareVerdict::kMixed, "mixed"},
    {CompareVerdict::kUnchanged, "unchanged"},
    {CompareVerdict::kInconclusive, "inconclusive"},
};

constexpr EnumName<CompareArea> kCompareAreaNames[] = {
    {CompareArea::kTime, "time"},
    {CompareArea::kGpu, "gpu"},
    {CompareArea::kMemory, "memory"},
    {CompareArea::kHealth, "health"},
};

constexpr EnumName<DeltaJudgement> kDeltaJudgementNames[] = {
    {DeltaJudgement::kImproved, "improved"},
    {DeltaJudgement::kRegressed, "regressed"},
    {DeltaJudgement::kWithinNoise, "within_noise"},
    {DeltaJudgement::kNotComparable, "not_comparable"},
};

constexpr EnumName<FindingChangeKind> kFindingChangeKindNames[] = {
    {FindingChangeKind::kAppeared, "appeared"},
    {FindingChangeKind::kResolved, "resolved"},
    {FindingChangeKind::kPersisted, "persisted"},
};

// ---- compile-time checks ----------------------------------------------------------------------

template <typename E, std::size_t N>
constexpr bool unique_names(const EnumName<E> (&table)[N]) {
    for (std::size_t i = 0; i < N; ++i) {
        for (std::size_t j = i + 1; j < N; ++j) {
            if (std::string_view(table[i].name) == std::string_view(table[j].name)) return false;
        }
    }
    return true;
}

template <typename E, std::size_t N>
constexpr bool snake_case(const EnumName<E> (&table)[N]) {
    for (const auto& entry : table) {
        std::string_view name(entry.name);
        if (name.empty() || name.front() < 'a' || name.front() > 'z') return false;
        for (char c : name) {
            if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
        }
    }
    return true;
}

template <typename E, std::size_t N>
constexpr bool complete(const EnumName<E> (&table)[N]) {
    return detail::one_row_per_enumerator<E>(table, [](const EnumName<E>& e) { return e.value; });
}

// complete(): one row per declared enumerator, in increasing value order.
#define GPUDIAG_CHECK_TABLE(table, snake)                                           \
    static_assert(complete(table),                                                  \
                  #table ": one row per enumerator, in value order (add its row)"); \
    static_assert(unique_names(table), #table ": two enumerators share a name");    \
    static_assert(!(snake) || snake_case(table), #table ": names must be snake_case")

GPUDIAG_CHECK_TABLE(kEventKindNames, true);
GPUDIAG_CHECK_TABLE(kMemoryKindNames, true);
GPUDIAG_CHECK_TABLE(kMemoryCategoryNames, true);
GPUDIAG_CHECK_TABLE(kCopyDirectionNames, true);
GPUDIAG_CHECK_TABLE(kSyncKindNames, true);
GPUDIAG_CHECK_TABLE(kRangeCategoryNames, true);
GPUDIAG_CHECK_TABLE(kApiDomainNames, true);
GPUDIAG_CHECK_TABLE(kCounterKindNames, true);
GPUDIAG_CHECK_TABLE(kStatusCodeNames, true);
GPUDIAG_CHECK_TABLE(kSeverityNames, true);
GPUDIAG_CHECK_TABLE(kEvidenceNames, true);
GPUDIAG_CHECK_TABLE(kUnitNames, false);
GPUDIAG_CHECK_TABLE(kFigureKindNames, true);
GPUDIAG_CHECK_TABLE(kTableKindNames, true);
GPUDIAG_CHECK_TABLE(kCaptureLevelNames, true);
GPUDIAG_CHECK_TABLE(kAnalysisWindowNames, true);
GPUDIAG_CHECK_TABLE(kInputFormatNames, true);
GPUDIAG_CHECK_TABLE(kMemoryMetricNames, true);
GPUDIAG_CHECK_TABLE(kOomCauseNames, true);
GPUDIAG_CHECK_TABLE(kWhatIfStartNames, true);
GPUDIAG_CHECK_TABLE(kCompareVerdictNames, true);
GPUDIAG_CHECK_TABLE(kCompareAreaNames, true);
GPUDIAG_CHECK_TABLE(kDeltaJudgementNames, true);
GPUDIAG_CHECK_TABLE(kFindingChangeKindNames, true);

template <typename E, std::size_t N>
constexpr EnumNames<E> view(const EnumName<E> (&table)[N]) {
    return EnumNames<E>{table, N};
}

}  // namespace

// ---- enum_names<E>() --------------------------------------------------------------------------

#define GPUDIAG_ENUM_NAMES(E, table)        \
    template <>                             \
    EnumNames<E> enum_names<E>() noexcept { \
        return view(table);                 \
    }

GPUDIAG_ENUM_NAMES(EventKind, kEventKindNames)
GPUDIAG_ENUM_NAMES(MemoryKind, kMemoryKindNames)
GPUDIAG_ENUM_NAMES(MemoryCategory, kMemoryCategoryNames)
GPUDIAG_ENUM_NAMES(CopyDirection, kCopyDirectionNames)
GPUDIAG_ENUM_NAMES(SyncKind, kSyncKindNames)
GPUDIAG_ENUM_NAMES(RangeCategory, kRangeCategoryNames)
GPUDIAG_ENUM_NAMES(ApiDomain, kApiDomainNames)
GPUDIAG_ENUM_NAMES(CounterKind, kCounterKindNames)
GPUDIAG_ENUM_NAMES(StatusCode, kStatusCodeNames)
GPUDIAG_ENUM_NAMES(Severity, kSeverityNames)
GPUDIAG_ENUM_NAMES(Evidence, kEvidenceNames)
GPUDIAG_ENUM_NAMES(Unit, kUnitNames)
GPUDIAG_ENUM_NAMES(FigureKind, kFigureKindNames)
GPUDIAG_ENUM_NAMES(TableKind, kTableKindNames)
GPUDIAG_ENUM_NAMES(CaptureLevel, kCaptureLevelNames)
GPUDIAG_ENUM_NAMES(AnalysisWindow, kAnalysisWindowNames)
GPUDIAG_ENUM_NAMES(InputFormat, kInputFormatNames)
GPUDIAG_ENUM_NAMES(MemoryMetric, kMemoryMetricNames)
GPUDIAG_ENUM_NAMES(OomCause, kOomCauseNames)
GPUDIAG_ENUM_NAMES(WhatIfStart, kWhatIfStartNames)
GPUDIAG_ENUM_NAMES(CompareVerdict, kCompareVerdictNames)
GPUDIAG_ENUM_NAMES(CompareArea, kCompareAreaNames)
GPUDIAG_ENUM_NAMES(DeltaJudgement, kDeltaJudgementNames)
GPUDIAG_ENUM_NAMES(FindingChangeKind, kFindingChangeKindNames)

// ---- the *_name() functions of the public API -------------------------------------------------

const char* event_kind_name(EventKind kind) noexcept {
    return enum_name(kind);
}
const char* memory_category_name(MemoryCategory c) noexcept {
    return enum_name(c);
}
const char* status_code_name(StatusCode code) noexcept {
    return enum_name(code);
}
const char* severity_name(Severity s) noexcept {
    return enum_name(s);
}
const char* capture_level_name(CaptureLevel level) noexcept {
    return enum_name(level);
}
const char* input_format_name(InputFormat f) noexcept {
    return enum_name(f);
}
const char* memory_metric_name(MemoryMetric m) noexcept {
    return enum_name(m);
}
const char* oom_cause_name(OomCause c) noexcept {
    return enum_name(c);
}
const char* whatif_start_name(WhatIfStart s) noexcept {
    return enum_name(s);
}
const char* compare_verdict_name(CompareVerdict v) noexcept {
    return enum_name(v);
}

Unit unit_from_name(std::string_view spelling) noexcept {
    Unit unit = Unit::kUnknown;
    enum_from_name(spelling, unit);
    return unit;
}

}  // namespace gpudiag
