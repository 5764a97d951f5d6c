// SPDX-License-Identifier: Apache-2.0
// The findings catalog: every finding id the library raises, and the thresholds its rules use.
//
// Each finding has one FindingId; its stable name (what reports write), its area, and its
// "raised when" and severity rules as docs/findings.md states them live in one table
// (finding_catalog.cpp), which tools/gen_findings_doc writes into the docs and a test keeps them
// equal. The thresholds below are defined here once, each with why: the analyses compare against
// them and the catalog's rule text quotes them, so changing one changes the docs. None was
// fitted to a particular trace.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpudiag::detail {

// ---- timeline (analysis/timeline/timeline_findings.cpp) ---------------------------------------

// TensorFlow's input-pipeline analyzer: "moderately" input-bound from 5 % of step time spent
// waiting for input, "highly" from 20 % (openxla/xprof op_stats_to_input_pipeline_analysis.cc).
inline constexpr double kInputModerate = 0.05;
inline constexpr double kInputHigh = 0.20;
// Without steps, one fetch in the whole host time (a program that stopped before its loop began)
// is no loop waiting for its input.
inline constexpr std::uint64_t kMinFetchesWithoutSteps = 2;
// Idle time worth explaining: below a tenth of the window a GPU is, for practical purposes, fed.
inline constexpr double kIdleWorthExplaining = 0.10;
inline constexpr double kIdleSevere = 0.25;
// "Mostly": the idle time is the host's when host wait is at least half of it, and launching is
// what the host waited in when it is at least half of that wait.
inline constexpr double kHostWaitMostly = 0.5;
inline constexpr double kLaunchingMostly = 0.5;
// A cause costing 5 % of the window is worth a change to the loop; 20 % dominates it.
inline constexpr double kCauseNotable = 0.05;
inline constexpr double kCauseSevere = 0.20;
// Communication not hidden behind compute: TensorBoard's PyTorch plugin flagged 10 %.
inline constexpr double kCommNotable = 0.10;
inline constexpr double kCommSevere = 0.30;
// Pageable copies of less than a MiB in total are not worth a finding.
inline constexpr double kPageableMinBytes = 1 << 20;
// A fix that saves under 1 % of the step is lost in the step time's run-to-run noise: the cause
// is off the critical path, and other findings are worth fixing first.
inline constexpr double kWorthFixing = 0.01;
// This many host syncs per step is what users notice (set_sync_debug_mode warns on each); say
// what they cost even when it is nothing.
inline constexpr double kManySyncsPerStep = 10;
// A predicted saving alone raises a finding only from 100 µs (per step, or over a window without
// steps): below that it is within a launch's latency, and in a trace of a few events a share of
// a tiny replay says nothing.
inline constexpr double kMinSavingToRaiseNs = 100e3;

// one_off_stall: one stretch of host time (the time before the first GPU work, or one idle gap)
// holding at least half of all the time the GPU waited cannot be per-step overhead, which recurs
// every step and so spreads over many gaps. It must also be a quarter of the window (less is a
// detail of the window, not a distortion of it) and 20 ms (a few kernel launches' worth of
// first-call work is not worth a finding of its own).
inline constexpr double kOneOffShareOfIdle = 0.5;
inline constexpr double kOneOffShareOfWindow = 0.25;
inline constexpr double kOneOffMinNs = 20e6;
// One idle gap is one-off only against others it stands out from: with fewer than 4 other gaps in
// the window there is no repetition to tell it from per-step work. (The time before the first
// GPU work needs none: it is before the loop by construction.)
inline constexpr std::uint64_t kOneOffMinOtherGaps = 4;
// A kernel launch costs the host 2-20 µs; the first launch of a kernel that keeps the idle GPU
// waiting 1 ms (50x that) is the driver loading the kernel's module (CUDA lazy loading), which
// happens once per kernel: a one-off cost, left out of the window with the stall.
inline constexpr double kColdLaunchNs = 1e6;
// A warmed-up PyTorch caching allocator calls cudaMalloc rarely (a few segments); 32 calls in one
// capture are an allocator still growing, worth naming as warm-up.
inline constexpr std::uint64_t kColdAllocatorCalls = 32;
// A stall after this many completed steps happened in a warmed-up loop (a checkpoint, an
// evaluation); before them, or without steps, the profile has no warm-up.
inline constexpr std::uint64_t kWarmSteps = 2;
// Compilation names a host wait's CPU work when at least half of it is inside compiler ranges.
inline constexpr double kCompileMostly = 0.5;

