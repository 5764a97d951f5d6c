// SPDX-License-Identifier: Apache-2.0
// TorchSnapshotReader: the snapshot schema on top of SafePickleReader's stream. The hot path is
// the device trace: an entry's keys are told apart by their interned ids, its frames by the
// frames' and stacks' digests (StackFacts), so that an entry costs a few lookups and no
// allocation.
#include "importers/torch_snapshot/torch_snapshot.hpp"

#include "core/allocation_site.hpp"
#include "importers/byte_stream.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

namespace gpudiag::detail {
namespace {

// Stream roles, by position from the root.
constexpr std::uint16_t kRootTag = 1;           // the root dict, or a bare list of segments
constexpr std::uint16_t kSegmentsTag = 2;       // root["segments"]
constexpr std::uint16_t kTracesTag = 3;         // root["device_traces"]
constexpr std::uint16_t kAnnotationsTag = 4;    // root["external_annotations"]
constexpr std::uint16_t kHostSegmentsTag = 5;   // root["host_segments"]
constexpr std::uint16_t kHostTracesTag = 6;     // root["host_traces"]
constexpr std::uint16_t kHostTraceListTag = 7;  // root["host_traces"][i] when it is a list
constexpr std::uint16_t kDeviceTraceTag = 100;  // root["device_traces"][d] -> 100 + d
constexpr std::size_t kMaxDevices = 4096;

BlockState parse_state(std::string_view s) {
    if (s == "active_allocated") return BlockState::kActive;
    // torch's code spells it active_pending_free; the _snapshot docstring says
    // active_awaiting_free. Accept both.
    if (s == "active_pending_free" || s == "active_awaiting_free") return BlockState::kPendingFree;
    return BlockState::kInactive;
}

TraceAction parse_action(std::string_view a) {
    if (a == "alloc") return TraceAction::kAlloc;
    if (a == "free_requested") return TraceAction::kFreeRequested;
    if (a == "free_completed") return TraceAction::kFreeCompleted;
    if (a == "segment_alloc") return TraceAction::kSegmentAlloc;
    if (a == "segment_free") return TraceAction::kSegmentFree;
    if (a == "segment_map") return TraceAction::kSegmentMap;
    if (a == "segment_unmap") return TraceAction::kSegmentUnmap;
    if (a == "oom") return TraceAction::kOom;
    if (a == "snapshot") return TraceAction::kSnapshot;
    return TraceAction::kOther;
}

std::uint64_t non_negative(std::int64_t v) {
    return v > 0 ? static_cast<std::uint64_t>(v) : 0;
}

// Fields of segments, blocks, trace entries and frames the reader uses, told apart by the interned
// id of their key (one vector lookup per key instead of comparing its text).
enum class Field : std::uint8_t {
    kOther,
    kAction,
    kAddr,
    kSize,
    kStream,
    kTimeUs,
    kDeviceFree,
    kFrames,
    kFilename,
    kName,
    kLine,
};

Field field_named(std::string_view k) {
    switch (k.size()) {
        case 4:
            if (k == "addr") return Field::kAddr;
            if (k == "size") return Field::kSize;
            if (k == "name") return Field::kName;
            if (k == "line") return Field::kLine;
            break;
        case 6:
            if (k == "action") return Field::kAction;
            if (k == "stream") return Field::kStream;
            if (k == "frames") return Field::kFrames;
            break;
        case 7:
            if (k == "time_us") return Field::kTimeUs;
            break;
        case 8:
            if (k == "filename") return Field::kFilename;
            break;
        case 11:
            if (k == "device_free") return Field::kDeviceFree;
            break;
        default: break;
    }
    return Field::kOther;
}

// What the reader learns about a string once and then looks up by its id.
class StringFacts {
public:
    Field field(const PickleView& key) {
        const std::uint32_t id = key.string_id();
        if (id < fields_.size() && fields_[id] != kUnknown) [[likely]] {
            return static_cast<Field>(fields_[id]);
        }
        return static_cast<Field>(get(key, fields_, 0));
    }
    // The action a trace entry's "action" names; kUserDefined for record_function annotations.
    static constexpr std::uint8_t kUserDefined = 0xFD;
    std::uint8_t action(const PickleView& name) { return get(name, actions_, 1); }

private:
    static constexpr std::uint8_t kUnknown = 0xFF;
    static constexpr std::size_t kMaxIds = std::size_t{1} << 24;  // past it: worked out each time

