// SPDX-License-Identifier: Apache-2.0
#include "analysis/compare/finding_diff.hpp"

#include "analysis/findings/finding_catalog.hpp"

#include <fmt/format.h>

namespace gpudiag::detail {
namespace {

bool could_see(const Report& report, Evidence e) {
    return !report.observed_known || report.saw(e);
}

// The allocator's own figures (a snapshot, a recording, a trace with allocator totals), rather
// than a running sum of allocation events: memory findings of one kind are not the other's.
bool allocator_level(const RunFigures& run) {
    return run.figure(run.memory, "peak_reserved_bytes") != nullptr;
}

const Finding* find(const Report& report, const std::string& id, std::int32_t rank) {
    for (const auto& f : report.findings) {
        if (f.id == id && f.rank == rank) return &f;
    }
    return nullptr;
}

FindingChange change_of(const Finding* b, const Finding* a) {
    FindingChange c;
    const Finding* any = b != nullptr ? b : a;
    c.id = any->id;
    c.rank = any->rank;
    c.change = b == nullptr   ? FindingChangeKind::kAppeared
               : a == nullptr ? FindingChangeKind::kResolved
                              : FindingChangeKind::kPersisted;
    if (b != nullptr) {
        c.severity_before = b->severity;
        c.title_before = b->title;
        c.saving_before_ns = b->saving_ns();
    }
    if (a != nullptr) {
        c.severity_after = a->severity;
        c.title_after = a->title;
        c.saving_after_ns = a->saving_ns();
    }
    return c;
}

}  // namespace

Evidence FindingDiff::evidence_for(const std::string& id) {
    if (id == finding_name(FindingId::kInputBound)) return Evidence::kInputWaits;
    const auto known = finding_id(id);
    if (!known) return Evidence::kGpuActivity;
    switch (finding_area(*known)) {
        case FindingArea::kMemory: return Evidence::kDeviceMemory;
        case FindingArea::kHealth: return Evidence::kDeviceHealth;
        case FindingArea::kStack: return Evidence::kSteps;
        case FindingArea::kTimeline:
        case FindingArea::kJob: break;
    }
    return Evidence::kGpuActivity;
}

std::vector<FindingChange> FindingDiff::build(std::vector<std::string>& not_compared) const {
    std::vector<FindingChange> out;
    const Report& before = *before_.report;
    const Report& after = *after_.report;
    const bool memory_alike = allocator_level(before_) == allocator_level(after_);
    auto comparable = [&](Evidence e, const Report& other) {
        if (e == Evidence::kSteps) return true;
        return could_see(other, e) && (e != Evidence::kDeviceMemory || memory_alike);
    };
    for (const auto& b : before.findings) {
        const Finding* a = find(after, b.id, b.rank);
        const Evidence e = evidence_for(b.id);
        if (a == nullptr && !comparable(e, after)) {
            not_compared.push_back(fmt::format(
                "finding {} (before): the after run has no {} measured alike that could show it",
                b.id, evidence_label(e)));
            continue;
        }
        out.push_back(change_of(&b, a));
    }
    for (const auto& a : after.findings) {
        if (find(before, a.id, a.rank) != nullptr) continue;
        const Evidence e = evidence_for(a.id);
        if (!comparable(e, before)) {
            not_compared.push_back(fmt::format(
                "finding {} (after): the before run has no {} measured alike that could show it",
                a.id, evidence_label(e)));
            continue;
        }
        out.push_back(change_of(nullptr, &a));
    }
    return out;
}

}  // namespace gpudiag::detail
