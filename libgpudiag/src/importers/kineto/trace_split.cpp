// SPDX-License-Identifier: Apache-2.0
#include "importers/kineto/trace_split.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace gpudiag::detail {
namespace {

bool is_space(char c) noexcept {
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

std::size_t skip_space(std::string_view text, std::size_t at) noexcept {
    while (at < text.size() && is_space(text[at])) ++at;
    return at;
}

}  // namespace

// Kineto writes the key once, at the top level; whether this one really is the top-level value is
// checked by the parser.
std::size_t find_events_array_open(std::string_view text) noexcept {
    constexpr std::string_view kKey = "\"traceEvents\"";
    for (std::size_t at = text.find(kKey); at != std::string_view::npos;
         at = text.find(kKey, at + 1)) {
        std::size_t p = skip_space(text, at + kKey.size());
        if (p >= text.size() || text[p] != ':') continue;
        p = skip_space(text, p + 1);
        if (p < text.size() && text[p] == '[') return p;
    }
    return std::string_view::npos;
}

std::size_t find_events_array_close(std::string_view text, std::size_t before) noexcept {
    if (before == 0) return std::string_view::npos;
    for (std::size_t at = text.rfind(']', before - 1); at != std::string_view::npos;
         at = at == 0 ? std::string_view::npos : text.rfind(']', at - 1)) {
        std::size_t p = at;
        while (p > 0 && is_space(text[p - 1])) --p;
        if (p > 0 && text[p - 1] == '}') return at;
    }
    return std::string_view::npos;
}

namespace {

// The comma of the first "},", then whitespace holding a line break, then "{", at or after `from`
// and before `limit`. Kineto (and torch's Chrome export) start every event on a line of its own,
// while lists of objects inside "args" are written on one line: requiring the line break makes
// most candidates real boundaries (the parser still checks each one).
// A file written on one line (json.dumps) has no line breaks: then any "}," ws "{" will do.
std::size_t find_cut(std::string_view text, std::size_t from, std::size_t limit,
                     bool need_line_break) noexcept {
    for (std::size_t at = text.find("},", from); at != std::string_view::npos && at < limit;
         at = text.find("},", at + 1)) {
        std::size_t p = skip_space(text, at + 2);
        if (p < limit && text[p] == '{' &&
            (!need_line_break ||
             text.substr(at + 2, p - (at + 2)).find('\n') != std::string_view::npos)) {
            return at + 1;
        }
    }
    return std::string_view::npos;
}

}  // namespace

bool cut_trace_slices(std::string_view text, std::size_t open, std::size_t close,
                      std::size_t max_slices, TraceSplit& out) {
    out = TraceSplit{};
    if (max_slices < 2 || open >= close || close >= text.size()) return false;
    out.array_open = open;
    out.array_close = close;
    const std::size_t body = close - (open + 1);
    std::size_t begin = open + 1;
    for (std::size_t k = 1; k < max_slices; ++k) {
        std::size_t target = open + 1 + body / max_slices * k;
        std::size_t from = target > begin ? target : begin;
        // Events take at most a few kB: a line-broken boundary is near, unless the file has no
        // line breaks, which a bounded look finds out without scanning the rest of it.
        constexpr std::size_t kLineBreakWindow = std::size_t{1} << 20;
        std::size_t cut = find_cut(text, from, std::min(close, from + kLineBreakWindow), true);
        if (cut == std::string_view::npos) cut = find_cut(text, from, close, false);
        if (cut == std::string_view::npos) break;
        out.slices.push_back({begin, cut});
        begin = cut + 1;
    }
    out.slices.push_back({begin, close});
    return out.slices.size() >= 2;
}

bool find_trace_split(std::string_view text, std::size_t max_slices, TraceSplit& out) {
    out = TraceSplit{};
    std::size_t open = find_events_array_open(text);
    if (open == std::string_view::npos) return false;
    std::size_t close = find_events_array_close(text, text.size());
    if (close == std::string_view::npos || close <= open) return false;
    return cut_trace_slices(text, open, close, max_slices, out);
}

std::size_t find_non_json_byte(std::string_view text) noexcept {
    // Every byte of every trace passes here, and real traces hold none: blocks of 64 bytes are
    // tested branch-free, their flags OR-ed into one byte, a loop GCC vectorises at -O2 as well
    // (a size_t count is vectorised only at -O3: 15x slower at -O2 on 54 MB). A flagged block is
    // searched byte by byte.
    const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
    const std::size_t size = text.size();
    constexpr std::size_t kBlock = 64;
    std::size_t at = 0;
    for (; at + kBlock <= size; at += kBlock) {
        unsigned char any = 0;
        for (std::size_t k = 0; k < kBlock; ++k) {
            const unsigned char c = bytes[at + k];
            any |= static_cast<unsigned char>((c < 0x20) & (c != '\n') & (c != '\r') & (c != '\t'));
        }
        if (any != 0) break;
    }
    for (; at < size; ++at) {
        const unsigned char c = bytes[at];
        if (c < 0x20 && c != '\n' && c != '\r' && c != '\t') return at;
    }
    return std::string_view::npos;
}

std::string describe_non_json_byte(std::uint64_t offset, unsigned char byte) {
    return fmt::format(
        "byte {} of the trace's text is 0x{:02x}, which JSON text cannot hold: the "
        "text is unreadable from there on{} and was not read further",
        offset, byte,
        byte == 0 ? " (zero bytes: the data never reached the disk, as after a "
                    "crash, or a sparse file)"
                  : "");
}

std::string note_after_trace_end(std::string_view what) {
    return fmt::format("after the trace's end: {} (the trace itself is whole)", what);
}

}  // namespace gpudiag::detail