// ---- job (analysis/job/job_analysis.cpp) ------------------------------------------------------

// Other ranks waiting 10 % of a step for one rank is worth naming; at 25 % that rank dominates
// the job's speed.
inline constexpr double kStragglerNotable = 0.10;
inline constexpr double kStragglerSevere = 0.25;
// Collective time differing by half of its mean across ranks means ranks arrive at collectives
// at very different times (or carry different loads).
inline constexpr double kCommImbalanceNotable = 0.5;

// ---- collectives (analysis/collectives/: Flight Recorder dumps) --------------------------------

// A finding names at most 8 ranks of a kind (the rest are counted): more is a list, not a name.
inline constexpr std::size_t kCollectiveRanksNamed = 8;
// Per rank and process group, the latest 256 collectives go into the report for the job view to
// align: a hang or desync is near the end of the ring, and 256 reach well past any step's worth
// of collectives while keeping a report of many ranks small. At most 64 process groups per rank
// (a job of 3-D parallelism has a handful).
inline constexpr std::size_t kCollectiveRecordsKept = 256;
inline constexpr std::size_t kCollectiveGroupsKept = 64;
// A call site is named by its first 3 frames outside torch and Python's own library: the
// program's caller, and its two callers.
inline constexpr std::size_t kCallSiteFrames = 3;

// ---- memory (analysis/memory/) ----------------------------------------------------------------

// reserved_unused: cached-but-unused memory matters when it is both large in absolute terms
// (under 1 GiB is not worth acting on for any current training GPU) and the majority of what
// the framework holds ("reserved >> allocated": at least as much cached as in use).
inline constexpr double kUnusedMinBytes = 1024.0 * 1024 * 1024;
inline constexpr double kUnusedMinShare = 0.5;
// A smaller cache is still worth naming when a quarter of what the framework holds sits in
// wholly free segments beyond what the program needs (as much again as a third of its use):
// empty_cache() hands it back in one call, which matters to whatever shares the device (an RL
// worker's rollout engine, another model, NCCL). Below that it is the allocator's usual slack.
// Without a near-full device it is information, not a problem of this program.
inline constexpr double kReleasableMinShare = 0.25;
// fragmentation: free space stranded in partly used segments (which empty_cache cannot return)
// is a problem when it is a fifth of what the framework holds, at least 256 MiB (a typical
// large activation), and broken up (1 - largest hole / stranded space: the largest hole is at
// most half of it).
inline constexpr double kSplitMinBytes = 256.0 * 1024 * 1024;
inline constexpr double kSplitMinShare = 0.2;
inline constexpr double kSplitMinFragmentation = 0.5;
// near_oom: within 10 % of capacity a single large activation or a library workspace fails;
// with 3 % left, almost any growth does (critical). A cache that reserves 90 % makes
// reserved_unused critical too: the cache itself is what crowds the device.
inline constexpr double kNearOomShare = 0.9;
inline constexpr double kNearOomCriticalShare = 0.97;
// memory_outside_framework: the CUDA context plus library workspaces are usually a few hundred
// MiB; beyond 512 MiB and a tenth of the memory held, the outside share deserves a look, and a
// quarter of the device is memory the framework's own planning cannot see (a warning).
inline constexpr double kOutsideMinBytes = 512.0 * 1024 * 1024;
inline constexpr double kOutsideMinShare = 0.1;
inline constexpr double kOutsideWarningShare = 0.25;
// Callers such as cuDNN's algorithm search catch an OOM and retry, so one real failure can be
// reported many times within moments: a failure of the same size on the same device within a
// second of the previous one is that retry.
inline constexpr std::uint64_t kOomRetryWindowNs = 1'000'000'000ull;

