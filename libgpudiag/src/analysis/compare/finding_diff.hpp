// SPDX-License-Identifier: Apache-2.0
// The findings of two runs side by side: which appeared, which were resolved, which persisted
// (with their predicted savings before and after). A finding counts as resolved only when the
// after run had the evidence that could have shown it; otherwise it was not compared.
#pragma once

#include "analysis/compare/run_figures.hpp"

#include <gpudiag/compare.hpp>
#include <gpudiag/report.hpp>

#include <string>
#include <vector>

namespace gpudiag::detail {

class FindingDiff {
public:
    FindingDiff(const RunFigures& before, const RunFigures& after)
        : before_(before), after_(after) {}

    [[nodiscard]] std::vector<FindingChange> build(std::vector<std::string>& not_compared) const;

    /// The evidence a report needs to raise finding `id` (kSteps for a finding that needs none).
    static Evidence evidence_for(const std::string& id);

private:
    const RunFigures& before_;
    const RunFigures& after_;
};

}  // namespace gpudiag::detail
