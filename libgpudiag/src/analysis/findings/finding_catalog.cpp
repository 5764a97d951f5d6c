// SPDX-License-Identifier: Apache-2.0
// The findings catalog's table: one row per FindingId with its stable name, its area and its
// rules as docs/findings.md states them (tools/gen_findings_doc writes the docs' tables from it).
// A rule quotes a threshold by the constant's name in braces ("{kInputModerate}"), and the text
// is formatted with that constant's value, so the docs cannot state a number the code does not
// use.
//
// Checked when this file compiles (GCC and Clang; see core/enum_check.hpp): one row per
// FindingId in value order, names unique and snake_case, every threshold a rule quotes is in
// kQuoted, and every quoted threshold is quoted by some rule.
#include "analysis/findings/finding_catalog.hpp"

#include "core/enum_check.hpp"

#include <fmt/args.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <exception>
#include <iterator>
#include <span>

namespace gpudiag::detail {
namespace {

// How the docs print a threshold.
enum class Print : std::uint8_t {
    kShare,    // a fraction, as a percentage: 0.05 -> "5 %"
    kPoints,   // a difference of fractions: 0.2 -> "20 points"
    kPercent,  // already a percentage: 80 -> "80 %"
    kBytes,    // "256 MiB", "1 GiB"
    kNs,       // "100 µs", "30 s", "1 min"
    kNumber,   // "8", "0.01"
    kCelsius,  // "10 °C"
    kList,     // "13, 31, 43, 45"
};

struct Quoted {
    const char* name;  // the constant's name, as rules write it in braces
    Print print;
    double value = 0;
    std::span<const std::uint32_t> list = {};
};

constexpr Quoted quote(const char* name, Print how, double value) {
    return Quoted{name, how, value};
}

// The thresholds the rules quote, each by its own name (written once, by the macro).
#define GPUDIAG_QUOTE(constant, how) quote(#constant, Print::how, static_cast<double>(constant))

constexpr Quoted kQuoted[] = {
    // timeline
    GPUDIAG_QUOTE(kInputModerate, kShare),
    GPUDIAG_QUOTE(kInputHigh, kShare),
    GPUDIAG_QUOTE(kMinFetchesWithoutSteps, kNumber),
    GPUDIAG_QUOTE(kIdleWorthExplaining, kShare),
    GPUDIAG_QUOTE(kIdleSevere, kShare),
    GPUDIAG_QUOTE(kHostWaitMostly, kShare),
    GPUDIAG_QUOTE(kLaunchingMostly, kShare),
    GPUDIAG_QUOTE(kCauseNotable, kShare),
    GPUDIAG_QUOTE(kCauseSevere, kShare),
    GPUDIAG_QUOTE(kCommNotable, kShare),
    GPUDIAG_QUOTE(kCommSevere, kShare),
    GPUDIAG_QUOTE(kPageableMinBytes, kBytes),
    GPUDIAG_QUOTE(kWorthFixing, kShare),
    GPUDIAG_QUOTE(kManySyncsPerStep, kNumber),
    GPUDIAG_QUOTE(kMinSavingToRaiseNs, kNs),
    GPUDIAG_QUOTE(kOneOffShareOfIdle, kShare),
    GPUDIAG_QUOTE(kOneOffShareOfWindow, kShare),
    GPUDIAG_QUOTE(kOneOffMinNs, kNs),
    GPUDIAG_QUOTE(kOneOffMinOtherGaps, kNumber),
    GPUDIAG_QUOTE(kColdLaunchNs, kNs),
    GPUDIAG_QUOTE(kColdAllocatorCalls, kNumber),
    GPUDIAG_QUOTE(kWarmSteps, kNumber),
    GPUDIAG_QUOTE(kCompileMostly, kShare),
    // job
    GPUDIAG_QUOTE(kStragglerNotable, kShare),
    GPUDIAG_QUOTE(kStragglerSevere, kShare),
    GPUDIAG_QUOTE(kCommImbalanceNotable, kShare),
    GPUDIAG_QUOTE(kCollectiveRanksNamed, kNumber),
    // memory
    GPUDIAG_QUOTE(kUnusedMinBytes, kBytes),
    GPUDIAG_QUOTE(kUnusedMinShare, kShare),
    GPUDIAG_QUOTE(kReleasableMinShare, kShare),
    GPUDIAG_QUOTE(kSplitMinBytes, kBytes),
    GPUDIAG_QUOTE(kSplitMinShare, kShare),
    GPUDIAG_QUOTE(kSplitMinFragmentation, kShare),
    GPUDIAG_QUOTE(kNearOomShare, kShare),
    GPUDIAG_QUOTE(kNearOomCriticalShare, kShare),
    GPUDIAG_QUOTE(kOutsideMinBytes, kBytes),
    GPUDIAG_QUOTE(kOutsideMinShare, kShare),
    GPUDIAG_QUOTE(kOutsideWarningShare, kShare),
    GPUDIAG_QUOTE(kOomRetryWindowNs, kNs),
    GPUDIAG_QUOTE(kMinRepetitions, kNumber),
    GPUDIAG_QUOTE(kMinPatternSpanNs, kNs),
    GPUDIAG_QUOTE(kServiceWindowNs, kNs),
    GPUDIAG_QUOTE(kMinServiceWindows, kNumber),
    GPUDIAG_QUOTE(kLeakSignificance, kNumber),
    GPUDIAG_QUOTE(kLeakMinBytes, kBytes),
    GPUDIAG_QUOTE(kLeakMinLevelShare, kShare),
    GPUDIAG_QUOTE(kLeakMinCapacityShare, kShare),
    GPUDIAG_QUOTE(kLeakLowerBoundDropShare, kShare),
    // health
    GPUDIAG_QUOTE(kThrottleShare, kShare),
    GPUDIAG_QUOTE(kThrottleMinBusySamples, kNumber),
    GPUDIAG_QUOTE(kHotCelsius, kCelsius),
    GPUDIAG_QUOTE(kThrottleMinStepsEach, kNumber),
    GPUDIAG_QUOTE(kThrottleNoiseShare, kShare),
    GPUDIAG_QUOTE(kForeignBytes, kBytes),
    GPUDIAG_QUOTE(kForeignShare, kShare),
    GPUDIAG_QUOTE(kForeignCriticalShare, kShare),
    GPUDIAG_QUOTE(kOtherProcessesNamed, kNumber),
    Quoted{"kProgramFaultXids", Print::kList, 0, kProgramFaultXids},
    GPUDIAG_QUOTE(kPcieDegradedShare, kShare),
    GPUDIAG_QUOTE(kPcieBusyUtilPercent, kPercent),
    GPUDIAG_QUOTE(kMinBusyLinkSamples, kNumber),
    GPUDIAG_QUOTE(kPcieReplaysDuringRun, kNumber),
    GPUDIAG_QUOTE(kNvlinkErrorsDuringRun, kNumber),
    GPUDIAG_QUOTE(kLooksBusyPercent, kPercent),
    GPUDIAG_QUOTE(kFewSmsActivePercent, kPercent),
    GPUDIAG_QUOTE(kMinBusyReadings, kNumber),
    GPUDIAG_QUOTE(kMemoryBoundDramPercent, kPercent),
    GPUDIAG_QUOTE(kOutlierMinPeers, kNumber),
    GPUDIAG_QUOTE(kOutlierMinBusySamples, kNumber),
    GPUDIAG_QUOTE(kClockDeficit, kShare),
    GPUDIAG_QUOTE(kHotterCelsius, kCelsius),
    GPUDIAG_QUOTE(kThrottleExcess, kPoints),
};

#undef GPUDIAG_QUOTE

struct AreaRow {
    FindingArea area;
    std::string_view name;
    std::string_view note;  // printed under the area's table; may quote thresholds
};

constexpr AreaRow kAreas[] = {
    {FindingArea::kTimeline, "timeline",
     "A timeline finding whose predicted saving (the critical path replayed without its cause) "
     "is under {kWorthFixing} of the step time, or of the window without steps, is `info` "
     "whatever its rule says: its cause is off the critical path, and other findings are worth "
     "fixing first. The savings of `pageable_memcpy`, and of `gpu_idle` when copies cause it, "
     "are lower bounds and leave the severity as it is."},
    {FindingArea::kJob, "job", ""},
    {FindingArea::kMemory, "memory", ""},
    {FindingArea::kHealth, "health", ""},
    {FindingArea::kStack, "stack", ""},
};

struct Row {
    FindingId id;
    std::string_view name;
    FindingArea area;
    std::string_view raised_when;
    std::string_view severity;
};

constexpr Row kRows[] = {
    // ---- timeline ----
    {FindingId::kInputBound, "input_bound", FindingArea::kTimeline,
     "the loop waits for its next batch ≥ {kInputModerate} of step time (TensorFlow's "
     "\"moderately input-bound\"); without steps, of the host time and over at least "
     "{kMinFetchesWithoutSteps} fetches (one fetch is no loop)",
     "critical from {kInputHigh} (\"highly\")"},
    {FindingId::kHostSyncStall, "host_sync_stall", FindingArea::kTimeline,
     "GPU idle right after host synchronizations (`.item()`, `cudaStreamSynchronize`, ...) ≥ "
     "{kCauseNotable} of the window, or the critical path replayed without them ≥ "
     "{kCauseNotable} shorter, by at least {kMinSavingToRaiseNs} (the syncs hold the host back, "
     "so its next work cannot overlap the GPU; the title then says so), or ≥ "
     "{kManySyncsPerStep} syncs per step (then says what they cost)",
     "critical from {kCauseSevere}"},
    {FindingId::kPageableMemcpy, "pageable_memcpy", FindingArea::kTimeline,
     "≥ {kPageableMinBytes} copied through pageable host memory; figures: bytes, count, "
     "achieved bandwidth",
     "warning from {kCauseNotable} of the window"},
    {FindingId::kLaunchBound, "launch_bound", FindingArea::kTimeline,
     "idle ≥ {kIdleWorthExplaining}, at least {kHostWaitMostly} of it host wait, and at least "
     "{kLaunchingMostly} of that wait spent launching (inside launch calls, or a launch's latency "
     "to its kernel); the title states that share and the median kernel and launch call. Host "
     "wait spent in other CPU work (Python, the framework, logging) is `gpu_idle`'s, whose advice "
     "is to find that work, not CUDA graphs first",
     "critical from {kIdleSevere} idle"},
    {FindingId::kCommBound, "comm_bound", FindingArea::kTimeline,
     "communication not overlapped with compute ≥ {kCommNotable} of the window",
     "critical from {kCommSevere}"},
    {FindingId::kGpuIdle, "gpu_idle", FindingArea::kTimeline,
     "idle ≥ {kIdleWorthExplaining} of the window; names the host-wait / kernel-wait / other "
     "split and the dominant cause (\"mostly waiting for the host\" from {kHostWaitMostly} host "
     "wait)",
     "warning from {kIdleSevere}; when at least {kCompileMostly} of the host wait's CPU work is "
     "inside a compiler's ranges (nvFuser, Inductor/Dynamo, NVRTC), names compilation as the "
     "cause, with compilation advice"},
    {FindingId::kOneOffStall, "one_off_stall", FindingArea::kTimeline,
     "one stretch of host time, the time before the first GPU work (without steps) or one idle "
     "gap among at least {kOneOffMinOtherGaps} others, holds ≥ {kOneOffShareOfIdle} of all the "
     "GPU's idle time, ≥ {kOneOffShareOfWindow} of the window and ≥ {kOneOffMinNs}; the first "
     "launch of a kernel that keeps the idle GPU waiting ≥ {kColdLaunchNs} (module loading) is "
     "one-off too and left out with it (not in HTA's window, which keeps HTA's figures); names "
     "what the host did in it (compilation, first-call library setup, allocator warm-up, "
     "module loading, data loading, a checkpoint) from the calls and ranges inside it. It is "
     "left out of the other timeline findings' window, figures and savings; before "
     "{kWarmSteps} completed steps the profile had no warm-up, and the advice says to profile "
     "after it; {kColdAllocatorCalls} or more cudaMalloc / cudaFree calls in the input are "
     "named as a cold allocator's warm-up",
     "warning when no warm-up preceded it, else info"},
    // ---- job ----
    {FindingId::kRankStraggler, "rank_straggler", FindingArea::kJob,
     "(several ranks) the others wait ≥ {kStragglerNotable} of a step in collectives for one "
     "rank",
     "graded by its predicted saving (the wait, bounded by the other ranks' replayed critical "
     "paths): critical from {kStragglerSevere}, warning from {kStragglerNotable}, info below"},
    {FindingId::kCommImbalance, "comm_imbalance", FindingArea::kJob,
     "(several ranks) collective time per step differs across ranks by ≥ "
     "{kCommImbalanceNotable} of its mean",
     "warning"},
    {FindingId::kCollectiveHang, "collective_hang", FindingArea::kJob,
     "(PyTorch Flight Recorder dumps, one per rank) in a process group, a collective that some "
     "rank enqueued has not completed on every rank: the first such sequence id (one past the "
     "last every rank completed). Names the group, the op and sequence id, the ranks waiting in "
     "it, and the culprit: the ranks that never called it (with the Python call site of their "
     "last collective), else the member ranks whose dump is missing (they died, hung or were "
     "killed before dumping), else none (every rank is in it: the collective itself does not "
     "finish); ranks ahead are listed. At most {kCollectiveRanksNamed} ranks of each kind are "
     "named, the rest counted",
     "critical"},
    {FindingId::kCollectiveDesync, "collective_desync", FindingArea::kJob,
     "(PyTorch Flight Recorder dumps) at one sequence id of a process group, ranks recorded "
     "different ops or different input/output sizes or dtypes: the first such id among the "
     "collectives the dumps hold. The culprit is the minority; with a tie (two ranks), the rank "
     "whose call differs from its own previous call of the same op, else all of them, said to "
     "be undecided. Names the group, the id, each side's op and sizes, and the culprit's Python "
     "call site",
     "critical"},
    // ---- memory ----
    {FindingId::kMemoryLeak, "memory_leak", FindingArea::kMemory,
     "the lowest level per iteration keeps rising across ≥ {kMinRepetitions} repetitions: steps, "
     "a period in the allocation pattern spanning ≥ {kMinPatternSpanNs}, or ≥ "
     "{kMinServiceWindows} windows of ≥ {kServiceWindowNs} (services); after a data-chosen "
     "warm-up: Theil–Sen slope, one-sided Mann–Kendall p < {kLeakSignificance}, rising in every "
     "third, growth ≥ max({kLeakMinBytes}, {kLeakMinLevelShare} of the level, "
     "{kLeakMinCapacityShare} of capacity). Levels: framework-allocated, outside the framework "
     "(driver-level), reserved (without an allocated leak), NVML's process figure (when nothing "
     "else explains it). Figures: rate per step and, from the steps' own pace, per hour; onset "
     "(`since_ns`), time until full; sites: live bytes gained since the onset. With ≥ "
     "{kLeakLowerBoundDropShare} of the capture's events dropped the rate is stated as a lower "
     "bound",
     "warning; critical when it explains an `out_of_memory` or the device is near full "
     "(≥ {kNearOomCriticalShare}, `near_oom` then names it as the cause)"},
    {FindingId::kMemoryGrowthInIteration, "memory_growth_in_iteration", FindingArea::kMemory,
     "the allocated level rises materially but the input holds fewer than {kMinRepetitions} "
     "repetitions: memory held until later in the iteration, reported without a rate",
     "info"},
    {FindingId::kReservedUnused, "reserved_unused", FindingArea::kMemory,
     "cached but unused ≥ {kUnusedMinBytes} and ≥ {kUnusedMinShare} of what the framework holds "
     "(against the recent per-step peak in step-based programs), or, with segments, spare wholly "
     "free segments ≥ {kUnusedMinBytes} and ≥ {kReleasableMinShare} of it; says what "
     "`empty_cache()` returns and what stays stranded",
     "info when only the free segments qualify, else warning; critical when the framework "
     "reserves ≥ {kNearOomShare} of capacity"},
    {FindingId::kFragmentation, "fragmentation", FindingArea::kMemory,
     "free space stranded in partly used segments ≥ {kSplitMinBytes} and ≥ {kSplitMinShare} of "
     "reserved, broken up: 1 − largest hole / stranded space ≥ {kSplitMinFragmentation}; or an "
     "allocation failed from it",
     "warning; critical with a failure"},
    {FindingId::kNearOom, "near_oom", FindingArea::kMemory,
     "device memory in use (or NVML's figure) ≥ {kNearOomShare} of capacity",
     "critical from {kNearOomCriticalShare}"},
    {FindingId::kMemoryOutsideFramework, "memory_outside_framework", FindingArea::kMemory,
     "(a framework is present) memory held outside its segments ≥ {kOutsideMinBytes} and ≥ "
     "{kOutsideMinShare} of what is held, split by owner (NCCL, cuBLAS, cuDNN, TensorRT, pools, "
     "other sites)",
     "info; warning from {kOutsideWarningShare} of capacity"},
    {FindingId::kOutOfMemory, "out_of_memory", FindingArea::kMemory,
     "allocations failed: one finding per device with the count and the moments; the cause of "
     "the first (free block available, bloated cache, fragmentation, other process, memory "
     "outside the framework, too little memory, or left open), or the leak the same report found "
     "when it explains them; advice that fits the program. A failure seen twice within "
     "{kOomRetryWindowNs} (a caller's retry, or CUPTI and the framework's hook seeing one "
     "failure) counts once, the sighting with the size explaining it; a retryable failure whose "
     "retry then succeeded is withdrawn (a note counts them); a failure without a device is "
     "placed on the only device in the books, else noted unexplained; failed host allocations "
     "are a note (host memory, not GPU memory)",
     "critical"},
    // ---- health ----
    {FindingId::kThermalThrottle, "thermal_throttle", FindingArea::kHealth,
     "thermal clock-event reasons active in ≥ {kThrottleShare} of busy samples (at least "
     "{kThrottleMinBusySamples}; NVML's plain hardware slowdown counts as thermal with a thermal "
     "reason or from {kHotCelsius}, else as power). With steps: the median step that a throttled "
     "sample fell in against the median step whose busy samples were all unthrottled (≥ "
     "{kThrottleMinStepsEach} of each), the slowdown and the step time lost over the run (the "
     "difference × the throttled share of the steps seen × every step); a slowdown of "
     "{kThrottleNoiseShare} or less is said to be none",
     "warning; critical when the hardware slowdown engaged"},
    {FindingId::kPowerThrottle, "power_throttle", FindingArea::kHealth,
     "power-cap clock-event reasons active in ≥ {kThrottleShare} of busy samples; what it cost "
     "the steps, as for `thermal_throttle`",
     "info for the software power cap; warning for the hardware power brake"},
    {FindingId::kEccErrors, "ecc_errors", FindingArea::kHealth,
     "uncorrected ECC errors (any), or corrected ones growing", "critical for uncorrected"},
    {FindingId::kForeignProcessMemory, "foreign_process_memory", FindingArea::kHealth,
     "other processes hold ≥ {kForeignBytes} or ≥ {kForeignShare} of the GPU's memory; names the "
     "{kOtherProcessesNamed} largest by the PIDs NVML lists, and gives their mean and largest "
     "share of the SMs where NVML measures it",
     "warning; critical at ≥ {kForeignCriticalShare} of the memory"},
    {FindingId::kXidError, "xid_error", FindingArea::kHealth,
     "the driver delivered Xid events for the GPU (NVML event set, drained every sample): every "
     "Xid, with its count and meaning",
     "critical; warning when every Xid is one that is most often the program's own fault "
     "({kProgramFaultXids})"},
    {FindingId::kEccPagesRetired, "ecc_pages_retired", FindingArea::kHealth,
     "memory rows remapped (Ampere on) or pages retired (before Ampere): a remap that failed, a "
     "retirement or remap waiting for a reset, counts that grew during the run, or counts from "
     "before it",
     "critical for a failed remap; warning for pending or growing; info otherwise"},
    {FindingId::kNvlinkErrors, "nvlink_errors", FindingArea::kHealth,
     "NVLink links needed recovery (retraining) during the run, or ≥ {kNvlinkErrorsDuringRun} "
     "replay and CRC errors during it, or fewer links were up at the end than during the run",
     "warning"},
    {FindingId::kGpuBusyNotComputing, "gpu_busy_not_computing", FindingArea::kHealth,
     "NVML GPM (Hopper and newer): in ≥ {kMinBusyReadings} GPM readings (windows of ≥ 100 ms) "
     "taken while NVML utilization was ≥ {kLooksBusyPercent}, SMs with work averaged under "
     "{kFewSmsActivePercent}. NVML's utilization counts the time any kernel ran, however few SMs "
     "it used; the finding gives SM activity, occupancy, tensor-pipe and DRAM activity over those "
     "readings, and advice for memory-bound kernels when DRAM is ≥ {kMemoryBoundDramPercent} "
     "busy",
     "warning"},
    {FindingId::kGpuOutlier, "gpu_outlier", FindingArea::kHealth,
     "with {kOutlierMinPeers} or more GPUs busy (≥ {kOutlierMinBusySamples} busy samples each): "
     "one whose SM clock under load is ≥ {kClockDeficit} below the median of them, or whose "
     "highest temperature is ≥ {kHotterCelsius} above it, or whose throttled share of busy "
     "samples is ≥ {kThrottleExcess} above it (in data-parallel work every step waits for the "
     "slowest GPU)",
     "warning"},
    {FindingId::kPcieLinkDegraded, "pcie_link_degraded", FindingArea::kHealth,
     "the link runs on fewer lanes than both ends support in ≥ {kPcieDegradedShare} of readings "
     "(the width does not drop to save power); or below the highest generation in ≥ "
     "{kPcieDegradedShare} of the readings taken while the GPU was ≥ {kPcieBusyUtilPercent} "
     "busy, at least {kMinBusyLinkSamples} (the generation does drop at idle); or ≥ "
     "{kPcieReplaysDuringRun} PCIe replays during the run",
     "warning"},
    // ---- stack ----
    {FindingId::kDriverTooOldForFramework, "driver_too_old_for_framework", FindingArea::kStack,
     "the framework was built for a newer CUDA major version than the driver supports: CUDA "
     "does not start",
     "critical"},
    {FindingId::kDriverOlderThanFramework, "driver_older_than_framework", FindingArea::kStack,
     "same major version, older minor: it runs under minor-version compatibility, without PTX "
     "JIT",
     "warning"},
    {FindingId::kCuptiNewerThanDriver, "cupti_newer_than_driver", FindingArea::kStack,
     "the CUPTI in use needs a newer driver: no GPU activity can be traced", "critical"},
    {FindingId::kSecondCupti, "second_cupti", FindingArea::kStack,
     "two different libcupti files are mapped in the process", "critical"},
    {FindingId::kCuptiMissingFromWheels, "cupti_missing_from_wheels", FindingArea::kStack,
     "the framework uses pip's CUDA 12/13 wheels but the CUPTI wheel is not installed", "warning"},
};

// ---- compile-time checks ----------------------------------------------------------------------

constexpr bool unique_snake_case_names() {
    for (std::size_t i = 0; i < std::size(kRows); ++i) {
        const std::string_view name = kRows[i].name;
        if (name.empty() || name.front() < 'a' || name.front() > 'z') return false;
        for (char c : name) {
            if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
        }
        for (std::size_t j = i + 1; j < std::size(kRows); ++j) {
            if (name == kRows[j].name) return false;
        }
    }
    return true;
}

constexpr bool is_quoted(std::string_view name) {
    for (const Quoted& q : kQuoted) {
        if (name == q.name) return true;
    }
    return false;
}

// Every "{name}" in `text` names a quoted threshold, and braces pair up (fmt reads them).
constexpr bool placeholders_known(std::string_view text) {
    for (std::size_t at = 0; at < text.size(); ++at) {
        if (text[at] == '}') return false;
        if (text[at] != '{') continue;
        const std::size_t end = text.find('}', at);
        if (end == std::string_view::npos || !is_quoted(text.substr(at + 1, end - at - 1))) {
            return false;
        }
        at = end;
    }
    return true;
}

constexpr bool every_rule_quotes_known_thresholds() {
    for (const Row& r : kRows) {
        if (!placeholders_known(r.raised_when) || !placeholders_known(r.severity)) return false;
    }
    for (const AreaRow& a : kAreas) {
        if (!placeholders_known(a.note)) return false;
    }
    return true;
}

// Marks the thresholds `text` quotes. One pass over every text, rather than one per threshold:
// the compiler's budget for constant evaluation (clang's default step limit) must hold it.
template <std::size_t N>
constexpr void mark_quoted(std::string_view text, bool (&used)[N]) {
    for (std::size_t at = text.find('{'); at != std::string_view::npos;
         at = text.find('{', at + 1)) {
        const std::size_t end = text.find('}', at);
        if (end == std::string_view::npos) return;
        const std::string_view name = text.substr(at + 1, end - at - 1);
        for (std::size_t i = 0; i < N; ++i) used[i] = used[i] || name == kQuoted[i].name;
    }
}

constexpr bool every_threshold_quoted() {
    bool used[std::size(kQuoted)] = {};
    for (const Row& r : kRows) {
        mark_quoted(r.raised_when, used);
        mark_quoted(r.severity, used);
    }
    for (const AreaRow& a : kAreas) mark_quoted(a.note, used);
    for (bool u : used) {
        if (!u) return false;
    }
    return true;
}

static_assert(one_row_per_enumerator<FindingId>(kRows, [](const Row& r) { return r.id; }),
              "kRows: one row per FindingId, in value order (add its row)");
static_assert(one_row_per_enumerator<FindingArea>(kAreas, [](const AreaRow& a) { return a.area; }),
              "kAreas: one row per FindingArea, in value order");
static_assert(unique_snake_case_names(), "kRows: names must be unique and snake_case");
static_assert(every_rule_quotes_known_thresholds(),
              "a rule quotes a threshold missing from kQuoted (or an unpaired brace)");
static_assert(every_threshold_quoted(), "kQuoted lists a threshold no rule quotes");

// ---- formatting ---------------------------------------------------------------------------------

std::string print(const Quoted& q) {
    const double v = q.value;
    switch (q.print) {
        case Print::kShare: return quote_share(v);
        case Print::kPoints: return fmt::format("{:g} points", v * 100);
        case Print::kPercent: return fmt::format("{:g} %", v);
        case Print::kBytes: return quote_bytes(v);
        case Print::kNs:
            if (v >= 60e9 && std::fmod(v, 60e9) == 0) return fmt::format("{:g} min", v / 60e9);
            if (v >= 1e9) return fmt::format("{:g} s", v / 1e9);
            if (v >= 1e6) return fmt::format("{:g} ms", v / 1e6);
            if (v >= 1e3) return fmt::format("{:g} µs", v / 1e3);
            return fmt::format("{:g} ns", v);
        case Print::kNumber: return fmt::format("{:g}", v);
        case Print::kCelsius: return fmt::format("{:g} °C", v);
        case Print::kList: return fmt::format("{}", fmt::join(q.list, ", "));
    }
    return "?";
}

// The rule with its thresholds' values. The compile-time checks above make a format error
// impossible; should one happen anyway the text says so rather than throw.
std::string with_thresholds(std::string_view text) {
    try {
        fmt::dynamic_format_arg_store<fmt::format_context> args;
        for (const Quoted& q : kQuoted) args.push_back(fmt::arg(q.name, print(q)));
        return fmt::vformat(text, args);
    } catch (const std::exception& e) {
        return fmt::format("(cannot format \"{}\": {})", text, e.what());
    }
}

const Row* row_of(FindingId id) noexcept {
    for (const Row& r : kRows) {
        if (r.id == id) return &r;
    }
    return nullptr;
}

}  // namespace

std::string_view finding_name(FindingId id) noexcept {
    const Row* r = row_of(id);
    return r != nullptr ? r->name : std::string_view("unknown");
}

std::optional<FindingId> finding_id(std::string_view name) noexcept {
    for (const Row& r : kRows) {
        if (r.name == name) return r.id;
    }
    return std::nullopt;
}

FindingArea finding_area(FindingId id) noexcept {
    const Row* r = row_of(id);
    return r != nullptr ? r->area : FindingArea::kTimeline;
}

std::string_view finding_area_name(FindingArea area) noexcept {
    for (const AreaRow& a : kAreas) {
        if (a.area == area) return a.name;
    }
    return "unknown";
}

std::optional<FindingArea> finding_area_from_name(std::string_view name) noexcept {
    for (const AreaRow& a : kAreas) {
        if (a.name == name) return a.area;
    }
    return std::nullopt;
}

std::vector<FindingDoc> finding_docs() {
    std::vector<FindingDoc> out;
    out.reserve(std::size(kRows));
    for (const Row& r : kRows) {
        out.push_back(FindingDoc{r.id, r.name, r.area, with_thresholds(r.raised_when),
                                 with_thresholds(r.severity)});
    }
    return out;
}

std::string quote_share(double fraction) {
    return fmt::format("{:g} %", fraction * 100);
}

std::string quote_bytes(double bytes) {
    constexpr double kMiB = 1024.0 * 1024;
    constexpr double kGiB = 1024 * kMiB;
    if (bytes >= kGiB) return fmt::format("{:g} GiB", bytes / kGiB);
    if (bytes >= kMiB) return fmt::format("{:g} MiB", bytes / kMiB);
    return fmt::format("{:g} bytes", bytes);
}

std::string finding_area_note(FindingArea area) {
    for (const AreaRow& a : kAreas) {
        if (a.area == area) return a.note.empty() ? std::string() : with_thresholds(a.note);
    }
    return {};
}

}  // namespace gpudiag::detail
