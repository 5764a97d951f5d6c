// SPDX-License-Identifier: Apache-2.0
// SnapshotSource: a torch memory snapshot as gpudiag Events.
//
// A snapshot is a state (the segments and blocks at dump time) plus a history (the per-device
// trace ring buffer, whose oldest entries may have been overwritten). Replay is designed so the
// ledger ends exactly in the snapshot's state while the history still plays out in time order:
//
//  Pass 1 reads the file once, streamed: it keeps the final state (bounded by the live blocks)
//  and, per address, whether the trace's first word on it was an allocation or a free, and how
//  many times it is allocated. From that it derives the state *before* the trace window:
//    initial blocks   = final blocks never touched by the trace
//                     + blocks whose first traced event is a free (allocated before the window)
//    initial segments = the same rule on segment_alloc/segment_free; expandable segments start
//                       at their final size minus the pages mapped (plus those unmapped) in it.
//  Pass 2 replays the trace (kept by pass 1 in about 12 bytes an entry up to a cap, else read
//  from the file again) and emits, per device: the initial state (synthetic, at the
//  first trace time), then every trace entry in order merged with the annotations by time, then
//  a reconciliation against the final state (synthetic events) that repairs whatever the ring
//  buffer lost. A snapshot without history is just its state at time 0. The analyses take the
//  events on a second thread (PipelinedSink) while the replay goes on.
//
//  Devices are replayed one after another (each in time order); the ledger keeps devices apart.
//  Memory: one streamed read (two past the cap on kept trace entries); held data is the state,
//  the trace entries (capped), per-address bookkeeping for the traced addresses (capped) and
//  the annotations (capped).
#include "core/pipelined_sink.hpp"
#include "core/producers.hpp"
#include "importers/open_source.hpp"
#include "importers/torch_snapshot/address_map.hpp"
#include "importers/torch_snapshot/compact_trace.hpp"
#include "importers/torch_snapshot/torch_snapshot.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace gpudiag::detail {
namespace {

constexpr std::size_t kMaxTrackedAddresses = std::size_t{32} << 20;
constexpr std::size_t kMaxAnnotations = std::size_t{1} << 20;
// Pinned host memory: the host allocator's trace entries kept (about 64 bytes each) and its
// segments. Pinned buffers are few and large (staging for copies); a million entries is far
// past what the host ring keeps by default.
constexpr std::size_t kMaxHostTraceEntries = std::size_t{1} << 20;
constexpr std::size_t kMaxUnknownKeys = 16;
constexpr std::size_t kBatch = 4096;
// Batches handed to the analyses' thread and not taken yet, at most: on a busy machine that
// thread waits its turn for a core, and the replay runs on meanwhile (16 batches: 4 MiB of
// events).
constexpr std::size_t kBatchesAhead = 16;
// Trace entries kept from pass 1 for pass 2 (CompactTrace, about 12 bytes each), so the file is
// decoded once. torch's history ring holds 100 000 entries per device by default and rarely more
// than a few million when raised; 64 MiB keeps about five million. Past it the entries are
// dropped and pass 2 reads the file again, as memory must stay bounded whatever the file.
constexpr std::size_t kMaxKeptTraceBytes = std::size_t{64} << 20;

struct TracedAddress {
    bool first_was_free = false;
    std::uint32_t allocs = 0;    // allocations of this address in the trace
    std::uint32_t replayed = 0;  // of which pass 2 has replayed so far
};

// A segment whose first traced event is its free: it existed before the trace window.
struct SegmentFreedBefore {
    std::uint64_t address = 0;
    std::uint64_t size = 0;
    std::uint64_t stream = 0;
};

struct DeviceHistory {
    std::uint64_t entries = 0;
    std::uint64_t first_ns = 0;
    std::uint64_t last_ns = 0;
    AddressMap<TracedAddress> blocks;
    std::unordered_map<std::uint64_t, bool> segments;  // first event was a free
    std::vector<SnapshotBlock> freed_before;           // allocated before the window
    std::vector<SegmentFreedBefore> segments_freed_before;
    std::vector<std::pair<std::uint64_t, std::int64_t>> map_deltas;  // addr, +mapped/-unmapped
};

// Pass 1: the final state and what the trace says about the time before it.
class StateCollector final : public SnapshotVisitor {
public:
    Status on_segment(SnapshotSegment& s) override {
        segments.push_back(std::move(s));
        return Status::ok();
    }
    Status on_trace_entry(const TraceEntry& e) override {
        if (!trace_overflow && !trace.append(e, kMaxKeptTraceBytes)) {
            trace_overflow = true;
            trace.clear();
        }
        DeviceHistory& h = history[e.device];
        std::uint64_t t = e.time_us * 1000;
        if (h.entries == 0) h.first_ns = t;
        h.last_ns = std::max(h.last_ns, t);
        ++h.entries;
        ++trace_entries;
        if (h.blocks.size() + h.segments.size() >= kMaxTrackedAddresses) {
            tracking_capped = true;
            return Status::ok();
        }
        switch (e.action) {
            case TraceAction::kAlloc: ++h.blocks[e.address].allocs; break;
            case TraceAction::kFreeRequested:
            case TraceAction::kFreeCompleted: {
                auto [traced, fresh] = h.blocks.try_emplace(e.address);
                if (fresh) {
                    traced->first_was_free = true;
                    h.freed_before.push_back(
                        SnapshotBlock{e.address, e.size, e.size, BlockState::kActive, kNoString});
                }
                break;
            }
            case TraceAction::kSegmentAlloc: h.segments.try_emplace(e.address, false); break;
            case TraceAction::kSegmentFree:
                if (h.segments.try_emplace(e.address, true).second) {
                    h.segments_freed_before.push_back(
                        SegmentFreedBefore{e.address, e.size, e.stream});
                }
                break;
            case TraceAction::kSegmentMap:
                h.map_deltas.emplace_back(e.address, static_cast<std::int64_t>(e.size));
                break;
            case TraceAction::kSegmentUnmap:
                h.map_deltas.emplace_back(e.address, -static_cast<std::int64_t>(e.size));
                break;
            default: break;
        }
        return Status::ok();
    }
    Status on_annotation(const SnapshotAnnotation& a) override {
        if (annotations.size() >= kMaxAnnotations) {
            ++annotations_dropped;
            return Status::ok();
        }
        annotations.push_back(a);
        return Status::ok();
    }
    void on_setting(const std::string& key, const std::string& value) override {
        settings.emplace_back(key, value);
    }
    Status on_host_segment(SnapshotSegment& s) override {
        host_segments.push_back(std::move(s));
        return Status::ok();
    }
    Status on_host_trace_entry(const TraceEntry& e) override {
        if (host_trace.size() >= kMaxHostTraceEntries) {
            ++host_trace_dropped;
            return Status::ok();
        }
        host_trace.push_back(e);
        return Status::ok();
    }
    void on_root_key(const std::string& key) override {
        // torch writes host_segments from 2.13 on (PR #182407), empty when not recording them.
        if (key == "host_segments") host_keys = true;
        if (!known_snapshot_root_key(key) && unknown_keys.size() < kMaxUnknownKeys)
            unknown_keys.push_back(key);
    }

