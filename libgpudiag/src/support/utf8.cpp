// SPDX-License-Identifier: Apache-2.0
#include "support/utf8.hpp"

#include <cstddef>
#include <cstdint>

namespace gpudiag::detail {
namespace {

// Length of the well-formed sequence at `at`, 0 when there is none (RFC 3629's table).
std::size_t sequence_at(std::string_view s, std::size_t at) noexcept {
    auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[at + k]); };
    const unsigned char c = byte(0);
    if (c < 0x80) return 1;
    const std::size_t left = s.size() - at;
    auto cont = [&](std::size_t k) { return k < left && (byte(k) & 0xC0) == 0x80; };
    if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if (left < 3 || !cont(2)) return 0;
        const unsigned char c1 = byte(1);
        const bool ok = c == 0xE0   ? (c1 >= 0xA0 && c1 <= 0xBF)
                        : c == 0xED ? (c1 >= 0x80 && c1 <= 0x9F)  // no surrogates
                                    : (c1 & 0xC0) == 0x80;
        return ok ? 3 : 0;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (left < 4 || !cont(2) || !cont(3)) return 0;
        const unsigned char c1 = byte(1);
        const bool ok = c == 0xF0   ? (c1 >= 0x90 && c1 <= 0xBF)
                        : c == 0xF4 ? (c1 >= 0x80 && c1 <= 0x8F)  // up to U+10FFFF
                                    : (c1 & 0xC0) == 0x80;
        return ok ? 4 : 0;
    }
    return 0;
}

}  // namespace

bool is_valid_utf8(std::string_view text) noexcept {
    for (std::size_t at = 0; at < text.size();) {
        std::size_t n = sequence_at(text, at);
        if (n == 0) return false;
        at += n;
    }
    return true;
}

std::string_view valid_utf8(std::string_view text, std::string& scratch) {
    if (is_valid_utf8(text)) return text;
    scratch.clear();
    for (std::size_t at = 0; at < text.size();) {
        std::size_t n = sequence_at(text, at);
        if (n == 0) {
            scratch += "\xEF\xBF\xBD";
            ++at;
        } else {
            scratch.append(text.substr(at, n));
            at += n;
        }
    }
    return scratch;
}

}  // namespace gpudiag::detail