// memory_leak (analysis/memory/memory_trend.hpp has the rules): a trend needs this many
// repetitions (steps, periods of the allocation pattern, or service windows); with fewer, growth
// may be memory held until later in one iteration.
inline constexpr std::uint64_t kMinRepetitions = 8;
// A step-less recording is trended on its allocation pattern's period only over at least a
// minute: one forward or backward pass lasts well under that, so a shorter recording may hold
// less than one iteration, and its layers' regular allocations would look like a leak.
inline constexpr std::uint64_t kMinPatternSpanNs = 60'000'000'000ull;
// A service sampled on a timer (NVML, polled allocator totals) is trended in windows of 30 s,
// at least 16 of them (8 minutes): its own iterations are far shorter than a window.
inline constexpr std::uint64_t kServiceWindowNs = 30'000'000'000ull;
inline constexpr std::size_t kMinServiceWindows = 16;
// The trend test's own minimum (analysis/memory/leak_detector.hpp): fewer points cannot show a
// significant monotone trend, nor be split in thirds.
inline constexpr std::size_t kLeakMinPoints = 8;
// One-sided Mann-Kendall: a 1 % chance that a flat level reads as rising.
inline constexpr double kLeakSignificance = 0.01;
// Material growth: it must reach 16 MiB, 2 % of the working level and 0.1 % of capacity over the
// analysed range: below that, steady-state noise and small caches dominate. The capacity share
// stays small because profiling windows are short (tens of steps): on a 141 GiB device a larger
// share would hide a leak of several MiB per step that fills the GPU within a day.
inline constexpr double kLeakMinBytes = 16.0 * 1024 * 1024;
inline constexpr double kLeakMinLevelShare = 0.02;
inline constexpr double kLeakMinCapacityShare = 0.001;
// A leak's rate from a capture that dropped a tenth of its events or more is a lower bound: the
// frees and allocations lost are as likely to be the leak's as anyone's, so the slope reads low.
inline constexpr double kLeakLowerBoundDropShare = 0.1;

// ---- health (analysis/health/) ----------------------------------------------------------------

// Throttling counts only busy samples (an idle GPU drops its clocks on purpose): a cause active
// in 5 % of them is reported; below that it is the odd boost transition, above it the run
// measurably ran slower. Judged from 3 busy samples on.
inline constexpr double kThrottleShare = 0.05;
inline constexpr std::uint64_t kThrottleMinBusySamples = 3;
// NVML's plain "HW slowdown" bit means temperature, power brake or power draw: it counts as
// thermal at 85 C or more (the slowdown region of datacenter parts), else as power.
inline constexpr double kHotCelsius = 85.0;
// Throttled steps against unthrottled ones: at least 3 steps in each group, else nothing is said;
// a throttled group slower by 2 % or less is "no slower" (step-to-step noise decides).
inline constexpr std::size_t kThrottleMinStepsEach = 3;
inline constexpr double kThrottleNoiseShare = 0.02;
// Other processes holding 1 GiB or 5 % of the GPU's memory take that much from this program's
// headroom and usually its compute time too; half of it leaves the program the lesser part.
inline constexpr double kForeignBytes = 1024.0 * 1024 * 1024;
inline constexpr double kForeignShare = 0.05;
inline constexpr double kForeignCriticalShare = 0.5;
// The other processes a finding names, largest first (the rest are counted).
inline constexpr std::size_t kOtherProcessesNamed = 3;
// Xids most often caused by the program itself (an illegal address, a killed kernel), not by the
// GPU, its memory or its link (NVIDIA's Xid catalog).
inline constexpr std::uint32_t kProgramFaultXids[] = {13, 31, 43, 45};
// PCIe: a link narrower than both ends support in half the readings or more is degraded (the
// width does not change to save power). The generation drops when the GPU idles, so a lower one
// counts only in readings taken at 30 % utilization or more, at least two of them. 100 replays
// (retransmitted packets) during the run mean link errors, whatever its speed.
inline constexpr double kPcieDegradedShare = 0.5;
inline constexpr double kPcieBusyUtilPercent = 30.0;
inline constexpr std::uint64_t kMinBusyLinkSamples = 2;
inline constexpr double kPcieReplaysDuringRun = 100;
// NVLink: 100 replay and CRC errors during the run are a link going bad (any recovery is too).
inline constexpr double kNvlinkErrorsDuringRun = 100;
// NVML GPM: in readings where utilization was 80 % or more (the GPU looked busy to anyone
// watching nvidia-smi), a mean SM activity under 30 % means most of the GPU sat unused while it
// looked busy; 5 such readings, so that one odd window decides nothing. DRAM 50 % busy or more
// makes the kernels memory-bound (the advice says so).
inline constexpr double kLooksBusyPercent = 80.0;
inline constexpr double kFewSmsActivePercent = 30.0;
inline constexpr std::uint64_t kMinBusyReadings = 5;
inline constexpr double kMemoryBoundDramPercent = 50.0;
// gpu_outlier: compared only among GPUs with 3 busy samples each, and only with 3 or more of
// them, so that "the others" is a majority. Against their median: an SM clock 10 % lower under
// load (a tenth of every step, for the whole job), a highest temperature 10 C higher (cooling),
// or a throttled share of busy samples 20 points higher.
inline constexpr std::uint64_t kOutlierMinBusySamples = 3;
inline constexpr std::size_t kOutlierMinPeers = 3;
inline constexpr double kClockDeficit = 0.10;
inline constexpr double kHotterCelsius = 10.0;
inline constexpr double kThrottleExcess = 0.20;