    std::vector<SnapshotSegment> segments;
    std::vector<SnapshotSegment> host_segments;
    std::vector<TraceEntry> host_trace;
    std::uint64_t host_trace_dropped = 0;
    std::vector<std::string> unknown_keys;
    bool host_keys = false;
    std::map<std::uint16_t, DeviceHistory> history;
    std::vector<SnapshotAnnotation> annotations;
    std::vector<std::pair<std::string, std::string>> settings;
    std::uint64_t trace_entries = 0;
    std::uint64_t annotations_dropped = 0;
    bool tracking_capped = false;
    CompactTrace trace;  // in file order; empty once past the cap
    bool trace_overflow = false;
};

// The live set pass 2 has produced so far for one device, to reconcile against the final state.
struct SimulatedDevice {
    AddressMap<std::pair<std::uint64_t, bool>> blocks;                 // size, pending
    std::map<std::uint64_t, std::pair<std::uint64_t, bool>> segments;  // size, expandable

    void map(std::uint64_t a, std::uint64_t n, bool expandable) {
        if (expandable) {
            auto it = segments.lower_bound(a);
            if (it != segments.begin()) {
                auto prev = std::prev(it);
                if (prev->second.second && prev->first + prev->second.first == a) {
                    prev->second.first += n;
                    if (it != segments.end() && it->second.second &&
                        it->first == prev->first + prev->second.first) {
                        prev->second.first += it->second.first;
                        segments.erase(it);
                    }
                    return;
                }
            }
        }
        segments[a] = {n, expandable};
    }
    void unmap(std::uint64_t a, std::uint64_t n, bool expandable) {
        if (!expandable) {
            segments.erase(a);
            return;
        }
        auto it = segments.upper_bound(a);
        if (it == segments.begin()) return;
        --it;
        std::uint64_t start = it->first;
        std::uint64_t end = start + it->second.first;
        if (a >= end) return;
        std::uint64_t cut_end = std::min(end, a + n);
        bool exp = it->second.second;
        segments.erase(it);
        if (a > start) segments[start] = {a - start, exp};
        if (cut_end < end) segments[cut_end] = {end - cut_end, exp};
    }
};

class SnapshotSource final : public EventSource {
public:
    explicit SnapshotSource(std::string path) : path_(std::move(path)) {}

