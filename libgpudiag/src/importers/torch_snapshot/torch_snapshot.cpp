// SPDX-License-Identifier: Apache-2.0
// TorchSnapshotReader: the snapshot schema on top of SafePickleReader's stream.
#include "importers/torch_snapshot/torch_snapshot.hpp"

#include "core/allocation_site.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <unordered_map>

namespace gpudiag::detail {
namespace {

// Stream roles, by position from the root.
constexpr std::uint16_t kRootTag = 1;           // the root dict, or a bare list of segments
constexpr std::uint16_t kSegmentsTag = 2;       // root["segments"]
constexpr std::uint16_t kTracesTag = 3;         // root["device_traces"]
constexpr std::uint16_t kAnnotationsTag = 4;    // root["external_annotations"]
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

class SnapshotHandler final : public PickleStreamHandler {
public:
    SnapshotHandler(const std::string& name, StringTable& strings, SnapshotVisitor& visitor)
        : name_(name), strings_(strings), visitor_(visitor) {}

    std::uint16_t root_tag() override { return kRootTag; }

    std::uint16_t child_tag(std::uint16_t parent, std::string_view key,
                            std::size_t index) override {
        if (parent == kRootTag) {
            if (key == "segments") return kSegmentsTag;
            if (key == "device_traces") return kTracesTag;
            if (key == "external_annotations") return kAnnotationsTag;
            return 0;
        }
        if (parent == kTracesTag && index < kMaxDevices) {
            return static_cast<std::uint16_t>(kDeviceTraceTag + index);
        }
        return 0;
    }

    bool streams(std::uint16_t tag) override {
        return tag == kRootTag || tag == kSegmentsTag || tag == kAnnotationsTag ||
               tag >= kDeviceTraceTag;
    }

    Status on_item(std::uint16_t tag, std::size_t /*index*/, const PickleValue& item) override {
        if (tag == kRootTag || tag == kSegmentsTag) return segment(item);
        if (tag == kAnnotationsTag) return external_annotation(item);
        return trace_entry(static_cast<std::uint16_t>(tag - kDeviceTraceTag), item);
    }

