// SPDX-License-Identifier: Apache-2.0
// Events -> allocator history. Sources replay a device's state before its history as synthetic
// events, then the history, then (snapshots) synthetic repairs towards the final state; the
// phases are told apart by the synthetic flag.
#include "analysis/allocator/allocation_history.hpp"
#include "core/producers.hpp"

#include <algorithm>
#include <cctype>
#include <string_view>

namespace gpudiag::detail {
namespace {

struct ObservedSegment {
    std::uint64_t bytes = 0;
    std::uint32_t stream = 0;
    bool expandable = false;
    bool small = false;
    std::uint32_t pool = 0;  // private pool from 1; 0 = the default pool
};

// A segment's pool when the source did not say: small-pool segments are exactly 2 MiB (large
// ones are 20 MiB or at least 10 MiB); a small expandable segment maps 2 MiB pages, a large one
// 20 MiB pages.
bool small_pool(const Event& e) {
    if (e.memory.aux == kSegmentPoolSmall) return true;
    if (e.memory.aux == kSegmentPoolLarge) return false;
    if ((e.flags & kEventFlagExpandable) != 0) return e.memory.bytes % (20 * kMiB) != 0;
    return e.memory.bytes == kSmallBuffer;
}

}  // namespace

struct AllocationHistory::Builder {
    explicit Builder(std::size_t cap) : max_ops(cap) {}
    std::size_t max_ops;
    DeviceHistory h;
    bool in_trace = false;
    std::map<std::uint64_t, ObservedSegment> segments;  // the recorded allocator's segments now
    std::uint64_t reserved = 0;
    std::map<std::uint64_t, CachingAllocatorModel::InitialBlock> start_blocks;
    std::uint64_t release_run = 0;  // segment frees not yet explained

    // Applies a recorded segment event. Expandable segments grow and shrink by page ranges:
    // a range that touches an existing one extends it, an unmapped range cuts it.
    void apply(const Event& e) {
        const bool expandable = (e.flags & kEventFlagExpandable) != 0;
        const std::uint64_t a = e.memory.address;
        const std::uint64_t n = e.memory.bytes;
        if (e.kind == EventKind::kSegmentAlloc) {
            has_segments = true;
            reserved += n;
            if (expandable) {
                auto it = segments.lower_bound(a);
                if (it != segments.begin()) {
                    auto prev = std::prev(it);
                    if (prev->second.expandable && prev->second.pool == pool_of(e) &&
                        prev->first + prev->second.bytes == a) {
                        prev->second.bytes += n;
                        if (it != segments.end() && it->second.expandable &&
                            it->second.pool == prev->second.pool && it->first == a + n) {
                            prev->second.bytes += it->second.bytes;
                            segments.erase(it);
                        }
                        return;
                    }
                }
                if (it != segments.end() && it->second.expandable &&
                    it->second.pool == pool_of(e) && it->first == a + n) {
                    ObservedSegment grown = it->second;
                    grown.bytes += n;
                    segments.erase(it);
                    segments[a] = grown;
                    return;
                }
            }
            segments[a] = ObservedSegment{n, e.stream, expandable, small_pool(e), pool_of(e)};
            return;
        }
        auto it = segments.upper_bound(a);
        if (it == segments.begin()) return;
        --it;
        const std::uint64_t start = it->first;
        const std::uint64_t end = start + it->second.bytes;
        if (a >= end) return;
        if (!expandable) {
            reserved -= std::min(reserved, it->second.bytes);
            segments.erase(it);
            return;
        }
        const std::uint64_t cut_end = std::min(end, a + n);
        reserved -= std::min(reserved, cut_end - a);
        ObservedSegment kept = it->second;
        segments.erase(it);
        if (a > start) {
            kept.bytes = a - start;
            segments[start] = kept;
        }
        if (cut_end < end) {
            kept.bytes = end - cut_end;
            segments[cut_end] = kept;
        }
    }

    // The private pool a segment event names (torch snapshots: the final segment's
    // segment_pool_id, found by address; other sources have none).
    [[nodiscard]] std::uint32_t pool_of(const Event& e) const {
        return pools_known ? static_cast<std::uint32_t>(e.memory.extra) : 0;
    }
    // The pool of the recorded segment holding `address` now (0 outside every segment).
    [[nodiscard]] std::uint16_t pool_at(std::uint64_t address) const {
        auto it = segments.upper_bound(address);
        if (it == segments.begin()) return 0;
        --it;
        if (address - it->first >= it->second.bytes) return 0;
        return static_cast<std::uint16_t>(std::min<std::uint32_t>(it->second.pool, 0xFFFFu));
    }

    void observe(const Event& e) {
        if (h.observed.size() >= max_ops) {
            h.truncated = true;
            return;
        }
        const bool expandable = (e.flags & kEventFlagExpandable) != 0;
        ObservedAction a;
        if (e.kind == EventKind::kSegmentAlloc) {
            a.kind = expandable ? DeviceActionKind::kMap : DeviceActionKind::kMalloc;
        } else {
            a.kind = expandable ? DeviceActionKind::kUnmap : DeviceActionKind::kFree;
        }
        a.address = e.memory.address;
        a.bytes = e.memory.bytes;
        a.stream = e.stream;
        a.small = small_pool(e);
        h.observed.push_back(a);
    }

