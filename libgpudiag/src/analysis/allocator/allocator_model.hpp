// SPDX-License-Identifier: Apache-2.0
// CachingAllocatorModel: PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp,
// torch 2.3 to 2.11) re-implemented as a pure model that places blocks in segments without a
// GPU, so an allocation history can be replayed under other settings.
//
// What it models, per device (one model per device, as torch has one DeviceCachingAllocator):
//  * size rounding: 512 B multiples, or power-of-two divisions (roundup_power2_divisions);
//  * a small pool (rounded requests <= 1 MiB, 2 MiB segments) and a large pool (1-10 MiB
//    requests get a 20 MiB segment, larger ones a segment rounded up to 2 MiB);
//  * best fit per stream: the free block with the smallest size, then lowest address, of the
//    requesting stream; blocks never move between streams;
//  * splitting (small pool: any remainder >= 512 B; large pool: remainder > 1 MiB and the
//    request below max_split_size) and merging of free neighbours;
//  * oversize blocks (>= max_split_size): never split, serve only requests at least
//    max_split_size and less than max_non_split_rounding smaller than the block;
//  * expandable segments: one virtual range per stream and pool, mapped in 2 MiB (small) or
//    20 MiB (large) pages, unmapped page-wise when the cache is released;
//  * frees that wait for other streams (free requested, completed later);
//  * garbage_collection_threshold (with a memory fraction): cached whole segments older than
//    the average are released before a new segment is allocated;
//  * the path before an out-of-memory error: cudaMalloc fails -> release oversize cached blocks
//    enough for the request (max_split_size only) -> retry -> release every unsplit cached block
//    (and pending frees) -> retry -> fail.
//  * private pools (a CUDA graph's, a torch.cuda.MemPool): each has its own small and large free
//    lists; a request made into one is served only by its segments, and its free blocks never
//    serve another pool's requests. empty_cache and garbage collection release only the default
//    pool's cache: torch releases a private pool's once its use count is 0 (graph destroyed,
//    MemPool released), which no input records, so the model keeps every private pool alive.
// Not modelled: the free-memory callbacks, and IPC.
//
// Versions (read: torch ~2.2, ~2.4 and ~2.10 sources; the changes since, to 2.15, from their
// pull requests: allocator_versions.cpp): the placement rules above are the same throughout. Later
// versions made configurable what was fixed (max_non_split_rounding_mb, large_segment_size_mb;
// defaults as before), skip expandable blocks when releasing oversize ones, and cap memory only for
// fractions below 1 (earlier, whenever a fraction was set); the model follows the later behaviour.
// The corpus snapshots come from torch 2.6-2.10.
#pragma once

#include "analysis/allocator/allocator_settings.hpp"
#include "analysis/allocator/allocator_versions.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <memory_resource>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace gpudiag::detail {

inline constexpr std::uint64_t kMinBlockSize = 512;         // every size rounds to 512 B
inline constexpr std::uint64_t kSmallSize = 1 * kMiB;       // largest small-pool request
inline constexpr std::uint64_t kSmallBuffer = 2 * kMiB;     // small-pool segment / page
inline constexpr std::uint64_t kMinLargeAlloc = 10 * kMiB;  // below: a large_segment_size segment
inline constexpr std::uint64_t kRoundLarge = 2 * kMiB;      // larger requests: 2 MiB multiples

/// What the driver is asked for; the model's device-level actions (for reproduction checks).
enum class DeviceActionKind : std::uint8_t { kMalloc, kFree, kMap, kUnmap };
struct DeviceAction {
    DeviceActionKind kind = DeviceActionKind::kMalloc;
    std::uint64_t address = 0;
    std::uint64_t bytes = 0;
};

/// Where new segments land. The model asks it for addresses; the replay either hands out the
/// addresses the recorded program got (to check the reproduction) or invents them.
class SegmentAddressSource {
public:
    virtual ~SegmentAddressSource() = default;
    /// Address for a cudaMalloc of `bytes` (the n-th call of the run).
    virtual std::uint64_t malloc_address(std::uint64_t bytes) = 0;
    virtual void free_address(std::uint64_t address, std::uint64_t bytes) = 0;
    /// Base of a new expandable segment's virtual range of `bytes` for (stream, pool).
    virtual std::uint64_t reserve_address(std::uint64_t bytes, std::uint32_t stream,
                                          bool small) = 0;
};

