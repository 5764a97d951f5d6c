// SPDX-License-Identifier: Apache-2.0
// MemoryLedger. The hot path (block alloc/free) is: one hash-table insert or erase, a site-slot
// lookup on alloc only (frees carry the slot in the record), and a handful of compares for
// peaks, the series and the watches. Block events do not touch their segment: per-segment
// occupancy and free space are worked out from the live blocks when layout() is asked, so
// they are exact and the hot path has one random memory access (the table slot), which
// apply(span) prefetches a few events ahead. Everything that walks the tables (layout, blocks,
// sites) is a query, done on demand.
//
// Reconciling the two views: a driver-level allocation (kDeviceAlloc, kVmMap) that starts where
// a framework segment starts is the segment's backing store and is not counted as outside the
// framework; the check runs on whichever of the two arrives second. Without segment events (a
// live PyTorch program polls its totals), the framework's reserved bytes are matched against the
// driver allocations that have no call site or whose site is the framework's allocator
// (reattribute()), so torch's own cudaMalloc calls are not counted again as outside memory.
//
// The peak's composition costs O(1) per change: each site remembers its live bytes at the latest
// peak lazily, when it first changes after that peak (site_change()).
#include "analysis/memory/memory_ledger.hpp"

#include <algorithm>
#include <limits>
#include <memory>

namespace gpudiag::detail {
namespace {

constexpr std::uint16_t kKindMask = 0x3;
constexpr std::uint16_t kKindDevice = 1;
constexpr std::uint16_t kKindPool = 2;
constexpr std::uint16_t kKindVm = 3;
constexpr std::uint16_t kFlagPending = 0x4;
constexpr std::uint16_t kFlagBacked = 0x8;
constexpr int kOwnerShift = 8;  // driver records keep their MemoryOwner in bits 8..11

// Host allocations past the cap are booked per kind: pinned (and anything else), pageable, managed.
std::size_t host_bucket(MemoryKind kind) {
    return kind == MemoryKind::kPageable ? 1 : kind == MemoryKind::kManaged ? 2 : 0;
}
constexpr std::size_t kMaxCachedOwners = 1 << 16;
constexpr std::size_t kMaxPendingCapacities = 256;
constexpr std::size_t kMaxOpenRanges = 64;
constexpr std::uint64_t kNoLimit = std::numeric_limits<std::uint64_t>::max();

// Rounding waste is exact below 2 GiB and kept in 512-byte units above (the allocator rounds to
// 512 B, and only power-of-two rounding of huge requests wastes more than 2 GiB).
std::uint32_t encode_shortfall(std::uint64_t s) {
    if (s < (std::uint64_t{1} << 31)) return static_cast<std::uint32_t>(s);
    std::uint64_t units = std::min<std::uint64_t>(s >> 9, 0x7FFFFFFF);
    return static_cast<std::uint32_t>(units) | 0x80000000u;
}
std::uint64_t decode_shortfall(std::uint32_t v) {
    return (v & 0x80000000u) != 0 ? std::uint64_t{v & 0x7FFFFFFFu} << 9 : v;
}
std::uint64_t requested_of(const LiveRecord& r) {
    std::uint64_t s = decode_shortfall(r.shortfall);
    return r.size() > s ? r.size() - s : 0;
}
std::uint64_t sub(std::uint64_t a, std::uint64_t b) {
    return a > b ? a - b : 0;
}

// The kind of memory an allocation event books, or kDevice for the device books. Recordings
// made before host and managed memory had event kinds of their own carry them as
// kDeviceAlloc/kDeviceFree with the MemoryKind in flags; they are booked by that kind too.
MemoryKind booked_kind(const Event& e) {
    auto flagged = static_cast<MemoryKind>(e.flags & kMemoryKindMask);
    switch (e.kind) {
        case EventKind::kHostAlloc:
        case EventKind::kHostFree:
            return flagged == MemoryKind::kPageable ? MemoryKind::kPageable : MemoryKind::kPinned;
        case EventKind::kManagedAlloc:
        case EventKind::kManagedFree: return MemoryKind::kManaged;
        case EventKind::kDeviceAlloc:
        case EventKind::kDeviceFree:
            if (flagged == MemoryKind::kPinned || flagged == MemoryKind::kPageable ||
                flagged == MemoryKind::kManaged) {
                return flagged;
            }
            return MemoryKind::kDevice;
        default: return MemoryKind::kDevice;
    }
}

bool is_allocation(EventKind k) {
    return k == EventKind::kHostAlloc || k == EventKind::kManagedAlloc ||
           k == EventKind::kDeviceAlloc;
}

bool tracks_phase(RangeCategory c) {
    return c == RangeCategory::kPhase || c == RangeCategory::kGeneric ||
           c == RangeCategory::kInputWait || c == RangeCategory::kUserAnnotation ||
           c == RangeCategory::kCommunication;
}

}  // namespace

struct MemoryLedger::Watch {
    int id = 0;
    MemoryWatch spec;
    MemoryWatchCallback callback;
    std::vector<std::uint8_t> disarmed;  // per device index (see Device::index)
};

// A device's levels while a range is open.
struct PhaseLevels {
    std::uint64_t start_allocated = 0;
    std::uint64_t peak_allocated = 0;
    std::uint64_t peak_reserved = 0;
};

struct MemoryLedger::OpenRange {
    StringId name = kNoString;
    std::uint32_t thread = 0;
    std::uint64_t start_ns = 0;
    std::uint64_t end_ns = 0;  // known end of a complete range; 0 = ends with kRangeEnd
    bool tracked = false;
    // By device index; a device first seen while the range is open held nothing at its start,
    // so the vector grows (zero-filled) on demand. Bounded by options.max_devices.
    std::vector<PhaseLevels> levels;

    PhaseLevels& at(std::size_t index) {
        if (index >= levels.size()) levels.resize(index + 1);
        return levels[index];
    }
};

struct MemoryLedger::Device {
    Device(std::uint16_t o, std::uint32_t i, const LedgerOptions& opt)
        : ordinal(o), index(i), series(opt.series_points) {}

    std::uint16_t ordinal;
    std::uint32_t index;  // dense, in order of first appearance: devices_[index] == this
    AddressTable blocks;
    AddressTable driver;
    std::vector<LedgerSegment> segments;        // sorted by address, non-overlapping
    std::vector<std::uint64_t> segment_starts;  // segments[i].address, packed for the search
    std::size_t last_segment = 0;
    LedgerTotals t;
    LedgerPeaks peak;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> pools;  // pool -> reserved bytes
    std::uint64_t pool_live = 0;
    std::uint64_t pool_reserved = 0;
    std::array<std::uint64_t, kMemoryOwnerCount> owner_raw{};  // unbacked device + VM bytes
    std::uint64_t segment_reserved = 0;                        // sum of the segments
    std::uint64_t reported_reserved = 0;                       // the framework's own total
    std::uint64_t first_alloc_ns = 0;  // the span the allocation pattern covers
    std::uint64_t last_alloc_ns = 0;
    std::uint64_t peak_version = 0;                // bumped at each new peak of live()
    std::array<std::uint32_t, 2> overflow_slot{};  // sites past the cap: framework, driver
    MemorySeries series;
    std::uint64_t last_ns = 0;
    // steps
    bool in_step = false;
    bool implicit_step = false;
    bool saw_steps = false;
    std::uint64_t pending_step_end = 0;
    StepMark current;
    StepMark group;  // steps accumulating into the next kept point
    std::uint32_t group_stride = 1;
    std::vector<StepMark> steps;
    // checkpoints for per-site growth
    std::vector<std::uint64_t> checkpoint_ns;
    std::uint64_t checkpoint_stride = 1;
    std::uint64_t ticks = 0;
    std::uint64_t last_bucket_count = 0;
    std::vector<std::uint32_t> site_slots;
    // phases
    std::vector<PhaseMark> phases;
    // live allocations past the cap (LedgerOptions::max_tracked_allocations), booked by size
    std::uint64_t untracked_blocks = 0;
    std::uint64_t untracked_block_bytes = 0;
    std::array<std::pair<std::uint64_t, std::uint64_t>, 4>
        untracked_driver{};                                          // kind: count, bytes
    std::array<std::uint64_t, kMemoryOwnerCount> untracked_owner{};  // their unbacked bytes
    // watches: evaluate only when a value leaves [lo, hi)
    std::array<std::uint64_t, 3> watch_hi{kNoLimit, kNoLimit, kNoLimit};
    std::array<std::uint64_t, 3> watch_lo{0, 0, 0};

