// SPDX-License-Identifier: Apache-2.0
// The order findings are reported in: what to act on first.
#include <gpudiag/report.hpp>

#include <algorithm>

namespace gpudiag {
namespace {

// 0: a failure (critical, with no time to win: the program cannot run as it is), 1: costs time
// (a predicted saving), 2: the rest.
int tier(const Finding& f) {
    if (f.saving_ns() >= 0) return 1;
    return f.severity == Severity::kCritical ? 0 : 2;
}

}  // namespace

void rank_findings(std::vector<Finding>& findings) noexcept {
    // stable_sort may allocate a buffer; without one it falls back to an in-place merge sort.
    std::stable_sort(findings.begin(), findings.end(), [](const Finding& a, const Finding& b) {
        const int ta = tier(a);
        const int tb = tier(b);
        if (ta != tb) return ta < tb;
        if (ta == 1 && a.saving_ns() != b.saving_ns()) return a.saving_ns() > b.saving_ns();
        return a.severity > b.severity;
    });
}

}  // namespace gpudiag