    Status run(EventSink& sink, StringTable& strings) override {
        StateCollector state;
        TorchSnapshotReader reader;
        Status first = reader.read(path_, strings, state);
        // A snapshot cut short still holds whole segments and trace entries before the cut: they
        // are replayed, and the report says the rest is missing.
        const bool cut_short = !first.is_ok() && reader.ended_early() &&
                               (!state.segments.empty() || state.trace_entries > 0);
        if (!first.is_ok() && !cut_short) return first;
        if (cut_short) {
            summary_.truncated = true;
            summary_.missing.push_back(
                fmt::format("{}: read {} segments and {} trace entries before the cut; what "
                            "followed (more segments, the rest of the allocation history, the "
                            "allocator settings) is missing, so the memory state at the end is "
                            "only what was read",
                            first.message(), state.segments.size(), state.trace_entries));
        }
        prepare(state, strings);

        // Pass 2 hands its events to the analyses on a second thread, which take each batch
        // while this one replays the next.
        PipelinedSink pipe(sink, kBatchesAhead);
        sink_ = &pipe;
        strings_ = &strings;
        state_ = &state;
        pipe.begin(info_, strings);

        Status status = Status::ok();
        if (!state.trace_overflow) {
            replay_kept(state.trace);
            state.trace.clear();
        } else {
            Emitter emitter(*this);
            status = reader.read(path_, strings, emitter);
            if (cut_short && reader.ended_early()) status = Status::ok();  // the same cut again
        }
        if (status.is_ok()) {
            finish_device();
            for (const auto& [device, segs] : final_by_device_) {
                if (done_devices_.count(device) == 0) {
                    start_device(device, 0);
                    finish_device();
                }
            }
        }
        if (status.is_ok()) emit_host_memory(state);
        flush();
        summary_.events = delivered_;
        if (!status.is_ok()) summary_.truncated = true;
        if (!state.unknown_keys.empty()) {
            std::string keys;
            for (const std::string& k : state.unknown_keys) keys += (keys.empty() ? "" : ", ") + k;
            summary_.notes.push_back(fmt::format(
                "the snapshot holds keys this reader does not know ({}): they were skipped, and "
                "the rest was read as usual",
                keys));
        }
        if (reconciled_ > 0) {
            summary_.notes.push_back(
                fmt::format("{} allocations or segments were reconciled with the snapshot's final "
                            "state (their history fell out of the trace ring buffer or was not "
                            "recorded)",
                            reconciled_));
        }
        if (state.annotations_dropped > 0) {
            summary_.dropped += state.annotations_dropped;
            summary_.notes.push_back(
                fmt::format("{} annotations past the cap were skipped", state.annotations_dropped));
        }
        if (state.tracking_capped) {
            summary_.notes.push_back(
                "the trace touches more addresses than tracked; the state before the trace "
                "window is approximate");
        }
        pipe.end(summary_);
        return status;
    }

private:
    // Pass 2's visitor: turns entries into events as they stream by.
    class Emitter final : public SnapshotVisitor {
    public:
        explicit Emitter(SnapshotSource& s) : s_(s) {}
        Status on_segment(SnapshotSegment&) override { return Status::ok(); }
        Status on_trace_entry(const TraceEntry& e) override {
            s_.trace_entry(e);
            return Status::ok();
        }
        Status on_annotation(const SnapshotAnnotation&) override { return Status::ok(); }
        void on_setting(const std::string&, const std::string&) override {}

    private:
        SnapshotSource& s_;
    };

    void prepare(StateCollector& state, StringTable& strings) {
        info_.producer = kProducerTorchSnapshot;
        info_.description = path_;
        bool any_expandable = false;
        for (auto& seg : state.segments) {
            any_expandable = any_expandable || seg.expandable;
            final_by_device_[seg.device].push_back(&seg);
        }
        for (auto& [device, segs] : final_by_device_) {
            std::sort(segs.begin(), segs.end(),
                      [](const SnapshotSegment* a, const SnapshotSegment* b) {
                          return a->address < b->address;
                      });
        }
        std::map<std::uint16_t, bool> devices;
        for (const auto& [device, segs] : final_by_device_) devices[device] = true;
        for (const auto& [device, h] : state.history) devices[device] = true;
        for (const auto& [device, unused] : devices) {
            DeviceInfo d;
            d.ordinal = device;  // the snapshot does not record names or capacity
            info_.devices.push_back(d);
        }
        bool settings_expandable = false;
        for (const auto& [k, v] : state.settings) {
            info_.properties.emplace_back(k, v);
            if (k == "expandable_segments") settings_expandable = v == "true";
            expandable_setting_ = settings_expandable;
        }
        if (!settings_expandable && any_expandable) {
            // Older snapshots lack allocator_settings; expandable segments show in the segments.
            bool present = false;
            for (auto& [k, v] : info_.properties) {
                if (k == "expandable_segments") {
                    v = "true";
                    present = true;
                }
            }
            if (!present) info_.properties.emplace_back("expandable_segments", "true");
        }
        add_pool_owners(state.segments, strings);
        info_.properties.emplace_back("snapshot_segments", fmt::to_string(state.segments.size()));
        info_.properties.emplace_back("snapshot_trace_entries",
                                      fmt::to_string(state.trace_entries));
        info_.properties.emplace_back("snapshot_has_history",
                                      state.trace_entries > 0 ? "true" : "false");
        // The torch version is not in a snapshot; its keys give a lower bound (what-if says so).
        if (state.host_keys) info_.properties.emplace_back("snapshot_torch_at_least", "2.13");
        note_history_cut(state);  // before the analyses are given info_

        // Annotations by device and time, with steps from ProfilerStep#N, or from the ends of
        // Optimizer.step when the profiler was not running (one optimizer step per iteration).
        std::stable_sort(state.annotations.begin(), state.annotations.end(),
                         [](const SnapshotAnnotation& a, const SnapshotAnnotation& b) {
                             return a.device != b.device ? a.device < b.device
                                                         : a.time_us < b.time_us;
                         });
        for (const auto& a : state.annotations) {
            if (strings.lookup(a.name).rfind("ProfilerStep#", 0) == 0) profiler_steps_ = true;
        }
    }

