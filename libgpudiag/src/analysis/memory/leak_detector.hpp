// SPDX-License-Identifier: Apache-2.0
// Leak detection: a trend test on a memory level sampled per step (or per time window), robust
// to warm-up, periodic spikes and one-off caches.
//
// The statistics, in order:
//  1. Warm-up is cut by the data: the prefix up to the last large jump in the first half, where
//     "large" is 8× the median absolute step-to-step change of the second half (the run's own
//     noise) or 0.1 % of its level, and never less than the first 10 % of the points.
//  2. Theil-Sen slope (median of pairwise slopes) on the rest: periodic spikes and outliers up
//     to ~29 % of points do not move it. Long series are first reduced to 256 bins of medians.
//  3. Mann-Kendall test (with the tie correction: flat series are mostly ties) for a monotone
//     upward trend; the one-sided p-value gives the confidence.
//  4. Sustained growth: the Theil-Sen slope of each third of the analysed range must be at least
//     a quarter of the overall slope. A one-off cache is a single step up: flat thirds around
//     one jump fail this, as does a warm-up that is still settling.
//  5. Material growth: the projected growth over the analysed range must reach a floor (set by
//     the caller from the level and capacity), so slow noise never reads as a leak.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace gpudiag::detail {

struct TrendPoint {
    double x = 0;  ///< step ordinal, or seconds
    double y = 0;  ///< bytes
};

struct TrendResult {
    bool enough_data = false;
    std::size_t points = 0;
    std::size_t warmup_points = 0;  ///< dropped from the front
    double slope = 0;               ///< bytes per unit of x (Theil-Sen)
    double mk_z = 0;                ///< Mann-Kendall standardised statistic
    double p_value = 1;             ///< one-sided, upward trend
    bool sustained = false;
    double growth = 0;   ///< slope × analysed x span
    double level = 0;    ///< median y of the analysed range
    double x_start = 0;  ///< first analysed x (end of warm-up)
    double x_end = 0;
};

/// Runs the test. Needs at least 8 points; fewer give enough_data = false.
TrendResult analyze_trend(std::span<const TrendPoint> points);

/// The verdict given a floor on material growth (bytes over the analysed range).
bool is_leak(const TrendResult& r, double min_growth_bytes);

/// Theil-Sen slope of a series (median of pairwise slopes); 0 for fewer than 2 points.
double theil_sen_slope(std::span<const TrendPoint> points);

}  // namespace gpudiag::detail
