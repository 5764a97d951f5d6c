// SPDX-License-Identifier: Apache-2.0
// TraceSplit: candidate cut points that divide a Kineto trace's "traceEvents" array into slices
// parsed on separate threads.
//
// The cuts are only candidates, found by looking at bytes ("}," then whitespace then "{"), which
// also occur inside nested "args" or inside strings. The parser verifies them (see
// kineto_parser.cpp, parse_split): every slice must parse on its own as a complete JSON array,
// and the text outside the array (the skeleton) must hold it as its one top-level "traceEvents".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpudiag::detail {

struct TraceSplit {
    struct Slice {
        std::size_t begin = 0;  ///< offset of the slice's first byte
        std::size_t end = 0;    ///< one past its last byte (the cutting comma is in no slice)
    };
    std::size_t array_open = 0;   ///< offset of the '[' that opens "traceEvents"
    std::size_t array_close = 0;  ///< offset of the ']' taken to close it
    std::vector<Slice> slices;    ///< in file order, covering the array body but the cut commas
};

/// The '[' of the first `"traceEvents": [` in `text`, or npos.
std::size_t find_events_array_open(std::string_view text) noexcept;

/// The last ']' before offset `before` that follows a '}' and whitespace (the end of an array of
/// objects), or npos. Tried from the end of the file: other arrays may follow "traceEvents".
std::size_t find_events_array_close(std::string_view text, std::size_t before) noexcept;

/// Cuts the body of the array [open, close] into at most `max_slices` slices of about equal size.
/// Returns false when fewer than two could be cut. Throws std::bad_alloc.
bool cut_trace_slices(std::string_view text, std::size_t open, std::size_t close,
                      std::size_t max_slices, TraceSplit& out);

/// The first candidates of the three above together (for tests and tools).
bool find_trace_split(std::string_view text, std::size_t max_slices, TraceSplit& out);

/// The offset of the first byte in `text` that JSON text cannot hold anywhere (a control
/// character other than tab, line feed and carriage return), or npos. Both the streamed and the
/// whole-document parse stop there, so they agree on what was read.
std::size_t find_non_json_byte(std::string_view text) noexcept;

/// What both parses say when they stop at such a byte, found at `offset` of the trace's text.
std::string describe_non_json_byte(std::uint64_t offset, unsigned char byte);

/// The note both parses add when what stopped the input (`what`) came after the trace had closed.
std::string note_after_trace_end(std::string_view what);

}  // namespace gpudiag::detail