    // Each private pool's owner and torch id, as properties "private_pool.<n>.owner" and
    // "private_pool.<n>.id" the memory analysis reads. The owner: the code (libraries included)
    // holding the most live bytes in it, else the code that created most of its bytes of
    // segments. A serving engine's KV cache names its cache engine.
    void add_pool_owners(const std::vector<SnapshotSegment>& segments, const StringTable& strings) {
        std::map<std::uint32_t, std::map<StringId, std::uint64_t>> live, created;
        std::map<std::uint32_t, std::string> ids;
        for (const SnapshotSegment& s : segments) {
            if (s.pool == 0) continue;
            ids.emplace(s.pool, s.pool_id);
            created[s.pool][s.owner] += s.owner != kNoString ? s.total_size : 0;
            for (const SnapshotBlock& b : s.blocks) {
                if (b.state != BlockState::kInactive && b.owner != kNoString)
                    live[s.pool][b.owner] += b.size;
            }
        }
        const auto most = [](const std::map<StringId, std::uint64_t>& by) {
            StringId best = kNoString;
            std::uint64_t bytes = 0;
            for (const auto& [id, n] : by) {
                if (n > bytes) {
                    best = id;
                    bytes = n;
                }
            }
            return best;
        };
        for (const auto& [pool, id] : ids) {
            info_.properties.emplace_back(fmt::format("private_pool.{}.id", pool), id);
        }
        for (const auto& [pool, by] : created) {
            StringId owner = live.count(pool) != 0 ? most(live[pool]) : kNoString;
            if (owner == kNoString) owner = most(by);
            if (owner == kNoString) continue;
            info_.properties.emplace_back(fmt::format("private_pool.{}.owner", pool),
                                          std::string(strings.lookup(owner)));
        }
    }

    void start_device(std::uint16_t device, std::uint64_t t0) {
        current_ = device;
        has_current_ = true;
        done_devices_.insert(device);
        sim_ = SimulatedDevice{};
        ann_pos_ = std::lower_bound(
                       state_->annotations.begin(), state_->annotations.end(), device,
                       [](const SnapshotAnnotation& a, std::uint16_t d) { return a.device < d; }) -
                   state_->annotations.begin();
        last_ns_ = t0;
        emit_initial_state(device, t0);
    }

    void finish_device() {
        if (!has_current_) return;
        emit_annotations_until(UINT64_MAX);
        reconcile(current_, last_ns_);
        has_current_ = false;
    }

    DeviceHistory* history_of(std::uint16_t device) const {
        auto it = state_->history.find(device);
        return it == state_->history.end() ? nullptr : &it->second;
    }

    void emit_initial_state(std::uint16_t device, std::uint64_t t0) {
        const DeviceHistory* h = history_of(device);
        auto fit = final_by_device_.find(device);
        std::vector<Event> segs;
        // Segments first, so every block lands in its segment.
        if (fit != final_by_device_.end()) {
            for (const SnapshotSegment* s : fit->second) {
                std::uint64_t size = s->total_size;
                if (h != nullptr) {
                    auto seen = h->segments.find(s->address);
                    if (seen != h->segments.end() && !seen->second) continue;  // created in window
                    if (s->expandable) {
                        std::int64_t net = 0;
                        for (const auto& [a, delta] : h->map_deltas) {
                            if (a >= s->address && a - s->address < s->total_size) net += delta;
                        }
                        size = net >= 0 ? (static_cast<std::uint64_t>(net) >= size
                                               ? 0
                                               : size - static_cast<std::uint64_t>(net))
                                        : size + static_cast<std::uint64_t>(-net);
                        if (size == 0) continue;
                    }
                }
                emit_segment_alloc(device, t0, s->address, size, stream_id(s->stream), s->site,
                                   s->expandable, true, pool_of(*s), s->pool);
            }
        }
        if (h != nullptr) {
            for (const SegmentFreedBefore& f : h->segments_freed_before) {
                emit_segment_alloc(device, t0, f.address, f.size, stream_id(f.stream), kNoString,
                                   false, true);
            }
        }
        if (fit != final_by_device_.end()) {
            for (const SnapshotSegment* s : fit->second) {
                for (const SnapshotBlock& b : s->blocks) {
                    if (b.state == BlockState::kInactive) continue;
                    if (h != nullptr && h->blocks.contains(b.address)) continue;  // traced
                    emit_block_alloc(device, t0, b.address, b.size, b.requested, b.site,
                                     stream_id(s->stream), true, b.category);
                    if (b.state == BlockState::kPendingFree)
                        emit_block_free(device, t0, b.address, b.size, true, true);
                }
            }
        }
        if (h != nullptr) {
            for (const SnapshotBlock& b : h->freed_before) {
                emit_block_alloc(device, t0, b.address, b.size, b.requested, kNoString, 0, true);
            }
        }
    }

    // The kept trace, read back a window at a time: the live blocks' table is too large to stay
    // in cache, so each entry's address is asked for a few entries before it is replayed.
    void replay_kept(const CompactTrace& trace) {
        constexpr std::size_t kWindow = 8;
        CompactTrace::Reader kept(trace);
        std::array<TraceEntry, kWindow> window;
        std::size_t filled = 0;
        while (filled < kWindow && kept.next(window[filled])) ++filled;
        for (std::size_t i = 0; filled > 0; i = (i + 1) % kWindow) {
            const TraceEntry e = window[i];
            if (kept.next(window[i])) {
                sim_.blocks.prefetch(window[i].address);
                if (const DeviceHistory* h = history_of(window[i].device)) {
                    h->blocks.prefetch(window[i].address);
                }
            } else {
                --filled;
            }
            trace_entry(e);
        }
    }

