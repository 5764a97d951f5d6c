// SPDX-License-Identifier: Apache-2.0
// The Kineto trace read as a stream, in bounded memory: the text is read (and inflated) in pieces
// of about 1 MB cut between two events; each piece is parsed, sorted by start and encoded compactly
// (core/event_runs.hpp) on the parse's threads; the text before and after the event array (the
// skeleton) is read at the end. Memory then holds the encoded events (10-15 bytes each, an eighth
// of their JSON) and a few pieces in flight, not the text.
//
// Every cut is verified the way the split parse verifies its slices (kineto_parser.cpp): a piece
// passes only when it parses as whole events ending exactly where it was cut, and the skeleton
// only when the array the pieces came from is the trace's one top-level event array. A trace the
// stream cannot verify (damaged, cut short, or laid out in a way the cuts do not fit) is reported
// as not streamed, and the caller reads it whole, as before.
#pragma once

#include "core/event_runs.hpp"
#include "importers/byte_stream.hpp"
#include "importers/kineto/kineto_parser.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace gpudiag::detail {

class ParseThreadBudget;

struct KinetoStreamOptions {
    /// JSON text per piece: a thread's working set is a few times this.
    std::size_t piece_bytes = std::size_t{1} << 20;
    /// Threads at most, the caller's included; 0: min(hardware threads, 4).
    unsigned max_threads = 0;
    /// Where helper threads come from; null: the process-wide budget.
    ParseThreadBudget* thread_budget = nullptr;
    /// Text before the event array kept to read its keys, and text of one event, at most.
    std::size_t max_held_bytes = std::size_t{64} << 20;
    /// Called now and then on the calling thread with (bytes of the file read, its size).
    std::function<void(std::uint64_t, std::uint64_t)> progress;
};

/// How a streamed read ended.
enum class StreamOutcome : std::uint8_t {
    kRead,  ///< the whole trace, verified
    /// The input itself ends early or turns unreadable (a gzip stream cut short, bytes JSON text
    /// cannot hold, a read error): the verified events before that point, `why` says what is
    /// missing. The whole-document parse could not read more.
    kPartial,
    /// The text ends without its event array closing where the stream can verify it (a plain file
    /// cut short, most likely): the verified events before the end, as for kPartial. A trace laid
    /// out unusually also ends here, so the caller reads it whole when it is small enough.
    kUnclosed,
    kDeclined,  ///< not verifiable this way (`why` says why): read it whole instead
    kRefused,   ///< cannot be a trace gpudiag reads, whole or not: `refusal` says why
};

struct KinetoStreamResult {
    KinetoParseResult parse;  ///< info, summary and counts; `parse.events` stays empty
    EventRunSet runs;         ///< the events, replayed in start order
    std::size_t pieces = 0;
    StreamOutcome outcome = StreamOutcome::kDeclined;
    std::uint64_t text_bytes = 0;  ///< bytes of the trace's text read (inflated)
    std::string why;               ///< what is missing (partial), or why it was declined
    Status refusal;                ///< kRefused: the error to report
    /// The names the runs' string ids refer to, until publish_stream_names() moves them.
    std::unique_ptr<StringTable> names;
};

/// Reads the trace from `in` into `out`; `out.outcome` is also returned. The caller's string
/// table is never touched: the runs refer to `out.names` until publish_stream_names().
/// Throws std::bad_alloc.
StreamOutcome stream_kineto_trace(ByteStream& in, const std::string& name,
                                  const KinetoStreamOptions& options, KinetoStreamResult& out);

/// Interns `result`'s names into `strings`, in the serial parse's first-seen order, and maps the
/// runs' ids to them.
void publish_stream_names(KinetoStreamResult& result, StringTable& strings);

/// Reads the trace from `in`. Returns true with `out` filled, string ids interned into `strings`
/// in the order the serial parse interns them, when the whole trace was read and verified; false
/// otherwise (nothing was added to `strings` then, and `out` is to be ignored). Throws
/// std::bad_alloc.
bool stream_kineto_events(ByteStream& in, const std::string& name, StringTable& strings,
                          const KinetoStreamOptions& options, KinetoStreamResult& out);

}  // namespace gpudiag::detail
