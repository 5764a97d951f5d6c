// SPDX-License-Identifier: Apache-2.0
// TorchSnapshotReader: decodes a torch.cuda.memory._dump_snapshot pickle (every variant from
// torch 2.0 to 2.11+) into compact records, streamed: segments, trace entries and annotations
// are handed to a visitor one at a time and never held as a whole.
//
// Variants handled (pytorch-integration.md §1.2): a bare list of segments (memory_snapshot());
// a dict with "segments" and optionally "device_traces" (one list per device), and from ~2.3
// "allocator_settings", from ~2.5 "external_annotations", from 2.12 "host_segments" and
// "host_traces" (pinned host memory), and "trace_alloc_overflowed"/"trace_alloc_max_entries"
// (pytorch PR #179276: in allocator_settings or at the root, one value or one per device); blocks
// with "frames" + "requested_size" (+ "address", computed when absent) or the 2.0 "history" list;
// the pending state spelled "active_pending_free" or "active_awaiting_free"; trace entries with or
// without "time_us" and "frames"; "oom" entries carrying "device_free" instead of "addr".
#pragma once

#include <gpudiag/event.hpp>
#include <gpudiag/status.hpp>
#include <gpudiag/string_table.hpp>

#include "importers/torch_snapshot/safe_pickle_reader.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpudiag::detail {

enum class BlockState : std::uint8_t { kActive, kPendingFree, kInactive };

struct SnapshotBlock {
    std::uint64_t address = 0;
    std::uint64_t size = 0;       ///< rounded bytes the block occupies
    std::uint64_t requested = 0;  ///< bytes the program asked for
    BlockState state = BlockState::kInactive;
    StringId site = kNoString;
    StringId owner = kNoString;  ///< allocation_owner_site: the library code that asked
    MemoryCategory category = MemoryCategory::kOther;
};

struct SnapshotSegment {
    std::uint16_t device = 0;
    std::uint64_t address = 0;
    std::uint64_t total_size = 0;
    std::uint64_t stream = 0;
    bool expandable = false;
    bool small_pool = false;
    bool private_pool = false;  ///< segment_pool_id != (0, 0): CUDA graph or MemPool
    /// The private pool, numbered from 1 in the order the file first names each
    /// segment_pool_id; 0 = the default pool.
    std::uint32_t pool = 0;
    /// torch's segment_pool_id as written, "(a, b)"; empty for the default pool.
    std::string pool_id;
    StringId site = kNoString;
    StringId owner = kNoString;  ///< allocation_owner_site of the segment's frames
    std::vector<SnapshotBlock> blocks;
};

enum class TraceAction : std::uint8_t {
    kAlloc,
    kFreeRequested,
    kFreeCompleted,
    kSegmentAlloc,
    kSegmentFree,
    kSegmentMap,
    kSegmentUnmap,
    kOom,
    kSnapshot,
    kOther,  ///< user_defined, annotate and actions added after this reader was written
};

struct TraceEntry {
    TraceAction action = TraceAction::kOther;
    std::uint16_t device = 0;
    std::uint64_t address = 0;
    std::uint64_t size = 0;
    std::uint64_t stream = 0;
    std::uint64_t time_us = 0;      ///< 0 when the snapshot predates time stamps (< ~2.2)
    std::uint64_t device_free = 0;  ///< oom only
    StringId site = kNoString;
    MemoryCategory category = MemoryCategory::kOther;  ///< alloc only
};

struct SnapshotAnnotation {
    std::uint16_t device = 0;
    std::uint64_t time_us = 0;
    bool start = true;
    StringId name = kNoString;
};

/// Receives the snapshot's parts in file order: segments, then each device's trace, then the
/// annotations; settings come last (they sit in the root dict, complete only at the end).
class SnapshotVisitor {
public:
    virtual ~SnapshotVisitor() = default;
    virtual Status on_segment(SnapshotSegment& segment) = 0;
    virtual Status on_trace_entry(const TraceEntry& entry) = 0;
    virtual Status on_annotation(const SnapshotAnnotation& annotation) = 0;
    virtual void on_setting(const std::string& key, const std::string& value) = 0;
    /// Pinned host memory (torch 2.12+, `_record_memory_history(record_pinned_host_memory=True)`,
    /// pytorch PR #182407): the host caching allocator's segments and trace, in the device
    /// records' shapes. They are host RAM, never device memory.
    virtual Status on_host_segment(SnapshotSegment& /*segment*/) { return Status::ok(); }
    virtual Status on_host_trace_entry(const TraceEntry& /*entry*/) { return Status::ok(); }
    /// Each key of the root dict, after the read (kept to note the ones this reader does not
    /// know; an unknown key is never an error).
    virtual void on_root_key(const std::string& /*key*/) {}
};

/// The root keys of a snapshot this reader knows (segments, device_traces, allocator_settings,
/// external_annotations, host_segments, host_traces, and the trace-overflow flags of pytorch PR
/// #179276 where a writer puts them at the root).
bool known_snapshot_root_key(std::string_view key) noexcept;

class TorchSnapshotReader {
public:
    explicit TorchSnapshotReader(PickleLimits limits = {}) : limits_(limits) {}
    /// Reads `path` (plain or gzip) once, in pieces, calling `visitor` as it goes. Errors:
    /// kNotFound/kIoError for the file, kCorruptData for pickles that are not torch snapshots
    /// (with what is wrong), kResourceExhausted past the limits.
    Status read(const std::string& path, StringTable& strings, SnapshotVisitor& visitor) noexcept;
    /// The same from a stream of the pickle's bytes (inflated already); `size`: how many it
    /// holds, or SafePickleReader::kUnknownSize.
    Status read_stream(ByteStream& in, std::uint64_t size, const std::string& name,
                       StringTable& strings, SnapshotVisitor& visitor) noexcept;
    /// The same from bytes in memory (tests, fuzzing).
    Status read_bytes(std::string_view bytes, const std::string& name, StringTable& strings,
                      SnapshotVisitor& visitor) noexcept;
    /// The last read failed only because the file ends early: what the visitor was given (whole
    /// segments and trace entries, in file order) is a valid prefix of the snapshot.
    [[nodiscard]] bool ended_early() const noexcept { return ended_early_; }
    /// Bytes of the pickle decoded by the last read.
    [[nodiscard]] std::uint64_t bytes_read() const noexcept { return bytes_read_; }

private:
    PickleLimits limits_;
    bool ended_early_ = false;
    std::uint64_t bytes_read_ = 0;
};

/// The facts a frame list gives: its site (allocation_site) and category (allocation_category,
/// from the framework's own frames: optimizer state, gradients, parameters, activations).
struct FrameFacts {
    StringId site = kNoString;
    MemoryCategory category = MemoryCategory::kOther;
    StringId owner = kNoString;  ///< allocation_owner_site (names a private pool's owner)
};

}  // namespace gpudiag::detail