    void trace_entry(const TraceEntry& e) {
        if (!has_current_ || e.device != current_) {
            finish_device();
            const DeviceHistory* h = history_of(e.device);
            start_device(e.device, h != nullptr ? h->first_ns : 0);
        }
        // Snapshots older than ~2.2 have no time stamps: keep the order with a counter.
        std::uint64_t t = e.time_us != 0 ? e.time_us * 1000 : last_ns_ + 1;
        if (t < last_ns_) t = last_ns_;  // the ring buffer is in order; never go backwards
        emit_annotations_until(t);
        last_ns_ = t;
        std::uint32_t stream = stream_id(e.stream);
        switch (e.action) {
            case TraceAction::kAlloc: {
                std::uint64_t requested = e.size;
                // The trace has no requested size; the final block has it for the last
                // allocation of an address that is still live.
                DeviceHistory* h = history_of(e.device);
                TracedAddress* traced = h != nullptr ? h->blocks.find(e.address) : nullptr;
                if (traced != nullptr && ++traced->replayed == traced->allocs) {
                    if (const SnapshotBlock* fb = final_block(e.device, e.address);
                        fb != nullptr && fb->size == e.size) {
                        requested = fb->requested;
                    }
                }
                emit_block_alloc(e.device, t, e.address, e.size, requested, e.site, stream, false,
                                 e.category);
                break;
            }
            case TraceAction::kFreeRequested:
                emit_block_free(e.device, t, e.address, e.size, true, false);
                break;
            case TraceAction::kFreeCompleted:
                emit_block_free(e.device, t, e.address, e.size, false, false);
                break;
            case TraceAction::kSegmentAlloc:
            case TraceAction::kSegmentMap:
                // segment_alloc entries do not say whether the segment is expandable; the
                // final state (or the allocator setting) does, and later maps extend it.
                emit_segment_alloc(
                    e.device, t, e.address, e.size, stream, e.site,
                    e.action == TraceAction::kSegmentMap || expandable_at(e.device, e.address),
                    false, pool_at(e.device, e.address), private_pool_at(e.device, e.address));
                break;
            case TraceAction::kSegmentFree:
            case TraceAction::kSegmentUnmap:
                emit_segment_free(e.device, t, e.address, e.size,
                                  e.action == TraceAction::kSegmentUnmap, false);
                break;
            case TraceAction::kOom: {
                Event ev = base(EventKind::kOutOfMemory, e.device, t, false);
                ev.stream = stream;
                ev.oom.requested_bytes = e.size;
                ev.oom.free_bytes = e.device_free;
                ev.oom.site = e.site;
                push(ev);
                break;
            }
            case TraceAction::kSnapshot:
            case TraceAction::kOther: break;
        }
    }

    bool expandable_at(std::uint16_t device, std::uint64_t address) const {
        auto fit = final_by_device_.find(device);
        if (fit != final_by_device_.end()) {
            const auto& segs = fit->second;
            auto it = std::upper_bound(
                segs.begin(), segs.end(), address,
                [](std::uint64_t a, const SnapshotSegment* s) { return a < s->address; });
            if (it != segs.begin() && address - (*(it - 1))->address < (*(it - 1))->total_size) {
                return (*(it - 1))->expandable;
            }
        }
        return expandable_setting_;
    }

    static std::uint64_t pool_of(const SnapshotSegment& s) {
        return s.small_pool ? kSegmentPoolSmall : kSegmentPoolLarge;
    }

    // The final segment holding `address`, or null.
    const SnapshotSegment* final_segment_at(std::uint16_t device, std::uint64_t address) const {
        auto fit = final_by_device_.find(device);
        if (fit == final_by_device_.end()) return nullptr;
        const auto& segs = fit->second;
        auto it = std::upper_bound(
            segs.begin(), segs.end(), address,
            [](std::uint64_t a, const SnapshotSegment* s) { return a < s->address; });
        if (it == segs.begin() || address - (*(it - 1))->address >= (*(it - 1))->total_size) {
            return nullptr;
        }
        return *(it - 1);
    }
    // The pool of the final segment holding `address` (trace entries do not name it).
    std::uint64_t pool_at(std::uint16_t device, std::uint64_t address) const {
        const SnapshotSegment* s = final_segment_at(device, address);
        return s == nullptr ? kSegmentPoolUnknown : pool_of(*s);
    }
    // Its private pool, 0 for the default pool (a segment freed before the end: not known).
    std::uint32_t private_pool_at(std::uint16_t device, std::uint64_t address) const {
        const SnapshotSegment* s = final_segment_at(device, address);
        return s == nullptr ? 0 : s->pool;
    }

    const SnapshotBlock* final_block(std::uint16_t device, std::uint64_t address) const {
        auto fit = final_by_device_.find(device);
        if (fit == final_by_device_.end()) return nullptr;
        const auto& segs = fit->second;
        auto it = std::upper_bound(
            segs.begin(), segs.end(), address,
            [](std::uint64_t a, const SnapshotSegment* s) { return a < s->address; });
        if (it == segs.begin()) return nullptr;
        const SnapshotSegment* s = *(it - 1);
        for (const SnapshotBlock& b : s->blocks) {
            if (b.address == address && b.state != BlockState::kInactive) return &b;
        }
        return nullptr;
    }

