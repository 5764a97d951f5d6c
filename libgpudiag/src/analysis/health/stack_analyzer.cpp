// SPDX-License-Identifier: Apache-2.0
// StackAnalyzer.
#include "analysis/health/stack_analyzer.hpp"

#include "analysis/findings/finding_catalog.hpp"
#include "analysis/health/stack_rules.hpp"

#include <optional>

namespace gpudiag::detail {
namespace {

// A framework that cannot start CUDA, or a CUPTI that cannot attach, loses everything GPU-side;
// the others lose part of it.
Severity severity_of(std::optional<FindingId> id) {
    if (id == FindingId::kDriverTooOldForFramework || id == FindingId::kCuptiNewerThanDriver ||
        id == FindingId::kSecondCupti) {
        return Severity::kCritical;
    }
    return Severity::kWarning;
}

}  // namespace

void StackAnalyzer::contribute(Report& report) {
    SoftwareStack stack = stack_from_properties(report.source);
    for (StackIssue& issue : check_stack(stack)) {
        Finding f;
        f.id = issue.id;
        f.severity = severity_of(finding_id(issue.id));
        f.title = std::move(issue.title);
        f.summary = std::move(issue.problem);
        f.advice.push_back(std::move(issue.fix));
        report.findings.push_back(std::move(f));
    }
}

}  // namespace gpudiag::detail
