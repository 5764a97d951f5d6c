// SPDX-License-Identifier: Apache-2.0
// Every figure both runs have, compared: step time (median and spread) and what it is made of
// (the critical path's parts), GPU busy and idle by cause, memory peaks, fragmentation and the
// peak's allocation sites, the card's throttling and other processes, and a job's ranks. Each
// delta carries the noise it was judged against; what one run lacks is said, not compared.
#pragma once

#include "analysis/compare/delta_judge.hpp"
#include "analysis/compare/run_figures.hpp"

#include <gpudiag/compare.hpp>

#include <string>
#include <vector>

namespace gpudiag::detail {

class DeltaBuilder {
public:
    DeltaBuilder(const RunFigures& before, const RunFigures& after, const CompareOptions& options)
        : before_(before), after_(after), options_(options), judge_(options) {}

    /// The deltas, outcomes first; `not_compared` gets the figures one run could not give.
    [[nodiscard]] std::vector<CompareDelta> build(std::vector<std::string>& not_compared) const;

private:
    [[nodiscard]] bool steps_enough() const;
    void step_deltas(std::vector<CompareDelta>& out) const;
    void window_deltas(std::vector<CompareDelta>& out) const;
    void memory_deltas(std::vector<CompareDelta>& out, std::vector<std::string>& nc) const;
    void phase_deltas(std::vector<CompareDelta>& out, const CompareDelta& step) const;
    void site_deltas(std::vector<CompareDelta>& out, double noise, const std::string& basis) const;
    void health_deltas(std::vector<CompareDelta>& out) const;
    void rank_deltas(std::vector<CompareDelta>& out) const;
    [[nodiscard]] double memory_noise(std::string& basis) const;

    const RunFigures& before_;
    const RunFigures& after_;
    const CompareOptions& options_;
    DeltaJudge judge_;
};

}  // namespace gpudiag::detail