    void emit_annotations_until(std::uint64_t t_ns) {
        const auto& anns = state_->annotations;
        while (ann_pos_ < anns.size() && anns[ann_pos_].device == current_ &&
               anns[ann_pos_].time_us * 1000 <= t_ns) {
            const SnapshotAnnotation& a = anns[ann_pos_++];
            std::uint64_t t = std::max(a.time_us * 1000, last_ns_);
            last_ns_ = t;
            std::string_view name = strings_->lookup(a.name);
            if (name.rfind("ProfilerStep#", 0) == 0) {
                Event ev =
                    base(a.start ? EventKind::kStepBegin : EventKind::kStepEnd, current_, t, false);
                ev.range.name = a.name;
                ev.range.category = RangeCategory::kStep;
                ev.range.id = parse_step(name.substr(13));
                push(ev);
                continue;
            }
            Event ev =
                base(a.start ? EventKind::kRangeBegin : EventKind::kRangeEnd, kNoDevice, t, false);
            ev.range.name = a.name;
            ev.range.category = name.rfind("Optimizer.", 0) == 0 ? RangeCategory::kPhase
                                : name.rfind("enumerate(DataLoader)", 0) == 0
                                    ? RangeCategory::kInputWait
                                    : RangeCategory::kGeneric;
            push(ev);
            if (!a.start && !profiler_steps_ && name.rfind("Optimizer.step#", 0) == 0) {
                Event step = base(EventKind::kStepEnd, current_, t, true);
                step.range.category = RangeCategory::kStep;
                step.range.id = ++derived_steps_;
                push(step);
            }
        }
    }

    static std::uint64_t parse_step(std::string_view digits) {
        std::uint64_t v = 0;
        for (char c : digits) {
            if (c < '0' || c > '9') break;
            v = v * 10 + static_cast<std::uint64_t>(c - '0');
        }
        return v;
    }

    // Brings the replayed state to the snapshot's final state.
    void reconcile(std::uint16_t device, std::uint64_t t) {
        reconciling_ = true;
        reconcile_to_final(device, t);
        reconciling_ = false;
    }
    void reconcile_to_final(std::uint16_t device, std::uint64_t t) {
        auto fit = final_by_device_.find(device);
        static const std::vector<const SnapshotSegment*> kNone;
        const auto& finals = fit != final_by_device_.end() ? fit->second : kNone;
        std::unordered_map<std::uint64_t, const SnapshotBlock*> final_blocks;
        std::map<std::uint64_t, const SnapshotSegment*> final_segments;
        for (const SnapshotSegment* s : finals) {
            final_segments[s->address] = s;
            for (const SnapshotBlock& b : s->blocks) {
                if (b.state != BlockState::kInactive) final_blocks[b.address] = &b;
            }
        }
        // Blocks the replay holds that the final state does not.
        std::vector<std::pair<std::uint64_t, std::uint64_t>> stale;
        sim_.blocks.for_each([&](std::uint64_t addr, const std::pair<std::uint64_t, bool>& v) {
            auto it = final_blocks.find(addr);
            if (it == final_blocks.end() || it->second->size != v.first)
                stale.emplace_back(addr, v.first);
        });
        std::sort(stale.begin(), stale.end());  // a fixed order, whatever the table's
        for (const auto& [addr, size] : stale) emit_block_free(device, t, addr, size, false, true);
        // Segments: compare extents.
        std::vector<std::pair<std::uint64_t, std::pair<std::uint64_t, bool>>> extra;
        for (const auto& [addr, v] : sim_.segments) {
            auto it = final_segments.find(addr);
            if (it == final_segments.end() || it->second->total_size != v.first)
                extra.emplace_back(addr, v);
        }
        // Highest address first: the analyses keep segments sorted by address, and freeing
        // thousands of them from the top costs nothing to move.
        for (auto it = extra.rbegin(); it != extra.rend(); ++it) {
            // Free the whole extent: non-expandable form frees the segment at its start.
            emit_segment_free(device, t, it->first, it->second.first, false, true);
        }
        for (const SnapshotSegment* s : finals) {
            auto it = sim_.segments.find(s->address);
            if (it == sim_.segments.end() || it->second.first != s->total_size) {
                emit_segment_alloc(device, t, s->address, s->total_size, stream_id(s->stream),
                                   s->site, s->expandable, true, pool_of(*s), s->pool);
            }
        }
        for (const SnapshotSegment* s : finals) {
            for (const SnapshotBlock& b : s->blocks) {
                if (b.state == BlockState::kInactive) continue;
                auto* live = sim_.blocks.find(b.address);
                if (live == nullptr || live->first != b.size) {
                    emit_block_alloc(device, t, b.address, b.size, b.requested, b.site,
                                     stream_id(s->stream), true, b.category);
                    live = sim_.blocks.find(b.address);
                }
                if (b.state == BlockState::kPendingFree && live != nullptr && !live->second) {
                    emit_block_free(device, t, b.address, b.size, true, true);
                }
            }
        }
    }

