// SPDX-License-Identifier: Apache-2.0
// Human-readable numbers for findings and text reports: "1.3 GiB", "62.3 ms", "39.4 %".
#pragma once

#include <cstdint>
#include <string>

namespace gpudiag::detail {

/// Binary units, three significant digits: "964.6 MiB", "13.2 GiB", "512 B".
std::string format_bytes(double bytes);
/// Adaptive time units from nanoseconds: "37 us", "62.3 ms", "2.25 s".
std::string format_duration_ns(double ns);
/// A fraction 0..1 as a percentage with one decimal: "39.4 %".
std::string format_percent(double fraction);
/// A plain number with up to `digits` decimals and no trailing zeros.
std::string format_number(double value, int digits = 1);
/// printf into a std::string.
std::string strprintf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace gpudiag::detail
