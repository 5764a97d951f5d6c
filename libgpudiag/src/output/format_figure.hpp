// SPDX-License-Identifier: Apache-2.0
// Formats a Figure or table cell by its unit, shared by the text renderer and analyses.
#pragma once

#include <gpudiag/report.hpp>

#include <string>

namespace gpudiag::detail {

/// "1.3 GiB" for bytes, "62.3 ms" for ns, "39.4 %" for fraction, "12" for count, etc.
std::string format_value(double value, const std::string& unit);

}  // namespace gpudiag::detail
