// SPDX-License-Identifier: Apache-2.0
// Two reports -> one Comparison: reads both runs' figures, checks that they can be compared,
// judges every figure both have against the runs' own noise, diffs the findings and decides.
#pragma once

#include <gpudiag/compare.hpp>
#include <gpudiag/report.hpp>

namespace gpudiag::detail {

class ReportComparer {
public:
    ReportComparer(const Report& before, const Report& after, const CompareOptions& options)
        : before_(before), after_(after), options_(options) {}

    /// The comparison. Throws only std::bad_alloc (the API entry turns it into a status).
    [[nodiscard]] Comparison run() const;

private:
    const Report& before_;
    const Report& after_;
    const CompareOptions& options_;
};

}  // namespace gpudiag::detail
