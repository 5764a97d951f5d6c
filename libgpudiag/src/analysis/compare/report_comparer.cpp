// SPDX-License-Identifier: Apache-2.0
#include "analysis/compare/report_comparer.hpp"

#include "analysis/compare/comparability.hpp"
#include "analysis/compare/delta_builder.hpp"
#include "analysis/compare/finding_diff.hpp"
#include "analysis/compare/run_figures.hpp"
#include "analysis/compare/verdict_rules.hpp"

#include <gpudiag/report.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>

namespace gpudiag::detail {
namespace {

// What a report read back from JSON without its evidence list observed, from what it carries.
std::vector<Evidence> evidence_of(const Report& r, const RunFigures& f) {
    if (r.observed_known) return r.observed;
    std::vector<Evidence> out;
    if (f.steps > 0) out.push_back(Evidence::kSteps);
    if (f.timeline != nullptr || f.job != nullptr) out.push_back(Evidence::kGpuActivity);
    if (f.memory != nullptr) out.push_back(Evidence::kDeviceMemory);
    if (f.health != nullptr) out.push_back(Evidence::kDeviceHealth);
    return out;
}

CompareSide side_of(const Report& r, const RunFigures& f) {
    CompareSide s;
    s.description = r.source.description;
    s.producer = r.source.producer;
    s.headline = headline(r);
    s.observed = r.observed;
    s.observed_known = r.observed_known;
    for (const auto& d : r.source.devices) s.devices.push_back(describe_device(d));
    s.steps = f.steps;
    s.ranks = static_cast<std::int32_t>(r.ranks.size());
    s.software = f.software;
    return s;
}

}  // namespace

Comparison ReportComparer::run() const {
    const RunFigures b = RunFigures::read(before_);
    const RunFigures a = RunFigures::read(after_);
    Comparison c;
    c.before = side_of(before_, b);
    c.after = side_of(after_, a);
    const auto eb = evidence_of(before_, b);
    const auto ea = evidence_of(after_, a);
    for (std::size_t i = 0; i < kEvidenceKinds; ++i) {
        const auto e = static_cast<Evidence>(i);
        const bool in_b = std::find(eb.begin(), eb.end(), e) != eb.end();
        const bool in_a = std::find(ea.begin(), ea.end(), e) != ea.end();
        if (in_b && in_a) {
            c.compared.push_back(e);
        } else if (in_b || in_a) {
            c.not_compared.push_back(fmt::format("{}: only the {} run observed it",
                                                 evidence_label(e), in_b ? "before" : "after"));
        } else {
            c.not_compared.push_back(fmt::format("{}: neither run observed it", evidence_label(e)));
        }
    }
    c.reasons = ComparabilityCheck(b, a, options_).reasons(c.notes);
    if (c.compared.empty()) {
        c.reasons.push_back(CompareReason{
            "no_common_evidence",
            "the two inputs have no kind of evidence in common",
            {CompareArea::kTime, CompareArea::kGpu, CompareArea::kMemory, CompareArea::kHealth}});
    }
    c.deltas = DeltaBuilder(b, a, options_).build(c.not_compared);
    c.findings = FindingDiff(b, a).build(c.not_compared);
    VerdictRules(c).decide();
    return c;
}

}  // namespace gpudiag::detail
