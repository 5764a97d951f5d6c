// SPDX-License-Identifier: Apache-2.0
// KinetoParser: PyTorch profiler (Kineto) Chrome-trace JSON -> gpudiag Events.
//
// Reads both category vocabularies (2021: "Kernel", "Runtime", "Memcpy", "Operator"; today:
// "kernel", "cuda_runtime", "gpu_memcpy", "cpu_op", "user_annotation" ...), integer-µs and
// fractional-µs timestamps (converted exactly to ns), the top-level object form and the bare
// event-array form. Events come out sorted by start time, as sinks expect.
#pragma once

#include <gpudiag/event.hpp>
#include <gpudiag/source_info.hpp>
#include <gpudiag/status.hpp>
#include <gpudiag/string_table.hpp>

#include "importers/kineto/layer_input_shapes.hpp"
#include "importers/kineto/trace_buffer.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gpudiag::detail {

class ParseThreadBudget;

struct KinetoParseResult {
    SourceInfo info;
    std::vector<Event> events;
    SourceSummary summary;  ///< dropped = events skipped as unreadable; notes say why
    std::uint64_t gpu_activities = 0;
    std::uint64_t ignored = 0;  ///< well-formed events gpudiag has no use for (flows, python)
    std::string device_vendor;  ///< "nvidia", "amd", "mtia" or "" when no device is described
    std::size_t slices = 1;     ///< pieces the event array was parsed in (1: single-threaded)
};

/// How parse_kineto_events may spread the work over threads.
struct KinetoParseOptions {
    /// Documents at least this large are parsed in slices on several threads: below it, thread
    /// start-up and the slices' copies cost more than they save (a few ms per MB parsed).
    std::size_t split_min_bytes = std::size_t{8} << 20;
    /// Threads (slices) at most; 0: min(hardware threads, 4). Past four the inflate, the skeleton
    /// and the ordering, which stay serial, dominate.
    unsigned max_threads = 0;
    /// Each thread copies and parses its share in pieces of about this size: the copies then take
    /// little memory and reuse one buffer (fresh pages cost a fault each).
    std::size_t piece_bytes = std::size_t{4} << 20;
    /// Where helper threads come from; null: the process-wide budget (ParseThreadBudget).
    ParseThreadBudget* thread_budget = nullptr;
};

/// What the events of a piece of the event array add to a parse besides the events: counts and
/// the first categories gpudiag does not read.
struct KinetoPieceTotals {
    std::uint64_t gpu_activities = 0;
    std::uint64_t ignored = 0;
    std::uint64_t dropped = 0;
    bool saw_mtia = false;
    std::vector<std::string> unknown_categories;  ///< the first eight, in file order
    LayerInputShapes layer_shapes;                ///< the batches of the layer calls read
};

/// Parses pieces of a trace's event array, one at a time, each cut between two events (see
/// kineto_stream.hpp). Reuses its buffers from piece to piece. Not thread-safe: one per thread.
class KinetoPieceParser {
public:
    KinetoPieceParser();
    ~KinetoPieceParser();
    KinetoPieceParser(const KinetoPieceParser&) = delete;
    KinetoPieceParser& operator=(const KinetoPieceParser&) = delete;

    /// `text` holds "[" piece ",{}]" in its first `size` bytes, then zeroed padding up to
    /// `capacity` (at least 64 bytes more). Appends the piece's events to `events` in file order,
    /// interning names into `strings`, and adds to `totals`. Returns false when the piece did not
    /// end between two events (the appended "{}" was not read as the array's last element, where
    /// it was put) or is not valid JSON; `events` may then hold part of it. Never throws.
    bool parse(const char* text, std::size_t size, std::size_t capacity, StringTable& strings,
               std::vector<Event>& events, KinetoPieceTotals& totals) noexcept;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

/// Reads the skeleton of a trace whose event array was parsed in pieces: the text before the
/// array's "[" (at offset `array_open`), then "]" and the text after the array. Sets `*verified`
/// when that array is the trace's one top-level event array (the object's "traceEvents", or the
/// document itself) and nothing else is wrong. Fills `out` (info, summary, counts) as the serial
/// parse would have, with the pieces' `totals` in place of their events. Throws std::bad_alloc.
void parse_kineto_skeleton(const TraceBuffer& skeleton, std::size_t array_open,
                           const KinetoPieceTotals& totals, const std::string& name,
                           StringTable& strings, KinetoParseResult& out, bool* verified);

/// Adds `later`'s totals to `into` (counts, and categories up to eight, in order).
void merge_piece_totals(KinetoPieceTotals& into, const KinetoPieceTotals& later);

/// The counts, notes and vendor property every successful parse ends with, for `events` events.
void finish_kineto_result(KinetoParseResult& out, std::uint64_t events);

/// Parses a whole trace. `name` prefixes messages. On malformed input it keeps every event read
/// before the damage: a cut-off file is closed after its last complete event and parsed again,
/// with `summary.truncated` set and a note. Errors (only when nothing could be read):
/// kCorruptData (not JSON, or JSON that is not a trace), kUnsupported (a JSON file of another
/// kind, e.g. a memory-timeline export), kResourceExhausted.
Status parse_kineto_trace(const TraceBuffer& buffer, const std::string& name, StringTable& strings,
                          KinetoParseResult& out);

/// parse_kineto_trace without the final sort: `out.events` stay in file order, for a caller that
/// replays them through start_order() (kineto/start_order.hpp) instead of copying them sorted.
/// Large documents are parsed on several threads (see KinetoParseOptions); the result is the same
/// as the single-threaded parse's, string ids included. (One exception: once `strings` reaches its
/// byte cap, its overflowed() count may differ, as the slices count refused strings apart.)
Status parse_kineto_events(const TraceBuffer& buffer, const std::string& name, StringTable& strings,
                           KinetoParseResult& out, const KinetoParseOptions& options = {});

}  // namespace gpudiag::detail
