// SPDX-License-Identifier: Apache-2.0
// MemoryLedger: per device, the framework's view (segments, live blocks, cached free space)
// reconciled with the driver's view (plain cudaMalloc, stream-ordered pools, virtual-memory
// mappings), with owners, watermarks per step and phase, a bounded time series and threshold
// watches. Fed one Event at a time; usable on its own (offline analysis, the live session).
//
// Thread-safety: none; one thread feeds and queries a ledger (the session serialises).
#pragma once

#include <gpudiag/event.hpp>
#include <gpudiag/memory.hpp>
#include <gpudiag/string_table.hpp>

#include "analysis/memory/address_table.hpp"
#include "analysis/memory/allocation_pattern.hpp"
#include "analysis/memory/memory_owner.hpp"
#include "analysis/memory/memory_series.hpp"

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace gpudiag::detail {

/// A framework segment (torch cudaMalloc'd or expandable range) and what lives in it.
struct LedgerSegment {
    std::uint64_t address = 0;
    std::uint64_t size = 0;
    std::uint32_t stream = 0;
    StringId site = kNoString;
    bool expandable = false;
    std::uint32_t pool = 0;  ///< private pool (CUDA graph, MemPool) from 1; 0 = the default pool
    // Occupancy, filled in by layout() from the live blocks (0 in the ledger's own list).
    std::uint64_t allocated = 0;       ///< live blocks inside, rounded (pending frees included)
    std::uint64_t pending = 0;         ///< of which freed but awaiting stream completion
    std::uint32_t blocks = 0;          ///< live blocks inside
    std::uint32_t pending_blocks = 0;  ///< of which freed but awaiting stream completion
};

/// One live framework block.
struct LedgerBlock {
    std::uint64_t address = 0;
    std::uint64_t size = 0;
    std::uint64_t requested = 0;
    bool pending = false;
    StringId site = kNoString;
};

/// Instantaneous totals of one device.
///
/// Reconciliation. Framework memory comes from whichever source is best: the allocator's segments
/// and blocks (snapshots, replayed allocator events), else its own totals (torch memory_stats,
/// Kineto "Total Allocated/Reserved"), else a running sum of allocation sizes. Driver-level
/// allocations (cudaMalloc, cuMemMap, pools) are the framework's when a segment starts there, or
/// when their call site names the framework's allocator; without segment events the framework's
/// reserved bytes are matched against driver allocations with no call site (torch's cudaMalloc
/// calls are among them), so the same bytes never count as both reserved and outside. What stays
/// is outside the framework, by owner.
struct LedgerTotals {
    std::uint64_t reserved = 0;  ///< framework segments (or its reported total)
    /// Of `reserved`, the segments of private pools (CUDA graphs, MemPool): none of it is what
    /// empty_cache can return while the pool lives.
    std::uint64_t private_pool_reserved = 0;
    std::uint64_t allocated_rounded = 0;  ///< live blocks, rounded sizes (torch allocated_bytes)
    std::uint64_t allocated_requested =
        0;                           ///< live blocks, requested sizes (_memory_viz "allocated")
    std::uint64_t pending_free = 0;  ///< freed blocks awaiting their streams
    std::uint64_t live_blocks = 0;
    std::uint64_t segments = 0;
    std::uint64_t outside_device = 0;  ///< plain device allocations not backing a segment (raw)
    std::uint64_t outside_pool = 0;    ///< stream-ordered pools (reserved, or live when unknown)
    std::uint64_t outside_vm = 0;      ///< physical bytes of VM mappings outside segments (raw)
    /// Driver-level bytes with no segment event that are the framework's (its reserved bytes
    /// matched against allocations with no call site, or sites in its allocator).
    std::uint64_t framework_attributed = 0;
    /// outside(), split by owner (sums to it).
    std::array<std::uint64_t, kMemoryOwnerCount> outside_by_owner{};
    std::uint64_t capacity = 0;      ///< 0 when unknown
    std::uint64_t process_used = 0;  ///< NVML's figure for this process, 0 when not sampled
    std::uint64_t foreign_used = 0;  ///< other processes on the device, per NVML
    std::uint64_t inactive_split_reported = 0;  ///< the framework's own figure (torch stats)

    // Where the figures come from (a figure the input cannot give is absent, never 0).
    bool segments_seen = false;         ///< the allocator's segments: layout figures are measured
    bool blocks_seen = false;           ///< framework blocks with addresses
    bool allocated_reported = false;    ///< allocated from the framework's own totals
    bool reserved_reported = false;     ///< reserved from the framework's own totals
    bool allocated_from_sizes = false;  ///< a running sum of sizes (events without addresses)
    bool driver_seen = false;           ///< driver-level allocations (CUPTI, or a caller)
    bool process_sampled = false;       ///< NVML's per-process figure
    bool split_reported = false;        ///< inactive_split_reported is measured

    [[nodiscard]] std::uint64_t outside() const noexcept {
        std::uint64_t raw = outside_device + outside_pool + outside_vm;
        return raw > framework_attributed ? raw - framework_attributed : 0;
    }
    [[nodiscard]] std::uint64_t used() const noexcept { return reserved + outside(); }
    /// Live allocations: framework blocks plus what is held outside the framework.
    [[nodiscard]] std::uint64_t live() const noexcept { return allocated_rounded + outside(); }
    /// Reserved but not handed out: torch's "reserved by PyTorch but unallocated".
    [[nodiscard]] std::uint64_t unallocated() const noexcept {
        return reserved > allocated_rounded ? reserved - allocated_rounded : 0;
    }
    /// NVML's per-process figure minus what the ledger attributes (the CUDA context, and what
    /// no event showed); 0 when NVML was not sampled.
    [[nodiscard]] std::uint64_t unattributed() const noexcept {
        return process_used > used() ? process_used - used() : 0;
    }
};

/// Memory CUDA allocated that is not device memory, for the whole process: page-locked host
/// memory is host RAM, and unified memory lives wherever it was last touched. Neither is
/// counted in any device's totals.
struct HostMemoryTotals {
    std::uint64_t pinned =
        0;  ///< page-locked host memory (cudaMallocHost, cudaHostAlloc, registered)
    std::uint64_t pageable = 0;  ///< pageable host memory CUPTI reported an allocation of
    std::uint64_t managed = 0;   ///< unified memory (cudaMallocManaged, __managed__)
    std::uint64_t peak_pinned = 0;
    std::uint64_t peak_pageable = 0;
    std::uint64_t peak_managed = 0;
    std::uint64_t live = 0;  ///< live allocations in these books
    bool seen = false;       ///< any host or managed allocation event arrived
};

/// Highest levels seen on one device.
struct LedgerPeaks {
    std::uint64_t allocated_rounded = 0;
    std::uint64_t allocated_requested = 0;  ///< at the time of the rounded peak
    std::uint64_t allocated_ns = 0;
    std::uint64_t reserved = 0;
    std::uint64_t private_pool_reserved = 0;  ///< of `reserved`, in private pools, at its peak
    std::uint64_t outside = 0;
    std::uint64_t used = 0;     ///< reserved + outside
    std::uint64_t used_ns = 0;  ///< when `used` peaked
    std::uint64_t process_used = 0;
    std::uint64_t live = 0;     ///< allocated + outside: what live allocations held
    std::uint64_t live_ns = 0;  ///< when `live` first reached its peak
    LedgerTotals at_live_peak;  ///< the totals at that moment
};

/// Layout of a device's segments, computed on demand from the live blocks.
struct SegmentLayout {
    LedgerSegment segment;
    std::uint64_t requested = 0;   ///< requested bytes of the live blocks
    std::uint64_t free_bytes = 0;  ///< gaps not covered by live or pending blocks
    std::uint64_t largest_free = 0;
    std::uint32_t free_blocks = 0;
};

struct DeviceLayout {
    std::vector<SegmentLayout> segments;  ///< by address
    std::uint64_t free_in_segments = 0;   ///< inactive blocks (gaps) in all segments
    std::uint64_t largest_free = 0;
    /// Gaps that are whole segments of the default pool (empty_cache returns them).
    std::uint64_t releasable = 0;
    /// Wholly free segments of private pools: empty_cache returns them only once their pool is
    /// released (a CUDA graph destroyed, a MemPool deleted), so they are not in `releasable`.
    std::uint64_t private_pool_free = 0;
    std::uint32_t pending_blocks = 0;  ///< freed blocks awaiting their streams
    std::uint64_t inactive_split = 0;  ///< gaps in segments that also hold live blocks
    std::uint64_t largest_split_free = 0;
    std::uint32_t free_blocks = 0;
    /// 1 − largest free / total free (0 when nothing is free): 0 = one hole, → 1 = many crumbs.
    [[nodiscard]] double external_fragmentation() const noexcept {
        return free_in_segments == 0 ? 0.0
                                     : 1.0 - static_cast<double>(largest_free) /
                                                 static_cast<double>(free_in_segments);
    }
};

/// Watermarks of one step (or, after merging, a run of consecutive steps).
struct StepMark {
    std::uint64_t first_step = 0;  ///< step number (RangePayload.id) of the first step covered
    std::uint32_t steps = 1;       ///< steps merged into this point
    std::uint64_t start_ns = 0;
    std::uint64_t end_ns = 0;
    std::uint64_t allocated_min = 0;
    std::uint64_t allocated_peak = 0;
    std::uint64_t allocated_end = 0;
    std::uint64_t reserved_peak = 0;
    // Lowest levels within the step, for trends of what persists across steps.
    std::uint64_t reserved_min = 0;
    std::uint64_t outside_min = 0;
    std::uint64_t process_min = 0;
};

/// Watermarks of one phase name, over every time it ran.
struct PhaseMark {
    StringId name = kNoString;
    std::uint64_t runs = 0;
    std::uint64_t allocated_peak = 0;
    std::uint64_t reserved_peak = 0;
    std::int64_t allocated_growth_max = 0;  ///< largest allocated(end) − allocated(begin) of a run
    std::uint64_t total_ns = 0;
};

/// Live bytes of one call site on one device (framework blocks of one category, or driver-level
/// allocations outside the framework of one owner), with checkpoints for growth attribution.
struct SiteUsage {
    std::uint16_t device = 0;
    StringId site = kNoString;  ///< kNoString = unknown site; kOverflowString = sites past the cap
    bool driver = false;        ///< driver-level allocations outside the framework
    MemoryCategory category = MemoryCategory::kOther;  ///< framework blocks: what they hold
    MemoryOwner owner = MemoryOwner::kNoSite;          ///< driver allocations: who holds them
    std::uint32_t slot = 0;                            ///< for site_checkpoints()
    std::int64_t live_bytes = 0;
    std::uint64_t live_blocks = 0;
    std::uint64_t allocated_total = 0;
    /// Live bytes when the device's live level (allocated + outside) last reached its peak.
    std::int64_t at_peak = 0;
    std::uint64_t seen_version = 0;  ///< internal: the peak this site's at_peak belongs to
    PatternStats pattern;            ///< when it allocated (for the period of a step-less loop)
};

/// A watch crossing as the report keeps it: the state then, and what the owner's action did.
struct WatchCrossingRecord {
    MemoryWatchCrossing crossing;
    std::uint64_t allocated = 0;
    std::uint64_t reserved = 0;
    bool action_recorded = false;
    std::string action;  ///< "empty_cache", "snapshot", "report", "callback", ...
    bool action_ok = false;
    std::uint64_t bytes_freed = 0;
    std::string detail;  ///< a path, or what went wrong
};

struct LedgerOptions {
    std::size_t max_devices = 64;  ///< distinct devices (any ordinal); events past it dropped
    std::size_t series_points = 2048;
    std::size_t step_points = 4096;   ///< steps kept; pairs merge beyond
    std::size_t max_sites = 1 << 16;  ///< distinct (device, site) pairs tracked
    std::size_t max_phase_names = 256;
    std::size_t checkpoints = 32;  ///< per-site live-byte checkpoints kept
    /// Live allocations kept one by one per table (a device's blocks, its driver-level memory,
    /// host memory). Past it, allocations are booked by size (see UntrackedAllocations), so a
    /// leak of millions of allocations costs bounded memory. Three quarters of 2^20 is the
    /// table's load limit at 2^20 slots: a full table stays at 24 MiB instead of doubling.
    std::size_t max_tracked_allocations = std::size_t{3} << 18;
};

/// Allocations booked by size because their table was full (LedgerOptions::
/// max_tracked_allocations). Totals, sites and leak rates include them; a free whose address no
/// table holds, once some are live, is taken as one of them by its size. Such a free cannot say
/// which site it came from: `unsited_freed_bytes` may still be counted at their sites.
struct UntrackedAllocations {
    std::uint64_t booked = 0;  ///< allocations ever booked by size
    std::uint64_t live = 0;    ///< of them, not freed yet
    std::uint64_t live_bytes = 0;
    std::uint64_t unsited_freed_bytes = 0;
    std::size_t cap = 0;  ///< LedgerOptions::max_tracked_allocations
};

class MemoryLedger {
public:
    explicit MemoryLedger(LedgerOptions options = {});
    ~MemoryLedger();
    MemoryLedger(const MemoryLedger&) = delete;
    MemoryLedger& operator=(const MemoryLedger&) = delete;

    /// Applies one event. Memory events change the books; steps, ranges, counters and OOM
    /// markers feed watermarks and capacity; everything else is ignored. Throws only
    /// std::bad_alloc (the caller's boundary converts it).
    void apply(const Event& e);
    /// Applies a batch in order. The same books as one apply() per event, faster: while one
    /// event is applied, the table slots of events a few places ahead are already being fetched
    /// from memory (a large live set does not fit in cache, and random addresses miss).
    void apply(std::span<const Event> events);

    /// Device capacity in bytes (from SourceInfo, NVML or the user). Applies when the device
    /// first shows memory activity; a device the program never used does not appear.
    void set_capacity(std::uint16_t device, std::uint64_t bytes);
    /// Site names, for telling the owner of driver-level allocations from their call sites.
    void set_strings(const StringTable* strings) noexcept { strings_ = strings; }

    /// Registers a watch; returns its id (> 0), or 0 when the spec is unusable.
    int add_watch(const MemoryWatch& watch, MemoryWatchCallback callback);
    void remove_watch(int id);
    /// What the watch's owner did about its latest crossing (its action and the result).
    /// Returns false when the watch has no crossing left to attach it to.
    bool record_watch_action(int id, std::string action, bool ok, std::uint64_t bytes_freed,
                             std::string detail);
    /// Crossings kept for the report (the most recent kMaxCrossings), oldest first.
    [[nodiscard]] const std::vector<WatchCrossingRecord>& crossings() const noexcept {
        return crossings_;
    }
    [[nodiscard]] std::uint64_t crossings_total() const noexcept { return crossings_total_; }
    static constexpr std::size_t kMaxCrossings = 64;

    // ---- queries ----
    [[nodiscard]] std::vector<std::uint16_t> devices() const;
    [[nodiscard]] LedgerTotals totals(std::uint16_t device) const;
    [[nodiscard]] const HostMemoryTotals& host_totals() const noexcept { return host_totals_; }
    [[nodiscard]] LedgerPeaks peaks(std::uint16_t device) const;
    [[nodiscard]] DeviceLayout layout(std::uint16_t device) const;
    [[nodiscard]] std::vector<MemorySeriesPoint> series(std::uint16_t device) const;
    [[nodiscard]] std::vector<StepMark> steps(std::uint16_t device) const;
    [[nodiscard]] std::vector<PhaseMark> phases(std::uint16_t device) const;
    /// Sites of the device, with at_peak resolved.
    [[nodiscard]] std::vector<SiteUsage> sites(std::uint16_t device) const;
    /// Per-site live bytes at the kept checkpoints (aligned with checkpoint_ticks()); a
    /// checkpoint is taken at step ends, or at series bucket closes when there are no steps.
    [[nodiscard]] std::vector<std::uint64_t> checkpoint_ticks(std::uint16_t device) const;
    [[nodiscard]] std::vector<std::int64_t> site_checkpoints(std::uint16_t device,
                                                             std::uint32_t slot) const;
    /// The repetition found in the device's allocations (see AllocationPattern).
    [[nodiscard]] DetectedPeriod period(std::uint16_t device, std::uint64_t min_repetitions) const;
    /// Pinned host memory (page-locked, cudaHostAlloc): a process-wide line, not device memory
    /// (the host books' pinned line, see host_totals()).
    [[nodiscard]] std::uint64_t pinned_host() const noexcept { return host_totals_.pinned; }
    [[nodiscard]] std::uint64_t pinned_host_peak() const noexcept {
        return host_totals_.peak_pinned;
    }
    [[nodiscard]] bool pinned_host_seen() const noexcept { return host_totals_.seen; }
    /// Live framework blocks (active and pending-free), unordered.
    [[nodiscard]] std::vector<LedgerBlock> blocks(std::uint16_t device) const;

    /// Events the books could not use (free of an unknown address, address 0, ...).
    [[nodiscard]] std::uint64_t unmatched_frees() const noexcept { return unmatched_frees_; }
    [[nodiscard]] UntrackedAllocations untracked() const noexcept;
    [[nodiscard]] std::uint64_t dropped_events() const noexcept { return dropped_; }
    [[nodiscard]] bool has_steps(std::uint16_t device) const;
    /// Bytes the ledger itself holds (tables, series), for the benchmark and self-reports.
    [[nodiscard]] std::size_t memory_bytes() const;

private:
    struct Device;
    struct Watch;
    struct OpenRange;

    Device* device(std::uint16_t ordinal);
    [[nodiscard]] const Device* find_device(std::uint16_t ordinal) const;
    std::uint32_t site_slot(Device& d, StringId site, bool driver, std::uint8_t kind);
    MemoryOwner owner_of(StringId site);
    void site_change(Device& d, std::uint32_t slot, std::int64_t bytes, int blocks);
    void note_allocation(Device& d, std::uint32_t slot, std::uint64_t bytes, std::uint64_t t);
    void reattribute(Device& d);
    void anonymous_block(Device& d, const Event& e);
    void record_crossing(Device& d, const MemoryWatchCrossing& c);

    void block_alloc(Device& d, const Event& e);
    void block_free(Device& d, const Event& e);
    void segment_alloc(Device& d, const Event& e);
    void segment_free(Device& d, const Event& e);
    void driver_alloc(Device& d, const Event& e);
    void driver_free(Device& d, const Event& e);
    void host_alloc(const Event& e, MemoryKind kind);
    void host_free(const Event& e);
    bool release_host(std::uint64_t address);
    bool untracked_free(Device& d, const Event& e, bool counts);
    bool untracked_driver_free(Device& d, const Event& e);
    bool untracked_host_free(const Event& e);
    [[nodiscard]] bool full(AddressTable& table, std::uint64_t address) const;
    void pool_resize(Device& d, const Event& e);
    void counter(const Event& e);
    void step_begin(Device& d, std::uint64_t id, std::uint64_t t);
    void step_end(Device& d, std::uint64_t t);
    void range_begin(const Event& e);
    void range_end(const Event& e);
    void after_change(Device& d, std::uint64_t t);
    void take_checkpoint(Device& d);
    void check_watches(Device& d, std::uint64_t t);
    void recompute_watch_bounds(Device& d);
    LedgerSegment* segment_containing(Device& d, std::uint64_t address);
    static void insert_segment(Device& d, std::size_t index, const LedgerSegment& seg);
    static void erase_segment(Device& d, std::size_t index);
    static void segments_changed(Device& d);

    LedgerOptions options_;
    std::vector<Device*> devices_;             // dense, by first appearance; owned
    std::vector<std::uint16_t> device_slots_;  // ordinal -> index + 1 (0 = not seen)
    std::vector<Watch> watches_;
    int next_watch_id_ = 1;
    std::vector<OpenRange> open_ranges_;
    std::vector<SiteUsage> site_usage_;                        // slot -> usage
    std::vector<std::vector<std::int64_t>> site_checkpoints_;  // slot -> values
    // (device << 48 | driver << 47 | kind << 32 | site) -> slot
    std::unordered_map<std::uint64_t, std::uint32_t> site_slots_;
    std::unordered_map<StringId, MemoryOwner> owners_;  // site -> owner, bounded
    const StringTable* strings_ = nullptr;
    std::vector<WatchCrossingRecord> crossings_;
    std::uint64_t crossings_total_ = 0;
    std::vector<std::pair<std::uint16_t, std::uint64_t>> pending_capacity_;
    struct SiteCacheEntry {
        std::uint64_t key = 0;
        std::uint32_t slot = 0;
        bool valid = false;
    };
    std::array<SiteCacheEntry, 256> site_cache_{};
    AddressTable host_;  // host and managed allocations; record flags = MemoryKind
    HostMemoryTotals host_totals_;
    std::uint64_t unmatched_frees_ = 0;
    std::uint64_t dropped_ = 0;
    std::uint64_t untracked_booked_ = 0;
    std::uint64_t unsited_freed_bytes_ = 0;
    // Host allocations past the cap, per MemoryKind bucket: pinned, pageable, managed.
    std::array<std::pair<std::uint64_t, std::uint64_t>, 3> host_untracked_{};  // count, bytes
};

}  // namespace gpudiag::detail
