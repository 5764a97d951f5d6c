// SPDX-License-Identifier: Apache-2.0
// Trend test for leak detection (the statistics are described in leak_detector.hpp).
#include "analysis/memory/leak_detector.hpp"

#include "analysis/findings/finding_catalog.hpp"
#include "support/statistics.hpp"

#include <algorithm>
#include <cmath>

namespace gpudiag::detail {
namespace {

// Long series are binned: the trend test's cost grows with the square of the points.
constexpr std::size_t kMaxBins = 256;

// Reduces a long series to at most kMaxBins points: mean x, median y of each bin.
std::vector<TrendPoint> bin(std::span<const TrendPoint> p) {
    if (p.size() <= kMaxBins) return {p.begin(), p.end()};
    std::vector<TrendPoint> out;
    out.reserve(kMaxBins);
    for (std::size_t b = 0; b < kMaxBins; ++b) {
        std::size_t lo = p.size() * b / kMaxBins;
        std::size_t hi = p.size() * (b + 1) / kMaxBins;
        if (hi <= lo) continue;
        double sx = 0;
        std::vector<double> ys;
        for (std::size_t i = lo; i < hi; ++i) {
            sx += p[i].x;
            ys.push_back(p[i].y);
        }
        out.push_back({sx / static_cast<double>(hi - lo), median(std::move(ys))});
    }
    return out;
}

// Mann-Kendall S and its variance with the correction for tied groups.
void mann_kendall(std::span<const TrendPoint> p, double& z) {
    const std::size_t n = p.size();
    double s = 0;
    for (std::size_t i = 0; i + 1 < n; ++i) {
        for (std::size_t j = i + 1; j < n; ++j) {
            double d = p[j].y - p[i].y;
            s += d > 0 ? 1 : d < 0 ? -1 : 0;
        }
    }
    std::vector<double> ys;
    ys.reserve(n);
    for (const auto& q : p) ys.push_back(q.y);
    std::sort(ys.begin(), ys.end());
    double ties = 0;
    for (std::size_t i = 0; i < n;) {
        std::size_t j = i;
        while (j < n && ys[j] == ys[i]) ++j;
        double t = static_cast<double>(j - i);
        ties += t * (t - 1) * (2 * t + 5);
        i = j;
    }
    double nn = static_cast<double>(n);
    double var = (nn * (nn - 1) * (2 * nn + 5) - ties) / 18.0;
    if (var <= 0) {
        z = 0;
        return;
    }
    z = s > 0 ? (s - 1) / std::sqrt(var) : s < 0 ? (s + 1) / std::sqrt(var) : 0;
}

}  // namespace

double theil_sen_slope(std::span<const TrendPoint> points) {
    std::vector<TrendPoint> p = bin(points);
    std::vector<double> slopes;
    slopes.reserve(p.size() * (p.size() - (p.empty() ? 0 : 1)) / 2);
    for (std::size_t i = 0; i + 1 < p.size(); ++i) {
        for (std::size_t j = i + 1; j < p.size(); ++j) {
            double dx = p[j].x - p[i].x;
            if (dx > 0) slopes.push_back((p[j].y - p[i].y) / dx);
        }
    }
    return median(std::move(slopes));
}

TrendResult analyze_trend(std::span<const TrendPoint> points) {
    TrendResult r;
    r.points = points.size();
    if (points.size() < kLeakMinPoints) return r;
    const std::size_t n = points.size();

    // 1. Warm-up.
    std::vector<double> late_changes;
    std::vector<double> late_levels;
    for (std::size_t i = n / 2; i + 1 < n; ++i) {
        late_changes.push_back(std::fabs(points[i + 1].y - points[i].y));
        late_levels.push_back(points[i].y);
    }
    double noise = median(late_changes);
    double level_late = median(late_levels);
    double jump = std::max(8 * noise, 1e-3 * level_late);
    std::size_t warmup = (n + 9) / 10;
    for (std::size_t i = 0; i + 1 < n / 2; ++i) {
        if (points[i + 1].y - points[i].y > jump) warmup = std::max(warmup, i + 1);
    }
    warmup = std::min(warmup, n / 2);
    r.warmup_points = warmup;
    std::span<const TrendPoint> rest = points.subspan(warmup);
    if (rest.size() < kLeakMinPoints) return r;
    r.enough_data = true;
    r.x_start = rest.front().x;
    r.x_end = rest.back().x;

    // 2. Theil-Sen.
    r.slope = theil_sen_slope(rest);
    std::vector<double> ys;
    for (const auto& q : rest) ys.push_back(q.y);
    r.level = median(std::move(ys));
    r.growth = r.slope * (r.x_end - r.x_start);

    // 3. Mann-Kendall on the (binned) series.
    std::vector<TrendPoint> binned = bin(rest);
    mann_kendall(binned, r.mk_z);
    r.p_value = 0.5 * std::erfc(r.mk_z / std::sqrt(2.0));

    // 4. Sustained over each third.
    if (r.slope > 0) {
        r.sustained = true;
        std::size_t m = rest.size();
        for (std::size_t k = 0; k < 3; ++k) {
            std::span<const TrendPoint> part = rest.subspan(m * k / 3, m * (k + 1) / 3 - m * k / 3);
            if (part.size() < 3 || theil_sen_slope(part) < 0.25 * r.slope) r.sustained = false;
        }
    }
    return r;
}

bool is_leak(const TrendResult& r, double min_growth_bytes) {
    return r.enough_data && r.slope > 0 && r.p_value < kLeakSignificance && r.sustained &&
           r.growth >= min_growth_bytes;
}

}  // namespace gpudiag::detail