    // The trace ring buffer wrapped (trace_alloc_overflowed, pytorch PR #179276): the history is
    // complete only from its first kept entry, whatever the rebuilt state before it says.
    void note_history_cut(const StateCollector& state) {
        std::map<std::string, std::string> flags;  // "", ".<device>" -> value
        for (const auto& [k, v] : state.settings) {
            for (const char* name : {"trace_alloc_overflowed", "trace_alloc_max_entries"}) {
                const std::string_view key = k;
                if (key.rfind(name, 0) == 0) flags[k] = v;
            }
        }
        for (const auto& [device, h] : state.history) {
            const std::string per = fmt::format(".{}", device);
            auto flag = flags.find("trace_alloc_overflowed" + per);
            if (flag == flags.end()) flag = flags.find("trace_alloc_overflowed");
            if (flag == flags.end() || flag->second != "true") continue;
            auto cap = flags.find("trace_alloc_max_entries" + per);
            if (cap == flags.end()) cap = flags.find("trace_alloc_max_entries");
            const std::string kept = cap != flags.end()
                                         ? fmt::format("keeps its last {} entries", cap->second)
                                         : std::string("keeps only its last entries");
            info_.properties.emplace_back(fmt::format("snapshot_history_cut.{}", device), "true");
            info_.properties.emplace_back(
                fmt::format("snapshot_history_complete_since_us.{}", device),
                fmt::to_string(h.first_ns / 1000));
            summary_.missing.push_back(fmt::format(
                "device {}: the allocator's trace ring buffer overflowed (trace_alloc_overflowed; "
                "it {}), so the allocation history is complete only from its first kept entry "
                "(time_us {}, {} entries kept); what happened before it was overwritten, and "
                "leak and what-if verdicts that need the whole history are not exact",
                device, kept, h.first_ns / 1000, h.entries));
        }
    }

    // Pinned host memory (host_segments, host_traces): booked as page-locked host RAM, never as
    // device memory. A host segment is what cudaHostAlloc pinned; the blocks in it are the
    // program's tensors, but the RAM is locked as long as the segment lives, cached or not.
    void emit_host_memory(const StateCollector& state) {
        if (state.host_segments.empty() && state.host_trace.empty()) return;
        std::unordered_map<std::uint64_t, bool> traced;  // segment address -> first was a free
        std::uint64_t t0 = 0;
        for (const TraceEntry& e : state.host_trace) {
            if (t0 == 0 && e.time_us != 0) t0 = e.time_us * 1000;
            if (e.action == TraceAction::kSegmentAlloc) traced.try_emplace(e.address, false);
            if (e.action == TraceAction::kSegmentFree) traced.try_emplace(e.address, true);
        }
        if (t0 == 0) {
            for (const auto& [device, h] : state.history) {
                if (h.first_ns != 0 && (t0 == 0 || h.first_ns < t0)) t0 = h.first_ns;
            }
        }
        std::uint64_t held = 0;
        for (const SnapshotSegment& s : state.host_segments) {
            held += s.total_size;
            auto it = traced.find(s.address);
            if (it != traced.end() && !it->second) continue;  // allocated within the trace
            push(host_event(EventKind::kHostAlloc, t0, s.address, s.total_size, true));
        }
        for (const TraceEntry& e : state.host_trace) {
            if (e.action == TraceAction::kSegmentFree && traced[e.address]) {
                push(host_event(EventKind::kHostAlloc, t0, e.address, e.size, true));
                traced[e.address] = false;  // its own free comes below
            }
        }
        std::uint64_t last = t0;
        for (const TraceEntry& e : state.host_trace) {
            if (e.action != TraceAction::kSegmentAlloc && e.action != TraceAction::kSegmentFree)
                continue;
            last = std::max(last, e.time_us * 1000);
            push(host_event(e.action == TraceAction::kSegmentAlloc ? EventKind::kHostAlloc
                                                                   : EventKind::kHostFree,
                            last, e.address, e.size, false));
        }
        info_.properties.emplace_back("snapshot_host_segments",
                                      fmt::to_string(state.host_segments.size()));
        summary_.notes.push_back(fmt::format(
            "pinned host memory (host_segments, host_traces): {} segments holding {} bytes of "
            "page-locked host RAM at the snapshot, {} host trace entries; booked as host memory, "
            "apart from the device's",
            state.host_segments.size(), held, state.host_trace.size()));
        if (state.host_trace_dropped > 0) {
            summary_.dropped += state.host_trace_dropped;
            summary_.notes.push_back(fmt::format("{} host trace entries past the cap were skipped",
                                                 state.host_trace_dropped));
        }
    }
    Event host_event(EventKind kind, std::uint64_t t, std::uint64_t addr, std::uint64_t size,
                     bool synthetic) {
        Event ev = base(kind, kNoDevice, t, synthetic);
        ev.flags = static_cast<std::uint8_t>(MemoryKind::kPinned) |
                   (synthetic ? kEventFlagSynthetic : std::uint8_t{0});
        ev.memory.address = addr;
        ev.memory.bytes = size;
        return ev;
    }