/// Invented addresses: freed ranges are reused first fit (as the driver tends to), else a bump
/// pointer; 2 MiB aligned. Only the order of addresses matters to the allocator (it breaks ties
/// between equal-size free blocks by address).
class BumpAddressSource final : public SegmentAddressSource {
public:
    explicit BumpAddressSource(std::uint64_t base = std::uint64_t{1} << 44) : top_(base) {}
    std::uint64_t malloc_address(std::uint64_t bytes) override;
    void free_address(std::uint64_t address, std::uint64_t bytes) override;
    std::uint64_t reserve_address(std::uint64_t bytes, std::uint32_t stream, bool small) override;

private:
    std::uint64_t top_;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> free_;  // address, bytes; by address
};

struct DeviceLimits {
    /// Bytes the allocator can obtain from the driver in total (cudaMalloc fails beyond);
    /// 0 = unlimited.
    std::uint64_t capacity_bytes = 0;
    /// The device's total memory (memory fraction and expandable address ranges are sized
    /// from it); 0 = the capacity, or 80 GiB when that is unlimited too.
    std::uint64_t device_total_bytes = 0;
};

struct ModelStats {
    std::uint64_t reserved = 0;  ///< segments + mapped pages (torch reserved_bytes)
    std::uint64_t peak_reserved = 0;
    std::uint64_t active = 0;  ///< allocated + freed-but-pending blocks
    std::uint64_t peak_active = 0;
    std::uint64_t allocated = 0;  ///< blocks the program holds (torch allocated_bytes)
    std::uint64_t peak_allocated = 0;
    std::uint64_t releasable = 0;      ///< cached bytes empty_cache could give back
    std::uint64_t peak_stranded = 0;   ///< peak of reserved - active - releasable
    std::uint64_t device_mallocs = 0;  ///< cudaMalloc calls
    std::uint64_t device_frees = 0;    ///< cudaFree calls
    std::uint64_t page_maps = 0;       ///< expandable segments: map calls (torch counts them
    std::uint64_t page_unmaps = 0;     ///< as device allocs/frees too)
    std::uint64_t alloc_retries = 0;   ///< cache flushed and cudaMalloc retried
    std::uint64_t ooms = 0;            ///< allocations that failed
    std::uint64_t gc_releases = 0;     ///< segments released by garbage collection
    std::uint64_t allocations = 0;
};

class CachingAllocatorModel {
public:
    struct Block;

    CachingAllocatorModel(const AllocatorSettings& settings, const DeviceLimits& limits,
                          SegmentAddressSource& addresses);
    ~CachingAllocatorModel();
    CachingAllocatorModel(const CachingAllocatorModel&) = delete;
    CachingAllocatorModel& operator=(const CachingAllocatorModel&) = delete;

    /// torch's round_size.
    [[nodiscard]] std::uint64_t round_size(std::uint64_t bytes) const;

    /// The program allocates `requested` bytes on `stream`; `handle` names the allocation until
    /// it is freed (the recorded address). Returns the block's address, or 0 when the
    /// allocation fails (out of memory at the limits). `private_pool`: the private pool the
    /// request is made into (numbered from 1), 0 for the default pool.
    std::uint64_t malloc(std::uint64_t handle, std::uint64_t requested, std::uint32_t stream,
                         std::uint32_t private_pool = 0);
    /// The program freed it, but other streams may still use it: not reusable yet. False when
    /// the handle is not live.
    bool free_requested(std::uint64_t handle);
    /// The free completes (at once, or once the streams caught up); true too when a cache
    /// release already completed it. False when the handle is not known.
    bool free(std::uint64_t handle);
    /// torch.cuda.empty_cache(): completes pending frees and releases every unsplit cached
    /// segment and every free expandable page.
    void empty_cache();

    /// Builds the state before a history starts: a segment that existed (allocated by cudaMalloc,
    /// or a mapped range of an expandable segment) with its live blocks (address, bytes,
    /// requested, pending); its free space becomes cached free blocks. A block's bytes are
    /// taken as a lower bound and grown as torch would have grown it (an unsplit remainder of
    /// 1 MiB or less, or an oversize block's whole free range). kInvalidArgument when blocks
    /// overlap or leave the segment.
    struct InitialBlock {
        std::uint64_t handle = 0;
        std::uint64_t address = 0;
        std::uint64_t bytes = 0;
        std::uint64_t requested = 0;
        bool pending = false;
    };
    Status adopt_segment(std::uint64_t address, std::uint64_t bytes, std::uint32_t stream,
                         bool small, bool expandable, std::vector<InitialBlock> blocks,
                         std::uint32_t private_pool = 0);

