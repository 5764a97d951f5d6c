// SPDX-License-Identifier: Apache-2.0
// The verdict of a comparison, the deltas that decided it, and its headline.
//
// Outcomes vote (the median step time, the memory peaks, and memory or health findings of at
// least warning severity that appeared or were resolved); causes (what a step is made of, GPU
// idle by cause, allocation sites) only explain. A vote in an area a comparability reason can
// explain makes the comparison inconclusive, and so does any compared outcome in the areas of a
// reason other than too few steps (another GPU, stack or input), moved or not. Otherwise better
// votes only give an improvement, worse only a regression, both mixed, none unchanged.
// Deciding: the outcomes that moved and the causes, largest first, that account for at least half
// of each outcome's change.
#pragma once

#include <gpudiag/compare.hpp>

#include <string>
#include <vector>

namespace gpudiag::detail {

class VerdictRules {
public:
    explicit VerdictRules(Comparison& c) : c_(c) {}

    /// Sets verdict, comparable, deciding flags and the headline.
    void decide();

private:
    struct Vote {
        CompareArea area;
        bool better;
        std::string what;  ///< "median step time 176.3 ms -> 126.6 ms (-28.2 %)"
    };

    [[nodiscard]] std::vector<Vote> votes() const;
    [[nodiscard]] bool explained(CompareArea area, bool environment_only = false) const;
    void mark_deciding();
    void mark_causes(const CompareDelta& outcome);
    void write_headline(const std::vector<Vote>& votes);
    [[nodiscard]] std::string causes_of(const CompareDelta& outcome) const;

    Comparison& c_;
};

/// "176.3 ms -> 126.6 ms (-28.2 %)": a delta as headlines and text reports say it.
std::string describe_change(const CompareDelta& d);

}  // namespace gpudiag::detail