    // ---- event builders (they also keep the simulated live set) ----
    Event base(EventKind kind, std::uint16_t device, std::uint64_t t, bool synthetic) {
        Event ev;
        ev.kind = kind;
        ev.device = device;
        ev.start_ns = ev.end_ns = t;
        ev.flags = static_cast<std::uint8_t>(MemoryKind::kDevice);
        if (synthetic) ev.flags |= kEventFlagSynthetic;
        return ev;
    }
    void emit_block_alloc(std::uint16_t device, std::uint64_t t, std::uint64_t addr,
                          std::uint64_t size, std::uint64_t requested, StringId site,
                          std::uint32_t stream, bool synthetic,
                          MemoryCategory category = MemoryCategory::kOther) {
        if (synthetic) ++reconciled_count_for(t);
        Event ev = base(EventKind::kBlockAlloc, device, t, synthetic);
        ev.stream = stream;
        ev.memory.address = addr;
        ev.memory.bytes = size;
        ev.memory.aux = requested;
        ev.memory.site = site;
        ev.memory.extra = segment_ordinal(device, addr) & 0x0FFFFFFFu;
        set_block_category(ev.memory, category);
        sim_.blocks[addr] = {size, false};
        push(ev);
    }
    void emit_block_free(std::uint16_t device, std::uint64_t t, std::uint64_t addr,
                         std::uint64_t size, bool pending, bool synthetic) {
        if (synthetic) ++reconciled_count_for(t);
        Event ev = base(EventKind::kBlockFree, device, t, synthetic);
        if (pending) ev.flags |= kEventFlagPendingFree;
        ev.memory.address = addr;
        ev.memory.bytes = size;
        if (pending) {
            if (auto* live = sim_.blocks.find(addr)) live->second = true;
        } else {
            sim_.blocks.erase(addr);
        }
        push(ev);
    }
    void emit_segment_alloc(std::uint16_t device, std::uint64_t t, std::uint64_t addr,
                            std::uint64_t size, std::uint32_t stream, StringId site,
                            bool expandable, bool synthetic,
                            std::uint64_t pool = kSegmentPoolUnknown,
                            std::uint32_t private_pool = 0) {
        if (synthetic) ++reconciled_count_for(t);
        Event ev = base(EventKind::kSegmentAlloc, device, t, synthetic);
        if (expandable) ev.flags |= kEventFlagExpandable;
        ev.stream = stream;
        ev.memory.address = addr;
        ev.memory.bytes = size;
        ev.memory.aux = pool;
        ev.memory.site = site;
        ev.memory.extra = private_pool;
        sim_.map(addr, size, expandable);
        push(ev);
    }
    void emit_segment_free(std::uint16_t device, std::uint64_t t, std::uint64_t addr,
                           std::uint64_t size, bool expandable, bool synthetic) {
        if (synthetic) ++reconciled_count_for(t);
        Event ev = base(EventKind::kSegmentFree, device, t, synthetic);
        if (expandable) ev.flags |= kEventFlagExpandable;
        ev.memory.address = addr;
        ev.memory.bytes = size;
        sim_.unmap(addr, size, expandable);
        push(ev);
    }
    // Synthetic events at the initial state are the reconstruction, not repairs; only those
    // after the first trace entry count as reconciled.
    std::uint64_t& reconciled_count_for(std::uint64_t) {
        return in_reconcile_phase() ? reconciled_ : ignored_;
    }
    bool in_reconcile_phase() const { return reconciling_; }

    std::uint32_t segment_ordinal(std::uint16_t device, std::uint64_t addr) const {
        auto fit = final_by_device_.find(device);
        if (fit == final_by_device_.end()) return 0;
        const auto& segs = fit->second;
        auto it = std::upper_bound(
            segs.begin(), segs.end(), addr,
            [](std::uint64_t a, const SnapshotSegment* s) { return a < s->address; });
        if (it == segs.begin()) return 0;
        const SnapshotSegment* s = *(it - 1);
        if (addr - s->address >= s->total_size) return 0;
        return static_cast<std::uint32_t>(it - segs.begin());  // 1-based
    }

    std::uint32_t stream_id(std::uint64_t stream) {
        if (stream == 0) return 0;
        auto [it, fresh] =
            streams_.try_emplace(stream, static_cast<std::uint32_t>(streams_.size() + 1));
        (void)fresh;
        return it->second;
    }

    void push(const Event& ev) {
        batch_.push_back(ev);
        if (batch_.size() >= kBatch) flush();
    }
    void flush() {
        if (batch_.empty()) return;
        delivered_ += batch_.size();
        sink_->hand_over(batch_);  // moved, not copied; comes back empty
    }

    std::string path_;
    SourceInfo info_;
    SourceSummary summary_;
    PipelinedSink* sink_ = nullptr;
    StringTable* strings_ = nullptr;
    StateCollector* state_ = nullptr;
    std::map<std::uint16_t, std::vector<const SnapshotSegment*>> final_by_device_;
    std::unordered_set<std::uint16_t> done_devices_;
    std::unordered_map<std::uint64_t, std::uint32_t> streams_;
    SimulatedDevice sim_;
    std::uint16_t current_ = 0;
    bool has_current_ = false;
    bool profiler_steps_ = false;
    bool reconciling_ = false;
    bool expandable_setting_ = false;
    std::uint64_t derived_steps_ = 0;
    std::size_t ann_pos_ = 0;
    std::uint64_t last_ns_ = 0;
    std::uint64_t reconciled_ = 0;
    std::uint64_t ignored_ = 0;
    std::uint64_t delivered_ = 0;
    std::vector<Event> batch_;
};

}  // namespace

Result<std::unique_ptr<EventSource>> open_snapshot_source(const std::string& path,
                                                          const AnalysisOptions& /*options*/) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) return not_found(path + ": cannot open");
    std::fclose(f);
    return std::unique_ptr<EventSource>(std::make_unique<SnapshotSource>(path));
}

}  // namespace gpudiag::detail
