// SPDX-License-Identifier: Apache-2.0
// Small statistics the analyses share.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace gpudiag::detail {

/// The median (the mean of the two middle values for an even count); 0 for none. O(n).
inline double median(std::vector<double> v) {
    if (v.empty()) return 0;
    auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
    std::nth_element(v.begin(), mid, v.end());
    const double hi = *mid;
    if (v.size() % 2 == 1) return hi;
    const double lo = *std::max_element(v.begin(), mid);
    return (lo + hi) / 2;
}

}  // namespace gpudiag::detail