    /// The device limit (0 = unlimited); a replay narrows it where a recorded failure tells it.
    [[nodiscard]] std::uint64_t capacity() const { return limits_.capacity_bytes; }
    void set_capacity(std::uint64_t bytes) { limits_.capacity_bytes = bytes; }
    /// The behaviours that depend on the torch release (allocator_versions.hpp).
    void set_rules(const AllocatorRules& rules) { rules_ = rules; }

    [[nodiscard]] const ModelStats& stats() const { return stats_; }
    /// The segments now held: (address, bytes) of each cudaMalloc'ed segment and of each
    /// contiguous mapped range of an expandable segment, by address.
    [[nodiscard]] std::vector<std::pair<std::uint64_t, std::uint64_t>> segments() const;
    /// Device actions are logged when asked (reproduction checks); off by default.
    void log_device_actions(bool on) { log_actions_ = on; }
    [[nodiscard]] const std::vector<DeviceAction>& device_actions() const { return actions_; }
    [[nodiscard]] std::size_t live_blocks() const { return live_.size(); }

private:
    struct Pool;
    struct Expandable;
    struct Request;
    struct BySize {
        bool operator()(const Block* a, const Block* b) const;
    };
    struct ByAddress {
        bool operator()(const Block* a, const Block* b) const;
    };
    using BlockSet = std::pmr::set<Block*, BySize>;
    using UnmappedSet = std::pmr::set<Block*, ByAddress>;

    Block* new_block();
    void delete_block(Block* b);
    Pool& pool_for(bool small, std::uint32_t private_pool = 0);
    [[nodiscard]] std::uint64_t allocation_size(std::uint64_t size) const;
    [[nodiscard]] bool gc_enabled() const;
    [[nodiscard]] std::uint64_t allowed_maximum() const;
    [[nodiscard]] std::uint64_t device_total() const;

    // Pool membership keeps the releasable count right: insert/erase only through these.
    void pool_insert(Block* b);
    void pool_erase(Block* b);
    [[nodiscard]] std::uint64_t releasable_bytes(const Block* b) const;

    bool get_free_block(Request& r);
    bool alloc_block(Request& r, bool retry);
    bool release_available_cached_blocks(const Request& r);
    void release_cached_blocks();
    void release_blocks(Pool& pool);
    void release_block(Block* b);
    void garbage_collect_cached_blocks();
    [[nodiscard]] bool should_split(const Block* b, std::uint64_t size) const;
    Block* alloc_found_block(Request& r, std::uint64_t requested, bool split);
    void free_block(Block* b);
    std::uint64_t try_merge_blocks(Block* dst, Block* src, Pool& pool);

    // Expandable segments.
    Block* find_expandable_block(Pool& pool, std::uint32_t stream, std::uint64_t size);
    Block* try_allocate_expandable_block(Pool& pool, std::uint32_t stream, std::uint64_t size);
    bool map_block(Block* to_map, std::uint64_t size);
    void unmap_block(Block* b);
    void release_expandable_segment(Block* b);
    Expandable* new_expandable(Pool& pool, std::uint32_t stream);

    // The state before a history.
    Status initial_sizes(std::uint64_t end, bool small, bool expandable,
                         const std::vector<InitialBlock>& blocks,
                         std::vector<std::uint64_t>& sizes) const;
    Status carve_mapped_range(Pool& pool, std::uint32_t stream, std::uint64_t address,
                              std::uint64_t end, Expandable*& es, Block*& before, Block*& after);

    void add_reserved(std::uint64_t bytes);
    void sub_reserved(std::uint64_t bytes);
    void note_peaks();
    void log(DeviceActionKind kind, std::uint64_t address, std::uint64_t bytes);

    AllocatorSettings settings_;
    AllocatorRules rules_;
    DeviceLimits limits_;
    SegmentAddressSource& addresses_;
    std::pmr::unsynchronized_pool_resource node_memory_;
    std::unique_ptr<Pool> small_;
    std::unique_ptr<Pool> large_;
    struct PrivatePools {
        std::unique_ptr<Pool> small;
        std::unique_ptr<Pool> large;
    };
    std::map<std::uint32_t, PrivatePools> private_;  // by private pool number
    std::vector<std::unique_ptr<Block[]>> slabs_;
    std::vector<Block*> spare_blocks_;
    std::vector<std::unique_ptr<Expandable>> expandables_;
    std::unordered_map<std::uint64_t, Block*> live_;     // handle -> allocated or pending block
    std::vector<Block*> pending_;                        // freed, waiting for other streams
    std::unordered_set<std::uint64_t> completed_early_;  // pending frees a cache release completed
    ModelStats stats_;
    bool log_actions_ = false;
    std::vector<DeviceAction> actions_;
};

}  // namespace gpudiag::detail
