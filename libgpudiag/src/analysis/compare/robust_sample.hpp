// SPDX-License-Identifier: Apache-2.0
// The centre and spread of a run's per-step values, robust to the odd slow step (the first
// step's warm-up, a checkpoint, a garbage collection): the median and the median absolute
// deviation, scaled to a standard deviation.
#pragma once

#include <cstddef>
#include <vector>

namespace gpudiag::detail {

struct RobustSample {
    double median = 0;
    /// 1.4826 x the median absolute deviation: the standard deviation for normally distributed
    /// values, and unmoved by a few outliers.
    double sigma = 0;
    std::size_t n = 0;

    static RobustSample of(const std::vector<double>& values);

    /// The standard error of the median: sqrt(pi/2) x sigma / sqrt(n) (the median is that much
    /// less efficient than the mean for normal values).
    [[nodiscard]] double median_standard_error() const;
    /// The standard error of `sigma` itself: 1.166 x sigma / sqrt(n) (the MAD's asymptotic
    /// variance for normal values is 1.36 sigma^2 / n).
    [[nodiscard]] double sigma_standard_error() const;
};

}  // namespace gpudiag::detail
