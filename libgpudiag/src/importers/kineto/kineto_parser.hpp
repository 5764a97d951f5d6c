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

#include "importers/kineto/trace_buffer.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gpudiag::detail {

class ParseThreadBudget;

struct KinetoParseResult {
    SourceInfo info;
    std::vector<Event> events;
    SourceSummary summary;         ///< dropped = events skipped as unreadable; notes say why
    std::uint64_t gpu_activities = 0;
    std::uint64_t ignored = 0;     ///< well-formed events gpudiag has no use for (flows, python)
    std::string device_vendor;     ///< "nvidia", "amd", "mtia" or "" when no device is described
    std::size_t slices = 1;        ///< pieces the event array was parsed in (1: single-threaded)
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
