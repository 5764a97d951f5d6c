// SPDX-License-Identifier: Apache-2.0
// The robust centre and spread every per-step delta is judged with.
#include "analysis/compare/robust_sample.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace gpudiag::detail {
namespace {

TEST(RobustSample, MedianAndScaledMadIgnoreOneSlowStep) {
    // Five steady steps and a warm-up step 10x slower: the spread stays that of the steady ones.
    const RobustSample s = RobustSample::of({100, 102, 98, 101, 99, 1000});
    EXPECT_DOUBLE_EQ(s.median, 100.5);
    // |deviations| 0.5 1.5 2.5 0.5 1.5 899.5 -> median 1.5
    EXPECT_NEAR(s.sigma, 1.4826 * 1.5, 1e-9);
    EXPECT_EQ(s.n, 6U);
    EXPECT_NEAR(s.median_standard_error(), 1.2533 * s.sigma / std::sqrt(6.0), 1e-9);
}

TEST(RobustSample, NoValuesIsNoSpread) {
    const RobustSample s = RobustSample::of({});
    EXPECT_EQ(s.n, 0U);
    EXPECT_EQ(s.median_standard_error(), 0.0);
    EXPECT_EQ(s.sigma_standard_error(), 0.0);
}

}  // namespace
}  // namespace gpudiag::detail