    std::uint8_t get(const PickleView& s, std::vector<std::uint8_t>& memo, int what) {
        const std::uint32_t id = s.string_id();
        if (id == PickleView::kNoId) return what == 0 ? 0 : learn(s.as_string(), what);
        if (id >= memo.size()) {
            if (id >= kMaxIds) return learn(s.as_string(), what);
            memo.resize(std::max<std::size_t>(id + 1, memo.size() * 2), kUnknown);
        }
        std::uint8_t& known = memo[id];
        if (known == kUnknown) known = learn(s.as_string(), what);
        return known;
    }
    static std::uint8_t learn(std::string_view text, int what) {
        if (what == 0) return static_cast<std::uint8_t>(field_named(text));
        if (text == "user_defined") return kUserDefined;
        return static_cast<std::uint8_t>(parse_action(text));
    }

    std::vector<std::uint8_t> fields_;
    std::vector<std::uint8_t> actions_;
};

// Distinct call stacks (sequences of frame indices) and what each says, in flat arrays: looked
// up once per allocation, so a lookup is a probe and a compare, not a node walk.
class StackTable {
public:
    static constexpr std::uint32_t kAbsent = 0xFFFFFFFFu;

    [[nodiscard]] std::uint32_t find(std::uint64_t hash,
                                     const std::vector<std::uint32_t>& stack) const {
        if (slots_.empty()) return kAbsent;
        const std::size_t mask = slots_.size() - 1;
        for (std::size_t at = hash & mask;; at = (at + 1) & mask) {
            const Slot& s = slots_[at];
            if (s.hash == 0) return kAbsent;
            if (s.hash == (hash | 1) && s.length == stack.size() &&
                std::equal(stack.begin(), stack.end(), frames_.begin() + s.begin)) {
                return s.facts;
            }
        }
    }
    // Remembers `stack`; nothing happens past the caps.
    void add(std::uint64_t hash, const std::vector<std::uint32_t>& stack, std::uint32_t facts) {
        if (size_ >= kMaxStacks || frames_.size() + stack.size() > kMaxFrames) return;
        if ((size_ + 1) * 2 > slots_.size()) grow();
        const std::size_t mask = slots_.size() - 1;
        std::size_t at = hash & mask;
        while (slots_[at].hash != 0) at = (at + 1) & mask;
        slots_[at] = Slot{hash | 1, static_cast<std::uint32_t>(frames_.size()),
                          static_cast<std::uint32_t>(stack.size()), facts};
        frames_.insert(frames_.end(), stack.begin(), stack.end());
        ++size_;
    }

private:
    static constexpr std::size_t kMaxStacks = std::size_t{1} << 22;
    static constexpr std::size_t kMaxFrames = std::size_t{1} << 24;  // 64 MiB of indices

    struct Slot {
        std::uint64_t hash = 0;  // the stack's hash with its low bit set; 0 is empty
        std::uint32_t begin = 0;
        std::uint32_t length = 0;
        std::uint32_t facts = 0;
    };
    void grow() {
        std::vector<Slot> bigger(std::max<std::size_t>(1024, slots_.size() * 2));
        const std::size_t mask = bigger.size() - 1;
        for (const Slot& s : slots_) {
            if (s.hash == 0) continue;
            std::size_t at = s.hash & mask;
            while (bigger[at].hash != 0) at = (at + 1) & mask;
            bigger[at] = s;
        }
        slots_ = std::move(bigger);
    }

