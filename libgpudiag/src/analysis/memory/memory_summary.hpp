// SPDX-License-Identifier: Apache-2.0
// MemorySummary: what the memory analysis measured, per device, from which the "memory" section
// and the memory findings are built (and which tests can check directly). Site names are
// resolved, so nothing here refers to the string table or the ledger.
#pragma once

#include <gpudiag/memory.hpp>
#include <gpudiag/report.hpp>

#include "analysis/memory/leak_detector.hpp"
#include "analysis/memory/memory_ledger.hpp"

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace gpudiag::detail {

/// Bytes of one site (framework blocks of a category, or driver allocations of an owner).
struct SiteLine {
    std::string site;
    bool driver = false;
    MemoryCategory category = MemoryCategory::kOther;
    MemoryOwner owner = MemoryOwner::kNoSite;
    double bytes = 0;
    std::uint64_t blocks = 0;
};

/// Which level a trend follows.
enum class TrendMetric : std::uint8_t {
    kAllocated = 0,  ///< the framework's live blocks
    kOutside = 1,    ///< driver-level memory outside the framework (cudaMalloc with no segment)
    kReserved = 2,   ///< the framework's segments (its cache included)
    kProcess = 3,    ///< NVML's figure for the process
};
const char* trend_metric_name(TrendMetric m) noexcept;  ///< "allocated", "outside", ...

/// What repeated iterations the trend rests on.
enum class Repetition : std::uint8_t {
    kNone = 0,     ///< too few: growth can be within one iteration
    kSteps = 1,    ///< step marks
    kPeriod = 2,   ///< a period found in the allocation pattern
    kWindows = 3,  ///< long time windows (services sampled on a timer)
};

/// One metric's trend over repeated iterations.
struct MemoryTrend {
    TrendMetric metric = TrendMetric::kAllocated;
    Repetition basis = Repetition::kNone;
    bool per_step = false;          ///< x is steps (else seconds)
    std::uint64_t repetitions = 0;  ///< steps, periods or windows the trend covers
    double period_ns = 0;           ///< kPeriod: the period found in the allocation pattern
    double window_ns = 0;           ///< time-based points: the window each one covers
    TrendResult result;             ///< on the analysed suffix (from the onset)
    bool leak = false;              ///< a leak verdict
    bool growth_only = false;       ///< material rising growth, but too few repetitions
    double rate = 0;                ///< bytes per step or per second
    double floor_bytes = 0;         ///< growth needed for a verdict
    std::uint64_t since_ns = 0;     ///< onset of the growth, on the source's clock
    double since_s = 0;             ///< onset, seconds after the device's first event
    double span_s = 0;              ///< seconds the analysed points cover
    double span_steps = 0;          ///< per-step trends: steps from the onset to the last
    double first_level = 0;         ///< level at the onset
    double last_level = 0;
    bool full_known = false;      ///< capacity known and rising
    double until_full = 0;        ///< steps (per_step) or seconds until the device is full
    double step_ns = 0;           ///< mean step duration (per_step), 0 when unknown
    std::vector<SiteLine> sites;  ///< live bytes gained since the onset, most first
    double sites_total = 0;
};

/// Out-of-memory events of one device, as one group.
struct OomGroup {
    std::uint16_t device = 0;
    bool device_inferred = false;  ///< the event carried no device (CUPTI): the only one used
    std::uint64_t count = 0;
    std::vector<std::uint64_t> moments;  ///< first ones, on the source's clock
    std::uint64_t first_ns = 0;
    std::uint64_t last_ns = 0;
    std::uint64_t smallest_request = 0;
    std::uint64_t largest_request = 0;
    std::uint64_t last_request = 0;  ///< for telling a retry from a new failure
    OomExplanation explanation;      ///< of the first failure, at its moment
};

/// One pool of the framework's allocator on a device: the default pool, or a private one (a CUDA
/// graph's, a torch.cuda.MemPool, a serving engine's KV cache). Its bytes are part of the
/// device's reserved and allocated figures, never counted again.
struct PoolLine {
    std::uint32_t pool = 0;  ///< 0 = the default pool; private pools from 1
    std::uint64_t segments = 0;
    std::uint64_t reserved = 0;
    std::uint64_t allocated = 0;  ///< live blocks, rounded, pending frees excluded
    std::uint64_t pending = 0;    ///< freed blocks awaiting their streams
    std::uint64_t pending_blocks = 0;
    std::uint64_t free = 0;          ///< free blocks inside its segments
    std::string owner;               ///< the code that allocated into it ("" for the default pool)
    bool owner_from_frames = false;  ///< the source named it from the call stacks' libraries
    /// The framework's own name for the pool (torch: segment_pool_id, "(0, 0)" for the default
    /// pool); empty when the source does not give it.
    std::string torch_id;

    /// A private pool holding segments but no live block: memory only the pool keeps (a CUDA
    /// graph's pool whose graph may be gone, or a MemPool not released).
    [[nodiscard]] bool idle() const { return pool != 0 && allocated == 0 && pending == 0; }
};

struct DeviceMemorySummary {
    std::uint16_t device = 0;
    LedgerTotals totals;
    LedgerPeaks peaks;
    DeviceLayout layout;                     ///< measured when totals.segments_seen
    std::vector<std::string> segment_sites;  ///< where each layout segment was created
    std::vector<StepMark> steps;
    std::vector<PhaseMark> phases;
    std::vector<std::string> phase_names;  ///< aligned with phases
    std::vector<MemorySeriesPoint> series;
    std::vector<SiteLine> live_sites;    ///< now, most first
    std::vector<SiteLine> growth_sites;  ///< over the recorded history, most first
    std::vector<SiteLine> peak_sites;    ///< live at the peak of live(), most first
    std::array<double, kMemoryCategoryCount> peak_by_category{};
    bool categories_known = false;  ///< some live block at the peak had a category
    std::uint64_t first_ns = 0;     ///< first point of the series
    std::uint64_t total_steps = 0;
    double step_ns = 0;  ///< mean step duration, 0 without steps
    DetectedPeriod period;
    std::vector<MemoryTrend> trends;  ///< metrics with a leak or growth-only verdict
    std::uint64_t needed = 0;         ///< allocated now, or the recent per-step peak
    bool fragmentation_oom = false;
    /// The framework's allocation history was cut (a full trace ring, trace_alloc_overflowed):
    /// verdicts that need the whole history cannot be exact.
    bool history_cut = false;
    /// The allocator's pools, the default first, when the input shows a private pool (empty
    /// otherwise: one pool says nothing the device's figures do not).
    std::vector<PoolLine> pools;
    /// Sites of live blocks in partly used segments, with the free bytes of those segments.
    std::vector<std::pair<std::string, std::uint64_t>> pinning_sites;

    [[nodiscard]] bool reserved_known() const {
        return totals.segments_seen || totals.reserved_reported || peaks.reserved > 0;
    }
    [[nodiscard]] bool allocated_known() const {
        return totals.blocks_seen || totals.allocated_reported || totals.allocated_from_sizes;
    }
    [[nodiscard]] const MemoryTrend* leak(TrendMetric m) const {
        for (const auto& t : trends) {
            if (t.metric == m && t.leak) return &t;
        }
        return nullptr;
    }
};

struct MemorySummary {
    bool observed = false;  ///< any memory event or counter
    std::vector<DeviceMemorySummary> devices;
    std::vector<OomGroup> ooms;
    std::uint64_t oom_events = 0;  ///< out-of-memory markers, withdrawn ones excluded
    std::vector<WatchCrossingRecord> crossings;
    std::uint64_t crossings_total = 0;
    bool expandable = false;
    HostMemoryTotals host;            ///< pinned, pageable and managed memory, process-wide
    std::uint64_t host_ooms = 0;      ///< failed host allocations (not in any group)
    std::uint64_t unplaced_ooms = 0;  ///< failures on a device the input does not name
    std::uint64_t retried_ooms = 0;   ///< withdrawn: the caller's retry succeeded
    std::uint64_t unmatched_frees = 0;
    UntrackedAllocations untracked;  ///< allocations past the tracking cap, booked by size
    double dropped_share = 0;        ///< of the capture's events, those it dropped (rates read low)

    [[nodiscard]] const DeviceMemorySummary* device(std::uint16_t ordinal) const {
        for (const auto& d : devices) {
            if (d.device == ordinal) return &d;
        }
        return nullptr;
    }
};

/// The "memory" section: figures (only those the input measured), tables, series.
void add_memory_section(const MemorySummary& s, Report& report);
/// The allocator what-if's advice for a device: its sentence ("" when the input has no allocation
/// history to replay), and whether the replay under the recorded settings reproduced what the
/// allocator did (when not, the prediction is less sure than the general advice).
struct MeasuredAdvice {
    std::string sentence;
    bool reproduced = false;
    bool about_oom = false;  ///< it says whether a setting avoids an out-of-memory failure
};
/// Asked only for devices with a fragmentation, reserved_unused or out_of_memory finding.
using AllocatorAdviceFn = std::function<MeasuredAdvice(std::uint16_t device)>;

/// The memory findings, causes before their symptoms (memory_leak, fragmentation, ... then
/// out_of_memory). Thresholds and their reasons are in memory_findings.cpp. The allocator
/// what-if's sentence, when `allocator_advice` has one, leads the advice of fragmentation,
/// reserved_unused and out_of_memory (it closes it when the replay did not reproduce the run).
void add_memory_findings(const MemorySummary& s, Report& report,
                         const AllocatorAdviceFn& allocator_advice = {});
/// Notes for what the input could not measure (never an all-clear about memory not seen).
void add_memory_notes(const MemorySummary& s, Report& report);

}  // namespace gpudiag::detail
