// SPDX-License-Identifier: Apache-2.0
// The repetition in a program's allocations when it marks no steps, so a leak verdict rests on
// repeated iterations rather than on growth within one.
//
// Each allocation site keeps when it allocated (count, first, last and its gaps' mean and spread),
// at no extra cost: the ledger already finds the site's slot for every allocation. A loop
// allocates at some site once per iteration, at regular intervals, from the first iteration to the
// last; sites inside one iteration (a layer's activation, allocated once per layer) repeat too,
// but only over the part of the run that phase covers, or at irregular intervals (forward layers
// close together, then a long backward gap). So the period is the site that
//   * allocates at least `min_repetitions` times,
//   * over at least 3/4 of the time the device allocated anything, and
//   * regularly: the coefficient of variation of its gaps is at most 1/2;
// among those, the one spanning the most of the run (within 5 %), then the one with the fewest
// allocations (a site allocating twice an iteration is regular too, with half the period).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace gpudiag::detail {

struct DetectedPeriod {
    std::uint64_t repetitions = 0;  ///< 0 when no period was found
    double period_ns = 0;
    std::uint64_t first_ns = 0;
    std::uint64_t last_ns = 0;
};

/// When one site allocated.
struct PatternStats {
    std::uint64_t count = 0;
    std::uint64_t gaps = 0;
    std::uint64_t first_ns = 0;
    std::uint64_t last_ns = 0;
    double gap_sum = 0;
    double gap_sq = 0;

    void add(std::uint64_t t_ns) noexcept {
        if (count == 0) {
            first_ns = last_ns = t_ns;
        } else if (t_ns > last_ns) {
            double gap = static_cast<double>(t_ns - last_ns);
            gap_sum += gap;
            gap_sq += gap * gap;
            ++gaps;
            last_ns = t_ns;
        }
        ++count;
    }
    [[nodiscard]] std::uint64_t span_ns() const noexcept { return last_ns - first_ns; }
    [[nodiscard]] bool regular(std::uint64_t min_repetitions,
                               std::uint64_t run_span_ns) const noexcept {
        if (count < min_repetitions || gaps + 1 < min_repetitions) return false;
        if (static_cast<double>(span_ns()) < 0.75 * static_cast<double>(run_span_ns)) return false;
        double mean = gap_sum / static_cast<double>(gaps);
        double var = gap_sq / static_cast<double>(gaps) - mean * mean;
        return mean > 0 && std::sqrt(std::max(var, 0.0)) <= 0.5 * mean;
    }
};

/// The period among `sites` (anything with a `pattern` member), over a run spanning `run_span_ns`.
template <typename Range>
DetectedPeriod detect_period(const Range& sites, std::uint64_t run_span_ns,
                             std::uint64_t min_repetitions) {
    DetectedPeriod best;
    if (run_span_ns == 0) return best;
    std::uint64_t widest = 0;
    for (const auto& s : sites) {
        if (s.pattern.regular(min_repetitions, run_span_ns))
            widest = std::max(widest, s.pattern.span_ns());
    }
    for (const auto& s : sites) {
        const PatternStats& p = s.pattern;
        if (!p.regular(min_repetitions, run_span_ns) ||
            static_cast<double>(p.span_ns()) < 0.95 * static_cast<double>(widest)) {
            continue;
        }
        if (best.repetitions == 0 || p.count < best.repetitions) {
            best = DetectedPeriod{p.count, p.gap_sum / static_cast<double>(p.gaps), p.first_ns,
                                  p.last_ns};
        }
    }
    return best;
}

}  // namespace gpudiag::detail