    std::vector<Slot> slots_;
    std::vector<std::uint32_t> frames_;
    std::size_t size_ = 0;
};

// Call stacks, each distinct frame and each distinct stack summarized once. torch shares one
// frame dict per distinct frame and one frame list between an allocation and its frees; both
// are condensed in the reader's memo to a digest (PickleView::condense), so a later reference
// costs a lookup and a trace of millions of allocations keeps 8 bytes per frame list.
class StackFacts {
public:
    explicit StackFacts(StringTable& strings) : strings_(strings) {}

    // The site and category of a frame list (nothing for anything else).
    FrameFacts of(const PickleView& frames, StringFacts& keys) {
        if (const std::uint32_t d = frames.digest(); d != 0) {
            return (d & kFrameBit) == 0 && d <= facts_.size() ? facts_[d - 1] : FrameFacts{};
        }
        if (!frames.is_list() || frames.item_count() == 0) return FrameFacts{};
        sequence_.clear();
        std::uint64_t hash = kHashSeed;
        const auto add = [&](std::uint32_t f) {
            sequence_.push_back(f);
            hash = (hash ^ f) * kHashPrime;
        };
        // Mostly every frame was seen before and carries its digest; else each is read.
        bool interned = frames.for_each_digest([&](std::uint32_t d) {
            if ((d & kFrameBit) != 0) add(d & ~kFrameBit);
            return d != 0;  // a digest that is not a frame's: not a frame, skipped
        });
        if (!interned) {
            sequence_.clear();
            hash = kHashSeed;
            interned = true;
            frames.for_each_item([&](const PickleView& item) {
                const std::uint32_t f = interned ? frame_of(item, keys) : kFull;
                if (f == kFull) interned = false;
                if (f < kFull) add(f);
            });
        }
        std::uint32_t index = 0;
        if (interned) {
            index = facts_of_sequence(hash);
        } else {
            // Past the cap on distinct frames: worked out from the frames themselves.
            views_.clear();
            frames.for_each_item([&](const PickleView& f) {
                if ((f.digest() & kFrameBit) != 0) {
                    views_.push_back(view_of(f.digest()));
                } else if (f.is_dict()) {
                    views_.push_back(read_frame(f, keys).view);
                }
            });
            index = facts_index(summarize(views_));
        }
        if (index + 1 < kFrameBit) frames.condense(index + 1);  // else not condensed: kept whole
        return facts_[index];
    }

    // One frame's file name and function name (record_function annotations ride in them).
    struct Names {
        std::string_view filename;
        std::string_view name;
    };
    std::optional<Names> names_of(const PickleView& frame, StringFacts& keys) {
        if ((frame.digest() & kFrameBit) != 0) {
            FrameView v = view_of(frame.digest());
            return Names{v.filename, v.name};
        }
        if (!frame.is_dict()) return std::nullopt;
        FrameView v = read_frame(frame, keys).view;
        return Names{v.filename, v.name};
    }

private:
    // Frames' digests have this bit, stacks' do not (both below PickleView::kMaxDigest).
    static constexpr std::uint32_t kFrameBit = 1u << 27;
    static constexpr std::uint64_t kHashSeed = 0xcbf29ce484222325ull;  // FNV-1a
    static constexpr std::uint64_t kHashPrime = 0x100000001B3ull;
    static constexpr std::uint32_t kFull = 0xFFFFFFFEu;     // not interned: no room, or no ids
    static constexpr std::uint32_t kNoFrame = 0xFFFFFFFFu;  // not a frame: skipped
    static constexpr std::size_t kMaxFrames = std::size_t{1} << 20;

    struct Frame {
        std::uint32_t filename = PickleView::kNoId;  // string ids of the read
        std::uint32_t name = PickleView::kNoId;
        std::int64_t line = 0;
        bool operator==(const Frame&) const = default;
    };
    struct FrameHash {
        std::size_t operator()(const Frame& f) const noexcept {
            std::uint64_t h = (std::uint64_t{f.filename} << 32) ^ f.name;
            h ^= static_cast<std::uint64_t>(f.line) * 0x9E3779B97F4A7C15ull;
            return static_cast<std::size_t>(h * 0xBF58476D1CE4E5B9ull >> 17);
        }
    };
    struct ReadFrame {
        Frame ids;
        FrameView view;
    };