    void op(const HistoryOp& o) {
        if (h.ops.size() >= max_ops) {
            h.truncated = true;
            return;
        }
        h.ops.push_back(o);
    }

    bool has_segments = false;
    bool pools_known = false;  // the source numbers private pools in segment events
};

AllocationHistory::AllocationHistory(std::size_t max_ops) : max_ops_(max_ops) {}
AllocationHistory::~AllocationHistory() = default;

const DeviceHistory* AllocationHistory::device(std::uint16_t ordinal) const {
    for (const auto& d : devices_) {
        if (d.device == ordinal) return &d;
    }
    return nullptr;
}

void AllocationHistory::begin(const SourceInfo& info, const StringTable& strings) {
    info_ = info;
    strings_ = &strings;
    Status s = settings_from_source(info, settings_, settings_recorded_);
    if (!s.is_ok()) settings_problem_ = s.message();
    // Asked for in the conf, off in effect: the build has no driver API for them.
    std::string conf = info.property("PYTORCH_CUDA_ALLOC_CONF");
    for (char& c : conf) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    facts_.expandable_ignored = conf.find("expandable_segments:true") != std::string::npos &&
                                info.property("expandable_segments") == "false";
}

// Evidence for the what-if's cautions: API calls (a live session or a gpudiag recording), the
// private pools and allocation sites of a snapshot.
void AllocationHistory::note_fact(const Event& e) {
    constexpr std::size_t kMaxPools = 4096;
    constexpr std::int64_t kCudaErrorNotSupported = 801;
    if (e.kind == EventKind::kApiCall && strings_ != nullptr) {
        const std::string_view name = strings_->lookup(e.api.name);
        if (name.find("IpcGetMemHandle") != std::string_view::npos) {
            ++facts_.ipc_handle_calls;
        } else if (name.find("StreamBeginCapture") != std::string_view::npos) {
            ++facts_.graph_captures;
        } else if (name.rfind("cuMem", 0) == 0 && e.api.return_code == kCudaErrorNotSupported) {
            ++facts_.vmm_not_supported;
        }
    } else if (e.kind == EventKind::kSegmentAlloc && e.memory.extra != 0 &&
               info_.producer == kProducerTorchSnapshot) {
        const auto pool = static_cast<std::uint32_t>(e.memory.extra);
        if (private_pools_.size() < kMaxPools &&
            std::find(private_pools_.begin(), private_pools_.end(), pool) == private_pools_.end()) {
            private_pools_.push_back(pool);
            facts_.private_pools = private_pools_.size();
        }
    } else if (e.kind == EventKind::kBlockAlloc && facts_.ipc_site.empty() && strings_ != nullptr &&
               e.memory.site != kNoString) {
        // vLLM's custom all-reduce registers its buffers with cudaIpcGetMemHandle. Each site is
        // looked at once (sites are few, allocations many).
        const std::size_t id = e.memory.site;
        if (id >= sites_checked_.size()) sites_checked_.resize(id + 1, 0);
        if (sites_checked_[id] != 0) return;
        sites_checked_[id] = 1;
        const std::string_view site = strings_->lookup(e.memory.site);
        if (site.find("custom_all_reduce") != std::string_view::npos) facts_.ipc_site = site;
    }
}

AllocationHistory::Builder& AllocationHistory::builder(std::uint16_t device) {
    auto it = by_device_.find(device);
    if (it != by_device_.end()) return *it->second;
    builders_.push_back(std::make_unique<Builder>(max_ops_));
    builders_.back()->h.device = device;
    builders_.back()->pools_known = info_.producer == kProducerTorchSnapshot;
    by_device_[device] = builders_.back().get();
    return *builders_.back();
}

void AllocationHistory::consume(std::span<const Event> events) {
    for (const Event& e : events) {
        if (e.kind == EventKind::kApiCall || e.kind == EventKind::kSegmentAlloc ||
            e.kind == EventKind::kBlockAlloc) {
            note_fact(e);
        }
        if (e.device == kNoDevice) continue;
        switch (e.kind) {
            case EventKind::kSegmentAlloc:
            case EventKind::kSegmentFree:
            case EventKind::kBlockAlloc:
            case EventKind::kBlockFree:
            case EventKind::kOutOfMemory: break;
            case EventKind::kDeviceAlloc:
            case EventKind::kDeviceFree:
            case EventKind::kPoolAlloc:
            case EventKind::kPoolFree:
            case EventKind::kVmMap:
            case EventKind::kVmUnmap: ++outside_allocator_; continue;
            default: continue;
        }
        Builder& b = builder(e.device);
        const bool synthetic = (e.flags & kEventFlagSynthetic) != 0;
        if (synthetic && !b.in_trace) {
            // The state before the history.
            if (e.kind == EventKind::kSegmentAlloc || e.kind == EventKind::kSegmentFree) {
                b.apply(e);
            } else if (e.kind == EventKind::kBlockAlloc) {
                CachingAllocatorModel::InitialBlock ib;
                ib.handle = ib.address = e.memory.address;
                ib.bytes = e.memory.bytes;
                ib.requested = e.memory.aux != 0 ? e.memory.aux : e.memory.bytes;
                b.start_blocks[ib.address] = ib;
            } else if (e.kind == EventKind::kBlockFree) {
                auto it = b.start_blocks.find(e.memory.address);
                if (it == b.start_blocks.end()) continue;
                if ((e.flags & kEventFlagPendingFree) != 0) {
                    it->second.pending = true;
                } else {
                    b.start_blocks.erase(it);
                }
            }
            continue;
        }
        if (synthetic) {
            // Repairs after the history (what a ring buffer lost): they only say where the
            // recorded allocator ended, never what the program did.
            if (e.kind == EventKind::kSegmentAlloc || e.kind == EventKind::kSegmentFree) b.apply(e);
            continue;
        }
        if (!b.in_trace) {
            finish_start(b);
            b.in_trace = true;
        }
        trace_event(b, e);
    }
}

void AllocationHistory::finish_start(Builder& b) {
    DeviceHistory& h = b.h;
    auto block = b.start_blocks.begin();
    for (const auto& [address, seg] : b.segments) {
        StartSegment s;
        s.address = address;
        s.bytes = seg.bytes;
        s.stream = seg.stream;
        s.small = seg.small;
        s.expandable = seg.expandable;
        s.pool = seg.pool;
        while (block != b.start_blocks.end() && block->first < address) {
            ++h.start_blocks_outside_segments;
            ++block;
        }
        for (; block != b.start_blocks.end() && block->first < address + seg.bytes; ++block) {
            s.blocks.push_back(block->second);
        }
        h.start.push_back(std::move(s));
    }
    for (; block != b.start_blocks.end(); ++block) ++h.start_blocks_outside_segments;
    b.start_blocks.clear();
    h.start_reserved = b.reserved;
    h.observed_peak_reserved = b.reserved;
}

// A run of segment frees is the program's torch.cuda.empty_cache(), unless an OOM entry follows
// (then it is the allocator releasing its cache before failing, which the replay redoes).
void AllocationHistory::flush_release(Builder& b, bool before_new_segment) {
    if (b.release_run == 0) return;
    b.release_run = 0;
    HistoryOp o;
    o.kind = HistoryOp::Kind::kReleaseCache;
    b.op(o);
    ++b.h.cache_releases;
    if (before_new_segment) ++b.h.releases_before_new_segment;
}

void AllocationHistory::trace_event(Builder& b, const Event& e) {
    DeviceHistory& h = b.h;
    switch (e.kind) {
        case EventKind::kBlockAlloc: {
            flush_release(b, false);
            HistoryOp o;
            o.kind = HistoryOp::Kind::kAlloc;
            o.pool = b.pool_at(e.memory.address);
            o.stream = e.stream;
            o.handle = e.memory.address;
            o.bytes = e.memory.aux != 0 ? e.memory.aux : e.memory.bytes;
            if (o.bytes == 0) return;
            b.op(o);
            ++h.allocations;
            return;
        }
        case EventKind::kBlockFree: {
            flush_release(b, false);
            HistoryOp o;
            o.kind = (e.flags & kEventFlagPendingFree) != 0 ? HistoryOp::Kind::kFreeRequested
                                                            : HistoryOp::Kind::kFree;
            o.stream = e.stream;
            o.handle = e.memory.address;
            b.op(o);
            return;
        }
        case EventKind::kSegmentAlloc:
            flush_release(b, true);
            b.observe(e);
            b.apply(e);
            h.observed_peak_reserved = std::max(h.observed_peak_reserved, b.reserved);
            return;
        case EventKind::kSegmentFree:
            b.observe(e);
            b.apply(e);
            ++b.release_run;
            return;
        case EventKind::kOutOfMemory: {
            b.release_run = 0;  // the allocator's own release before failing
            HistoryOp o;
            o.kind = HistoryOp::Kind::kOom;
            o.stream = e.stream;
            o.bytes = e.oom.requested_bytes;
            o.limit = b.reserved + e.oom.free_bytes;
            b.op(o);
            ++h.recorded_ooms;
            return;
        }
        default: return;
    }
}

void AllocationHistory::end(const SourceSummary& /*summary*/) {
    devices_.clear();
    for (auto& [device, b] : by_device_) {
        if (!b->in_trace) finish_start(*b);
        flush_release(*b, false);
        b->h.has_segment_records = b->has_segments;
        for (const auto& [address, seg] : b->segments)
            b->h.final_segments.emplace_back(address, seg.bytes);
        devices_.push_back(std::move(b->h));
    }
    by_device_.clear();
    builders_.clear();
}

}  // namespace gpudiag::detail
