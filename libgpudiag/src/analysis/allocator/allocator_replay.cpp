// SPDX-License-Identifier: Apache-2.0
// Replaying a history through the model.
#include "analysis/allocator/allocator_replay.hpp"

#include "support/format.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace gpudiag::detail {
namespace {

// The recorded program's segment addresses, handed out in the order it got them. Pairing is by
// position: the n-th cudaMalloc of the replay gets the n-th recorded one if the sizes agree.
class RecordedAddresses final : public SegmentAddressSource {
public:
    explicit RecordedAddresses(const DeviceHistory& h) : invented_(std::uint64_t{1} << 52) {
        for (const ObservedAction& a : h.observed) {
            if (a.kind == DeviceActionKind::kMalloc) mallocs_.push_back(&a);
            if (a.kind == DeviceActionKind::kMap) maps_.push_back(&a);
        }
    }
    std::uint64_t malloc_address(std::uint64_t bytes) override {
        if (next_ < mallocs_.size()) {
            const ObservedAction* a = mallocs_[next_++];
            if (a->bytes == bytes) return a->address;
        }
        return invented_.malloc_address(bytes);
    }
    void free_address(std::uint64_t address, std::uint64_t bytes) override {
        if (address >= (std::uint64_t{1} << 52)) invented_.free_address(address, bytes);
    }
    // An expandable segment's range starts at the first page the recording mapped for the same
    // stream and pool that no earlier range of the replay covers.
    std::uint64_t reserve_address(std::uint64_t bytes, std::uint32_t stream, bool small) override {
        for (const ObservedAction* a : maps_) {
            if (a->stream != stream || a->small != small) continue;
            bool covered = std::any_of(ranges_.begin(), ranges_.end(), [&](const auto& r) {
                return a->address >= r.first && a->address < r.first + r.second;
            });
            if (!covered) {
                ranges_.emplace_back(a->address, bytes);
                return a->address;
            }
        }
        return invented_.reserve_address(bytes, stream, small);
    }

private:
    BumpAddressSource invented_;
    std::vector<const ObservedAction*> mallocs_;
    std::vector<const ObservedAction*> maps_;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges_;
    std::size_t next_ = 0;
};

// OOM entries carry no handle; give their blocks ones no recorded address can have.
constexpr std::uint64_t kOomHandleBase = std::uint64_t{1} << 63;

Status build_start(const DeviceHistory& h, const ReplayConfig& config, CachingAllocatorModel& model,
                   ReplayOutcome& out) {
    if (config.start == ReplayStart::kRecordedState) {
        for (const StartSegment& s : h.start) {
            Status st = model.adopt_segment(s.address, s.bytes, s.stream, s.small, s.expandable,
                                            s.blocks, s.pool);
            if (!st.is_ok()) {
                return Status(st.code(),
                              fmt::format("segment at {:#x}: {}", s.address, st.message()));
            }
        }
        return Status::ok();
    }
    // Live blocks only, allocated afresh in address order.
    for (const StartSegment& s : h.start) {
        for (const auto& b : s.blocks) {
            if (model.malloc(b.handle, b.requested, s.stream, s.pool) == 0) {
                out.new_oom = true;
                out.oom_request = b.requested;
                return Status::ok();
            }
            if (b.pending) model.free_requested(b.handle);
        }
    }
    return Status::ok();
}

}  // namespace