    static ReadFrame read_frame(const PickleView& dict, StringFacts& keys) {
        ReadFrame out;
        dict.for_each_pair([&](const PickleView& key, const PickleView& value) {
            switch (keys.field(key)) {
                case Field::kFilename:
                    out.ids.filename = value.string_id();
                    out.view.filename = value.as_string();
                    break;
                case Field::kName:
                    out.ids.name = value.string_id();
                    out.view.name = value.as_string();
                    break;
                case Field::kLine: out.ids.line = out.view.line = value.as_int(0); break;
                default: break;
            }
        });
        return out;
    }

    // The frame's index; kNoFrame for an item that is not a frame, kFull past the cap.
    std::uint32_t frame_of(const PickleView& f, StringFacts& keys) {
        if (const std::uint32_t d = f.digest(); d != 0) {
            return (d & kFrameBit) != 0 ? d & ~kFrameBit : kNoFrame;
        }
        if (!f.is_dict()) return kNoFrame;
        ReadFrame r = read_frame(f, keys);
        // Names that are bytes, not strings, have no id to tell frames apart by.
        if ((r.ids.filename == PickleView::kNoId && !r.view.filename.empty()) ||
            (r.ids.name == PickleView::kNoId && !r.view.name.empty())) {
            return kFull;
        }
        auto it = frame_index_.find(r.ids);
        if (it == frame_index_.end()) {
            if (frames_.size() >= kMaxFrames) return kFull;
            it = frame_index_.emplace(r.ids, static_cast<std::uint32_t>(frames_.size())).first;
            frames_.push_back(r.view);
        }
        f.condense(kFrameBit | it->second);
        return it->second;
    }
    FrameView view_of(std::uint32_t digest) const {
        const std::uint32_t i = digest & ~kFrameBit;
        return i < frames_.size() ? frames_[i] : FrameView{};
    }

    std::uint32_t facts_of_sequence(std::uint64_t hash) {
        if (std::uint32_t known = stacks_.find(hash, sequence_); known != StackTable::kAbsent) {
            return known;
        }
        views_.clear();
        for (std::uint32_t f : sequence_) views_.push_back(frames_[f]);
        const std::uint32_t index = facts_index(summarize(views_));
        stacks_.add(hash, sequence_, index);
        return index;
    }
    FrameFacts summarize(const std::vector<FrameView>& views) {
        return FrameFacts{strings_.intern(allocation_site(views)), allocation_category(views),
                          strings_.intern(allocation_owner_site(views))};
    }
    // Distinct facts are few (sites x owners x categories): each has one index.
    std::uint32_t facts_index(const FrameFacts& f) {
        const FactsKey key{f.site, f.owner, static_cast<std::uint8_t>(f.category)};
        auto [it, fresh] = facts_index_.try_emplace(key, static_cast<std::uint32_t>(facts_.size()));
        if (fresh) facts_.push_back(f);
        return it->second;
    }

    StringTable& strings_;
    std::vector<FrameView> frames_;  // views into the reader's strings, valid for the read
    std::unordered_map<Frame, std::uint32_t, FrameHash> frame_index_;
    StackTable stacks_;
    std::vector<FrameFacts> facts_;
    using FactsKey = std::tuple<StringId, StringId, std::uint8_t>;
    std::map<FactsKey, std::uint32_t> facts_index_;
    std::vector<std::uint32_t> sequence_;  // scratch
    std::vector<FrameView> views_;         // scratch
};

class SnapshotHandler final : public PickleStreamHandler {
public:
    SnapshotHandler(const std::string& name, StringTable& strings, SnapshotVisitor& visitor)
        : name_(name), strings_(strings), visitor_(visitor), stacks_(strings) {}

    std::uint16_t root_tag() override { return kRootTag; }

