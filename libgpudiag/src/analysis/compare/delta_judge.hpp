// SPDX-License-Identifier: Apache-2.0
// Judges one compared figure: how large a change must be before it counts, and which way it went.
//
// The rule: a change counts when it exceeds both
//  * noise_multiplier (3) standard errors of the difference, where the standard errors come from
//    the runs' own step-to-step spread (per-step figures: the medians' standard errors; a figure
//    without per-step values: what its own basis says), and
//  * min_relative_change (1 %) of the before value: no one acts on less, and clocks, sampling and
//    the allocator's rounding move figures by that much between identical runs.
// A change inside that is noise; a change beyond it with no noise estimate at all (no steps) is
// not comparable rather than a verdict.
#pragma once

#include <gpudiag/compare.hpp>

#include <string>
#include <vector>

namespace gpudiag::detail {

class DeltaJudge {
public:
    explicit DeltaJudge(const CompareOptions& options) : options_(options) {}

    /// A per-step figure: the difference of the two runs' medians, judged against their spread.
    [[nodiscard]] CompareDelta per_step(const std::vector<double>& before,
                                        const std::vector<double>& after,
                                        bool lower_is_better = true) const;
    /// The spread of a per-step figure itself (is the run steadier?).
    [[nodiscard]] CompareDelta spread(const std::vector<double>& before,
                                      const std::vector<double>& after,
                                      bool lower_is_better = true) const;
    /// A single figure each side: `noise` is the smallest change its basis says is real (0: none
    /// known, only the relative floor applies); `known_noise` false when the noise could not be
    /// estimated (a change beyond the floor is then not comparable).
    [[nodiscard]] CompareDelta single(double before, double after, double noise, std::string basis,
                                      bool known_noise, bool lower_is_better = true) const;

    /// Sets `judgement` from before, after, noise and lower_is_better.
    void judge(CompareDelta& d, bool known_noise) const;

private:
    [[nodiscard]] double floor(double before) const;

    const CompareOptions& options_;
};

}  // namespace gpudiag::detail