// ---- the catalog --------------------------------------------------------------------------------

/// Where a finding comes from: the section of docs/findings.md that lists it.
enum class FindingArea : std::uint8_t { kTimeline, kJob, kMemory, kHealth, kStack };

/// Every finding the library raises, in the catalog's order. Adding one here without its row in
/// finding_catalog.cpp fails the build.
enum class FindingId : std::uint8_t {
    // timeline
    kInputBound,
    kHostSyncStall,
    kPageableMemcpy,
    kLaunchBound,
    kCommBound,
    kGpuIdle,
    kOneOffStall,
    // job
    kRankStraggler,
    kCommImbalance,
    kCollectiveHang,
    kCollectiveDesync,
    // memory
    kMemoryLeak,
    kMemoryGrowthInIteration,
    kReservedUnused,
    kFragmentation,
    kNearOom,
    kMemoryOutsideFramework,
    kOutOfMemory,
    // health
    kThermalThrottle,
    kPowerThrottle,
    kEccErrors,
    kForeignProcessMemory,
    kXidError,
    kEccPagesRetired,
    kNvlinkErrors,
    kGpuBusyNotComputing,
    kGpuOutlier,
    kPcieLinkDegraded,
    // stack (analysis/health/stack_rules.cpp, raised by StackAnalyzer in live reports)
    kDriverTooOldForFramework,
    kDriverOlderThanFramework,
    kCuptiNewerThanDriver,
    kSecondCupti,
    kCuptiMissingFromWheels,
};

/// The id reports write for `id` ("input_bound"): stable, never reused for another meaning.
std::string_view finding_name(FindingId id) noexcept;
/// The finding a report's id names; nullopt for an id the catalog does not hold.
std::optional<FindingId> finding_id(std::string_view name) noexcept;
FindingArea finding_area(FindingId id) noexcept;
/// "timeline", "job", "memory", "health", "stack".
std::string_view finding_area_name(FindingArea area) noexcept;
/// The area `name` names; nullopt for none.
std::optional<FindingArea> finding_area_from_name(std::string_view name) noexcept;

/// One finding as docs/findings.md lists it, its rules written with the thresholds above.
struct FindingDoc {
    FindingId id{};
    std::string_view name;
    FindingArea area{};
    std::string raised_when;
    std::string severity;
};

/// Every finding, in catalog order.
std::vector<FindingDoc> finding_docs();
/// What the docs say under an area's table, with the thresholds above ("" for none).
std::string finding_area_note(FindingArea area);

/// A threshold as the docs print it, for findings that quote one: a share as "5 %", "0.1 %";
/// bytes as "512 MiB", "1 GiB".
std::string quote_share(double fraction);
std::string quote_bytes(double bytes);

}  // namespace gpudiag::detail
