// SPDX-License-Identifier: Apache-2.0
// Memory trends (the rules are in memory_trend.hpp; the thresholds, and why, in the findings
// catalog).
#include "analysis/memory/memory_trend.hpp"

#include "support/statistics.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <span>
#include <vector>

namespace gpudiag::detail {
namespace {

double value_of(const StepMark& s, TrendMetric m) {
    switch (m) {
        case TrendMetric::kAllocated: return static_cast<double>(s.allocated_min);
        case TrendMetric::kOutside: return static_cast<double>(s.outside_min);
        case TrendMetric::kReserved: return static_cast<double>(s.reserved_min);
        case TrendMetric::kProcess: return static_cast<double>(s.process_min);
    }
    return 0;
}

double value_of(const MemorySeriesPoint& p, TrendMetric m) {
    switch (m) {
        case TrendMetric::kAllocated: return static_cast<double>(p.allocated_min);
        case TrendMetric::kOutside: return static_cast<double>(p.outside_min);
        case TrendMetric::kReserved: return static_cast<double>(p.reserved_min);
        case TrendMetric::kProcess: return static_cast<double>(p.process_min);
    }
    return 0;
}

// The points a metric is trended on, with the moment each begins.
struct TrendPoints {
    std::vector<TrendPoint> pts;
    std::vector<std::uint64_t> times;
    Repetition basis = Repetition::kNone;
    bool per_step = false;
    std::uint64_t repetitions = 0;
    double period_ns = 0;
    double window_ns = 0;
};

TrendPoints from_steps(const DeviceMemorySummary& d, TrendMetric m) {
    TrendPoints out;
    out.per_step = true;
    out.basis = Repetition::kSteps;
    out.repetitions = d.total_steps;
    double x = 0;
    for (const StepMark& st : d.steps) {
        double v = value_of(st, m);
        // NVML's figure is 0 until its first sample: those steps say nothing about it.
        if (m != TrendMetric::kProcess || v > 0) {
            out.pts.push_back({x + st.steps / 2.0, v});
            out.times.push_back(st.start_ns);
        }
        x += st.steps;
    }
    return out;
}

// Consecutive series buckets merged into windows of at least `window_ns`; the lowest level of
// each window. The last window is dropped when it is shorter: a minimum over less time reads
// higher, which would look like growth.
TrendPoints from_windows(const DeviceMemorySummary& d, TrendMetric m, double window_ns) {
    TrendPoints out;
    const auto& s = d.series;
    if (s.empty()) return out;
    const std::uint64_t t0 = s.front().start_ns;
    std::uint64_t bucket_ns = std::numeric_limits<std::uint64_t>::max();
    for (std::size_t i = 1; i < s.size(); ++i) {
        bucket_ns = std::min(bucket_ns, s[i].start_ns - s[i - 1].start_ns);
    }
    if (bucket_ns == std::numeric_limits<std::uint64_t>::max()) bucket_ns = 1;
    const auto width =
        static_cast<std::uint64_t>(std::max(window_ns, static_cast<double>(bucket_ns)));
    std::size_t i = 0;
    while (i < s.size()) {
        const std::uint64_t start = s[i].start_ns;
        double low = std::numeric_limits<double>::max();
        std::size_t j = i;
        for (; j < s.size() && s[j].start_ns < start + width; ++j) {
            double v = value_of(s[j], m);
            if (m != TrendMetric::kProcess || v > 0) low = std::min(low, v);
        }
        const bool complete = j < s.size() || s[j - 1].start_ns + bucket_ns >= start + width;
        if (complete && low != std::numeric_limits<double>::max()) {
            const std::uint64_t middle = start - t0 + width / 2;  // whole ns are exact enough
            out.pts.push_back({static_cast<double>(middle) / 1e9, low});
            out.times.push_back(start);
        }
        i = j;
    }
    out.window_ns = static_cast<double>(width);
    return out;
}

// The repetition the device's points rest on, for a metric (see memory_trend.hpp).
TrendPoints points_for(const DeviceMemorySummary& d, TrendMetric m) {
    if (d.total_steps >= kMinRepetitions && d.steps.size() >= kLeakMinPoints)
        return from_steps(d, m);
    if (d.total_steps == 0 && d.period.repetitions >= kMinRepetitions &&
        d.period.last_ns - d.period.first_ns >= kMinPatternSpanNs) {
        TrendPoints p = from_windows(d, m, d.period.period_ns);
        p.basis = Repetition::kPeriod;
        p.repetitions = d.period.repetitions;
        p.period_ns = d.period.period_ns;
        if (p.pts.size() >= kLeakMinPoints) return p;
    }
    if (d.total_steps == 0) {
        TrendPoints p = from_windows(d, m, static_cast<double>(kServiceWindowNs));
        p.basis = Repetition::kWindows;
        p.repetitions = p.pts.size();
        if (p.pts.size() >= kMinServiceWindows) return p;
    }
    return {};
}

double floor_for(const TrendResult& r, const LedgerTotals& t) {
    return std::max({kLeakMinBytes, kLeakMinLevelShare * r.level,
                     kLeakMinCapacityShare * static_cast<double>(t.capacity)});
}

// The earliest suffix on which the test passes (the onset); -1 when none does.
std::ptrdiff_t onset(const std::vector<TrendPoint>& pts, const LedgerTotals& t, TrendResult& out) {
    const std::size_t n = pts.size();
    for (std::size_t k = 0; k * 8 <= 5 * n && n - k >= kLeakMinPoints;
         k += std::max<std::size_t>(1, n / 8)) {
        TrendResult r = analyze_trend(std::span<const TrendPoint>(pts).subspan(k));
        if (is_leak(r, floor_for(r, t))) {
            out = r;
            return static_cast<std::ptrdiff_t>(k);
        }
    }
    return -1;
}

// Where the growth began within an accepted range: the knee of a "flat, then rising" fit (least
// squares over the knee's position, on at most 256 binned points). A leak that starts with the
// range gives a knee at its start; one that starts late is dated from when it started, so "since
// when" and the rate describe the growth, not the calm before it.
std::size_t knee(std::span<const TrendPoint> pts) {
    std::vector<TrendPoint> p;
    const std::size_t n = pts.size();
    const std::size_t bins = std::min<std::size_t>(n, 256);
    std::vector<std::size_t> first_of_bin;
    for (std::size_t b = 0; b < bins; ++b) {
        std::size_t lo = n * b / bins, hi = n * (b + 1) / bins;
        double sx = 0, sy = 0;
        for (std::size_t i = lo; i < hi; ++i) {
            sx += pts[i].x;
            sy += pts[i].y;
        }
        p.push_back({sx / static_cast<double>(hi - lo), sy / static_cast<double>(hi - lo)});
        first_of_bin.push_back(lo);
    }
    double best = std::numeric_limits<double>::max();
    std::size_t best_j = 0;
    for (std::size_t j = 0; j + 2 < p.size(); ++j) {
        // y = a + s * max(0, x - x_j): ordinary least squares in (a, s).
        double m = static_cast<double>(p.size()), sh = 0, shh = 0, sy = 0, shy = 0;
        for (const auto& q : p) {
            double h = std::max(0.0, q.x - p[j].x);
            sh += h;
            shh += h * h;
            sy += q.y;
            shy += h * q.y;
        }
        double det = m * shh - sh * sh;
        if (det <= 0) continue;
        double s = (m * shy - sh * sy) / det;
        double a = (sy - s * sh) / m;
        double sse = 0;
        for (const auto& q : p) {
            double e = q.y - (a + s * std::max(0.0, q.x - p[j].x));
            sse += e * e;
        }
        if (sse < best) {
            best = sse;
            best_j = j;
        }
    }
    return first_of_bin[best_j];
}

// The leak test sets the first tenth of the points aside as warm-up, so that start-up
// allocations are never read as a leak. Points set aside that already lie on the leak's line
// (within three median deviations of it, or half a point's growth) were the leak too: walking
// back over them dates a leak that was there from the start from the start, not from the end
// of the warm-up. A warm-up jump or a flat stretch lies off the line and stops the walk.
std::size_t extend_back(std::span<const TrendPoint> pts, std::size_t start, std::size_t earliest,
                        double rate) {
    if (start <= earliest || start >= pts.size() || rate <= 0) return start;
    std::vector<double> intercepts;
    std::vector<double> gaps;
    for (std::size_t i = start; i < pts.size(); ++i) {
        intercepts.push_back(pts[i].y - rate * pts[i].x);
        if (i > start) gaps.push_back(pts[i].x - pts[i - 1].x);
    }
    const double intercept = median(intercepts);
    std::vector<double> deviations;
    for (std::size_t i = start; i < pts.size(); ++i) {
        deviations.push_back(std::fabs(pts[i].y - (intercept + rate * pts[i].x)));
    }
    const double tolerance = std::max(3 * median(deviations), 0.5 * rate * median(gaps));
    while (start > earliest) {
        const TrendPoint& p = pts[start - 1];
        if (std::fabs(p.y - (intercept + rate * p.x)) > tolerance) break;
        --start;
    }
    return start;
}

bool site_counts_for(const SiteUsage& u, TrendMetric m) {
    switch (m) {
        case TrendMetric::kAllocated:
        case TrendMetric::kReserved: return !u.driver;
        case TrendMetric::kOutside: return u.driver;
        case TrendMetric::kProcess: return true;
    }
    return true;
}

// Live bytes each site gained since `since_ns` (from the checkpoint at or after it).
void attribute_growth(const MemoryLedger& ledger, std::uint16_t device, std::uint64_t since_ns,
                      const SiteNamer& site_name, MemoryTrend& trend) {
    std::vector<std::uint64_t> cps = ledger.checkpoint_ticks(device);
    std::size_t k0 = 0;
    while (k0 + 1 < cps.size() && cps[k0] < since_ns) ++k0;
    for (const SiteUsage& u : ledger.sites(device)) {
        if (!site_counts_for(u, trend.metric)) continue;
        std::vector<std::int64_t> v = ledger.site_checkpoints(device, u.slot);
        std::int64_t before = k0 < v.size() ? v[k0] : 0;
        std::int64_t g = u.live_bytes - before;
        if (g <= 0) continue;
        SiteLine line;
        line.site = site_name(u.site);
        line.driver = u.driver;
        line.category = u.category;
        line.owner = u.owner;
        line.bytes = static_cast<double>(g);
        line.blocks = u.live_blocks;
        trend.sites.push_back(std::move(line));
        trend.sites_total += static_cast<double>(g);
    }
    std::sort(trend.sites.begin(), trend.sites.end(),
              [](const SiteLine& a, const SiteLine& b) { return a.bytes > b.bytes; });
    if (trend.sites.size() > 10) trend.sites.resize(10);
}

void time_until_full(const DeviceMemorySummary& d, MemoryTrend& trend) {
    const LedgerTotals& t = d.totals;
    if (t.capacity == 0 || trend.rate <= 0) return;
    double held = static_cast<double>(std::max(t.used(), t.process_used) + t.foreign_used);
    double left = std::max(0.0, static_cast<double>(t.capacity) - held);
    trend.full_known = true;
    trend.until_full = left / trend.rate;
}

std::optional<MemoryTrend> leak_trend(const MemoryLedger& ledger, const DeviceMemorySummary& d,
                                      TrendMetric m, const SiteNamer& site_name) {
    TrendPoints p = points_for(d, m);
    if (p.pts.size() < kLeakMinPoints) return std::nullopt;
    MemoryTrend trend;
    std::ptrdiff_t k = onset(p.pts, d.totals, trend.result);
    if (k < 0) return std::nullopt;
    const auto accepted = static_cast<std::size_t>(k) + trend.result.warmup_points;
    std::size_t start = accepted + knee(std::span<const TrendPoint>(p.pts).subspan(accepted));
    trend.metric = m;
    trend.basis = p.basis;
    trend.per_step = p.per_step;
    trend.repetitions = p.repetitions;
    trend.period_ns = p.period_ns;
    trend.window_ns = p.window_ns;
    trend.leak = true;
    // The rate since the knee (the accepted range's slope when the knee leaves too few points).
    trend.rate = p.pts.size() - start >= kLeakMinPoints
                     ? theil_sen_slope(std::span<const TrendPoint>(p.pts).subspan(start))
                     : trend.result.slope;
    if (trend.rate <= 0) trend.rate = trend.result.slope;
    if (start == accepted)
        start = extend_back(p.pts, start, static_cast<std::size_t>(k), trend.rate);
    trend.floor_bytes = floor_for(trend.result, d.totals);
    trend.since_ns = p.times[std::min(start, p.times.size() - 1)];
    trend.since_s = d.first_ns != 0 && trend.since_ns > d.first_ns
                        ? static_cast<double>(trend.since_ns - d.first_ns) / 1e9
                        : 0;
    trend.span_s = static_cast<double>(p.times.back() - trend.since_ns) / 1e9;
    if (p.per_step) trend.span_steps = p.pts.back().x - p.pts[std::min(start, p.pts.size() - 1)].x;
    trend.first_level = p.pts[std::min(start, p.pts.size() - 1)].y;
    trend.last_level = p.pts.back().y;
    trend.step_ns = d.step_ns;
    time_until_full(d, trend);
    attribute_growth(ledger, d.device, trend.since_ns, site_name, trend);
    return trend;
}

// Growth of the allocated level with too few repetitions to call it a leak: the raw series
// buckets, tested the same way, with no rate.
std::optional<MemoryTrend> growth_only(const DeviceMemorySummary& d) {
    if (d.series.size() < kLeakMinPoints) return std::nullopt;
    std::vector<TrendPoint> pts;
    for (const auto& p : d.series) {
        pts.push_back({static_cast<double>(p.start_ns - d.series.front().start_ns) / 1e9,
                       static_cast<double>(p.allocated_min)});
    }
    TrendResult r = analyze_trend(pts);
    if (!is_leak(r, floor_for(r, d.totals))) return std::nullopt;
    MemoryTrend trend;
    trend.metric = TrendMetric::kAllocated;
    trend.growth_only = true;
    trend.result = r;
    trend.repetitions = d.total_steps;
    trend.floor_bytes = floor_for(r, d.totals);
    trend.first_level = pts[r.warmup_points].y;
    trend.last_level = pts.back().y;
    trend.span_s = r.x_end - r.x_start;
    return trend;
}

}  // namespace

const char* trend_metric_name(TrendMetric m) noexcept {
    switch (m) {
        case TrendMetric::kAllocated: return "allocated";
        case TrendMetric::kOutside: return "outside";
        case TrendMetric::kReserved: return "reserved";
        case TrendMetric::kProcess: return "process";
    }
    return "allocated";
}

std::vector<MemoryTrend> compute_trends(const MemoryLedger& ledger, const DeviceMemorySummary& d,
                                        const SiteNamer& site_name) {
    std::vector<MemoryTrend> out;
    const LedgerTotals& t = d.totals;
    if (d.allocated_known()) {
        if (auto trend = leak_trend(ledger, d, TrendMetric::kAllocated, site_name)) {
            out.push_back(std::move(*trend));
        } else if (points_for(d, TrendMetric::kAllocated).pts.size() < kLeakMinPoints) {
            if (auto g = growth_only(d)) out.push_back(std::move(*g));
        }
    }
    if (t.driver_seen) {
        if (auto trend = leak_trend(ledger, d, TrendMetric::kOutside, site_name)) {
            out.push_back(std::move(*trend));
        }
    }
    auto leaks = [&](std::optional<TrendMetric> m) {
        return std::any_of(out.begin(), out.end(),
                           [&](const MemoryTrend& x) { return x.leak && (!m || x.metric == *m); });
    };
    if (!leaks(TrendMetric::kAllocated) && d.reserved_known()) {
        if (auto trend = leak_trend(ledger, d, TrendMetric::kReserved, site_name)) {
            out.push_back(std::move(*trend));
        }
    }
    if (!leaks(std::nullopt) && t.process_sampled) {
        if (auto trend = leak_trend(ledger, d, TrendMetric::kProcess, site_name)) {
            out.push_back(std::move(*trend));
        }
    }
    return out;
}

}  // namespace gpudiag::detail
