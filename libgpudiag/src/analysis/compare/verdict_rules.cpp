// SPDX-License-Identifier: Apache-2.0
#include "analysis/compare/verdict_rules.hpp"

#include "analysis/findings/finding_catalog.hpp"

#include "analysis/compare/finding_diff.hpp"
#include "support/format.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace gpudiag::detail {
namespace {

// A cause counts as deciding until the causes named cover this share of the outcome's change.
constexpr double kCausesCover = 0.5;
constexpr std::size_t kMaxCauses = 3;

std::string value_text(double v, Unit unit) {
    switch (unit) {
        case Unit::kNanoseconds: return format_duration_ns(v);
        case Unit::kBytes: return format_bytes(v);
        case Unit::kFraction: return format_percent(v);
        default: return format_number(v, 2);
    }
}

// Findings the environment raises (another program, the card's cooling or power, the software
// stack) are comparability reasons, not something the change under test did.
bool environmental(const std::string& id) {
    return id == finding_name(FindingId::kForeignProcessMemory) ||
           id == finding_name(FindingId::kThermalThrottle) ||
           id == finding_name(FindingId::kPowerThrottle) ||
           FindingDiff::evidence_for(id) == Evidence::kSteps;
}

// Reasons that only limit what could be measured: they make a comparison inconclusive when
// something moved that they could explain, never when nothing moved. Every other reason is a
// difference between the runs besides the change under test: with it, even unchanged figures do
// not show that the change did nothing.
bool measurement_only(const CompareReason& r) {
    return r.id == "too_few_steps";
}

bool moved(const CompareDelta& d) {
    return d.judgement == DeltaJudgement::kImproved || d.judgement == DeltaJudgement::kRegressed;
}

std::string joined_reasons(const std::vector<CompareReason>& reasons) {
    std::vector<std::string> texts;
    texts.reserve(reasons.size());
    for (const auto& r : reasons) texts.push_back(r.text);
    return fmt::format("{}", fmt::join(texts, "; "));
}

}  // namespace

std::string describe_change(const CompareDelta& d) {
    std::string s = value_text(d.before, d.unit) + " -> " + value_text(d.after, d.unit);
    if (std::isfinite(d.relative_change) && d.unit != Unit::kFraction) {
        s += fmt::format(" ({:+.1f} %)", d.relative_change * 100.0);
    }
    return s;
}

std::vector<VerdictRules::Vote> VerdictRules::votes() const {
    std::vector<Vote> out;
    for (const auto& d : c_.deltas) {
        if (!d.outcome || d.rank >= 0 || !moved(d)) continue;
        out.push_back(
            {d.area, d.judgement == DeltaJudgement::kImproved, d.label + " " + describe_change(d)});
    }
    for (const auto& f : c_.findings) {
        const Evidence e = FindingDiff::evidence_for(f.id);
        if (f.change == FindingChangeKind::kPersisted || environmental(f.id)) continue;
        if (e != Evidence::kDeviceMemory && e != Evidence::kDeviceHealth) continue;
        const bool resolved = f.change == FindingChangeKind::kResolved;
        const Severity s = resolved ? f.severity_before : f.severity_after;
        if (s == Severity::kInfo) continue;
        out.push_back({e == Evidence::kDeviceMemory ? CompareArea::kMemory : CompareArea::kHealth,
                       resolved, fmt::format("{} {}", f.id, resolved ? "resolved" : "appeared")});
    }
    return out;
}

bool VerdictRules::explained(CompareArea area, bool environment_only) const {
    for (const auto& r : c_.reasons) {
        if (environment_only && measurement_only(r)) continue;
        if (std::find(r.explains.begin(), r.explains.end(), area) != r.explains.end()) {
            return true;
        }
    }
    return false;
}

void VerdictRules::decide() {
    c_.comparable = c_.reasons.empty();
    const std::vector<Vote> v = votes();
    bool explained_change = false;
    bool better = false;
    bool worse = false;
    for (const auto& vote : v) {
        explained_change = explained_change || explained(vote.area);
        (vote.better ? better : worse) = true;
    }
    for (const auto& d : c_.deltas) {
        if (!d.outcome || d.rank >= 0) continue;
        if (d.judgement == DeltaJudgement::kNotComparable || explained(d.area, true)) {
            explained_change = true;
        }
    }
    const bool nothing =
        c_.compared.empty() || (c_.deltas.empty() && v.empty() && c_.findings.empty());
    if (nothing || explained_change) {
        c_.verdict = CompareVerdict::kInconclusive;
    } else if (better && worse) {
        c_.verdict = CompareVerdict::kMixed;
    } else if (better) {
        c_.verdict = CompareVerdict::kImprovement;
    } else if (worse) {
        c_.verdict = CompareVerdict::kRegression;
    } else {
        c_.verdict = CompareVerdict::kUnchanged;
    }
    mark_deciding();
    write_headline(v);
}

