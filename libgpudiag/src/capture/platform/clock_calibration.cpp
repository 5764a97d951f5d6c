// SPDX-License-Identifier: Apache-2.0
// ClockCalibration.
#include "capture/platform/clock_calibration.hpp"

#include "core/clock.hpp"

#include <cmath>

namespace gpudiag::detail {
namespace {

// A segment's rate outside this band is no clock at all: the source jumped.
constexpr double kMinRate = 1e-4;
constexpr double kMaxRate = 1e4;
// A segment this long whose rate differs from the regime's by more than kBreakTolerance means
// the clock changed. Two pairs' errors (kMaxBracketNs / 2 each) over 10 ms are 0.2 %.
constexpr std::uint64_t kMinBreakSpanNs = 10'000'000;
constexpr double kBreakTolerance = 0.01;
// Records this far outside a regime's pairs (in time) still belong to it: buffers are flushed
// every period, so records are seconds old at most; a minute is generous.
constexpr double kCoverNs = 60e9;
constexpr int kSampleTries = 4;

}  // namespace

bool read_realtime_clock(std::uint64_t* out_ns) {
    *out_ns = realtime_now_ns();
    return *out_ns != 0;
}

void ClockCalibration::Regime::push(const Pair& p) noexcept {
    if (count == 0) first_source = p.source;
    if (count < kCapacity) {
        ring[(head + count) % kCapacity] = p;
        ++count;
    } else {
        ring[head] = p;
        head = (head + 1) % kCapacity;
    }
    refit();
}

void ClockCalibration::Regime::refit() noexcept {
    fitted_rate = 0.0;
    if (count < 2) return;
    // Least squares of mono on source, relative to the oldest pair (keeps doubles exact enough).
    const Pair& base = at(0);
    double sx = 0, sy = 0;
    for (std::size_t i = 0; i < count; ++i) {
        sx += static_cast<double>(at(i).source - base.source);
        sy += static_cast<double>(at(i).mono - base.mono);
    }
    double n = static_cast<double>(count);
    double mx = sx / n, my = sy / n, sxx = 0, sxy = 0;
    for (std::size_t i = 0; i < count; ++i) {
        double dx = static_cast<double>(at(i).source - base.source) - mx;
        double dy = static_cast<double>(at(i).mono - base.mono) - my;
        sxx += dx * dx;
        sxy += dx * dy;
    }
    if (sxx > 0 && newest().mono - base.mono >= kMinBreakSpanNs) fitted_rate = sxy / sxx;
}

bool ClockCalibration::Regime::nanoseconds() const noexcept {
    return fitted_rate <= 0 || std::fabs(fitted_rate - 1.0) <= kForeignRateTolerance;
}

double ClockCalibration::Regime::slope_or_one() const noexcept {
    return nanoseconds() ? 1.0 : fitted_rate;
}

bool ClockCalibration::Regime::covers(std::uint64_t source) const noexcept {
    if (count == 0) return false;
    double margin = kCoverNs / slope_or_one();
    double s = static_cast<double>(source);
    return s >= static_cast<double>(first_source) - margin &&
           s <= static_cast<double>(newest().source) + margin;
}

std::uint64_t ClockCalibration::Regime::map(std::uint64_t source) const noexcept {
    auto extrapolate = [&](const Pair& from) {
        // The difference in integers first: the absolute values (1.7e18 ns) do not fit a double.
        auto ticks = static_cast<std::int64_t>(source - from.source);
        std::int64_t mono = static_cast<std::int64_t>(from.mono) +
                            std::llround(static_cast<double>(ticks) * slope_or_one());
        return mono < 1 ? std::uint64_t{1} : static_cast<std::uint64_t>(mono);
    };
    if (source < at(0).source) return extrapolate(at(0));
    // Last pair at or before `source` (binary search over the ring in time order).
    std::size_t lo = 0;
    std::size_t hi = count;
    while (hi - lo > 1) {
        std::size_t mid = lo + (hi - lo) / 2;
        if (at(mid).source <= source) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    // A nanosecond clock (CUPTI's own) keeps its durations exact: the offset of the pair before
    // the record, as the pairs' noise would otherwise stretch them by up to 1e-4.
    if (lo + 1 >= count || nanoseconds()) return extrapolate(at(lo));
    const Pair& a = at(lo);
    const Pair& b = at(lo + 1);
    // Within one segment (pairs are at most seconds apart) a double holds the offset exactly
    // enough: 53 bits over ~1e9 ns.
    double fraction =
        static_cast<double>(source - a.source) / static_cast<double>(b.source - a.source);
    return a.mono + static_cast<std::uint64_t>(
                        std::llround(fraction * static_cast<double>(b.mono - a.mono)));
}

bool ClockCalibration::continues(const Regime& r, const Pair& p) const noexcept {
    if (r.count == 0) return true;
    const Pair& last = r.newest();
    if (p.source <= last.source) return false;  // stepped back, or another clock
    double span = static_cast<double>(p.mono - last.mono);
    double seg = span / static_cast<double>(p.source - last.source);
    if (seg < kMinRate || seg > kMaxRate) return false;
    if (r.fitted_rate > 0 && p.mono - last.mono >= kMinBreakSpanNs) {
        return std::fabs(seg / r.fitted_rate - 1.0) <= kBreakTolerance;
    }
    return true;
}

bool ClockCalibration::sample(SourceReader read_source) noexcept {
    if (read_source == nullptr) return false;
    std::uint64_t best_width = UINT64_MAX;
    Pair best{};
    for (int i = 0; i < kSampleTries && best_width > kMaxBracketNs / 4; ++i) {
        std::uint64_t before = monotonic_now_ns();
        std::uint64_t source = 0;
        if (!read_source(&source) || source == 0) return false;
        std::uint64_t after = monotonic_now_ns();
        if (after - before < best_width) {
            best_width = after - before;
            best = Pair{source, before + (after - before) / 2};
        }
    }
    if (best_width > kMaxBracketNs) return false;
    add_pair(best.source, best.mono);
    return true;
}

void ClockCalibration::add_pair(std::uint64_t source, std::uint64_t monotonic_ns) noexcept {
    Pair p{source, monotonic_ns};
    Regime& cur = regimes_[current_];
    if (cur.count > 0 && p.mono <= cur.newest().mono && p.source > cur.newest().source) {
        return;  // no time passed on the session clock: the pair says nothing
    }
    if (!continues(cur, p)) {
        current_ = 1 - current_;
        regimes_[current_] = Regime{};
        has_previous_ = true;
        ++regime_changes_;
    }
    regimes_[current_].push(p);
}

std::uint64_t ClockCalibration::to_monotonic(std::uint64_t source) const noexcept {
    if (source == 0) return 0;
    const Regime& cur = current();
    if (cur.count == 0) {
        auto offset = static_cast<std::int64_t>(monotonic_now_ns() - realtime_now_ns());
        return static_cast<std::uint64_t>(static_cast<std::int64_t>(source) + offset);
    }
    const Regime& prev = regimes_[1 - current_];
    if (!cur.covers(source) && has_previous_ && prev.covers(source)) return prev.map(source);
    return cur.map(source);
}

double ClockCalibration::rate() const noexcept {
    const Regime& cur = current();
    if (cur.count < 2 || cur.newest().mono - cur.at(0).mono < kMinFitSpanNs) return 0.0;
    return cur.fitted_rate;
}

bool ClockCalibration::foreign_clock() const noexcept {
    double r = rate();
    return r > 0 && std::fabs(r - 1.0) > kForeignRateTolerance;
}

}  // namespace gpudiag::detail
