// SPDX-License-Identifier: Apache-2.0
// Which values an enum declares, known at compile time, so a table with one row per enumerator
// (names, unit traits) can static_assert that it misses none. GCC and Clang print a declared
// enumerator by name in __PRETTY_FUNCTION__ ("V = gpudiag::EventKind::kKernel") and any other
// value as a cast or a number ("V = (gpudiag::EventKind)13"); other compilers skip the check.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>
#include <utility>

namespace gpudiag::detail {

#if defined(__GNUC__) || defined(__clang__)
inline constexpr bool kEnumCheckAvailable = true;

template <typename E, E V>
constexpr bool is_declared() {
    constexpr std::string_view signature = __PRETTY_FUNCTION__;
    constexpr std::size_t at = signature.rfind("V = ");
    if (at == std::string_view::npos || at + 4 >= signature.size()) return false;
    // A name starts with a letter (or "::"); a value printed as a cast or a bare number does not.
    constexpr char first = signature[at + 4];
    return first != '(' && first != '-' && (first < '0' || first > '9');
}
#else
inline constexpr bool kEnumCheckAvailable = false;

template <typename E, E V>
constexpr bool is_declared() {
    return false;
}
#endif

/// Every enum checked this way declares its enumerators in [0, kEnumScan).
inline constexpr int kEnumScan = 256;

template <typename E, int... I>
constexpr std::array<bool, sizeof...(I)> declared_values(std::integer_sequence<int, I...>) {
    return {is_declared<E, static_cast<E>(I)>()...};
}

/// declared<E>[v]: E declares an enumerator of value v.
template <typename E>
inline constexpr std::array<bool, kEnumScan> declared =
    declared_values<E>(std::make_integer_sequence<int, kEnumScan>{});

template <typename E>
constexpr std::size_t declared_count() {
    std::size_t n = 0;
    for (bool d : declared<E>) n += d ? 1 : 0;
    return n;
}

/// True when `values` (of length n) are exactly the enumerators E declares, in increasing order
/// (always true where the compiler cannot tell).
template <typename E, typename Row, std::size_t N, typename ValueOf>
constexpr bool one_row_per_enumerator(const Row (&rows)[N], ValueOf value_of) {
    if (!kEnumCheckAvailable) return true;
    if (N != declared_count<E>()) return false;
    long long previous = -1;
    for (const Row& row : rows) {
        auto v = static_cast<long long>(value_of(row));
        if (v <= previous || v < 0 || v >= kEnumScan || !declared<E>[static_cast<std::size_t>(v)]) {
            return false;
        }
        previous = v;
    }
    return true;
}

}  // namespace gpudiag::detail