void VerdictRules::mark_deciding() {
    if (c_.verdict == CompareVerdict::kUnchanged) return;
    for (auto& d : c_.deltas) {
        if (!d.outcome || d.rank >= 0) continue;
        if (moved(d) || d.judgement == DeltaJudgement::kNotComparable) d.deciding = true;
    }
    const std::vector<CompareDelta> outcomes = c_.deltas;
    for (const auto& d : outcomes) {
        if (d.deciding && moved(d)) mark_causes(d);
    }
}

// The causes in the outcome's area that moved its way, largest first, until they cover half of
// its change.
void VerdictRules::mark_causes(const CompareDelta& outcome) {
    std::vector<CompareDelta*> causes;
    for (auto& d : c_.deltas) {
        if (d.outcome || d.rank >= 0 || d.area != outcome.area || !moved(d)) continue;
        if ((d.change < 0) != (outcome.change < 0)) continue;
        // The spread is not a part of the step; phases overlap the critical path's parts.
        if (d.key.rfind("step_time_spread", 0) == 0 || d.key.rfind("phase:", 0) == 0) continue;
        causes.push_back(&d);
    }
    std::stable_sort(causes.begin(), causes.end(), [](const auto* a, const auto* b) {
        return std::fabs(a->change) > std::fabs(b->change);
    });
    double covered = 0;
    for (std::size_t i = 0; i < causes.size() && i < kMaxCauses; ++i) {
        if (covered >= kCausesCover * std::fabs(outcome.change)) break;
        causes[i]->deciding = true;
        covered += std::fabs(causes[i]->change);
    }
}

std::string VerdictRules::causes_of(const CompareDelta& outcome) const {
    std::vector<std::string> parts;
    for (const auto& d : c_.deltas) {
        if (d.deciding && !d.outcome && d.area == outcome.area && d.rank < 0) {
            parts.push_back(d.label + " " + describe_change(d));
        }
    }
    if (parts.empty()) return {};
    return fmt::format(", mostly from {}", fmt::join(parts, " and "));
}

void VerdictRules::write_headline(const std::vector<Vote>& votes) {
    const bool inconclusive = c_.verdict == CompareVerdict::kInconclusive;
    std::vector<std::string> moved_outcomes;
    for (const auto& d : c_.deltas) {
        if (!d.deciding || !d.outcome) continue;
        if (inconclusive && moved_outcomes.size() >= kMaxCauses) break;
        moved_outcomes.push_back(d.label + " " + describe_change(d) +
                                 (inconclusive ? std::string() : causes_of(d)));
    }
    for (const auto& v : votes) {
        if (v.what.find(" appeared") != std::string::npos ||
            v.what.find(" resolved") != std::string::npos) {
            moved_outcomes.push_back(v.what);
        }
    }
    const std::string what = fmt::format("{}", fmt::join(moved_outcomes, "; "));
    switch (c_.verdict) {
        case CompareVerdict::kUnchanged:
            c_.headline =
                fmt::format("Unchanged: no figure moved beyond the runs' own noise ({} compared)",
                            c_.deltas.size());
            break;
        case CompareVerdict::kInconclusive:
            if (c_.compared.empty()) {
                c_.headline = "Inconclusive: the two inputs have no kind of evidence in common";
            } else if (c_.reasons.empty()) {
                c_.headline = "Inconclusive: the two inputs have no figure measured alike";
            } else if (what.empty()) {
                c_.headline = "Inconclusive: the runs differ in more than the change under test: " +
                              joined_reasons(c_.reasons);
            } else {
                c_.headline = fmt::format("Inconclusive: {}{}{}", what,
                                          what.empty() ? "" : ", but ", joined_reasons(c_.reasons));
            }
            break;
        default: {
            std::string word = enum_name(c_.verdict);
            word[0] = static_cast<char>(word[0] - 'a' + 'A');
            c_.headline = fmt::format("{}: {}", word, what);
        }
    }
    if (!c_.comparable && c_.verdict != CompareVerdict::kInconclusive) {
        std::vector<std::string> ids;
        for (const auto& r : c_.reasons) ids.push_back(r.id);
        c_.headline += fmt::format(" (not comparable in every respect: {})", fmt::join(ids, ", "));
    }
    c_.headline += '.';
}

}  // namespace gpudiag::detail
