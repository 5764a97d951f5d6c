// SPDX-License-Identifier: Apache-2.0
// The trend test on its own: leaks versus warm-up, spikes, one-off caches and noise.
#include "analysis/memory/leak_detector.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace gpudiag::detail {
namespace {

constexpr double kMiB = 1 << 20;
constexpr double kFloor = 64 * kMiB;

std::vector<TrendPoint> series(int n, double (*level)(int), unsigned seed, double noise) {
    std::mt19937 rng(seed);
    std::normal_distribution<double> gauss(0, noise);
    std::vector<TrendPoint> p;
    for (int i = 0; i < n; ++i) p.push_back({static_cast<double>(i), level(i) + gauss(rng)});
    return p;
}

TEST(LeakDetector, SteadyLeakInNoiseIsFound) {
    auto p = series(
        200, [](int i) { return 8e9 + 4 * kMiB * i; }, 1, 20 * kMiB);
    TrendResult r = analyze_trend(p);
    EXPECT_TRUE(is_leak(r, kFloor));
    EXPECT_NEAR(r.slope, 4 * kMiB, 0.5 * kMiB);
    EXPECT_LT(r.p_value, 1e-6);
}

TEST(LeakDetector, FlatNoisySeriesIsNotALeak) {
    for (unsigned seed = 0; seed < 20; ++seed) {
        auto p = series(
            200, [](int) { return 8e9; }, seed, 50 * kMiB);
        EXPECT_FALSE(is_leak(analyze_trend(p), kFloor)) << seed;
    }
}

TEST(LeakDetector, WarmupThatSettlesIsNotALeak) {
    auto p = series(
        200, [](int i) { return 2e9 + 6e9 * (1 - std::exp(-i / 8.0)); }, 2, 10 * kMiB);
    TrendResult r = analyze_trend(p);
    EXPECT_FALSE(is_leak(r, kFloor));
    EXPECT_GT(r.warmup_points, 10u);
}

TEST(LeakDetector, OneOffCacheIsNotALeak) {
    auto p = series(
        200, [](int i) { return i < 120 ? 8e9 : 9e9; }, 3, 10 * kMiB);
    EXPECT_FALSE(is_leak(analyze_trend(p), kFloor));
}

TEST(LeakDetector, PeriodicSpikesAloneAreNotALeakButDoNotHideOne) {
    auto spikes = series(
        200, [](int i) { return i % 10 == 0 ? 12e9 : 8e9; }, 4, 10 * kMiB);
    EXPECT_FALSE(is_leak(analyze_trend(spikes), kFloor));
    auto leak = series(
        200, [](int i) { return (i % 10 == 0 ? 12e9 : 8e9) + 3 * kMiB * i; }, 5, 10 * kMiB);
    EXPECT_TRUE(is_leak(analyze_trend(leak), kFloor));
}

TEST(LeakDetector, TooFewPointsGiveNoVerdict) {
    auto p = series(
        6, [](int i) { return 1e9 * i; }, 6, 0);
    TrendResult r = analyze_trend(p);
    EXPECT_FALSE(r.enough_data);
    EXPECT_FALSE(is_leak(r, 0));
}

TEST(LeakDetector, TheilSenIgnoresOutliers) {
    std::vector<TrendPoint> p;
    for (int i = 0; i < 50; ++i)
        p.push_back({static_cast<double>(i), 2.0 * i + (i % 7 == 0 ? 1e6 : 0)});
    EXPECT_NEAR(theil_sen_slope(p), 2.0, 1e-9);
}

}  // namespace
}  // namespace gpudiag::detail
