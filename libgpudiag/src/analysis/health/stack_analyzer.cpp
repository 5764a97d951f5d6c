// SPDX-License-Identifier: Apache-2.0
// StackAnalyzer.
#include "analysis/health/stack_analyzer.hpp"

#include "capture/stack_verdict.hpp"

namespace gpudiag::detail {
namespace {

// A framework that cannot start CUDA, or a CUPTI that cannot attach, loses everything GPU-side;
// the others lose part of it.
Severity severity_of(const std::string& id) {
    if (id == "driver_too_old_for_framework" || id == "cupti_newer_than_driver" ||
        id == "second_cupti") {
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
        f.severity = severity_of(issue.id);
        f.title = std::move(issue.title);
        f.summary = std::move(issue.problem);
        f.advice.push_back(std::move(issue.fix));
        report.findings.push_back(std::move(f));
    }
}

}  // namespace gpudiag::detail
