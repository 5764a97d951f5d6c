// SPDX-License-Identifier: Apache-2.0
// The caching allocator model. Function names follow torch's DeviceCachingAllocator so each can
// be read next to the behaviour it models; the code is our own.
#include "analysis/allocator/allocator_model.hpp"

#include <algorithm>
#include <bit>

namespace gpudiag::detail {

struct CachingAllocatorModel::Expandable {
    std::uint64_t base = 0;
    std::uint64_t page = 0;   // 2 MiB (small pool) or large_segment_size
    std::uint64_t bytes = 0;  // the whole virtual range
    std::uint32_t stream = 0;
    bool small = false;
    const Pool* owner = nullptr;  // a private pool's ranges never serve another pool
};

struct CachingAllocatorModel::Block {
    std::uint64_t ptr = 0;
    std::uint64_t size = 0;
    std::uint64_t requested = 0;
    std::uint64_t handle = 0;
    std::int64_t gc_count_base = 0;
    Block* prev = nullptr;  // neighbours in the same segment
    Block* next = nullptr;
    Pool* pool = nullptr;
    Expandable* expandable = nullptr;
    std::uint32_t stream = 0;
    bool allocated = false;
    bool pending = false;  // freed, other streams still using it (torch: outstanding events)
    bool mapped = true;    // expandable segments: backed by pages