    // The site and category of a frame list, cached: most lists repeat.
    FrameFacts facts_of(const PickleValue* frames) {
        if (frames == nullptr || frames->kind() != PickleValue::Kind::kList ||
            frames->items().empty()) {
            return FrameFacts{};
        }
        // Lists the pickle memoizes live until the read ends, so their address is a safe key;
        // torch shares one frame list between an allocation and its frees.
        if (frames->is_memoized()) {
            auto it = site_cache_.find(frames);
            if (it != site_cache_.end()) return it->second;
        }
        // Most lists are new but made of the same memoized frame dicts (one per distinct frame
        // of the program): the same sequence of frames gives the same site, and comparing
        // pointers is far cheaper than classifying every frame's file name again.
        std::uint64_t hash = 0;
        bool all_memoized = true;
        for (const auto& f : frames->items()) {
            all_memoized = all_memoized && f->is_memoized();
            hash = (hash ^ reinterpret_cast<std::uintptr_t>(f.get())) * 0x100000001B3ull;
        }
        if (all_memoized) {
            auto it = sequence_cache_.find(hash);
            if (it != sequence_cache_.end() && same_frames(it->second.frames, *frames)) {
                return it->second.facts;
            }
        }
        FrameFacts id{strings_.intern(frames_to_site(*frames)), frames_to_category(*frames)};
        if (frames->is_memoized() && site_cache_.size() < kMaxCachedSites) {
            site_cache_.emplace(frames, id);
        }
        if (all_memoized && sequence_cache_.size() < kMaxCachedSites &&
            cached_frame_pointers_ + frames->items().size() <= kMaxCachedFramePointers) {
            FrameSequence& entry = sequence_cache_[hash];  // a colliding sequence replaces it
            cached_frame_pointers_ -= entry.frames.size();
            entry.frames.clear();
            for (const auto& f : frames->items()) entry.frames.push_back(f.get());
            cached_frame_pointers_ += entry.frames.size();
            entry.facts = id;
        }
        return id;
    }
    StringId site_of(const PickleValue* frames) { return facts_of(frames).site; }

private:
    Status segment(const PickleValue& v) {
        if (v.kind() != PickleValue::Kind::kDict) {
            return corrupt_data(name_ + ": a segment is not a dict: not a torch memory snapshot");
        }
        if (v.find("total_size") == nullptr || v.find("blocks") == nullptr) {
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
        seg.expandable = v.find("is_expandable") != nullptr && v.find("is_expandable")->as_bool();
        seg.small_pool = v.string_at("segment_type") == "small";
        if (const PickleValue* pool = v.find("segment_pool_id");
            pool != nullptr && pool->size() == 2) {
            seg.private_pool = pool->items()[0]->as_int() != 0 || pool->items()[1]->as_int() != 0;
        }
        seg.site = site_of(v.find("frames"));
        const PickleValue* blocks = v.find("blocks");
        std::uint64_t offset = 0;
        if (blocks->kind() == PickleValue::Kind::kList) {
            seg.blocks.reserve(blocks->size());
            for (const auto& b : blocks->items()) {
                if (b->kind() != PickleValue::Kind::kDict) continue;
                SnapshotBlock block;
                block.size = non_negative(b->int_at("size", 0));
                // "address" is segment address + running offset in torch; compute it when absent.
                block.address = b->find("address") != nullptr ? non_negative(b->int_at("address"))
                                                              : seg.address + offset;
                block.state = parse_state(b->string_at("state"));
                if (const PickleValue* req = b->find("requested_size")) {
                    block.requested = non_negative(req->as_int());
                    FrameFacts f = facts_of(b->find("frames"));
                    block.site = f.site;
                    block.category = f.category;
                } else if (const PickleValue* history = b->find("history");
                           history != nullptr && history->size() > 0 &&
                           history->items()[0]->kind() == PickleValue::Kind::kDict) {
                    // torch 2.0: the block's most recent allocation is history[0].
                    const PickleValue& h = *history->items()[0];
                    block.requested = non_negative(h.int_at("real_size", b->int_at("size", 0)));
                    FrameFacts f = facts_of(h.find("frames"));
                    block.site = f.site;
                    block.category = f.category;
                } else {
                    block.requested = block.size;
                }
                if (block.requested > block.size) block.requested = block.size;
                offset += block.size;
                seg.blocks.push_back(block);
            }
        }
        return visitor_.on_segment(seg);
    }

    Status trace_entry(std::uint16_t device, const PickleValue& v) {
        if (v.kind() != PickleValue::Kind::kDict) {
            return corrupt_data(name_ + ": a device trace entry is not a dict");
        }
        // One pass over the entry's keys: a lookup by name per field would scan them all each
        // time, and trace entries are most of a snapshot. A later duplicate key wins, as in
        // Python (and as PickleValue::find does).
        const PickleValue* action = nullptr;
        const PickleValue* addr = nullptr;
        const PickleValue* size = nullptr;
        const PickleValue* stream = nullptr;
        const PickleValue* time_us = nullptr;
        const PickleValue* device_free = nullptr;
        const PickleValue* frames = nullptr;
        const auto& items = v.items();
        for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
            if (!items[i]->is_string()) continue;
            std::string_view k = items[i]->as_string();
            const PickleValue* value = items[i + 1].get();
            switch (k.size()) {
                case 4:
                    if (k == "addr")
                        addr = value;
                    else if (k == "size")
                        size = value;
                    break;
                case 6:
                    if (k == "action")
                        action = value;
                    else if (k == "stream")
                        stream = value;
                    else if (k == "frames")
                        frames = value;
                    break;
                case 7:
                    if (k == "time_us") time_us = value;
                    break;
                case 11:
                    if (k == "device_free") device_free = value;
                    break;
                default: break;
            }
        }
        auto int_of = [](const PickleValue* p, std::int64_t fallback) {
            return p != nullptr ? p->as_int(fallback) : fallback;
        };
        std::string_view action_name = action != nullptr ? action->as_string() : std::string_view();
        if (action_name == "user_defined") {
            // ~2.5 form of record_function annotations: the stage and name ride in frames[0].
            if (frames != nullptr && frames->size() > 0 &&
                frames->items()[0]->kind() == PickleValue::Kind::kDict) {
                const PickleValue& f = *frames->items()[0];
                SnapshotAnnotation a;
                a.device = device;
                a.time_us = non_negative(int_of(time_us, 0));
                a.start = f.string_at("name") != "END";
                a.name = strings_.intern(f.string_at("filename"));
                return visitor_.on_annotation(a);
            }
            return Status::ok();
        }
        TraceEntry e;
        e.action = parse_action(action_name);
        e.device = device;
        e.address = non_negative(int_of(addr, 0));
        e.size = non_negative(int_of(size, 0));
        e.stream = static_cast<std::uint64_t>(int_of(stream, 0));
        e.time_us = non_negative(int_of(time_us, 0));
        if (e.action == TraceAction::kOom) {
            // Python writes the free bytes under "device_free"; C++ kept them in addr.
            e.device_free = non_negative(int_of(device_free, int_of(addr, 0)));
            e.address = 0;
        }
        if (e.action == TraceAction::kAlloc || e.action == TraceAction::kSegmentAlloc ||
            e.action == TraceAction::kSegmentMap || e.action == TraceAction::kOom) {
            FrameFacts f = facts_of(frames);
            e.site = f.site;
            e.category = f.category;
        }
        return visitor_.on_trace_entry(e);
    }

