// SPDX-License-Identifier: Apache-2.0
// Exact conversion of Kineto's microsecond timestamps to integer nanoseconds.
//
// Kineto writes "ts" as microseconds since an epoch: integers in old traces, decimals with up to
// three (or more) fractional digits in ns-resolution traces ("1712195495519695.8"). Such a value
// has 17 significant digits, more than a double holds, so it is converted from its decimal text.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

namespace gpudiag::detail {

/// True when the 8 bytes at `p` are all ASCII digits; then `value` is their decimal value.
/// (SWAR: one 64-bit load instead of eight rounds of a per-character loop.)
inline bool parse_eight_digits(const char* p, std::uint64_t& value) noexcept {
    std::uint64_t x = 0;
    std::memcpy(&x, p, 8);
    // Each byte in '0'..'9': high nibble 3, and adding 6 does not carry out of the low nibble.
    if ((x & 0xF0F0F0F0F0F0F0F0ull) != 0x3030303030303030ull ||
        ((x + 0x0606060606060606ull) & 0xF0F0F0F0F0F0F0F0ull) != 0x3030303030303030ull) {
        return false;
    }
    x -= 0x3030303030303030ull;  // bytes: d0 d1 ... d7 (d0 first)
    x = (x * 10) + (x >> 8);     // pairs
    x = (((x & 0x000000FF000000FFull) * (100 + (1000000ull << 32))) +
         (((x >> 16) & 0x000000FF000000FFull) * (1 + (10000ull << 32)))) >>
        32;
    value = x;
    return true;
}

/// Parses a JSON number token in microseconds into nanoseconds, rounding to the nearest ns.
/// Negative values, exponents and oversized values fall back to double precision or fail.
/// Returns false when `token` is not a number or does not fit.
inline bool parse_microseconds_as_ns(std::string_view token, std::int64_t& ns) noexcept {
    std::size_t i = 0;
    std::size_t n = token.size();
    while (n > 0 && (token[n - 1] == ' ' || token[n - 1] == '\n' || token[n - 1] == '\r' ||
                     token[n - 1] == '\t')) {
        --n;
    }
    bool negative = false;
    if (i < n && token[i] == '-') {
        negative = true;
        ++i;
    }
    std::uint64_t whole = 0;
    std::size_t digits = 0;
    std::uint64_t eight = 0;
    while (n - i >= 8 && digits + 8 <= 17 && parse_eight_digits(token.data() + i, eight)) {
        whole = whole * 100'000'000 + eight;
        i += 8;
        digits += 8;
    }
    for (; i < n && token[i] >= '0' && token[i] <= '9'; ++i, ++digits) {
        if (digits >= 17) return false;
        whole = whole * 10 + static_cast<std::uint64_t>(token[i] - '0');
    }
    // Epoch microseconds today have 16 digits; 9e15 µs (year 2255) still fits int64 nanoseconds.
    if (digits == 0 || whole > 9'000'000'000'000'000ull) return false;
    std::uint64_t frac_ns = 0;
    bool round_up = false;
    if (i < n && token[i] == '.') {
        ++i;
        std::size_t fd = 0;
        for (; i < n && token[i] >= '0' && token[i] <= '9'; ++i, ++fd) {
            if (fd < 3) {
                frac_ns = frac_ns * 10 + static_cast<std::uint64_t>(token[i] - '0');
            } else if (fd == 3) {
                round_up = token[i] >= '5';
            }
        }
        if (fd == 0) return false;
        for (std::size_t k = fd; k < 3; ++k) frac_ns *= 10;
    }
    if (i < n && (token[i] == 'e' || token[i] == 'E')) {
        // Rare (a writer that printed doubles with exponents): double precision is all there is.
        std::string copy(token.substr(0, n));
        char* end = nullptr;
        double us = std::strtod(copy.c_str(), &end);
        if (end == nullptr || end != copy.c_str() + copy.size() || !std::isfinite(us) ||
            std::fabs(us) > 9.0e15) {
            return false;
        }
        ns = static_cast<std::int64_t>(std::llround(us * 1000.0));
        return true;
    }
    if (i != n) return false;
    std::int64_t value = static_cast<std::int64_t>(whole * 1000 + frac_ns + (round_up ? 1 : 0));
    ns = negative ? -value : value;
    return true;
}

/// Parses a decimal integer token (digits only, optional '-'); false otherwise.
inline bool parse_integer_token(std::string_view token, std::int64_t& out) noexcept {
    std::size_t i = 0;
    bool negative = false;
    if (i < token.size() && token[i] == '-') {
        negative = true;
        ++i;
    }
    if (i == token.size()) return false;
    std::int64_t v = 0;
    for (; i < token.size(); ++i) {
        char c = token[i];
        if (c < '0' || c > '9') return false;
        if (v > (INT64_MAX - 9) / 10) return false;
        v = v * 10 + (c - '0');
    }
    out = negative ? -v : v;
    return true;
}

}  // namespace gpudiag::detail