ReplayOutcome replay(const DeviceHistory& h, const ReplayConfig& config) {
    ReplayOutcome out;
    BumpAddressSource invented;
    RecordedAddresses recorded(h);
    SegmentAddressSource& addresses =
        config.recorded_addresses ? static_cast<SegmentAddressSource&>(recorded) : invented;
    CachingAllocatorModel model(config.settings, config.limits, addresses);
    model.set_rules(config.rules);
    model.log_device_actions(config.log_actions);
    Status started = build_start(h, config, model, out);
    if (!started.is_ok()) {
        out.problem = started.message();
        out.replayed_to_end = false;
        return out;
    }
    if (out.new_oom) {
        out.replayed_to_end = false;
    }
    for (std::size_t i = 0; i < h.ops.size() && out.replayed_to_end; ++i) {
        const HistoryOp& op = h.ops[i];
        switch (op.kind) {
            case HistoryOp::Kind::kAlloc: {
                ++out.allocations;
                const std::uint64_t ptr = model.malloc(op.handle, op.bytes, op.stream, op.pool);
                if (ptr == 0) {
                    if (!out.new_oom) {
                        out.oom_entry = i;
                        out.oom_request = op.bytes;
                    }
                    out.new_oom = true;
                    if (config.stop_at_new_oom) out.replayed_to_end = false;
                } else if (ptr == op.handle) {
                    ++out.at_recorded_address;
                }
                break;
            }
            case HistoryOp::Kind::kFreeRequested:
                if (!model.free_requested(op.handle)) ++out.unknown_frees;
                break;
            case HistoryOp::Kind::kFree:
                if (!model.free(op.handle)) ++out.unknown_frees;
                break;
            case HistoryOp::Kind::kReleaseCache: model.empty_cache(); break;
            case HistoryOp::Kind::kOom: {
                ++out.recorded_ooms;
                // The request failed against the memory the allocator could reach then (what it
                // held after releasing its cache plus what the driver had free); without a given
                // capacity that limit is known to apply only here.
                const std::uint64_t capacity = model.capacity();
                if (config.limits.capacity_bytes == 0) model.set_capacity(op.limit);
                if (model.malloc(kOomHandleBase + i, op.bytes, op.stream) != 0)
                    ++out.recorded_ooms_avoided;
                model.set_capacity(capacity);
                break;
            }
        }
    }
    out.stats = model.stats();
    out.final_segments = model.segments();
    if (config.log_actions) out.actions = model.device_actions();
    return out;
}

namespace {

const char* action_name(DeviceActionKind k) {
    switch (k) {
        case DeviceActionKind::kMalloc: return "cudaMalloc";
        case DeviceActionKind::kFree: return "cudaFree";
        case DeviceActionKind::kMap: return "page map";
        case DeviceActionKind::kUnmap: return "page unmap";
    }
    return "?";
}

std::string describe(DeviceActionKind kind, std::uint64_t bytes, std::uint64_t address) {
    return fmt::format("{} of {} B at {:#x}", action_name(kind), bytes, address);
}

}  // namespace

ReproductionCheck compare(const DeviceHistory& h, const ReplayOutcome& out) {
    ReproductionCheck c;
    c.checked = h.has_segment_records;
    c.recorded_actions = h.observed.size();
    c.modelled_actions = out.actions.size();
    const std::size_t n = std::min(h.observed.size(), out.actions.size());
    std::size_t i = 0;
    for (; i < n; ++i) {
        const ObservedAction& r = h.observed[i];
        const DeviceAction& m = out.actions[i];
        if (r.kind != m.kind || r.bytes != m.bytes || r.address != m.address) break;
    }
    c.matching_actions = i;
    c.peak_matches = out.stats.peak_reserved == h.observed_peak_reserved;
    c.final_segments_match = out.final_segments == h.final_segments;
    if (!out.problem.empty()) {
        c.first_difference = "the state before the history could not be rebuilt: " + out.problem;
    } else if (i < n) {
        const ObservedAction& r = h.observed[i];
        const DeviceAction& m = out.actions[i];
        c.first_difference =
            fmt::format("segment action {}: recorded {}, modelled {}", i + 1,
                        describe(r.kind, r.bytes, r.address), describe(m.kind, m.bytes, m.address));
    } else if (h.observed.size() != out.actions.size()) {
        c.first_difference = fmt::format("the recording has {} segment actions, the replay {}",
                                         h.observed.size(), out.actions.size());
    } else if (!out.replayed_to_end) {
        c.first_difference = fmt::format(
            "the replay failed an allocation of {} B that the recording made", out.oom_request);
    } else if (out.at_recorded_address != out.allocations) {
        c.first_difference =
            fmt::format("{} of {} allocations landed elsewhere than recorded",
                        out.allocations - out.at_recorded_address, out.allocations);
    } else if (!c.peak_matches) {
        c.first_difference = fmt::format("peak reserved: recorded {} B, modelled {} B",
                                         h.observed_peak_reserved, out.stats.peak_reserved);
    } else if (!c.final_segments_match) {
        c.first_difference =
            fmt::format("final segments: recorded {}, modelled {} (or at other addresses)",
                        h.final_segments.size(), out.final_segments.size());
    }
    c.exact = c.first_difference.empty();
    return c;
}

}  // namespace gpudiag::detail
