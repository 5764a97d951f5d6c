// SPDX-License-Identifier: Apache-2.0
// Human-readable numbers.
#include "support/format.hpp"

#include <fmt/format.h>

#include <cmath>
#include <string_view>

namespace gpudiag::detail {

std::string format_number(double value, int digits) {
    if (!std::isfinite(value)) return "n/a";
    std::string s = fmt::format("{:.{}f}", value, digits);
    if (s.find('.') != std::string::npos) {
        while (s.back() == '0') s.pop_back();
        if (s.back() == '.') s.pop_back();
    }
    if (s == "-0") s = "0";
    return s;
}

namespace {

// The binary unit ladder shared by both byte formats; `decimals(v)` picks the precision.
template <typename Decimals>
std::string bytes_in_units(double bytes, Decimals decimals) {
    if (!std::isfinite(bytes)) return "n/a";
    constexpr std::string_view kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = std::fabs(bytes);
    std::size_t u = 0;
    while (v >= 1024.0 && u + 1 < std::size(kUnits)) {
        v /= 1024.0;
        ++u;
    }
    std::string_view sign = bytes < 0 ? "-" : "";
    if (u == 0) return fmt::format("{}{:.0f} B", sign, v);
    return fmt::format("{}{:.{}f} {}", sign, v, decimals(v), kUnits[u]);
}

}  // namespace

std::string format_bytes(double bytes) {
    return bytes_in_units(bytes, [](double) { return 1; });
}

std::string format_bytes_3(double bytes) {
    return bytes_in_units(bytes, [](double v) { return v < 10 ? 2 : v < 100 ? 1 : 0; });
}

std::string format_duration_ns(double ns) {
    if (!std::isfinite(ns)) return "n/a";
    double a = std::fabs(ns);
    if (a < 1e3) return format_number(ns, 0) + " ns";
    if (a < 1e6) return format_number(ns / 1e3, a < 1e4 ? 1 : 0) + " us";
    if (a < 1e9) return format_number(ns / 1e6, 1) + " ms";
    if (a < 600e9) return format_number(ns / 1e9, 2) + " s";
    if (a < 7200e9) return format_number(ns / 60e9, 1) + " min";
    return format_number(ns / 3600e9, 1) + " h";
}

std::string format_percent(double fraction) {
    if (!std::isfinite(fraction)) return "n/a";
    return format_number(fraction * 100.0, 1) + " %";
}

}  // namespace gpudiag::detail
