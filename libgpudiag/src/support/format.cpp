// SPDX-License-Identifier: Apache-2.0
// Human-readable numbers.
#include "support/format.hpp"

#include <cmath>
#include <cstdarg>
#include <cstdio>

namespace gpudiag::detail {

std::string strprintf(const char* fmt, ...) {
    va_list args;
    va_start(args, fmt);
    va_list copy;
    va_copy(copy, args);
    int n = std::vsnprintf(nullptr, 0, fmt, copy);
    va_end(copy);
    std::string out;
    if (n > 0) {
        out.resize(static_cast<std::size_t>(n) + 1);
        std::vsnprintf(out.data(), out.size(), fmt, args);
        out.resize(static_cast<std::size_t>(n));
    }
    va_end(args);
    return out;
}

std::string format_number(double value, int digits) {
    if (!std::isfinite(value)) return "n/a";
    std::string s = strprintf("%.*f", digits, value);
    if (s.find('.') != std::string::npos) {
        while (!s.empty() && s.back() == '0') s.pop_back();
        if (!s.empty() && s.back() == '.') s.pop_back();
    }
    if (s == "-0") s = "0";
    return s;
}

std::string format_bytes(double bytes) {
    if (!std::isfinite(bytes)) return "n/a";
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = std::fabs(bytes);
    int u = 0;
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        ++u;
    }
    std::string sign = bytes < 0 ? "-" : "";
    if (u == 0) return sign + strprintf("%.0f B", v);
    return sign + strprintf("%.1f %s", v, units[u]);
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