    std::uint16_t child_tag(std::uint16_t parent, std::string_view key,
                            std::size_t index) override {
        if (parent == kRootTag) {
            if (key == "segments") return kSegmentsTag;
            if (key == "device_traces") return kTracesTag;
            if (key == "external_annotations") return kAnnotationsTag;
            if (key == "host_segments") return kHostSegmentsTag;
            if (key == "host_traces") return kHostTracesTag;
            return 0;
        }
        // host_traces is one list of entries, or one list per device like device_traces; a
        // dict item given this tag is simply kept (only lists stream).
        if (parent == kHostTracesTag) return kHostTraceListTag;
        if (parent == kTracesTag && index < kMaxDevices) {
            return static_cast<std::uint16_t>(kDeviceTraceTag + index);
        }
        return 0;
    }

    bool streams(std::uint16_t tag) override {
        return tag == kRootTag || tag == kSegmentsTag || tag == kAnnotationsTag ||
               tag == kHostSegmentsTag || tag == kHostTracesTag || tag == kHostTraceListTag ||
               tag >= kDeviceTraceTag;
    }

    Status on_item(std::uint16_t tag, std::size_t /*index*/, PickleView item) override {
        if (tag == kRootTag || tag == kSegmentsTag) return segment(item, false);
        if (tag == kAnnotationsTag) return external_annotation(item);
        if (tag == kHostSegmentsTag) return segment(item, true);
        if (tag == kHostTracesTag || tag == kHostTraceListTag) {
            // A nested list was streamed item by item already (kHostTraceListTag).
            if (item.is_list()) return Status::ok();
            return trace_entry(0, item, true);
        }
        return trace_entry(static_cast<std::uint16_t>(tag - kDeviceTraceTag), item, false);
    }

private:
    FrameFacts facts_of(const PickleView& frames) { return stacks_.of(frames, keys_); }

    // torch names a private pool by a pair (CUDA graph or MemPool id); the events number them.
    // A few per process; past kMaxPrivatePools the rest share the last number.
    std::uint32_t pool_ordinal(const std::pair<std::int64_t, std::int64_t>& id) {
        constexpr std::size_t kMaxPrivatePools = 4096;
        auto it = pools_.find(id);
        if (it != pools_.end()) return it->second;
        if (pools_.size() >= kMaxPrivatePools) return static_cast<std::uint32_t>(pools_.size());
        const auto ordinal = static_cast<std::uint32_t>(pools_.size() + 1);
        pools_.emplace(id, ordinal);
        return ordinal;
    }

    Status segment(const PickleView& v, bool host) {
        if (!v.is_dict()) {
            return corrupt_data(name_ + ": a segment is not a dict: not a torch memory snapshot");
        }
        const PickleView blocks = v.find("blocks");
        if (!v.find("total_size").exists() || !blocks.exists()) {
            return corrupt_data(name_ +
                                ": a segment lacks \"total_size\" or \"blocks\": not a torch "
                                "memory snapshot");
        }
        SnapshotSegment seg;
        seg.device = static_cast<std::uint16_t>(
            std::min<std::int64_t>(std::max<std::int64_t>(v.int_at("device", 0), 0), 0xFFFE));
        seg.address = non_negative(v.int_at("address", 0));
        seg.total_size = non_negative(v.int_at("total_size", 0));
        seg.stream = static_cast<std::uint64_t>(v.int_at("stream", 0));
        seg.expandable = v.find("is_expandable").as_bool();
        seg.small_pool = v.string_at("segment_type") == "small";
        if (const PickleView pool = v.find("segment_pool_id"); pool.size() == 2) {
            const std::pair<std::int64_t, std::int64_t> id{pool.item(0).as_int(),
                                                           pool.item(1).as_int()};
            seg.private_pool = id.first != 0 || id.second != 0;
            if (seg.private_pool) {
                seg.pool = pool_ordinal(id);
                seg.pool_id = fmt::format("({}, {})", id.first, id.second);
            }
        }
        const FrameFacts seg_facts = facts_of(v.find("frames"));
        seg.site = seg_facts.site;
        seg.owner = seg_facts.owner;
        std::uint64_t offset = 0;
        if (blocks.is_list()) {
            seg.blocks.reserve(blocks.size());
            for (std::size_t i = 0; i < blocks.item_count(); ++i) {
                const PickleView b = blocks.item(i);
                if (!b.is_dict()) continue;
                SnapshotBlock block;
                block.size = non_negative(b.int_at("size", 0));
                // "address" is segment address + running offset in torch; compute it when absent.
                const PickleView address = b.find("address");
                block.address =
                    address.exists() ? non_negative(address.as_int()) : seg.address + offset;
                block.state = parse_state(b.string_at("state"));
                const PickleView history = b.find("history");
                if (const PickleView req = b.find("requested_size"); req.exists()) {
                    block.requested = non_negative(req.as_int());
                    FrameFacts f = facts_of(b.find("frames"));
                    block.site = f.site;
                    block.owner = f.owner;
                    block.category = f.category;
                } else if (history.size() > 0 && history.item(0).is_dict()) {
                    // torch 2.0: the block's most recent allocation is history[0].
                    const PickleView h = history.item(0);
                    block.requested = non_negative(h.int_at("real_size", b.int_at("size", 0)));
                    FrameFacts f = facts_of(h.find("frames"));
                    block.site = f.site;
                    block.owner = f.owner;
                    block.category = f.category;
                } else {
                    block.requested = block.size;
                }
                if (block.requested > block.size) block.requested = block.size;
                offset += block.size;
                seg.blocks.push_back(block);
            }
        }
        return host ? visitor_.on_host_segment(seg) : visitor_.on_segment(seg);
    }

