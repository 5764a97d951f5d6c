// SPDX-License-Identifier: Apache-2.0
#include "analysis/compare/delta_judge.hpp"

#include "analysis/compare/robust_sample.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace gpudiag::detail {
namespace {

void fill(CompareDelta& d, double before, double after) {
    d.before = before;
    d.after = after;
    d.change = after - before;
    d.relative_change =
        before != 0 ? d.change / std::fabs(before) : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace

double DeltaJudge::floor(double before) const {
    return options_.min_relative_change * std::fabs(before);
}

void DeltaJudge::judge(CompareDelta& d, bool known_noise) const {
    const double threshold = std::max(d.noise, floor(d.before));
    d.noise = threshold;
    if (std::fabs(d.change) <= threshold) {
        d.judgement = DeltaJudgement::kWithinNoise;
    } else if (!known_noise) {
        d.judgement = DeltaJudgement::kNotComparable;
    } else {
        const bool lower = d.change < 0;
        d.judgement =
            lower == d.lower_is_better ? DeltaJudgement::kImproved : DeltaJudgement::kRegressed;
    }
}

CompareDelta DeltaJudge::per_step(const std::vector<double>& before,
                                  const std::vector<double>& after, bool lower_is_better) const {
    const RobustSample b = RobustSample::of(before);
    const RobustSample a = RobustSample::of(after);
    CompareDelta d;
    d.lower_is_better = lower_is_better;
    fill(d, b.median, a.median);
    const double se = std::hypot(b.median_standard_error(), a.median_standard_error());
    d.noise = options_.noise_multiplier * se;
    d.noise_basis = fmt::format(
        "{:g} x the standard error of the difference of the medians, from the step-to-step "
        "spread of {} and {} steps",
        options_.noise_multiplier, b.n, a.n);
    judge(d, true);
    return d;
}

CompareDelta DeltaJudge::spread(const std::vector<double>& before, const std::vector<double>& after,
                                bool lower_is_better) const {
    const RobustSample b = RobustSample::of(before);
    const RobustSample a = RobustSample::of(after);
    CompareDelta d;
    d.lower_is_better = lower_is_better;
    fill(d, b.sigma, a.sigma);
    d.noise =
        options_.noise_multiplier * std::hypot(b.sigma_standard_error(), a.sigma_standard_error());
    d.noise_basis = fmt::format(
        "{:g} x the standard error of the difference of the spreads, from {} and {} steps",
        options_.noise_multiplier, b.n, a.n);
    judge(d, true);
    return d;
}

CompareDelta DeltaJudge::single(double before, double after, double noise, std::string basis,
                                bool known_noise, bool lower_is_better) const {
    CompareDelta d;
    d.lower_is_better = lower_is_better;
    fill(d, before, after);
    d.noise = noise;
    d.noise_basis = std::move(basis);
    judge(d, known_noise);
    return d;
}

}  // namespace gpudiag::detail
