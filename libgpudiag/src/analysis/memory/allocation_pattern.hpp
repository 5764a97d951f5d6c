// SPDX-License-Identifier: Apache-2.0
// AllocationPattern: finds the repetition in a program's allocations when it marks no steps, so a
// leak verdict rests on repeated iterations rather than on growth within one.
//
// Each allocation is a token (its site and size). A loop allocates the same token once per
// iteration, at regular intervals, from the first iteration to the last; tokens inside one
// iteration (a layer's activation, allocated once per layer) repeat too, but only over the part
// of the run that phase covers, or at irregular intervals (forward layers close together, then a
// long backward gap). So the period is the token that
//   * occurs at least `min_repetitions` times,
//   * spans at least 3/4 of the time the device allocated anything, and
//   * recurs regularly: the coefficient of variation of its gaps is at most 1/2;
// and among those, the one with the fewest occurrences (a token allocated twice per iteration is
// regular too, with half the period). Tokens are counted in a bounded table: past the cap new
// tokens are ignored (a loop's tokens are among the first seen).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <unordered_map>

namespace gpudiag::detail {

struct DetectedPeriod {
    std::uint64_t repetitions = 0;  ///< 0 when no period was found
    double period_ns = 0;
    std::uint64_t first_ns = 0;
    std::uint64_t last_ns = 0;
};

class AllocationPattern {
public:
    static constexpr std::size_t kMaxTokens = 4096;

    void add(std::uint64_t token, std::uint64_t t_ns) {
        if (!seen_ || t_ns < first_ns_) first_ns_ = t_ns;
        if (!seen_ || t_ns > last_ns_) last_ns_ = t_ns;
        seen_ = true;
        auto it = tokens_.find(token);
        if (it == tokens_.end()) {
            if (tokens_.size() >= kMaxTokens) return;
            it = tokens_.emplace(token, Stats{}).first;
            it->second.first_ns = t_ns;
        } else if (t_ns > it->second.last_ns) {
            double gap = static_cast<double>(t_ns - it->second.last_ns);
            it->second.gap_sum += gap;
            it->second.gap_sq += gap * gap;
            ++it->second.gaps;
        }
        it->second.last_ns = std::max(it->second.last_ns, t_ns);
        ++it->second.count;
    }

    [[nodiscard]] DetectedPeriod period(std::uint64_t min_repetitions) const {
        DetectedPeriod best;
        const double span = static_cast<double>(last_ns_ - first_ns_);
        if (span <= 0) return best;
        auto regular = [&](const Stats& s) {
            if (s.count < min_repetitions || s.gaps + 1 < min_repetitions) return false;
            if (static_cast<double>(s.last_ns - s.first_ns) < 0.75 * span) return false;
            double mean = s.gap_sum / static_cast<double>(s.gaps);
            double var = s.gap_sq / static_cast<double>(s.gaps) - mean * mean;
            return mean > 0 && std::sqrt(std::max(var, 0.0)) <= 0.5 * mean;
        };
        // The loop's own token runs from its first iteration to its last: prefer the widest
        // span (within 5 %), then the fewest occurrences.
        std::uint64_t widest = 0;
        for (const auto& [token, s] : tokens_) {
            if (regular(s)) widest = std::max(widest, s.last_ns - s.first_ns);
        }
        for (const auto& [token, s] : tokens_) {
            if (!regular(s) || static_cast<double>(s.last_ns - s.first_ns) < 0.95 * static_cast<double>(widest)) {
                continue;
            }
            if (best.repetitions == 0 || s.count < best.repetitions) {
                best = DetectedPeriod{s.count, s.gap_sum / static_cast<double>(s.gaps), s.first_ns, s.last_ns};
            }
        }
        return best;
    }

    [[nodiscard]] std::size_t memory_bytes() const { return tokens_.size() * 64; }

private:
    struct Stats {
        std::uint64_t count = 0;
        std::uint64_t gaps = 0;
        std::uint64_t first_ns = 0;
        std::uint64_t last_ns = 0;
        double gap_sum = 0;
        double gap_sq = 0;
    };
    std::unordered_map<std::uint64_t, Stats> tokens_;
    std::uint64_t first_ns_ = 0;
    std::uint64_t last_ns_ = 0;
    bool seen_ = false;
};

}  // namespace gpudiag::detail
