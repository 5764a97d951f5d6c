// SPDX-License-Identifier: Apache-2.0
#include "analysis/compare/robust_sample.hpp"

#include "support/statistics.hpp"

#include <cmath>

namespace gpudiag::detail {

namespace {
constexpr double kMadToSigma = 1.4826;        // 1 / Phi^-1(3/4)
constexpr double kMedianEfficiency = 1.2533;  // sqrt(pi / 2)
constexpr double kMadSpreadError = 1.166;     // sqrt(1.36)
}  // namespace

RobustSample RobustSample::of(const std::vector<double>& values) {
    RobustSample s;
    s.n = values.size();
    if (values.empty()) return s;
    s.median = detail::median(values);
    std::vector<double> deviations;
    deviations.reserve(values.size());
    for (double v : values) deviations.push_back(std::fabs(v - s.median));
    s.sigma = kMadToSigma * detail::median(std::move(deviations));
    return s;
}

double RobustSample::median_standard_error() const {
    if (n == 0) return 0;
    return kMedianEfficiency * sigma / std::sqrt(static_cast<double>(n));
}

double RobustSample::sigma_standard_error() const {
    if (n == 0) return 0;
    return kMadSpreadError * sigma / std::sqrt(static_cast<double>(n));
}

}  // namespace gpudiag::detail