    Status trace_entry(std::uint16_t device, const PickleView& v, bool host) {
        if (!v.is_dict()) {
            if (host) return Status::ok();  // host traces are new: an odd item is skipped
            return corrupt_data(name_ + ": a device trace entry is not a dict");
        }
        // One pass over the entry's keys: trace entries are most of a snapshot. A later
        // duplicate key wins, as in Python (and as PickleView::find does).
        PickleView action, addr, size, stream, time_us, device_free, frames;
        v.for_each_pair([&](const PickleView& key, const PickleView& value) {
            switch (keys_.field(key)) {
                case Field::kAction: action = value; break;
                case Field::kAddr: addr = value; break;
                case Field::kSize: size = value; break;
                case Field::kStream: stream = value; break;
                case Field::kTimeUs: time_us = value; break;
                case Field::kDeviceFree: device_free = value; break;
                case Field::kFrames: frames = value; break;
                default: break;
            }
        });
        const std::uint8_t kind =
            action.exists() ? keys_.action(action) : static_cast<std::uint8_t>(TraceAction::kOther);
        if (kind == StringFacts::kUserDefined) {
            if (host) return Status::ok();  // annotations ride in the device traces
            // ~2.5 form of record_function annotations: the stage and name ride in frames[0].
            if (frames.is_container() && frames.item_count() > 0) {
                if (auto names = stacks_.names_of(frames.item(0), keys_)) {
                    SnapshotAnnotation a;
                    a.device = device;
                    a.time_us = non_negative(time_us.as_int(0));
                    a.start = names->name != "END";
                    a.name = strings_.intern(names->filename);
                    return visitor_.on_annotation(a);
                }
            }
            return Status::ok();
        }
        TraceEntry e;
        e.action = static_cast<TraceAction>(kind);
        e.device = device;
        e.address = non_negative(addr.as_int(0));
        e.size = non_negative(size.as_int(0));
        e.stream = static_cast<std::uint64_t>(stream.as_int(0));
        e.time_us = non_negative(time_us.as_int(0));
        if (e.action == TraceAction::kOom) {
            // Python writes the free bytes under "device_free"; C++ kept them in addr.
            e.device_free = non_negative(device_free.as_int(addr.as_int(0)));
            e.address = 0;
        }
        // Every entry's frames are summarized, so that the reader can condense them (frees
        // mostly refer back to their allocation's list, already condensed); only allocations
        // and OOMs carry a site.
        const FrameFacts f = facts_of(frames);
        if (e.action == TraceAction::kAlloc || e.action == TraceAction::kSegmentAlloc ||
            e.action == TraceAction::kSegmentMap || e.action == TraceAction::kOom) {
            e.site = f.site;
            e.category = f.category;
        }
        return host ? visitor_.on_host_trace_entry(e) : visitor_.on_trace_entry(e);
    }

