// SPDX-License-Identifier: Apache-2.0
// Fuzzes the torch snapshot reader: the safe pickle VM on raw bytes, then the snapshot schema
// layer, whose records are fed to a MemoryLedger as events. Nothing may crash, hang or grow
// past the limits, whatever the bytes.
#include "analysis/memory/memory_ledger.hpp"
#include "importers/torch_snapshot/safe_pickle_reader.hpp"
#include "importers/torch_snapshot/torch_snapshot.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace {

using namespace gpudiag;
using namespace gpudiag::detail;

class LedgerFeeder final : public SnapshotVisitor {
public:
    Status on_segment(SnapshotSegment& s) override {
        ledger.apply(event(EventKind::kSegmentAlloc, s.device, s.address, s.total_size,
                           s.expandable ? kEventFlagExpandable : 0));
        for (const auto& b : s.blocks) {
            if (b.state == BlockState::kInactive) continue;
            Event e = event(EventKind::kBlockAlloc, s.device, b.address, b.size, 0);
            e.memory.aux = b.requested;
            e.memory.site = b.site;
            ledger.apply(e);
        }
        return Status::ok();
    }
    Status on_trace_entry(const TraceEntry& t) override {
        switch (t.action) {
            case TraceAction::kAlloc:
                ledger.apply(event(EventKind::kBlockAlloc, t.device, t.address, t.size, 0));
                break;
            case TraceAction::kFreeRequested:
                ledger.apply(event(EventKind::kBlockFree, t.device, t.address, t.size,
                                   kEventFlagPendingFree));
                break;
            case TraceAction::kFreeCompleted:
                ledger.apply(event(EventKind::kBlockFree, t.device, t.address, t.size, 0));
                break;
            case TraceAction::kSegmentMap:
                ledger.apply(event(EventKind::kSegmentAlloc, t.device, t.address, t.size,
                                   kEventFlagExpandable));
                break;
            case TraceAction::kSegmentUnmap:
                ledger.apply(event(EventKind::kSegmentFree, t.device, t.address, t.size,
                                   kEventFlagExpandable));
                break;
            case TraceAction::kSegmentFree:
                ledger.apply(event(EventKind::kSegmentFree, t.device, t.address, t.size, 0));
                break;
            default: break;
        }
        return Status::ok();
    }
    Status on_annotation(const SnapshotAnnotation&) override { return Status::ok(); }
    void on_setting(const std::string&, const std::string&) override {}

    static Event event(EventKind k, std::uint16_t device, std::uint64_t addr, std::uint64_t bytes,
                       std::uint8_t flags) {
        Event e;
        e.kind = k;
        e.device = device % 8;  // keep the ledger's device table small
        e.flags = flags;
        e.memory.address = addr;
        e.memory.bytes = bytes;
        return e;
    }

    MemoryLedger ledger;
};

// The bytes in pieces of a few bytes each, so every value that can straddle two pieces of a
// streamed read does (the reader's buffer refills and its copies of straddling values).
class PieceStream final : public ByteStream {
public:
    explicit PieceStream(std::string_view bytes) : bytes_(bytes) {}
    Result<std::size_t> read(char* dst, std::size_t n) override {
        const std::size_t take = std::min({n, bytes_.size() - at_, 1 + at_ % 13});
        std::memcpy(dst, bytes_.data() + at_, take);
        at_ += take;
        return take;
    }
    [[nodiscard]] std::uint64_t consumed() const noexcept override { return at_; }
    [[nodiscard]] std::uint64_t total() const noexcept override { return bytes_.size(); }

private:
    std::string_view bytes_;
    std::size_t at_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view bytes(reinterpret_cast<const char*>(data), size);
    PickleLimits limits;
    limits.max_live_bytes = 64u << 20;
    limits.max_string_bytes = 1u << 20;
    SafePickleReader raw(limits);
    (void)raw.read(bytes, "fuzz");
    StringTable strings(1u << 20);
    LedgerFeeder feeder;
    TorchSnapshotReader reader(limits);
    (void)reader.read_bytes(bytes, "fuzz", strings, feeder);
    for (std::uint16_t d : feeder.ledger.devices()) (void)feeder.ledger.layout(d);
    // The same bytes streamed in small pieces, their size unknown.
    LedgerFeeder streamed;
    PieceStream pieces(bytes);
    (void)reader.read_stream(pieces, SafePickleReader::kUnknownSize, "fuzz", strings, streamed);
    return 0;
}
