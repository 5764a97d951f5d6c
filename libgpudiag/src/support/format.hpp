// SPDX-License-Identifier: Apache-2.0
// Human-readable numbers for findings and text reports: "1.3 GiB", "62.3 ms", "39.4 %". The
// public format_figure() (output/format_figure.cpp) formats by a figure's unit with these.
#pragma once

#include <string>

namespace gpudiag::detail {

/// Binary units, one decimal: "964.6 MiB", "13.2 GiB", "512 B".
std::string format_bytes(double bytes);
/// Binary units to three significant digits, for comparing close figures (what-if predictions):
/// "1.69 GiB", "17.5 MiB", "512 B".
std::string format_bytes_3(double bytes);
/// Adaptive time units from nanoseconds: "37 ns", "4.2 us", "62.3 ms", "2.25 s", "1.5 min", "3 h".
std::string format_duration_ns(double ns);
/// A fraction 0..1 as a percentage with one decimal: "39.4 %".
std::string format_percent(double fraction);
/// A plain number with up to `digits` decimals and no trailing zeros.
std::string format_number(double value, int digits = 1);

}  // namespace gpudiag::detail