    [[nodiscard]] bool is_split() const { return prev != nullptr || next != nullptr; }
};

struct CachingAllocatorModel::Pool {
    Pool(bool small_pool, std::pmr::memory_resource* memory, std::uint32_t private_id = 0)
        : small(small_pool), id(private_id), blocks(memory), unmapped(memory) {}
    bool small;
    std::uint32_t id;                        // private pool; 0 = the default pool
    BlockSet blocks;                         // free mapped blocks
    UnmappedSet unmapped;                    // expandable segments' unmapped ranges
    std::int64_t get_free_blocks_calls = 0;  // garbage collection's clock
};

struct CachingAllocatorModel::Request {
    std::uint64_t size = 0;        // rounded request
    std::uint64_t alloc_size = 0;  // segment size a cudaMalloc would ask for
    std::uint32_t stream = 0;
    Pool* pool = nullptr;
    Block* block = nullptr;
};

// Pools are ordered by stream, then size, then address: best fit on the requesting stream, ties
// to the lowest address (torch's BlockComparatorSize).
bool CachingAllocatorModel::BySize::operator()(const Block* a, const Block* b) const {
    if (a->stream != b->stream) return a->stream < b->stream;
    if (a->size != b->size) return a->size < b->size;
    return a->ptr < b->ptr;
}
bool CachingAllocatorModel::ByAddress::operator()(const Block* a, const Block* b) const {
    if (a->stream != b->stream) return a->stream < b->stream;
    return a->ptr < b->ptr;
}

// ---- invented addresses ----

std::uint64_t BumpAddressSource::malloc_address(std::uint64_t bytes) {
    std::uint64_t size = (bytes + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
    for (auto it = free_.begin(); it != free_.end(); ++it) {
        if (it->second < size) continue;
        std::uint64_t address = it->first;
        if (it->second == size) {
            free_.erase(it);
        } else {
            it->first += size;
            it->second -= size;
        }
        return address;
    }
    std::uint64_t address = top_;
    top_ += size;
    return address;
}

void BumpAddressSource::free_address(std::uint64_t address, std::uint64_t bytes) {
    std::uint64_t size = (bytes + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
    auto it =
        std::lower_bound(free_.begin(), free_.end(), std::make_pair(address, std::uint64_t{0}));
    it = free_.insert(it, {address, size});
    // Coalesce with the neighbours so large ranges can be handed out again.
    if (auto next = std::next(it); next != free_.end() && it->first + it->second == next->first) {
        it->second += next->second;
        free_.erase(next);
    }
    if (it != free_.begin()) {
        auto prev = std::prev(it);
        if (prev->first + prev->second == it->first) {
            prev->second += it->second;
            free_.erase(it);
        }
    }
}

std::uint64_t BumpAddressSource::reserve_address(std::uint64_t bytes, std::uint32_t, bool) {
    std::uint64_t address = top_;
    top_ += (bytes + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
    return address;
}

// ---- construction and bookkeeping ----

CachingAllocatorModel::CachingAllocatorModel(const AllocatorSettings& settings,
                                             const DeviceLimits& limits,
                                             SegmentAddressSource& addresses)
    : settings_(settings),
      limits_(limits),
      addresses_(addresses),
      small_(std::make_unique<Pool>(true, &node_memory_)),
      large_(std::make_unique<Pool>(false, &node_memory_)) {}

CachingAllocatorModel::~CachingAllocatorModel() {
    // The sets hold pointers into the slabs; clear them before the memory resource goes.
    small_.reset();
    large_.reset();
    private_.clear();
}

// A private pool (CUDA graph or MemPool) has its own small and large free lists, made on first
// use: its blocks serve only its requests, and default-pool requests never see them.
CachingAllocatorModel::Pool& CachingAllocatorModel::pool_for(bool small,
                                                             std::uint32_t private_pool) {
    if (private_pool == 0) return small ? *small_ : *large_;
    PrivatePools& p = private_[private_pool];
    if (p.small == nullptr) {
        p.small = std::make_unique<Pool>(true, &node_memory_, private_pool);
        p.large = std::make_unique<Pool>(false, &node_memory_, private_pool);
    }
    return small ? *p.small : *p.large;
}

CachingAllocatorModel::Block* CachingAllocatorModel::new_block() {
    if (spare_blocks_.empty()) {
        constexpr std::size_t kSlab = 1024;
        slabs_.push_back(std::make_unique<Block[]>(kSlab));
        Block* slab = slabs_.back().get();
        for (std::size_t i = kSlab; i > 0; --i) spare_blocks_.push_back(&slab[i - 1]);
    }
    Block* b = spare_blocks_.back();
    spare_blocks_.pop_back();
    *b = Block{};
    return b;
}

void CachingAllocatorModel::delete_block(Block* b) {
    spare_blocks_.push_back(b);
}

std::uint64_t CachingAllocatorModel::device_total() const {
    if (limits_.device_total_bytes != 0) return limits_.device_total_bytes;
    if (limits_.capacity_bytes != 0) return limits_.capacity_bytes;
    return std::uint64_t{80} << 30;
}

// The memory fraction caps reserved memory at fraction x device total (torch sets the cap only
// for fractions below 1).
std::uint64_t CachingAllocatorModel::allowed_maximum() const {
    return static_cast<std::uint64_t>(settings_.memory_fraction *
                                      static_cast<double>(device_total()));
}

bool CachingAllocatorModel::gc_enabled() const {
    return settings_.memory_fraction < 1.0 && settings_.garbage_collection_threshold > 0.0;
}

void CachingAllocatorModel::add_reserved(std::uint64_t bytes) {
    stats_.reserved += bytes;
    stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
}

void CachingAllocatorModel::sub_reserved(std::uint64_t bytes) {
    stats_.reserved -= std::min(stats_.reserved, bytes);
}

void CachingAllocatorModel::note_peaks() {
    stats_.peak_active = std::max(stats_.peak_active, stats_.active);
    stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
    std::uint64_t held = stats_.active + stats_.releasable;
    std::uint64_t stranded = stats_.reserved > held ? stats_.reserved - held : 0;
    stats_.peak_stranded = std::max(stats_.peak_stranded, stranded);
}

void CachingAllocatorModel::log(DeviceActionKind kind, std::uint64_t address, std::uint64_t bytes) {
    if (log_actions_) actions_.push_back(DeviceAction{kind, address, bytes});
}

// What empty_cache could return of a free block: a whole unsplit segment, or the whole pages
// inside a free range of an expandable segment (of the default pool).
std::uint64_t CachingAllocatorModel::releasable_bytes(const Block* b) const {
    if (b->pool->id != 0) return 0;  // a private pool's cache outlives empty_cache
    if (b->expandable == nullptr) return b->is_split() ? 0 : b->size;
    const std::uint64_t page = b->expandable->page;
    const std::uint64_t offset = b->ptr - b->expandable->base;
    const std::uint64_t first = (offset + page - 1) / page;
    const std::uint64_t last = (offset + b->size) / page;
    return last > first ? (last - first) * page : 0;
}

void CachingAllocatorModel::pool_insert(Block* b) {
    b->gc_count_base = b->pool->get_free_blocks_calls;
    b->pool->blocks.insert(b);
    stats_.releasable += releasable_bytes(b);
}

void CachingAllocatorModel::pool_erase(Block* b) {
    if (b->pool->blocks.erase(b) != 0)
        stats_.releasable -= std::min(stats_.releasable, releasable_bytes(b));
}

// ---- sizes ----

std::uint64_t CachingAllocatorModel::round_size(std::uint64_t bytes) const {
    if (bytes < kMinBlockSize) return kMinBlockSize;
    const std::uint64_t divisions = settings_.divisions_for(bytes);
    if (divisions > 1 && bytes > kMinBlockSize * divisions) {
        // Round up to the next of `divisions` equal steps between two powers of two.
        if (std::has_single_bit(bytes)) return bytes;
        const std::uint64_t floor_pow2 = std::bit_floor(bytes);
        const std::uint64_t step = floor_pow2 >> (std::bit_width(divisions) - 1);
        if (step == 0) return floor_pow2 << 1;
        const std::uint64_t floored = bytes & ~(step - 1);
        return floored == bytes ? bytes : floored + step;
    }
    return (bytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

// Small requests share 2 MiB segments, 1-10 MiB ones a large_segment_size segment, larger ones
// get a segment of their own rounded up to 2 MiB.
std::uint64_t CachingAllocatorModel::allocation_size(std::uint64_t size) const {
    if (size <= kSmallSize) return kSmallBuffer;
    if (size < kMinLargeAlloc) return settings_.large_segment_size;
    return (size + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

// ---- the program's operations ----

std::uint64_t CachingAllocatorModel::malloc(std::uint64_t handle, std::uint64_t requested,
                                            std::uint32_t stream, std::uint32_t private_pool) {
    if (auto stale = live_.find(handle); stale != live_.end()) {
        // The history lost this handle's free; complete it so the address can be reused.
        free(handle);
    }
    Request r;
    r.size = round_size(requested);
    r.pool = &pool_for(r.size <= kSmallSize, private_pool);
    r.alloc_size = allocation_size(r.size);
    r.stream = stream;
    bool found = get_free_block(r);
    if (!found) {
        if (gc_enabled()) garbage_collect_cached_blocks();
        // cudaMalloc; on failure release oversize cached blocks and retry; then release every
        // unsplit cached block (and complete pending frees) and retry once more.
        found =
            alloc_block(r, false) || (release_available_cached_blocks(r) && alloc_block(r, false));
        if (!found) {
            release_cached_blocks();
            found = alloc_block(r, true);
        }
    }
    if (!found) {
        ++stats_.ooms;
        note_peaks();
        return 0;
    }
    Block* b = alloc_found_block(r, requested, should_split(r.block, r.size));
    b->handle = handle;
    live_[handle] = b;
    note_peaks();
    return b->ptr;
}

bool CachingAllocatorModel::free_requested(std::uint64_t handle) {
    auto it = live_.find(handle);
    if (it == live_.end() || !it->second->allocated) return false;
    Block* b = it->second;
    b->allocated = false;
    b->pending = true;
    stats_.allocated -= std::min(stats_.allocated, b->size);
    pending_.push_back(b);
    return true;
}

bool CachingAllocatorModel::free(std::uint64_t handle) {
    auto it = live_.find(handle);
    if (it == live_.end()) return completed_early_.erase(handle) != 0;
    Block* b = it->second;
    live_.erase(it);
    if (b->allocated) {
        b->allocated = false;
        stats_.allocated -= std::min(stats_.allocated, b->size);
    }
    if (b->pending) {
        // Usually the block just freed: search from the back.
        auto p = std::find(pending_.rbegin(), pending_.rend(), b);
        if (p != pending_.rend()) pending_.erase(std::next(p).base());
    }
    free_block(b);
    note_peaks();
    return true;
}

void CachingAllocatorModel::empty_cache() {
    release_cached_blocks();
    note_peaks();
}

// ---- finding and making blocks ----

bool CachingAllocatorModel::get_free_block(Request& r) {
    Pool& pool = *r.pool;
    if (gc_enabled()) ++pool.get_free_blocks_calls;  // garbage collection ages blocks by this
    Block key;
    key.stream = r.stream;
    key.size = r.size;
    auto it = pool.blocks.lower_bound(&key);
    if (it == pool.blocks.end() || (*it)->stream != r.stream) return false;
    if ((*it)->expandable != nullptr) {
        if (settings_.expandable_segments) {
            // A free block followed by unmapped pages can grow: for best fit it counts as that
            // large, so a smaller fixed block further on may fit better.
            auto growable = [](const Block* b) {
                return b->size + (b->next != nullptr && !b->next->mapped ? b->next->size : 0);
            };
            auto next = std::next(it);
            while ((*it)->expandable != nullptr && next != pool.blocks.end() &&
                   (*next)->stream == r.stream && growable(*next) < growable(*it)) {
                it = next++;
            }
        } else {
            // Expandable segments were turned off: use only ordinary blocks.
            do {
                ++it;
            } while (it != pool.blocks.end() && (*it)->expandable != nullptr &&
                     (*it)->stream == r.stream);
            if (it == pool.blocks.end() || (*it)->stream != r.stream) return false;
        }
    }
    const std::uint64_t max_split = settings_.max_split_size;
    // An oversize block never serves a request below max_split_size, and serves a larger one
    // only when it is less than max_non_split_rounding bigger. Up to torch 2.15 this holds inside
    // expandable segments too (pytorch PR #193400 would lift it there; no release has it).
    const bool oversize_rules =
        !(rules_.oversize_rules_skip_expandable && (*it)->expandable != nullptr);
    if (oversize_rules && r.size < max_split && (*it)->size >= max_split) return false;
    if (oversize_rules && r.size >= max_split &&
        (*it)->size >= r.size + settings_.max_non_split_rounding_size)
        return false;
    r.block = *it;
    pool_erase(r.block);
    return true;
}

bool CachingAllocatorModel::should_split(const Block* b, std::uint64_t size) const {
    const std::uint64_t remaining = b->size - size;
    if (b->pool->small || settings_.expandable_segments) return remaining >= kMinBlockSize;
    return size < settings_.max_split_size && remaining > kSmallSize;
}

CachingAllocatorModel::Block* CachingAllocatorModel::alloc_found_block(Request& r,
                                                                       std::uint64_t requested,
                                                                       bool split) {
    Block* block = r.block;
    if (split) {
        // The front becomes the allocation, the rest stays cached in the pool.
        Block* remaining = block;
        block = new_block();
        block->ptr = remaining->ptr;
        block->size = r.size;
        block->stream = r.stream;
        block->pool = r.pool;
        block->expandable = remaining->expandable;
        block->prev = remaining->prev;
        if (block->prev != nullptr) block->prev->next = block;
        block->next = remaining;
        remaining->prev = block;
        remaining->ptr += r.size;
        remaining->size -= r.size;
        pool_insert(remaining);
    }
    block->allocated = true;
    block->requested = requested;
    stats_.allocated += block->size;
    stats_.active += block->size;
    ++stats_.allocations;
    return block;
}

bool CachingAllocatorModel::alloc_block(Request& r, bool retry) {
    if (retry) ++stats_.alloc_retries;
    const std::uint64_t size = r.alloc_size;
    if (settings_.memory_fraction < 1.0 && stats_.reserved + size > allowed_maximum()) return false;
    if (settings_.expandable_segments) {
        r.block = try_allocate_expandable_block(*r.pool, r.stream, r.size);
        return r.block != nullptr;
    }
    // cudaMalloc fails when the device has not that much left.
    if (limits_.capacity_bytes != 0 && stats_.reserved + size > limits_.capacity_bytes)
        return false;
    Block* b = new_block();
    b->ptr = addresses_.malloc_address(size);
    b->size = size;
    b->stream = r.stream;
    b->pool = r.pool;
    r.block = b;
    add_reserved(size);
    ++stats_.device_mallocs;
    log(DeviceActionKind::kMalloc, b->ptr, size);
    return true;
}

void CachingAllocatorModel::free_block(Block* b) {
    b->pending = false;
    stats_.active -= std::min(stats_.active, b->size);
    Pool& pool = *b->pool;
    Block* neighbours[2] = {b->prev, b->next};
    for (Block* n : neighbours) try_merge_blocks(b, n, pool);
    pool_insert(b);
}

std::uint64_t CachingAllocatorModel::try_merge_blocks(Block* dst, Block* src, Pool& pool) {
    if (src == nullptr || src->allocated || src->pending || dst->mapped != src->mapped) return 0;
    if (dst->prev == src) {
        dst->ptr = src->ptr;
        dst->prev = src->prev;
        if (dst->prev != nullptr) dst->prev->next = dst;
    } else {
        dst->next = src->next;
        if (dst->next != nullptr) dst->next->prev = dst;
    }
    const std::uint64_t subsumed = src->size;
    dst->size += subsumed;
    if (src->mapped) {
        pool_erase(src);
    } else {
        pool.unmapped.erase(src);
    }
    delete_block(src);
    return subsumed;
}

// ---- giving memory back ----

void CachingAllocatorModel::release_block(Block* b) {
    // Only whole cudaMalloc'ed segments go back to the driver.
    if (b->expandable != nullptr || b->is_split()) return;
    pool_erase(b);
    addresses_.free_address(b->ptr, b->size);
    sub_reserved(b->size);
    ++stats_.device_frees;
    log(DeviceActionKind::kFree, b->ptr, b->size);
    delete_block(b);
}

// Frees oversize cached blocks on the request's stream, just enough for it: the smallest one
// that is large enough, else the largest ones until enough is released.
bool CachingAllocatorModel::release_available_cached_blocks(const Request& r) {
    const std::uint64_t max_split = settings_.max_split_size;
    if (max_split == kNoSplitLimit) return false;
    Pool& pool = *r.pool;
    Block key;
    key.stream = r.stream;
    key.size = std::max(r.size, max_split);
    auto it = pool.blocks.lower_bound(&key);
    if (it == pool.blocks.end() || (*it)->stream != r.stream || (*it)->expandable != nullptr) {
        if (it == pool.blocks.begin()) return false;
        std::uint64_t released = 0;
        --it;
        while (released < key.size && (*it)->size >= max_split && (*it)->stream == r.stream) {
            auto current = it;
            const bool first = current == pool.blocks.begin();
            if (!first) --it;
            if ((*current)->expandable == nullptr) {
                released += (*current)->size;
                release_block(*current);
            }
            if (first) break;
        }
        return released >= key.size;
    }
    release_block(*it);
    return true;
}

void CachingAllocatorModel::release_cached_blocks() {
    // Synchronizing first completes every pending free.
    std::vector<Block*> pending;
    pending.swap(pending_);
    for (Block* b : pending) {
        live_.erase(b->handle);
        completed_early_.insert(b->handle);
        free_block(b);
    }
    // Private pools keep their cached blocks while their graph or MemPool lives (torch frees
    // them only once the pool's use count is 0, which no input records): the default pool only.
    release_blocks(*large_);
    release_blocks(*small_);
}

void CachingAllocatorModel::release_blocks(Pool& pool) {
    std::vector<Block*> to_unmap;
    for (auto it = pool.blocks.begin(); it != pool.blocks.end();) {
        Block* b = *it;
        ++it;
        if (b->expandable != nullptr) {
            to_unmap.push_back(b);  // unmapping reshapes the pool: collect first
        } else if (!b->is_split()) {
            release_block(b);
        }
    }
    for (Block* b : to_unmap) {
        unmap_block(b);
        if (!b->mapped && !b->is_split()) release_expandable_segment(b);
    }
}

// Releases unsplit cached large blocks whose age (pool searches since they were cached) is at
// least the average, repeatedly, until reserved memory is back under the threshold.
void CachingAllocatorModel::garbage_collect_cached_blocks() {
    Pool& pool = *large_;
    const auto threshold = static_cast<std::uint64_t>(settings_.garbage_collection_threshold *
                                                      static_cast<double>(allowed_maximum()));
    if (stats_.reserved <= threshold) return;
    const std::uint64_t target = stats_.reserved - threshold;
    auto age = [&](const Block* b) {
        return static_cast<std::uint64_t>(
            std::max<std::int64_t>(0, pool.get_free_blocks_calls - b->gc_count_base));
    };
    std::uint64_t total_age = 0;
    std::uint64_t freeable = 0;
    for (const Block* b : pool.blocks) {
        if (!b->is_split()) {
            total_age += age(b);
            ++freeable;
        }
    }
    if (freeable == 0) return;
    std::uint64_t reclaimed = 0;
    bool freed = true;
    while (reclaimed < target && freed && freeable > 0) {
        const double age_threshold = static_cast<double>(total_age) / static_cast<double>(freeable);
        freed = false;
        for (auto it = pool.blocks.begin(); it != pool.blocks.end();) {
            Block* b = *it;
            ++it;
            if (!b->is_split() && b->expandable == nullptr &&
                static_cast<double>(age(b)) >= age_threshold) {
                freed = true;
                reclaimed += b->size;
                total_age -= std::min(total_age, age(b));
                --freeable;
                ++stats_.gc_releases;
                release_block(b);
            }
        }
    }
}

// ---- expandable segments ----

CachingAllocatorModel::Expandable* CachingAllocatorModel::new_expandable(Pool& pool,
                                                                         std::uint32_t stream) {
    auto es = std::make_unique<Expandable>();
    es->page = pool.small ? kSmallBuffer : settings_.large_segment_size;
    // torch reserves address space for 9/8 of the device's memory.
    const std::uint64_t span = device_total() + device_total() / 8;
    es->bytes = (span + es->page - 1) / es->page * es->page;
    es->stream = stream;
    es->small = pool.small;
    es->owner = &pool;
    es->base = addresses_.reserve_address(es->bytes, stream, pool.small);
    expandables_.push_back(std::move(es));
    return expandables_.back().get();
}

// The lowest address, in this stream's expandable segments of the pool, where free and unmapped
// space together can hold `size`; a new segment when none can.
CachingAllocatorModel::Block* CachingAllocatorModel::find_expandable_block(Pool& pool,
                                                                           std::uint32_t stream,
                                                                           std::uint64_t size) {
    auto usable = [](const Block* b) { return b != nullptr && !b->allocated && !b->pending; };
    auto has_room = [&](const Block* b) {
        std::uint64_t bytes = 0;
        while (bytes < size && usable(b)) {
            bytes += b->size;
            b = b->next;
        }
        return bytes >= size;
    };
    Block key;
    key.stream = stream;
    for (auto it = pool.unmapped.lower_bound(&key);
         it != pool.unmapped.end() && (*it)->stream == stream; ++it) {
        Block* c = *it;
        if (usable(c->prev)) c = c->prev;  // a free block just before the gap helps
        if (has_room(c)) return c;
    }
    Expandable* es = new_expandable(pool, stream);
    Block* candidate = new_block();
    candidate->ptr = es->base;
    candidate->size = es->bytes;
    candidate->stream = stream;
    candidate->pool = &pool;
    candidate->expandable = es;
    candidate->mapped = false;
    pool.unmapped.insert(candidate);
    return candidate;
}

// Maps whole pages from the start of an unmapped block to cover `size`; false when the device
// has no room for them.
bool CachingAllocatorModel::map_block(Block* to_map, std::uint64_t size) {
    const Expandable& es = *to_map->expandable;
    const std::uint64_t begin = (to_map->ptr - es.base) / es.page;
    const std::uint64_t end = (to_map->ptr + size - es.base + es.page - 1) / es.page;
    const std::uint64_t mapped = (end - begin) * es.page;
    if (mapped == 0) return false;
    if (limits_.capacity_bytes != 0 && stats_.reserved + mapped > limits_.capacity_bytes)
        return false;
    Pool& pool = *to_map->pool;
    pool.unmapped.erase(to_map);
    to_map->mapped = true;
    const std::uint64_t at = to_map->ptr;
    if (mapped < to_map->size) {
        Block* rest = new_block();
        rest->ptr = to_map->ptr + mapped;
        rest->size = to_map->size - mapped;
        rest->stream = to_map->stream;
        rest->pool = &pool;
        rest->expandable = to_map->expandable;
        rest->mapped = false;
        rest->prev = to_map;
        rest->next = to_map->next;
        if (rest->next != nullptr) rest->next->prev = rest;
        to_map->next = rest;
        pool.unmapped.insert(rest);
        to_map->size = mapped;
    }
    try_merge_blocks(to_map, to_map->prev, pool);
    try_merge_blocks(to_map, to_map->next, pool);
    pool_insert(to_map);
    add_reserved(mapped);
    ++stats_.page_maps;
    log(DeviceActionKind::kMap, at, mapped);
    return true;
}

CachingAllocatorModel::Block* CachingAllocatorModel::try_allocate_expandable_block(
    Pool& pool, std::uint32_t stream, std::uint64_t size) {
    Block* candidate = find_expandable_block(pool, stream, size);
    // candidate is unmapped, or free and followed by unmapped space: map until it is large enough.
    if (!candidate->mapped && !map_block(candidate, std::min(candidate->size, size)))
        return nullptr;
    while (candidate->size < size) {
        Block* next = candidate->next;
        if (next == nullptr || !map_block(next, std::min(size - candidate->size, next->size)))
            return nullptr;
        candidate = next;  // map_block merged the free block before it
    }
    pool_erase(candidate);
    return candidate;
}

// Unmaps the whole pages inside a free block; partial pages at its ends stay mapped and free.
void CachingAllocatorModel::unmap_block(Block* b) {
    const Expandable& es = *b->expandable;
    const std::uint64_t begin = (b->ptr - es.base + es.page - 1) / es.page;
    const std::uint64_t end = (b->ptr + b->size - es.base) / es.page;
    if (begin >= end) return;
    const std::uint64_t unmapped_ptr = es.base + begin * es.page;
    const std::uint64_t unmapped_size = (end - begin) * es.page;
    Pool& pool = *b->pool;
    pool_erase(b);
    auto piece = [&](std::uint64_t ptr, std::uint64_t size, Block* before, Block* after) {
        Block* p = new_block();
        p->ptr = ptr;
        p->size = size;
        p->stream = b->stream;
        p->pool = &pool;
        p->expandable = b->expandable;
        p->prev = before;
        p->next = after;
        if (before != nullptr) before->next = p;
        if (after != nullptr) after->prev = p;
        pool_insert(p);
    };
    const std::uint64_t before_size = unmapped_ptr - b->ptr;
    const std::uint64_t after_size = b->size - before_size - unmapped_size;
    if (before_size > 0) piece(b->ptr, before_size, b->prev, b);
    if (after_size > 0) piece(unmapped_ptr + unmapped_size, after_size, b, b->next);
    b->ptr = unmapped_ptr;
    b->size = unmapped_size;
    b->mapped = false;
    try_merge_blocks(b, b->prev, pool);
    try_merge_blocks(b, b->next, pool);
    pool.unmapped.insert(b);
    sub_reserved(unmapped_size);
    ++stats_.page_unmaps;
    log(DeviceActionKind::kUnmap, unmapped_ptr, unmapped_size);
}

void CachingAllocatorModel::release_expandable_segment(Block* b) {
    b->pool->unmapped.erase(b);
    Expandable* es = b->expandable;
    expandables_.erase(
        std::remove_if(expandables_.begin(), expandables_.end(),
                       [es](const std::unique_ptr<Expandable>& e) { return e.get() == es; }),
        expandables_.end());
    delete_block(b);
}

// ---- the state before a history ----

// Sizes of blocks live before a history: at least the rounded request; an unsplit large-pool
// block also owns a remainder of 1 MiB or less, and an oversize block its whole free range
// (torch would not have split them off).
Status CachingAllocatorModel::initial_sizes(std::uint64_t end, bool small, bool expandable,
                                            const std::vector<InitialBlock>& blocks,
                                            std::vector<std::uint64_t>& sizes) const {
    sizes.assign(blocks.size(), 0);
    for (std::size_t i = 0; i < blocks.size(); ++i) {
        const InitialBlock& b = blocks[i];
        const std::uint64_t limit = i + 1 < blocks.size() ? blocks[i + 1].address : end;
        std::uint64_t size = std::max(b.bytes, round_size(std::max<std::uint64_t>(b.requested, 1)));
        if (b.address >= limit || limit - b.address < size)
            return invalid_argument("blocks overlap or leave their segment");
        if (!small && !expandable && !settings_.expandable_segments) {
            const std::uint64_t gap = limit - b.address - size;
            if (gap <= kSmallSize || size >= settings_.max_split_size) size = limit - b.address;
        }
        sizes[i] = size;
    }
    return Status::ok();
}

// The expandable segment a mapped range [address, end) belongs to (a new one starting there when
// none covers it); the unmapped block covering the range is cut around it. `before` and `after`
// are the neighbours the range's blocks will sit between.
Status CachingAllocatorModel::carve_mapped_range(Pool& pool, std::uint32_t stream,
                                                 std::uint64_t address, std::uint64_t end,
                                                 Expandable*& es, Block*& before, Block*& after) {
    for (auto& e : expandables_) {
        if (e->stream == stream && e->owner == &pool && address >= e->base &&
            end <= e->base + e->bytes) {
            es = e.get();
        }
    }
    if (es == nullptr) {
        auto fresh = std::make_unique<Expandable>();
        fresh->page = pool.small ? kSmallBuffer : settings_.large_segment_size;
        const std::uint64_t span = std::max(device_total() + device_total() / 8, end - address);
        fresh->bytes = (span + fresh->page - 1) / fresh->page * fresh->page;
        fresh->base = address;
        fresh->stream = stream;
        fresh->small = pool.small;
        fresh->owner = &pool;
        es = fresh.get();
        expandables_.push_back(std::move(fresh));
        Block* all = new_block();
        all->ptr = es->base;
        all->size = es->bytes;
        all->stream = stream;
        all->pool = &pool;
        all->expandable = es;
        all->mapped = false;
        pool.unmapped.insert(all);
    }
    Block* gap = nullptr;
    for (Block* u : pool.unmapped) {
        if (u->expandable == es && u->ptr <= address && u->ptr + u->size >= end) gap = u;
    }
    if (gap == nullptr) return invalid_argument("expandable ranges overlap");
    pool.unmapped.erase(gap);
    before = gap->prev;
    after = gap->next;
    if (gap->ptr < address) {
        Block* head = new_block();
        *head = *gap;
        head->size = address - gap->ptr;
        head->prev = before;
        if (before != nullptr) before->next = head;
        pool.unmapped.insert(head);
        before = head;
    }
    if (gap->ptr + gap->size > end) {
        Block* tail = new_block();
        *tail = *gap;
        tail->ptr = end;
        tail->size = gap->ptr + gap->size - end;
        tail->next = after;
        if (after != nullptr) after->prev = tail;
        pool.unmapped.insert(tail);
        after = tail;
    }
    delete_block(gap);
    return Status::ok();
}

Status CachingAllocatorModel::adopt_segment(std::uint64_t address, std::uint64_t bytes,
                                            std::uint32_t stream, bool small, bool expandable,
                                            std::vector<InitialBlock> blocks,
                                            std::uint32_t private_pool) {
    if (bytes == 0) return invalid_argument("a segment of 0 bytes");
    std::sort(blocks.begin(), blocks.end(),
              [](const InitialBlock& a, const InitialBlock& b) { return a.address < b.address; });
    const std::uint64_t end = address + bytes;
    if (!blocks.empty() && blocks.front().address < address)
        return invalid_argument("blocks leave their segment");
    std::vector<std::uint64_t> sizes;
    GPUDIAG_RETURN_IF_ERROR(initial_sizes(end, small, expandable, blocks, sizes));
    Pool& pool = pool_for(small, private_pool);
    Expandable* es = nullptr;
    Block* before = nullptr;
    Block* after = nullptr;
    if (expandable)
        GPUDIAG_RETURN_IF_ERROR(carve_mapped_range(pool, stream, address, end, es, before, after));
    // The range: live blocks where given, free blocks in between.
    std::vector<Block*> chain;
    auto piece = [&](std::uint64_t ptr, std::uint64_t size) {
        Block* p = new_block();
        p->ptr = ptr;
        p->size = size;
        p->stream = stream;
        p->pool = &pool;
        p->expandable = es;
        chain.push_back(p);
        return p;
    };
    std::uint64_t cursor = address;
    for (std::size_t i = 0; i < blocks.size(); ++i) {
        if (blocks[i].address > cursor) piece(cursor, blocks[i].address - cursor);
        Block* b = piece(blocks[i].address, sizes[i]);
        b->allocated = !blocks[i].pending;
        b->pending = blocks[i].pending;
        b->requested = blocks[i].requested;
        b->handle = blocks[i].handle;
        cursor = blocks[i].address + sizes[i];
    }
    if (cursor < end) piece(cursor, end - cursor);
    for (std::size_t i = 0; i < chain.size(); ++i) {
        chain[i]->prev = i > 0 ? chain[i - 1] : before;
        chain[i]->next = i + 1 < chain.size() ? chain[i + 1] : after;
    }
    if (before != nullptr) before->next = chain.front();
    if (after != nullptr) after->prev = chain.back();
    add_reserved(bytes);
    for (Block* b : chain) {
        if (!b->allocated && !b->pending) {
            pool_insert(b);
            continue;
        }
        live_[b->handle] = b;
        stats_.active += b->size;
        if (b->allocated) stats_.allocated += b->size;
        if (b->pending) pending_.push_back(b);
    }
    note_peaks();
    return Status::ok();
}

std::vector<std::pair<std::uint64_t, std::uint64_t>> CachingAllocatorModel::segments() const {
    // Every block is in a pool, in the live set or unmapped; segments start where prev is null
    // (and, for expandable ones, where a mapped run starts).
    std::vector<const Block*> heads;
    auto consider = [&](const Block* b) {
        if (!b->mapped) return;
        if (b->prev == nullptr || !b->prev->mapped) heads.push_back(b);
    };
    for (const Pool* pool : {small_.get(), large_.get()}) {
        for (const Block* b : pool->blocks) consider(b);
    }
    for (const auto& [id, p] : private_) {
        for (const Pool* pool : {p.small.get(), p.large.get()}) {
            for (const Block* b : pool->blocks) consider(b);
        }
    }
    for (const auto& [handle, b] : live_) consider(b);
    std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
    out.reserve(heads.size());
    for (const Block* h : heads) {
        std::uint64_t total = 0;
        for (const Block* b = h; b != nullptr && b->mapped; b = b->next) total += b->size;
        out.emplace_back(h->ptr, total);
    }
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace gpudiag::detail