    Status external_annotation(const PickleView& v) {
        if (!v.is_dict()) return Status::ok();
        SnapshotAnnotation a;
        a.device = static_cast<std::uint16_t>(
            std::min<std::int64_t>(std::max<std::int64_t>(v.int_at("device", 0), 0), 0xFFFE));
        a.time_us = non_negative(v.int_at("time_us", 0));
        a.start = v.string_at("stage") != "END";
        a.name = strings_.intern(v.string_at("name"));
        return visitor_.on_annotation(a);
    }

    const std::string& name_;
    StringTable& strings_;
    SnapshotVisitor& visitor_;
    StringFacts keys_;
    StackFacts stacks_;
    std::map<std::pair<std::int64_t, std::int64_t>, std::uint32_t> pools_;
};

std::string scalar_text(const PickleValue& v) {
    switch (v.kind()) {
        case PickleValue::Kind::kBool: return v.as_bool() ? "true" : "false";
        case PickleValue::Kind::kInt: return fmt::to_string(v.as_int());
        case PickleValue::Kind::kFloat: return fmt::format("{:g}", v.as_double());
        case PickleValue::Kind::kString: return std::string(v.as_string());
        case PickleValue::Kind::kNone: return "none";
        default: return {};
    }
}

// A dict of scalars as "[key:value,...]"; "" when it holds anything else.
std::string flat_dict_text(const PickleValue& dict) {
    std::string out = "[";
    const auto& items = dict.items();
    for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
        if (items[i]->is_container() || items[i + 1]->is_container()) return {};
        if (i > 0) out += ',';
        out += scalar_text(*items[i]) + ":" + scalar_text(*items[i + 1]);
    }
    return out + "]";
}

// A setting given per device (a list indexed by device, or a dict keyed by it) as
// "key.<device>" settings; other containers are not settings this reader uses.
void per_device_setting(const std::string& key, const PickleValue& v, SnapshotVisitor& visitor) {
    constexpr std::size_t kMaxDeviceSettings = 4096;
    const auto& items = v.items();
    if (v.kind() == PickleValue::Kind::kList || v.kind() == PickleValue::Kind::kTuple) {
        for (std::size_t d = 0; d < items.size() && d < kMaxDeviceSettings; ++d) {
            if (!items[d]->is_container())
                visitor.on_setting(fmt::format("{}.{}", key, d), scalar_text(*items[d]));
        }
    } else if (v.kind() == PickleValue::Kind::kDict) {
        for (std::size_t i = 0; i + 1 < items.size() && i / 2 < kMaxDeviceSettings; i += 2) {
            if (items[i]->is_container() || items[i + 1]->is_container()) continue;
            visitor.on_setting(key + "." + scalar_text(*items[i]), scalar_text(*items[i + 1]));
        }
    }
}

Status finish(const Result<PickleRef>& root, const std::string& name, SnapshotVisitor& visitor) {
    if (!root) return root.status();
    const PickleValue& r = **root;
    if (r.kind() == PickleValue::Kind::kList) return Status::ok();  // bare segment list
    if (r.kind() != PickleValue::Kind::kDict || r.find("segments") == nullptr) {
        return corrupt_data(name +
                            ": a pickle, but not a torch memory snapshot (no \"segments\"); "
                            "write one with torch.cuda.memory._dump_snapshot()");
    }
    if (const PickleValue* settings = r.find("allocator_settings");
        settings != nullptr && settings->kind() == PickleValue::Kind::kDict) {
        const auto& items = settings->items();
        for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
            if (!items[i]->is_string()) continue;
            const PickleValue& v = *items[i + 1];
            if (v.kind() == PickleValue::Kind::kDict) {
                // roundup_power2_divisions: {"1": 0, "2": 0, ...} -> "[1:0,2:0,...]", the form
                // PYTORCH_CUDA_ALLOC_CONF takes.
                visitor.on_setting(std::string(items[i]->as_string()), flat_dict_text(v));
            } else if (!v.is_container()) {
                visitor.on_setting(std::string(items[i]->as_string()), scalar_text(v));
            } else {
                per_device_setting(std::string(items[i]->as_string()), v, visitor);
            }
        }
    }
    for (std::size_t i = 0; i + 1 < r.items().size(); i += 2) {
        const PickleValue& key = *r.items()[i];
        if (!key.is_string()) continue;
        const std::string k(key.as_string());
        visitor.on_root_key(k);
        // PR #179276 describes the flags as per-device fields of the snapshot: accepted at the
        // root as well as in allocator_settings.
        if (k == "trace_alloc_overflowed" || k == "trace_alloc_max_entries") {
            const PickleValue& v = *r.items()[i + 1];
            if (v.is_container()) {
                per_device_setting(k, v, visitor);
            } else {
                visitor.on_setting(k, scalar_text(v));
            }
        }
    }
    return Status::ok();
}

}  // namespace