    Status external_annotation(const PickleValue& v) {
        if (v.kind() != PickleValue::Kind::kDict) return Status::ok();
        SnapshotAnnotation a;
        a.device = static_cast<std::uint16_t>(
            std::min<std::int64_t>(std::max<std::int64_t>(v.int_at("device", 0), 0), 0xFFFE));
        a.time_us = non_negative(v.int_at("time_us", 0));
        a.start = v.string_at("stage") != "END";
        a.name = strings_.intern(v.string_at("name"));
        return visitor_.on_annotation(a);
    }

    struct FrameSequence {
        std::vector<const PickleValue*> frames;
        FrameFacts facts;
    };
    static bool same_frames(const std::vector<const PickleValue*>& a, const PickleValue& list) {
        const auto& items = list.items();
        if (a.size() != items.size()) return false;
        for (std::size_t i = 0; i < a.size(); ++i) {
            if (a[i] != items[i].get()) return false;
        }
        return true;
    }

    static constexpr std::size_t kMaxCachedSites = std::size_t{1} << 22;
    static constexpr std::size_t kMaxCachedFramePointers = std::size_t{1} << 23;  // 64 MiB

    const std::string& name_;
    StringTable& strings_;
    SnapshotVisitor& visitor_;
    std::unordered_map<const PickleValue*, FrameFacts> site_cache_;
    std::unordered_map<std::uint64_t, FrameSequence> sequence_cache_;  // frame pointers' hash
    std::size_t cached_frame_pointers_ = 0;
};

std::string scalar_text(const PickleValue& v) {
    switch (v.kind()) {
        case PickleValue::Kind::kBool: return v.as_bool() ? "true" : "false";
        case PickleValue::Kind::kInt: return std::to_string(v.as_int());
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
            }
        }
    }
    return Status::ok();
}

}  // namespace

std::string frames_to_site(const PickleValue& frames) {
    std::vector<FrameView> views;
    views.reserve(frames.items().size());
    for (const auto& f : frames.items()) {
        if (f->kind() != PickleValue::Kind::kDict) continue;
        views.push_back({f->string_at("filename"), f->string_at("name"), f->int_at("line", 0)});
    }
    return allocation_site(views);
}

MemoryCategory frames_to_category(const PickleValue& frames) {
    std::vector<FrameView> views;
    views.reserve(frames.items().size());
    for (const auto& f : frames.items()) {
        if (f->kind() != PickleValue::Kind::kDict) continue;
        views.push_back({f->string_at("filename"), f->string_at("name"), f->int_at("line", 0)});
    }
    return allocation_category(views);
}

Status TorchSnapshotReader::read(const std::string& path, StringTable& strings,
                                 SnapshotVisitor& visitor) noexcept {
    ended_early_ = false;
    bytes_read_ = 0;
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"),
                                                         &std::fclose);
    if (!file) {
        if (errno == ENOENT) return not_found(path + ": no such file");
        return io_error(path + ": cannot open (" + std::strerror(errno) + ")");
    }
    try {
        SnapshotHandler handler(path, strings, visitor);
        SafePickleReader reader(limits_);
        auto root = reader.read(file.get(), path, &handler);
        ended_early_ = reader.ended_early() && std::ferror(file.get()) == 0;
        bytes_read_ = reader.bytes_read();
        if (root && std::ferror(file.get()) != 0) return io_error(path + ": read error");
        return finish(root, path, visitor);
    } catch (...) {
        return resource_exhausted(path + ": out of host memory while reading the snapshot");
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