    [[nodiscard]] std::array<std::uint64_t, 3> values() const {
        return {t.allocated_rounded, t.reserved, std::max(t.used(), t.process_used)};
    }
};

MemoryLedger::MemoryLedger(LedgerOptions options) : options_(options) {
    // Slot 0 means "no slot" (backed driver records); it is never handed out for a site.
    site_usage_.emplace_back();
    site_checkpoints_.emplace_back();
}

MemoryLedger::~MemoryLedger() {
    for (Device* d : devices_) delete d;
}

MemoryLedger::Device* MemoryLedger::device(std::uint16_t ordinal) {
    if (ordinal < device_slots_.size() && device_slots_[ordinal] != 0) {
        return devices_[device_slots_[ordinal] - 1u];
    }
    // Any ordinal an event carries is accepted (importers number devices by global rank); the
    // number of distinct devices is what is capped, and events past the cap are counted.
    if (ordinal == kNoDevice ||
        devices_.size() >= std::min<std::size_t>(options_.max_devices, 0xFFFF)) {
        ++dropped_;
        return nullptr;
    }
    if (ordinal >= device_slots_.size()) device_slots_.resize(ordinal + 1u, 0);
    auto index = static_cast<std::uint32_t>(devices_.size());
    // Owned until it is in the list: a failed push_back must neither leak it nor leave a null.
    auto owned = std::make_unique<Device>(ordinal, index, options_);
    devices_.push_back(owned.get());
    owned.release();
    device_slots_[ordinal] = static_cast<std::uint16_t>(index + 1u);
    Device& d = *devices_.back();
    // Each device collects its sites past the cap in its own slots, so per-device sums hold.
    for (std::uint32_t driver = 0; driver < 2; ++driver) {
        auto slot = static_cast<std::uint32_t>(site_usage_.size());
        SiteUsage u;
        u.device = ordinal;
        u.site = StringTable::kOverflowString;
        u.driver = driver != 0;
        u.owner = driver != 0 ? MemoryOwner::kOther : MemoryOwner::kNoSite;
        u.slot = slot;
        site_usage_.push_back(u);
        site_checkpoints_.emplace_back();
        d.site_slots.push_back(slot);
        d.overflow_slot[driver] = slot;
    }
    for (const auto& [dev, bytes] : pending_capacity_) {
        if (dev == ordinal) d.t.capacity = bytes;
    }
    // Watches registered before the device's first event apply to it too.
    if (!watches_.empty()) recompute_watch_bounds(d);
    return &d;
}

const MemoryLedger::Device* MemoryLedger::find_device(std::uint16_t ordinal) const {
    return ordinal < device_slots_.size() && device_slots_[ordinal] != 0
               ? devices_[device_slots_[ordinal] - 1u]
               : nullptr;
}

std::uint32_t MemoryLedger::site_slot(Device& d, StringId site, bool driver, std::uint8_t kind) {
    std::uint64_t key = (std::uint64_t{d.ordinal} << 48) | (std::uint64_t{driver} << 47) |
                        (std::uint64_t{kind} << 32) | site;
    // A direct-mapped cache in front of the hash map: programs allocate from a few hot sites.
    SiteCacheEntry& cached = site_cache_[(key * 0x9E3779B97F4A7C15ull) >> 56];
    if (cached.valid && cached.key == key) return cached.slot;
    auto it = site_slots_.find(key);
    if (it != site_slots_.end()) {
        cached = SiteCacheEntry{key, it->second, true};
        return it->second;
    }
    if (site_usage_.size() >= options_.max_sites) return d.overflow_slot[driver ? 1 : 0];
    auto slot = static_cast<std::uint32_t>(site_usage_.size());
    SiteUsage u;
    u.device = d.ordinal;
    u.site = site;
    u.driver = driver;
    if (driver) {
        u.owner = static_cast<MemoryOwner>(kind);
    } else {
        u.category = static_cast<MemoryCategory>(kind);
    }
    u.slot = slot;
    site_usage_.push_back(u);
    // A site first seen now held nothing at the earlier checkpoints.
    site_checkpoints_.emplace_back(d.checkpoint_ns.size(), 0);
    d.site_slots.push_back(slot);
    site_slots_.emplace(key, slot);
    return slot;
}

MemoryOwner MemoryLedger::owner_of(StringId site) {
    if (site == kNoString) return MemoryOwner::kNoSite;
    if (strings_ == nullptr) return MemoryOwner::kOther;
    auto it = owners_.find(site);
    if (it != owners_.end()) return it->second;
    MemoryOwner owner = classify_owner(strings_->lookup(site));
    if (owner == MemoryOwner::kNoSite) owner = MemoryOwner::kOther;  // a site id with no text
    if (owners_.size() < kMaxCachedOwners) owners_.emplace(site, owner);
    return owner;
}

// Every change to a site's live bytes goes through here: before the first change after a new
// peak, the site's live bytes are its bytes at that peak, so they are kept then.
void MemoryLedger::site_change(Device& d, std::uint32_t slot, std::int64_t bytes, int blocks) {
    if (slot == 0 || slot >= site_usage_.size()) return;
    SiteUsage& u = site_usage_[slot];
    if (u.seen_version != d.peak_version) {
        u.at_peak = u.live_bytes;
        u.seen_version = d.peak_version;
    }
    u.live_bytes += bytes;
    if (blocks > 0) {
        u.live_blocks += static_cast<std::uint64_t>(blocks);
    } else if (u.live_blocks > 0) {
        --u.live_blocks;
    }
}

void MemoryLedger::note_allocation(Device& d, std::uint32_t slot, std::uint64_t bytes,
                                   std::uint64_t t) {
    if (d.first_alloc_ns == 0 || t < d.first_alloc_ns) d.first_alloc_ns = t;
    d.last_alloc_ns = std::max(d.last_alloc_ns, t);
    if (slot == 0) return;
    SiteUsage& u = site_usage_[slot];
    u.allocated_total += bytes;
    u.pattern.add(t);
}

// Derives reserved and the owner split of outside memory from the raw sums (see the file
// comment). O(owners); runs on driver, segment and reserved-total changes only.
void MemoryLedger::reattribute(Device& d) {
    LedgerTotals& t = d.t;
    const auto fw = static_cast<std::size_t>(MemoryOwner::kFramework);
    const auto nosite = static_cast<std::size_t>(MemoryOwner::kNoSite);
    std::uint64_t attributed = 0;
    if (t.segments_seen) {
        t.reserved = d.segment_reserved;
    } else {
        t.reserved = std::max(t.reserved_reported ? d.reported_reserved : 0, d.owner_raw[fw]);
        attributed = std::min(t.reserved, d.owner_raw[fw] + d.owner_raw[nosite]);
    }
    t.framework_attributed = attributed;
    t.outside_by_owner = d.owner_raw;
    std::uint64_t from_fw = std::min(attributed, t.outside_by_owner[fw]);
    t.outside_by_owner[fw] -= from_fw;
    t.outside_by_owner[nosite] = sub(t.outside_by_owner[nosite], attributed - from_fw);
    t.outside_by_owner[static_cast<std::size_t>(MemoryOwner::kStreamPool)] += t.outside_pool;
}

void MemoryLedger::set_capacity(std::uint16_t ordinal, std::uint64_t bytes) {
    if (bytes == 0 || ordinal == kNoDevice) return;
    auto it = std::find_if(pending_capacity_.begin(), pending_capacity_.end(),
                           [&](const auto& p) { return p.first == ordinal; });
    if (it != pending_capacity_.end()) {
        it->second = bytes;
    } else if (pending_capacity_.size() < kMaxPendingCapacities) {
        pending_capacity_.emplace_back(ordinal, bytes);
    }
    if (ordinal < device_slots_.size() && device_slots_[ordinal] != 0) {
        Device& d = *devices_[device_slots_[ordinal] - 1u];
        d.t.capacity = bytes;
        recompute_watch_bounds(d);
    }
}

// ---- segments ----

LedgerSegment* MemoryLedger::segment_containing(Device& d, std::uint64_t address) {
    auto& segs = d.segments;
    if (segs.empty()) return nullptr;
    if (d.last_segment < segs.size()) {
        LedgerSegment& s = segs[d.last_segment];
        if (address >= s.address && address - s.address < s.size) return &s;
    }
    // Branch-free binary search over the packed start addresses (random addresses make a
    // branchy search mispredict at every level).
    const std::uint64_t* base = d.segment_starts.data();
    std::size_t n = d.segment_starts.size();
    while (n > 1) {
        std::size_t half = n / 2;
        base = base[half] <= address ? base + half : base;
        n -= half;
    }
    if (*base > address) return nullptr;
    auto index = static_cast<std::size_t>(base - d.segment_starts.data());
    LedgerSegment& s = segs[index];
    if (address - s.address >= s.size) return nullptr;
    d.last_segment = index;
    return &s;
}

// Every change to the segment list goes through these two, which keep the packed starts in
// step (a memmove, nearly free when segments arrive in address order as the driver gives them).
void MemoryLedger::insert_segment(Device& d, std::size_t index, const LedgerSegment& seg) {
    d.segments.insert(d.segments.begin() + static_cast<std::ptrdiff_t>(index), seg);
    d.segment_starts.insert(d.segment_starts.begin() + static_cast<std::ptrdiff_t>(index),
                            seg.address);
    segments_changed(d);
}

void MemoryLedger::erase_segment(Device& d, std::size_t index) {
    d.segments.erase(d.segments.begin() + static_cast<std::ptrdiff_t>(index));
    d.segment_starts.erase(d.segment_starts.begin() + static_cast<std::ptrdiff_t>(index));
    segments_changed(d);
}

void MemoryLedger::segments_changed(Device& d) {
    d.last_segment = 0;
}

void MemoryLedger::segment_alloc(Device& d, const Event& e) {
    const MemoryPayload& m = e.memory;
    if (m.bytes == 0) return;
    d.t.segments_seen = true;
    auto& segs = d.segments;
    auto it =
        std::lower_bound(segs.begin(), segs.end(), m.address,
                         [](const LedgerSegment& s, std::uint64_t a) { return s.address < a; });
    bool expandable = (e.flags & kEventFlagExpandable) != 0;
    if (expandable && it != segs.begin()) {
        // Pages mapped at the end of an expandable segment (of the same pool) extend it.
        auto prev = it - 1;
        if (prev->expandable && prev->pool == m.extra && prev->address + prev->size == m.address) {
            prev->size += m.bytes;
            d.segment_reserved += m.bytes;
            if (prev->pool != 0) d.t.private_pool_reserved += m.bytes;
            if (it != segs.end() && it->expandable && it->pool == prev->pool &&
                it->address == prev->address + prev->size) {
                prev->size += it->size;
                erase_segment(d, static_cast<std::size_t>(it - segs.begin()));
                --d.t.segments;
            }
            segments_changed(d);
            reattribute(d);
            return;
        }
    }
    if (it != segs.end() && it->address == m.address) {
        // A segment at the same address again: the free was lost. Replace it.
        d.segment_reserved = sub(d.segment_reserved, it->size);
        if (it->pool != 0) d.t.private_pool_reserved = sub(d.t.private_pool_reserved, it->size);
        --d.t.segments;
        erase_segment(d, static_cast<std::size_t>(it - segs.begin()));
        it =
            std::lower_bound(segs.begin(), segs.end(), m.address,
                             [](const LedgerSegment& s, std::uint64_t a) { return s.address < a; });
    }
    LedgerSegment seg;
    seg.address = m.address;
    seg.size = m.bytes;
    seg.stream = e.stream;
    seg.site = m.site;
    seg.expandable = expandable;
    seg.pool = m.extra;
    insert_segment(d, static_cast<std::size_t>(it - segs.begin()), seg);
    d.segment_reserved += m.bytes;
    if (seg.pool != 0) d.t.private_pool_reserved += m.bytes;
    ++d.t.segments;
    if (LiveRecord* r = d.driver.find(m.address);
        r != nullptr && (r->flags() & kFlagBacked) == 0 && (r->flags() & kKindMask) != kKindPool) {
        // The driver allocation arrived first: it was outside, it is the segment's store now.
        std::uint16_t kind = r->flags() & kKindMask;
        r->set_flags(r->flags() | kFlagBacked);
        if (kind == kKindDevice) d.t.outside_device = sub(d.t.outside_device, r->size());
        if (kind == kKindVm) d.t.outside_vm = sub(d.t.outside_vm, r->size());
        auto owner = static_cast<std::size_t>((r->flags() >> kOwnerShift) & 0xF);
        if (owner < kMemoryOwnerCount) d.owner_raw[owner] = sub(d.owner_raw[owner], r->size());
        site_change(d, r->site_slot, -static_cast<std::int64_t>(r->size()), -1);
        r->site_slot = 0;
    }
    reattribute(d);
}

void MemoryLedger::segment_free(Device& d, const Event& e) {
    const MemoryPayload& m = e.memory;
    auto& segs = d.segments;
    d.last_segment = 0;
    if ((e.flags & kEventFlagExpandable) == 0) {
        auto it =
            std::lower_bound(segs.begin(), segs.end(), m.address,
                             [](const LedgerSegment& s, std::uint64_t a) { return s.address < a; });
        if (it == segs.end() || it->address != m.address) {
            ++unmatched_frees_;
            return;
        }
        d.segment_reserved = sub(d.segment_reserved, it->size);
        if (it->pool != 0) d.t.private_pool_reserved = sub(d.t.private_pool_reserved, it->size);
        --d.t.segments;
        erase_segment(d, static_cast<std::size_t>(it - segs.begin()));
        reattribute(d);
        return;
    }
    // Unmapping pages of an expandable segment: cut [a, a + n) out of the segment holding it.
    LedgerSegment* s = segment_containing(d, m.address);
    if (s == nullptr) {
        ++unmatched_frees_;
        return;
    }
    std::uint64_t cut_end = std::min(m.address + m.bytes, s->address + s->size);
    std::uint64_t removed = cut_end - m.address;
    d.segment_reserved = sub(d.segment_reserved, removed);
    if (s->pool != 0) d.t.private_pool_reserved = sub(d.t.private_pool_reserved, removed);
    LedgerSegment head = *s;
    head.size = m.address - s->address;
    LedgerSegment tail = *s;
    tail.address = cut_end;
    tail.size = s->address + s->size - cut_end;
    auto index = static_cast<std::size_t>(s - segs.data());
    erase_segment(d, index);
    --d.t.segments;
    for (LedgerSegment* part : {&tail, &head}) {
        if (part->size == 0) continue;
        insert_segment(d, index, *part);
        ++d.t.segments;
    }
    reattribute(d);
}

// ---- blocks ----

void MemoryLedger::block_alloc(Device& d, const Event& e) {
    const MemoryPayload& m = e.memory;
    if (m.address == 0) {
        anonymous_block(d, e);
        return;
    }
    d.t.blocks_seen = true;
    std::uint64_t requested = m.aux == 0 || m.aux > m.bytes ? m.bytes : m.aux;
    LiveRecord r;
    r.address = m.address;
    r.set(m.bytes, 0);
    r.shortfall = encode_shortfall(m.bytes - requested);
    r.site_slot = site_slot(d, m.site, false, static_cast<std::uint8_t>(block_category(m)));
    LiveRecord old;
    if (full(d.blocks, r.address)) {
        ++d.untracked_blocks;
        d.untracked_block_bytes += r.size();
        ++untracked_booked_;
    } else if (!d.blocks.insert(r, &old)) {
        // Allocated again without a free in between (a lost free): retire the old one first.
        Event undo = e;
        undo.kind = EventKind::kBlockFree;
        undo.flags = 0;
        d.blocks.insert(old);
        block_free(d, undo);
        d.blocks.insert(r);
    }
    if (!d.t.allocated_reported) {
        d.t.allocated_rounded += r.size();
        d.t.allocated_requested += requested;
    }
    ++d.t.live_blocks;
    site_change(d, r.site_slot, static_cast<std::int64_t>(r.size()), 1);
    note_allocation(d, r.site_slot, r.size(), e.start_ns);
}

// A block without an address (Kineto [memory] events before 2022): its size still moves the
// level, as a running sum; frees cannot be matched to sites.
void MemoryLedger::anonymous_block(Device& d, const Event& e) {
    if (d.t.allocated_reported) return;  // the framework's own totals carry the level
    d.t.allocated_from_sizes = true;
    const std::uint64_t bytes = e.memory.bytes;
    if (e.kind == EventKind::kBlockAlloc) {
        d.t.allocated_rounded += bytes;
        d.t.allocated_requested += bytes;
        return;
    }
    if ((e.flags & kEventFlagPendingFree) != 0) return;  // the completion counts
    // A free larger than the level released memory allocated before the input began.
    if (bytes > d.t.allocated_rounded) ++unmatched_frees_;
    d.t.allocated_rounded = sub(d.t.allocated_rounded, bytes);
    d.t.allocated_requested = sub(d.t.allocated_requested, bytes);
}

void MemoryLedger::block_free(Device& d, const Event& e) {
    const MemoryPayload& m = e.memory;
    if (m.address == 0) {
        anonymous_block(d, e);
        return;
    }
    const bool counts = !d.t.allocated_reported;
    bool pending = (e.flags & kEventFlagPendingFree) != 0;
    if (!pending) {
        // The common case takes one probe: erase, then settle the books from the record.
        LiveRecord r;
        if (!d.blocks.erase(m.address, &r)) {
            if (!untracked_free(d, e, counts)) ++unmatched_frees_;
            return;
        }
        if ((r.flags() & kFlagPending) != 0) {
            d.t.pending_free = sub(d.t.pending_free, r.size());
        } else {
            site_change(d, r.site_slot, -static_cast<std::int64_t>(r.size()), -1);
            if (counts) {
                d.t.allocated_rounded = sub(d.t.allocated_rounded, r.size());
                d.t.allocated_requested = sub(d.t.allocated_requested, requested_of(r));
            }
        }
        if (d.t.live_blocks > 0) --d.t.live_blocks;
        return;
    }
    LiveRecord* found = d.blocks.find(m.address);
    if (found == nullptr) return;  // a pending free of an unknown block: its completion counts
    if ((found->flags() & kFlagPending) == 0) {
        // The program is done with it: it leaves "allocated" now, and leaves the segment's
        // occupied space only when the free completes.
        site_change(d, found->site_slot, -static_cast<std::int64_t>(found->size()), -1);
        if (counts) {
            d.t.allocated_rounded = sub(d.t.allocated_rounded, found->size());
            d.t.allocated_requested = sub(d.t.allocated_requested, requested_of(*found));
        }
        found->set_flags(found->flags() | kFlagPending);
        d.t.pending_free += found->size();
    }
}

// ---- driver-level memory ----

void MemoryLedger::driver_alloc(Device& d, const Event& e) {
    const MemoryPayload& m = e.memory;
    if (m.address == 0) {
        ++dropped_;
        return;
    }
    std::uint16_t kind = e.kind == EventKind::kDeviceAlloc ? kKindDevice
                         : e.kind == EventKind::kPoolAlloc ? kKindPool
                                                           : kKindVm;
    // VM mappings count physical bytes (aux) when the source knows them.
    std::uint64_t bytes = kind == kKindVm && m.aux != 0 ? m.aux : m.bytes;
    const MemoryOwner owner = kind == kKindPool ? MemoryOwner::kStreamPool : owner_of(m.site);
    LiveRecord r;
    r.address = m.address;
    std::uint16_t flags =
        kind | static_cast<std::uint16_t>(static_cast<unsigned>(owner) << kOwnerShift);
    if (kind != kKindPool) {
        LedgerSegment* s = segment_containing(d, m.address);
        if (s != nullptr && (kind == kKindVm || s->address == m.address)) flags |= kFlagBacked;
    }
    r.set(bytes, flags);
    const bool outside = (flags & kFlagBacked) == 0;
    // Sites are kept for memory that is outside the framework by its call site; the framework's
    // own and site-less allocations are matched in aggregate (reattribute()), not per site.
    const bool keeps_site =
        outside && owner != MemoryOwner::kNoSite && owner != MemoryOwner::kFramework;
    r.site_slot = keeps_site ? site_slot(d, m.site, true, static_cast<std::uint8_t>(owner)) : 0;
    LiveRecord old;
    const bool untracked = full(d.driver, r.address);
    if (untracked) {
        ++untracked_booked_;
    } else if (!d.driver.insert(r, &old)) {
        Event undo = e;
        undo.kind = kind == kKindDevice ? EventKind::kDeviceFree
                    : kind == kKindPool ? EventKind::kPoolFree
                                        : EventKind::kVmUnmap;
        d.driver.insert(old);
        driver_free(d, undo);
        d.driver.insert(r);
    }
    if (!outside) return;
    if (untracked) {
        ++d.untracked_driver[kind].first;
        d.untracked_driver[kind].second += bytes;
        if (kind != kKindPool) d.untracked_owner[static_cast<std::size_t>(owner)] += bytes;
    }
    d.t.driver_seen = true;
    if (kind == kKindDevice) d.t.outside_device += bytes;
    if (kind == kKindVm) d.t.outside_vm += bytes;
    if (kind == kKindPool) {
        d.pool_live += bytes;
        d.t.outside_pool = std::max(d.pool_live, d.pool_reserved);
    } else {
        d.owner_raw[static_cast<std::size_t>(owner)] += bytes;
    }
    site_change(d, r.site_slot, static_cast<std::int64_t>(bytes), 1);
    note_allocation(d, r.site_slot, bytes, e.start_ns);
    reattribute(d);
}

void MemoryLedger::driver_free(Device& d, const Event& e) {
    LiveRecord r;
    if (!d.driver.erase(e.memory.address, &r)) {
        // A free that does not say its memory kind (cudaFreeHost seen as a plain free) of
        // host memory booked earlier.
        if (!release_host(e.memory.address) && !untracked_driver_free(d, e)) ++unmatched_frees_;
        return;
    }
    if ((r.flags() & kFlagBacked) != 0) return;
    std::uint16_t kind = r.flags() & kKindMask;
    if (kind == kKindDevice) d.t.outside_device = sub(d.t.outside_device, r.size());
    if (kind == kKindVm) d.t.outside_vm = sub(d.t.outside_vm, r.size());
    if (kind == kKindPool) {
        d.pool_live = sub(d.pool_live, r.size());
        d.t.outside_pool = std::max(d.pool_live, d.pool_reserved);
    } else {
        auto owner = static_cast<std::size_t>((r.flags() >> kOwnerShift) & 0xF);
        if (owner < kMemoryOwnerCount) d.owner_raw[owner] = sub(d.owner_raw[owner], r.size());
    }
    site_change(d, r.site_slot, -static_cast<std::int64_t>(r.size()), -1);
    reattribute(d);
}

void MemoryLedger::pool_resize(Device& d, const Event& e) {
    const MemoryPayload& m = e.memory;
    auto it = std::find_if(d.pools.begin(), d.pools.end(),
                           [&](const auto& p) { return p.first == m.address; });
    if (it == d.pools.end()) {
        if (d.pools.size() >= 1024) {
            ++dropped_;
            return;
        }
        d.pools.emplace_back(m.address, 0);
        it = d.pools.end() - 1;
    }
    d.pool_reserved = sub(d.pool_reserved, it->second) + m.bytes;
    it->second = m.bytes;
    d.t.outside_pool = std::max(d.pool_live, d.pool_reserved);
    d.t.driver_seen = true;
    reattribute(d);
}

// ---- host and managed memory (process-wide) ----

void MemoryLedger::host_alloc(const Event& e, MemoryKind kind) {
    const MemoryPayload& m = e.memory;
    if (m.address == 0) {
        ++dropped_;
        return;
    }
    host_totals_.seen = true;
    LiveRecord r;
    r.address = m.address;
    r.set(m.bytes, static_cast<std::uint16_t>(kind));
    LiveRecord old;
    if (full(host_, r.address)) {
        auto& u = host_untracked_[host_bucket(kind)];
        ++u.first;
        u.second += r.size();
        ++untracked_booked_;
    } else if (!host_.insert(r, &old)) {
        // Allocated again without a free in between (a lost free): retire the old one first.
        host_.insert(old);
        host_free(e);
        host_.insert(r);
    }
    HostMemoryTotals& h = host_totals_;
    ++h.live;
    switch (kind) {
        case MemoryKind::kPageable:
            h.pageable += r.size();
            h.peak_pageable = std::max(h.peak_pageable, h.pageable);
            break;
        case MemoryKind::kManaged:
            h.managed += r.size();
            h.peak_managed = std::max(h.peak_managed, h.managed);
            break;
        default:
            h.pinned += r.size();
            h.peak_pinned = std::max(h.peak_pinned, h.pinned);
            break;
    }
}

void MemoryLedger::host_free(const Event& e) {
    host_totals_.seen = true;
    if (!release_host(e.memory.address) && !untracked_host_free(e)) ++unmatched_frees_;
}

bool MemoryLedger::release_host(std::uint64_t address) {
    LiveRecord r;
    if (!host_.erase(address, &r)) return false;
    HostMemoryTotals& h = host_totals_;
    if (h.live > 0) --h.live;
    switch (static_cast<MemoryKind>(r.flags())) {
        case MemoryKind::kPageable: h.pageable = sub(h.pageable, r.size()); break;
        case MemoryKind::kManaged: h.managed = sub(h.managed, r.size()); break;
        default: h.pinned = sub(h.pinned, r.size()); break;
    }
    return true;
}

// ---- allocations past the cap ----

bool MemoryLedger::full(AddressTable& table, std::uint64_t address) const {
    return table.size() >= options_.max_tracked_allocations && table.find(address) == nullptr;
}

// A free of an address no table holds, while allocations booked by size are live: one of them.
bool MemoryLedger::untracked_free(Device& d, const Event& e, bool counts) {
    if (d.untracked_blocks == 0 || e.memory.bytes == 0) return false;
    const std::uint64_t b = std::min(e.memory.bytes, d.untracked_block_bytes);
    --d.untracked_blocks;
    d.untracked_block_bytes -= b;
    if (counts) {
        d.t.allocated_rounded = sub(d.t.allocated_rounded, b);
        d.t.allocated_requested = sub(d.t.allocated_requested, b);
    }
    if (d.t.live_blocks > 0) --d.t.live_blocks;
    unsited_freed_bytes_ += b;
    return true;
}

bool MemoryLedger::untracked_driver_free(Device& d, const Event& e) {
    const std::uint16_t kind = e.kind == EventKind::kDeviceFree ? kKindDevice
                               : e.kind == EventKind::kPoolFree ? kKindPool
                                                                : kKindVm;
    auto& u = d.untracked_driver[kind];
    const std::uint64_t freed =
        kind == kKindVm && e.memory.aux != 0 ? e.memory.aux : e.memory.bytes;
    if (u.first == 0 || freed == 0) return false;
    const std::uint64_t b = std::min(freed, u.second);
    --u.first;
    u.second -= b;
    if (kind == kKindDevice) d.t.outside_device = sub(d.t.outside_device, b);
    if (kind == kKindVm) d.t.outside_vm = sub(d.t.outside_vm, b);
    if (kind == kKindPool) {
        d.pool_live = sub(d.pool_live, b);
        d.t.outside_pool = std::max(d.pool_live, d.pool_reserved);
    } else {
        // The owner is not known either: the one holding the most such bytes gives them back.
        auto most = static_cast<std::size_t>(
            std::max_element(d.untracked_owner.begin(), d.untracked_owner.end()) -
            d.untracked_owner.begin());
        const std::uint64_t x = std::min(b, d.untracked_owner[most]);
        d.untracked_owner[most] -= x;
        d.owner_raw[most] = sub(d.owner_raw[most], x);
    }
    unsited_freed_bytes_ += b;
    reattribute(d);
    return true;
}

bool MemoryLedger::untracked_host_free(const Event& e) {
    auto it = std::max_element(host_untracked_.begin(), host_untracked_.end(),
                               [](const auto& a, const auto& b) { return a.second < b.second; });
    if (it->first == 0 || e.memory.bytes == 0) return false;
    const std::uint64_t b = std::min(e.memory.bytes, it->second);
    --it->first;
    it->second -= b;
    HostMemoryTotals& h = host_totals_;
    if (h.live > 0) --h.live;
    switch (it - host_untracked_.begin()) {
        case 1: h.pageable = sub(h.pageable, b); break;
        case 2: h.managed = sub(h.managed, b); break;
        default: h.pinned = sub(h.pinned, b); break;
    }
    return true;
}

UntrackedAllocations MemoryLedger::untracked() const noexcept {
    UntrackedAllocations u;
    u.booked = untracked_booked_;
    u.unsited_freed_bytes = unsited_freed_bytes_;
    u.cap = options_.max_tracked_allocations;
    for (const Device* d : devices_) {
        u.live += d->untracked_blocks;
        u.live_bytes += d->untracked_block_bytes;
        for (const auto& [count, bytes] : d->untracked_driver) {
            u.live += count;
            u.live_bytes += bytes;
        }
    }
    for (const auto& [count, bytes] : host_untracked_) {
        u.live += count;
        u.live_bytes += bytes;
    }
    return u;
}

// ---- counters, steps, ranges ----

void MemoryLedger::counter(const Event& e) {
    if (e.device == kNoDevice) return;
    double v = e.counter.value;
    auto bytes = v > 0 ? static_cast<std::uint64_t>(v) : 0;
    const CounterKind kind = e.counter.counter;
    if (kind == CounterKind::kDeviceMemoryTotalBytes) {
        set_capacity(e.device, bytes);
        return;
    }
    // A device the program never used (NVML samples every visible one) does not appear.
    const bool exists = find_device(e.device) != nullptr;
    if (kind == CounterKind::kForeignProcessMemoryBytes) {
        if (exists) device(e.device)->t.foreign_used = bytes;
        return;
    }
    if (kind == CounterKind::kProcessMemoryUsedBytes && bytes == 0 && !exists) return;
    if (kind != CounterKind::kProcessMemoryUsedBytes &&
        kind != CounterKind::kFrameworkAllocatedBytes &&
        kind != CounterKind::kFrameworkReservedBytes &&
        kind != CounterKind::kFrameworkInactiveSplitBytes) {
        return;
    }
    Device* d = device(e.device);
    if (d == nullptr) return;
    LedgerTotals& t = d->t;
    switch (kind) {
        case CounterKind::kProcessMemoryUsedBytes:
            t.process_used = bytes;
            t.process_sampled = true;
            d->peak.process_used = std::max(d->peak.process_used, bytes);
            break;
        case CounterKind::kFrameworkAllocatedBytes:
            // The allocator's own total is exact; block events, when they come too, may start
            // after allocations the input never showed.
            t.allocated_reported = true;
            t.allocated_rounded = t.allocated_requested = bytes;
            break;
        case CounterKind::kFrameworkReservedBytes: {
            // Until the framework's first total, driver allocations with no call site could be
            // its segments or anyone's: peaks of "outside" and "live" taken then are ambiguous,
            // so they start again from the first reconciled state.
            const bool settles = !t.reserved_reported && !t.segments_seen &&
                                 d->owner_raw[static_cast<std::size_t>(MemoryOwner::kNoSite)] > 0;
            t.reserved_reported = true;
            d->reported_reserved = bytes;
            reattribute(*d);
            if (settles) {
                d->peak.outside = 0;
                d->peak.live = 0;
            }
            break;
        }
        default:  // kFrameworkInactiveSplitBytes
            t.inactive_split_reported = bytes;
            t.split_reported = true;
            return;
    }
    after_change(*d, e.start_ns);
}

void MemoryLedger::step_begin(Device& d, std::uint64_t id, std::uint64_t t) {
    d.saw_steps = true;
    d.in_step = true;
    d.implicit_step = false;
    d.current = StepMark{};
    d.current.first_step = id;
    d.current.start_ns = t;
    d.current.allocated_min = d.current.allocated_peak = d.t.allocated_rounded;
    d.current.reserved_peak = d.current.reserved_min = d.t.reserved;
    d.current.outside_min = d.t.outside();
    d.current.process_min = d.t.process_used;
}

void MemoryLedger::step_end(Device& d, std::uint64_t t) {
    d.saw_steps = true;
    if (d.in_step) {
        StepMark s = d.current;
        s.end_ns = t;
        s.allocated_end = d.t.allocated_rounded;
        s.allocated_min = std::min(s.allocated_min, s.allocated_end);
        // Accumulate into the group of `group_stride` steps, then keep the group.
        if (d.group.steps == 0 || d.group.end_ns == 0) {
            d.group = s;
        } else {
            d.group.steps += s.steps;
            d.group.end_ns = s.end_ns;
            d.group.allocated_min = std::min(d.group.allocated_min, s.allocated_min);
            d.group.allocated_peak = std::max(d.group.allocated_peak, s.allocated_peak);
            d.group.reserved_peak = std::max(d.group.reserved_peak, s.reserved_peak);
            d.group.reserved_min = std::min(d.group.reserved_min, s.reserved_min);
            d.group.outside_min = std::min(d.group.outside_min, s.outside_min);
            d.group.process_min = std::min(d.group.process_min, s.process_min);
            d.group.allocated_end = s.allocated_end;
        }
        if (d.group.steps >= d.group_stride) {
            d.steps.push_back(d.group);
            d.group = StepMark{};
            if (d.steps.size() >= options_.step_points) {
                std::vector<StepMark> merged;
                merged.reserve(d.steps.size() / 2 + 1);
                for (std::size_t i = 0; i < d.steps.size(); i += 2) {
                    StepMark m = d.steps[i];
                    if (i + 1 < d.steps.size()) {
                        const StepMark& b = d.steps[i + 1];
                        m.steps += b.steps;
                        m.end_ns = b.end_ns;
                        m.allocated_min = std::min(m.allocated_min, b.allocated_min);
                        m.allocated_peak = std::max(m.allocated_peak, b.allocated_peak);
                        m.reserved_peak = std::max(m.reserved_peak, b.reserved_peak);
                        m.reserved_min = std::min(m.reserved_min, b.reserved_min);
                        m.outside_min = std::min(m.outside_min, b.outside_min);
                        m.process_min = std::min(m.process_min, b.process_min);
                        m.allocated_end = b.allocated_end;
                    }
                    merged.push_back(m);
                }
                d.steps = std::move(merged);
                d.group_stride *= 2;
            }
        }
        ++d.ticks;
        if (d.ticks % d.checkpoint_stride == 0) take_checkpoint(d);
    }
    // Until the next explicit begin, memory is watched as part of an implicit step, so
    // programs that only mark step ends still get per-step figures.
    step_begin(d, d.current.first_step + 1, t);
    d.implicit_step = true;
}

void MemoryLedger::take_checkpoint(Device& d) {
    if (d.checkpoint_ns.size() >= options_.checkpoints) {
        // Keep every other checkpoint (the first always stays) and halve the rate.
        std::size_t kept = 0;
        for (std::size_t i = 0; i < d.checkpoint_ns.size(); i += 2)
            d.checkpoint_ns[kept++] = d.checkpoint_ns[i];
        d.checkpoint_ns.resize(kept);
        for (std::uint32_t slot : d.site_slots) {
            auto& v = site_checkpoints_[slot];
            std::size_t k = 0;
            for (std::size_t i = 0; i < v.size(); i += 2) v[k++] = v[i];
            v.resize(k);
        }
        d.checkpoint_stride *= 2;
    }
    d.checkpoint_ns.push_back(d.last_ns);
    for (std::uint32_t slot : d.site_slots) {
        auto& v = site_checkpoints_[slot];
        v.resize(d.checkpoint_ns.size() - 1, 0);
        v.push_back(site_usage_[slot].live_bytes);
    }
}

void MemoryLedger::range_begin(const Event& e) {
    if (open_ranges_.size() >= kMaxOpenRanges) {
        ++dropped_;
        return;
    }
    OpenRange r;
    r.name = e.range.name;
    r.thread = e.thread;
    r.start_ns = e.start_ns;
    r.end_ns = e.kind == EventKind::kRange ? std::max(e.end_ns, e.start_ns + 1) : 0;
    r.tracked = tracks_phase(e.range.category);
    r.levels.resize(devices_.size());
    for (std::size_t i = 0; i < devices_.size(); ++i) {
        r.levels[i].start_allocated = r.levels[i].peak_allocated = devices_[i]->t.allocated_rounded;
        r.levels[i].peak_reserved = devices_[i]->t.reserved;
    }
    open_ranges_.push_back(r);
}

void MemoryLedger::range_end(const Event& e) {
    // Pop the innermost range of this thread (ranges of other threads may interleave).
    std::size_t i = open_ranges_.size();
    while (i > 0 && open_ranges_[i - 1].thread != e.thread) --i;
    if (i == 0) {
        ++dropped_;
        return;
    }
    OpenRange r = std::move(open_ranges_[i - 1]);
    open_ranges_.erase(open_ranges_.begin() + static_cast<std::ptrdiff_t>(i - 1));
    if (i - 1 > 0) {
        OpenRange& parent = open_ranges_[i - 2];
        for (std::size_t k = 0; k < r.levels.size(); ++k) {
            PhaseLevels& p = parent.at(k);
            p.peak_allocated = std::max(p.peak_allocated, r.levels[k].peak_allocated);
            p.peak_reserved = std::max(p.peak_reserved, r.levels[k].peak_reserved);
        }
    }
    if (!r.tracked || r.name == kNoString) return;
    std::uint64_t end = e.kind == EventKind::kRangeEnd ? e.start_ns : r.end_ns;
    for (std::size_t k = 0; k < devices_.size(); ++k) {
        Device* d = devices_[k];
        const PhaseLevels levels = r.at(k);
        auto it = std::find_if(d->phases.begin(), d->phases.end(),
                               [&](const PhaseMark& p) { return p.name == r.name; });
        if (it == d->phases.end()) {
            if (d->phases.size() >= options_.max_phase_names) continue;
            d->phases.push_back(PhaseMark{r.name, 0, 0, 0, 0, 0});
            it = d->phases.end() - 1;
        }
        ++it->runs;
        it->allocated_peak = std::max(it->allocated_peak, levels.peak_allocated);
        it->reserved_peak = std::max(it->reserved_peak, levels.peak_reserved);
        auto growth = static_cast<std::int64_t>(d->t.allocated_rounded) -
                      static_cast<std::int64_t>(levels.start_allocated);
        if (it->runs == 1 || growth > it->allocated_growth_max) it->allocated_growth_max = growth;
        it->total_ns += end > r.start_ns ? end - r.start_ns : 0;
    }
}

// ---- the per-change bookkeeping ----

void MemoryLedger::after_change(Device& d, std::uint64_t t) {
    const LedgerTotals& v = d.t;
    if (t > d.last_ns) d.last_ns = t;
    if (v.allocated_rounded > d.peak.allocated_rounded) {
        d.peak.allocated_rounded = v.allocated_rounded;
        d.peak.allocated_requested = std::max(d.peak.allocated_requested, v.allocated_requested);
        d.peak.allocated_ns = t;
    }
    if (v.reserved > d.peak.reserved) {
        d.peak.reserved = v.reserved;
        d.peak.private_pool_reserved = v.private_pool_reserved;
    }
    std::uint64_t outside = v.outside();
    if (outside > d.peak.outside) d.peak.outside = outside;
    if (v.used() > d.peak.used) {
        d.peak.used = v.used();
        d.peak.used_ns = t;
    }
    if (v.live() > d.peak.live) {
        d.peak.live = v.live();
        d.peak.live_ns = t;
        d.peak.at_live_peak = v;
        ++d.peak_version;
    }
    if (d.in_step) {
        d.current.allocated_min = std::min(d.current.allocated_min, v.allocated_rounded);
        d.current.allocated_peak = std::max(d.current.allocated_peak, v.allocated_rounded);
        d.current.reserved_peak = std::max(d.current.reserved_peak, v.reserved);
        d.current.reserved_min = std::min(d.current.reserved_min, v.reserved);
        d.current.outside_min = std::min(d.current.outside_min, outside);
        d.current.process_min = std::min(d.current.process_min, v.process_used);
    }
    if (!open_ranges_.empty()) {
        PhaseLevels& p = open_ranges_.back().at(d.index);
        p.peak_allocated = std::max(p.peak_allocated, v.allocated_rounded);
        p.peak_reserved = std::max(p.peak_reserved, v.reserved);
    }
    d.series.record(t, MemoryLevels{v.allocated_rounded, v.reserved, outside, v.process_used});
    if (!d.saw_steps && d.series.closed_buckets() != d.last_bucket_count) {
        // Without steps, growth is tracked over time: one tick per closed series bucket.
        d.last_bucket_count = d.series.closed_buckets();
        ++d.ticks;
        if (d.ticks % d.checkpoint_stride == 0) take_checkpoint(d);
    }
    auto values = d.values();
    for (std::size_t m = 0; m < 3; ++m) {
        if (values[m] >= d.watch_hi[m] || values[m] < d.watch_lo[m]) {
            check_watches(d, t);
            break;
        }
    }
}

void MemoryLedger::apply(const Event& e) {
    // Complete ranges and steps whose end has passed close before this event counts.
    while (!open_ranges_.empty() && open_ranges_.back().end_ns != 0 &&
           open_ranges_.back().end_ns <= e.start_ns) {
        Event end;
        end.kind = EventKind::kRange;
        end.thread = open_ranges_.back().thread;
        range_end(end);
    }
    if (MemoryKind kind = booked_kind(e); kind != MemoryKind::kDevice) {
        if (is_allocation(e.kind)) {
            host_alloc(e, kind);
        } else {
            host_free(e);
        }
        return;
    }
    switch (e.kind) {
        case EventKind::kBlockAlloc:
        case EventKind::kBlockFree:
        case EventKind::kSegmentAlloc:
        case EventKind::kSegmentFree:
        case EventKind::kDeviceAlloc:
        case EventKind::kDeviceFree:
        case EventKind::kPoolAlloc:
        case EventKind::kPoolFree:
        case EventKind::kPoolResize:
        case EventKind::kVmMap:
        case EventKind::kVmUnmap: {
            Device* d = device(e.device);
            if (d == nullptr) return;
            if (d->pending_step_end != 0 && e.start_ns >= d->pending_step_end) {
                std::uint64_t end = d->pending_step_end;
                d->pending_step_end = 0;
                step_end(*d, end);
            }
            switch (e.kind) {
                case EventKind::kBlockAlloc: block_alloc(*d, e); break;
                case EventKind::kBlockFree: block_free(*d, e); break;
                case EventKind::kSegmentAlloc: segment_alloc(*d, e); break;
                case EventKind::kSegmentFree: segment_free(*d, e); break;
                case EventKind::kDeviceAlloc:
                case EventKind::kPoolAlloc:
                case EventKind::kVmMap: driver_alloc(*d, e); break;
                case EventKind::kPoolResize: pool_resize(*d, e); break;
                default: driver_free(*d, e); break;
            }
            after_change(*d, e.start_ns);
            return;
        }
        case EventKind::kStepBegin:
        case EventKind::kStepEnd:
            // Host step marks apply to every device; a source may aim one at a single device.
            for (Device* d : devices_) {
                if (d == nullptr || (e.device != kNoDevice && e.device != d->ordinal)) continue;
                if (e.kind == EventKind::kStepBegin) {
                    step_begin(*d, e.range.id, e.start_ns);
                } else {
                    step_end(*d, e.start_ns);
                }
            }
            return;
        case EventKind::kRange:
            if (e.range.category == RangeCategory::kStep) {
                for (Device* d : devices_) {
                    if (d == nullptr) continue;
                    // Steps given as complete ranges arrive at their start: the previous step
                    // ends here (at its own end) before the next one begins, even when no
                    // memory event fell between them.
                    if (d->pending_step_end != 0) {
                        step_end(*d, std::min(d->pending_step_end, e.start_ns));
                        d->pending_step_end = 0;
                    }
                    step_begin(*d, e.range.id, e.start_ns);
                    d->pending_step_end = std::max(e.end_ns, e.start_ns + 1);
                }
                return;
            }
            if (e.range.category != RangeCategory::kCpuOp) range_begin(e);
            return;
        case EventKind::kRangeBegin: range_begin(e); return;
        case EventKind::kRangeEnd: range_end(e); return;
        case EventKind::kCounter: counter(e); return;
        case EventKind::kOutOfMemory:
            if (e.device != kNoDevice && e.oom.total_bytes != 0) {
                set_capacity(e.device, e.oom.total_bytes);
            }
            return;
        default: return;
    }
}

void MemoryLedger::apply(std::span<const Event> events) {
    // How far ahead to prefetch: an event that hits in cache takes some tens of nanoseconds, a
    // miss to DRAM ~100 ns or more, so a handful of events ahead hides the latency; far more
    // would evict lines before they are used when the batch churns many addresses.
    constexpr std::size_t kAhead = 8;
    const std::size_t n = events.size();
    for (std::size_t i = 0; i < n; ++i) {
        // Written out here rather than in a helper: a helper that only prefetches reads as a
        // pure function to the optimiser, and a call to it whose result is unused is dropped.
        if (i + kAhead < n) {
            const Event& next = events[i + kAhead];
            if (is_memory_event(next.kind) && next.kind < EventKind::kHostAlloc &&
                next.kind != EventKind::kPoolResize && next.kind != EventKind::kSegmentAlloc &&
                next.kind != EventKind::kSegmentFree) {
                if (const Device* d = find_device(next.device)) {
                    bool block =
                        next.kind == EventKind::kBlockAlloc || next.kind == EventKind::kBlockFree;
                    (block ? d->blocks : d->driver).prefetch(next.memory.address);
                }
            }
        }
        apply(events[i]);
    }
}

// ---- watches ----

int MemoryLedger::add_watch(const MemoryWatch& watch, MemoryWatchCallback callback) {
    if (!callback || (watch.level_bytes == 0 && !(watch.level_fraction > 0))) return 0;
    if (watch.hysteresis_fraction < 0 || watch.hysteresis_fraction >= 1) return 0;
    Watch w;
    w.id = next_watch_id_++;
    w.spec = watch;
    w.callback = std::move(callback);
    watches_.push_back(std::move(w));
    for (Device* d : devices_) {
        if (d != nullptr) recompute_watch_bounds(*d);
    }
    return watches_.back().id;
}

void MemoryLedger::remove_watch(int id) {
    watches_.erase(std::remove_if(watches_.begin(), watches_.end(),
                                  [id](const Watch& w) { return w.id == id; }),
                   watches_.end());
    for (Device* d : devices_) {
        if (d != nullptr) recompute_watch_bounds(*d);
    }
}

namespace {
std::uint64_t resolve_level(const MemoryWatch& w, std::uint64_t capacity) {
    if (w.level_fraction > 0) {
        if (capacity == 0) return 0;  // inactive until the capacity is known
        return static_cast<std::uint64_t>(w.level_fraction * static_cast<double>(capacity));
    }
    return w.level_bytes;
}
}  // namespace

void MemoryLedger::recompute_watch_bounds(Device& d) {
    d.watch_hi = {kNoLimit, kNoLimit, kNoLimit};
    d.watch_lo = {0, 0, 0};
    for (const Watch& w : watches_) {
        if (w.spec.device >= 0 && w.spec.device != d.ordinal) continue;
        std::uint64_t level = resolve_level(w.spec, d.t.capacity);
        if (level == 0) continue;
        auto m = static_cast<std::size_t>(w.spec.metric);
        if (m >= 3) continue;
        bool disarmed = d.index < w.disarmed.size() && w.disarmed[d.index] != 0;
        if (disarmed) {
            auto rearm = static_cast<std::uint64_t>(static_cast<double>(level) *
                                                    (1.0 - w.spec.hysteresis_fraction));
            d.watch_lo[m] = std::max(d.watch_lo[m], rearm);
        } else {
            d.watch_hi[m] = std::min(d.watch_hi[m], level);
        }
    }
}

void MemoryLedger::check_watches(Device& d, std::uint64_t t) {
    auto values = d.values();
    for (Watch& w : watches_) {
        if (w.spec.device >= 0 && w.spec.device != d.ordinal) continue;
        std::uint64_t level = resolve_level(w.spec, d.t.capacity);
        auto m = static_cast<std::size_t>(w.spec.metric);
        if (level == 0 || m >= 3) continue;
        if (w.disarmed.size() <= d.index) w.disarmed.resize(d.index + 1u, 0);
        std::uint8_t& disarmed = w.disarmed[d.index];
        if (disarmed == 0 && values[m] >= level) {
            disarmed = 1;
            MemoryWatchCrossing c;
            c.watch_id = w.id;
            c.device = d.ordinal;
            c.metric = w.spec.metric;
            c.level_bytes = level;
            c.value_bytes = values[m];
            c.capacity_bytes = d.t.capacity;
            c.time_ns = t;
            record_crossing(d, c);
            try {
                w.callback(crossings_.back().crossing);
            } catch (...) {
                ++dropped_;  // a throwing callback must not break the books
            }
        } else if (disarmed != 0 &&
                   static_cast<double>(values[m]) <
                       static_cast<double>(level) * (1.0 - w.spec.hysteresis_fraction)) {
            disarmed = 0;
        }
    }
    recompute_watch_bounds(d);
}

// What emptying the cache could have done at a crossing: from the segments when the ledger has
// them, else from the framework's own figures (reserved − allocated − stranded is what sits in
// wholly free segments, which empty_cache returns).
void MemoryLedger::record_crossing(Device& d, const MemoryWatchCrossing& c) {
    WatchCrossingRecord rec;
    rec.crossing = c;
    rec.allocated = d.t.allocated_rounded;
    rec.reserved = d.t.reserved;
    if (d.t.segments_seen) {
        DeviceLayout l = layout(d.ordinal);
        rec.crossing.cache_known = true;
        rec.crossing.releasable_bytes = l.releasable;
        rec.crossing.stranded_bytes = l.inactive_split;
    } else if (d.t.reserved_reported && d.t.split_reported) {
        rec.crossing.cache_known = true;
        rec.crossing.stranded_bytes = d.t.inactive_split_reported;
        rec.crossing.releasable_bytes =
            sub(d.t.unallocated(), d.t.inactive_split_reported + d.t.pending_free);
    }
    ++crossings_total_;
    if (crossings_.size() >= kMaxCrossings) crossings_.erase(crossings_.begin());
    crossings_.push_back(std::move(rec));
}

bool MemoryLedger::record_watch_action(int id, std::string action, bool ok,
                                       std::uint64_t bytes_freed, std::string detail) {
    for (auto it = crossings_.rbegin(); it != crossings_.rend(); ++it) {
        if (it->crossing.watch_id != id) continue;
        if (it->action_recorded) return false;  // the latest crossing already has its action
        it->action_recorded = true;
        it->action = std::move(action);
        it->action_ok = ok;
        it->bytes_freed = bytes_freed;
        it->detail = std::move(detail);
        return true;
    }
    return false;
}

// ---- queries ----

std::vector<std::uint16_t> MemoryLedger::devices() const {
    std::vector<std::uint16_t> out;
    for (const Device* d : devices_) out.push_back(d->ordinal);
    std::sort(out.begin(), out.end());
    return out;
}

LedgerTotals MemoryLedger::totals(std::uint16_t ordinal) const {
    const Device* d = find_device(ordinal);
    return d != nullptr ? d->t : LedgerTotals{};
}

LedgerPeaks MemoryLedger::peaks(std::uint16_t ordinal) const {
    const Device* d = find_device(ordinal);
    return d != nullptr ? d->peak : LedgerPeaks{};
}

DeviceLayout MemoryLedger::layout(std::uint16_t ordinal) const {
    DeviceLayout out;
    const Device* d = find_device(ordinal);
    if (d == nullptr) return out;
    struct Span {
        std::uint64_t address, size, requested;
        bool pending;
    };
    std::vector<Span> spans;
    spans.reserve(d->blocks.size());
    d->blocks.for_each([&](const LiveRecord& r) {
        bool pending = (r.flags() & kFlagPending) != 0;
        spans.push_back({r.address, r.size(), pending ? 0 : requested_of(r), pending});
    });
    std::sort(spans.begin(), spans.end(),
              [](const Span& a, const Span& b) { return a.address < b.address; });
    std::size_t bi = 0;
    for (const LedgerSegment& s : d->segments) {
        SegmentLayout sl;
        sl.segment = s;
        std::uint64_t end = s.address + s.size;
        while (bi < spans.size() && spans[bi].address < s.address) ++bi;  // blocks outside segments
        std::uint64_t cursor = s.address;
        bool any_block = false;
        auto gap = [&](std::uint64_t from, std::uint64_t to) {
            if (to <= from) return;
            std::uint64_t g = to - from;
            sl.free_bytes += g;
            sl.largest_free = std::max(sl.largest_free, g);
            ++sl.free_blocks;
        };
        while (bi < spans.size() && spans[bi].address < end) {
            const Span& b = spans[bi++];
            any_block = true;
            // Occupancy is counted here, from the live blocks, rather than on every block event:
            // exact by construction, and block events need not find their segment.
            sl.segment.allocated += b.size;
            if (b.pending) {
                sl.segment.pending += b.size;
                ++sl.segment.pending_blocks;
            }
            ++sl.segment.blocks;
            gap(cursor, b.address);
            cursor = std::max(cursor, std::min(end, b.address + b.size));
            sl.requested += b.requested;
        }
        gap(cursor, end);
        out.free_in_segments += sl.free_bytes;
        out.free_blocks += sl.free_blocks;
        out.largest_free = std::max(out.largest_free, sl.largest_free);
        out.pending_blocks += sl.segment.pending_blocks;
        if (any_block) {
            out.inactive_split += sl.free_bytes;
            out.largest_split_free = std::max(out.largest_split_free, sl.largest_free);
        } else if (s.pool != 0) {
            out.private_pool_free += sl.free_bytes;
        } else {
            out.releasable += sl.free_bytes;
        }
        out.segments.push_back(sl);
    }
    return out;
}

std::vector<LedgerBlock> MemoryLedger::blocks(std::uint16_t ordinal) const {
    std::vector<LedgerBlock> out;
    const Device* d = find_device(ordinal);
    if (d == nullptr) return out;
    out.reserve(d->blocks.size());
    d->blocks.for_each([&](const LiveRecord& r) {
        out.push_back(LedgerBlock{
            r.address, r.size(), requested_of(r), (r.flags() & kFlagPending) != 0,
            r.site_slot < site_usage_.size() ? site_usage_[r.site_slot].site : kNoString});
    });
    return out;
}

std::vector<MemorySeriesPoint> MemoryLedger::series(std::uint16_t ordinal) const {
    const Device* d = find_device(ordinal);
    return d != nullptr ? d->series.points() : std::vector<MemorySeriesPoint>{};
}

std::vector<StepMark> MemoryLedger::steps(std::uint16_t ordinal) const {
    const Device* d = find_device(ordinal);
    if (d == nullptr) return {};
    std::vector<StepMark> out = d->steps;
    if (d->group.steps > 0 && d->group.end_ns != 0) out.push_back(d->group);  // partial group
    return out;
}

std::vector<PhaseMark> MemoryLedger::phases(std::uint16_t ordinal) const {
    const Device* d = find_device(ordinal);
    return d != nullptr ? d->phases : std::vector<PhaseMark>{};
}

std::vector<SiteUsage> MemoryLedger::sites(std::uint16_t ordinal) const {
    std::vector<SiteUsage> out;
    const Device* d = find_device(ordinal);
    if (d == nullptr) return out;
    for (std::uint32_t slot : d->site_slots) {
        SiteUsage u = site_usage_[slot];
        // Unchanged since the latest peak: its bytes now are its bytes then.
        if (u.seen_version != d->peak_version) u.at_peak = u.live_bytes;
        out.push_back(u);
    }
    return out;
}

std::vector<std::uint64_t> MemoryLedger::checkpoint_ticks(std::uint16_t ordinal) const {
    const Device* d = find_device(ordinal);
    return d != nullptr ? d->checkpoint_ns : std::vector<std::uint64_t>{};
}

std::vector<std::int64_t> MemoryLedger::site_checkpoints(std::uint16_t ordinal,
                                                         std::uint32_t slot) const {
    const Device* d = find_device(ordinal);
    if (d == nullptr || slot == 0 || slot >= site_checkpoints_.size() ||
        site_usage_[slot].device != ordinal) {
        return {};
    }
    std::vector<std::int64_t> v = site_checkpoints_[slot];
    v.resize(d->checkpoint_ns.size(), 0);
    return v;
}

DetectedPeriod MemoryLedger::period(std::uint16_t ordinal, std::uint64_t min_repetitions) const {
    const Device* d = find_device(ordinal);
    if (d == nullptr) return {};
    std::vector<SiteUsage> mine;
    for (std::uint32_t slot : d->site_slots) {
        // A catch-all slot (sites past the cap) mixes sites: it is no site's pattern.
        if (site_usage_[slot].site != StringTable::kOverflowString)
            mine.push_back(site_usage_[slot]);
    }
    return detect_period(mine, d->last_alloc_ns - d->first_alloc_ns, min_repetitions);
}

bool MemoryLedger::has_steps(std::uint16_t ordinal) const {
    const Device* d = find_device(ordinal);
    return d != nullptr && d->saw_steps;
}

std::size_t MemoryLedger::memory_bytes() const {
    std::size_t total = sizeof(*this) + site_usage_.capacity() * sizeof(SiteUsage) +
                        site_slots_.size() * 32 + owners_.size() * 32 + host_.memory_bytes() +
                        crossings_.size() * sizeof(WatchCrossingRecord);
    for (const auto& v : site_checkpoints_)
        total += v.capacity() * sizeof(std::int64_t) + sizeof(std::vector<std::int64_t>);
    for (const Device* d : devices_) {
        if (d == nullptr) continue;
        total += sizeof(Device) + d->blocks.memory_bytes() + d->driver.memory_bytes() +
                 d->segments.capacity() * sizeof(LedgerSegment) +
                 d->series.size() * sizeof(MemorySeriesPoint) +
                 d->steps.capacity() * sizeof(StepMark);
    }
    return total;
}

}  // namespace gpudiag::detail