bool known_snapshot_root_key(std::string_view key) noexcept {
    return key == "segments" || key == "device_traces" || key == "allocator_settings" ||
           key == "external_annotations" || key == "host_segments" || key == "host_traces" ||
           key == "trace_alloc_overflowed" || key == "trace_alloc_max_entries";
}

Status TorchSnapshotReader::read(const std::string& path, StringTable& strings,
                                 SnapshotVisitor& visitor) noexcept {
    ended_early_ = false;
    bytes_read_ = 0;
    try {
        auto file = open_file_stream(path);
        if (!file) return file.status();
        // A plain pickle's size bounds the lengths it may claim; a gzip one is read as it
        // inflates, whatever its size.
        std::uint64_t size = (*file)->total();
        std::string magic(2, '\0');
        auto got = read_fully(**file, magic.data(), magic.size());
        if (!got) return got.status();
        magic.resize(*got);
        const bool gzip = magic.size() == 2 && magic[0] == '\x1f' && magic[1] == '\x8b';
        std::unique_ptr<ByteStream> in = prefixed_stream(std::move(magic), std::move(*file));
        if (gzip) {
            // Inflated on a second thread while this one decodes.
            in = read_ahead_stream(gzip_stream(std::move(in)));
            size = SafePickleReader::kUnknownSize;
        }
        return read_stream(*in, size, path, strings, visitor);
    } catch (...) {
        return resource_exhausted(path + ": out of host memory while reading the snapshot");
    }
}

Status TorchSnapshotReader::read_stream(ByteStream& in, std::uint64_t size, const std::string& name,
                                        StringTable& strings, SnapshotVisitor& visitor) noexcept {
    ended_early_ = false;
    bytes_read_ = 0;
    try {
        SnapshotHandler handler(name, strings, visitor);
        SafePickleReader reader(limits_);
        auto root = reader.read(in, size, name, &handler);
        ended_early_ = reader.ended_early();
        bytes_read_ = reader.bytes_read();
        return finish(root, name, visitor);
    } catch (...) {
        return resource_exhausted(name + ": out of host memory while reading the snapshot");
    }
}

Status TorchSnapshotReader::read_bytes(std::string_view bytes, const std::string& name,
                                       StringTable& strings, SnapshotVisitor& visitor) noexcept {
    ended_early_ = false;
    bytes_read_ = 0;
    try {
        SnapshotHandler handler(name, strings, visitor);
        SafePickleReader reader(limits_);
        auto root = reader.read(bytes, name, &handler);
        ended_early_ = reader.ended_early();
        bytes_read_ = reader.bytes_read();
        return finish(root, name, visitor);
    } catch (...) {
        return resource_exhausted(name + ": out of host memory while reading the snapshot");
    }
}

}  // namespace gpudiag::detail
