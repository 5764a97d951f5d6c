// SPDX-License-Identifier: Apache-2.0
// AllocationHistory: the events of a source (the same ones the memory ledger consumes) turned
// into what a caching allocator replay needs, per device:
//  * the state before the history: segments and the blocks live in them (a snapshot whose
//    trace ring buffer starts late rebuilds it from its final state; see SnapshotSource);
//  * the program's operations, in order: allocations (requested bytes, stream, pool), frees
//  (requested
//    and completed), cache releases (torch.cuda.empty_cache) and failed allocations (OOM);
//  * what the real allocator did, to check a replay against: its segment allocations, frees,
//    maps and unmaps in order, the reserved bytes' peak, and the segments at the end.
#pragma once

#include <gpudiag/sink.hpp>

#include "analysis/allocator/allocator_model.hpp"
#include "analysis/allocator/allocator_settings.hpp"
#include "analysis/allocator/allocator_versions.hpp"
#include "core/chunked_vector.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace gpudiag::detail {

struct HistoryOp {
    enum class Kind : std::uint8_t { kAlloc, kFreeRequested, kFree, kReleaseCache, kOom };
    Kind kind = Kind::kAlloc;
    /// Allocations: the private pool the block was made in (the recorded segment holding it),
    /// numbered from 1; 0 = the default pool. Fits the padding after `kind`.
    std::uint16_t pool = 0;
    std::uint32_t stream = 0;
    // An OOM has no address and only OOMs have a limit: they share 8 bytes (a long history keeps
    // millions of these).
    union {
        std::uint64_t handle = 0;  ///< the recorded address of the allocation (not OOMs)
        /// OOM: the memory the allocator could reach when it failed (what it held after
        /// releasing its cache plus what the driver reported free).
        std::uint64_t limit;
    };
    std::uint64_t bytes = 0;  ///< requested bytes (allocations, OOMs)
};
static_assert(sizeof(HistoryOp) == 24, "a history keeps millions of operations: 24 bytes each");

/// One of the recorded allocator's device-level actions.
struct ObservedAction {
    DeviceActionKind kind = DeviceActionKind::kMalloc;
    std::uint64_t address = 0;
    std::uint64_t bytes = 0;
    std::uint32_t stream = 0;
    bool small = false;  ///< the segment's pool (recorded, or told by its size)
};

struct StartSegment {
    std::uint64_t address = 0;
    std::uint64_t bytes = 0;
    std::uint32_t stream = 0;
    bool small = false;
    bool expandable = false;
    std::uint32_t pool = 0;  ///< private pool from 1; 0 = the default pool
    std::vector<CachingAllocatorModel::InitialBlock> blocks;
};

struct DeviceHistory {
    std::uint16_t device = 0;
    std::vector<StartSegment> start;  ///< by address
    ChunkedVector<HistoryOp> ops;     ///< in chunks: a long history grows without copying
    std::vector<ObservedAction> observed;
    std::uint64_t start_reserved = 0;
    std::uint64_t observed_peak_reserved = 0;
    /// The recorded segments at the end, (address, bytes) by address.
    std::vector<std::pair<std::uint64_t, std::uint64_t>> final_segments;
    std::uint64_t allocations = 0;
    std::uint64_t recorded_ooms = 0;
    std::uint64_t cache_releases = 0;
    std::uint64_t releases_before_new_segment = 0;  ///< could also be the allocator's own retry
    std::uint64_t start_blocks_outside_segments = 0;
    bool has_segment_records = false;  ///< the source recorded segments (not only blocks)
    bool truncated = false;            ///< past the cap on kept operations
};

class AllocationHistory final : public EventSink {
public:
    /// `max_ops`: operations (and observed allocator actions) kept per device; past it the
    /// history is cut, and the what-if says so.
    explicit AllocationHistory(std::size_t max_ops = kMaxOps);
    ~AllocationHistory() override;
    AllocationHistory(const AllocationHistory&) = delete;
    AllocationHistory& operator=(const AllocationHistory&) = delete;

    void begin(const SourceInfo& info, const StringTable& strings) override;
    void consume(std::span<const Event> events) override;
    void end(const SourceSummary& summary) override;

    [[nodiscard]] const SourceInfo& info() const { return info_; }
    /// Devices with allocator activity, by ordinal.
    [[nodiscard]] const std::vector<DeviceHistory>& devices() const { return devices_; }
    [[nodiscard]] const DeviceHistory* device(std::uint16_t ordinal) const;
    /// The allocator settings the source recorded (torch defaults when it recorded none).
    [[nodiscard]] const AllocatorSettings& recorded_settings() const { return settings_; }
    [[nodiscard]] bool settings_recorded() const { return settings_recorded_; }
    /// Why the recorded settings could not be read, if they could not ("" otherwise).
    [[nodiscard]] const std::string& settings_problem() const { return settings_problem_; }
    [[nodiscard]] std::uint64_t outside_allocator_events() const { return outside_allocator_; }
    /// What the input shows that decides whether a setting is safe (IPC, graphs, VMM).
    [[nodiscard]] const ProgramFacts& facts() const { return facts_; }

    /// Operations kept per device at most (24 bytes each): past it the history is truncated.
    static constexpr std::size_t kMaxOps = std::size_t{1} << 24;
    /// This history's cap (kMaxOps unless the owner asked for less).
    [[nodiscard]] std::size_t max_ops() const noexcept { return max_ops_; }

private:
    struct Builder;
    Builder& builder(std::uint16_t device);
    void finish_start(Builder& b);
    void trace_event(Builder& b, const Event& e);
    void flush_release(Builder& b, bool before_new_segment);
    void note_fact(const Event& e);

    SourceInfo info_;
    AllocatorSettings settings_;
    bool settings_recorded_ = false;
    std::string settings_problem_;
    std::uint64_t outside_allocator_ = 0;
    const StringTable* strings_ = nullptr;
    ProgramFacts facts_;
    std::vector<std::uint32_t> private_pools_;  // distinct ids seen, at most kMaxPools
    std::vector<std::uint8_t> sites_checked_;   // by StringId: looked at for IPC users
    std::map<std::uint16_t, Builder*> by_device_;
    std::vector<std::unique_ptr<Builder>> builders_;
    std::vector<DeviceHistory> devices_;
    std::size_t max_ops_;
};

}  // namespace gpudiag::detail
