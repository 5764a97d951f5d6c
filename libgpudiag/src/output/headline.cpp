// SPDX-License-Identifier: Apache-2.0
// The first line of every report: what was found, and in what evidence. A report that found
// nothing says which kinds of evidence its input lacked, so "no finding" is never read as "no
// problem" for what was never seen.
#include <gpudiag/report.hpp>

#include <fmt/format.h>

#include <string>
#include <vector>

namespace gpudiag {
namespace {

// "a", "a and b", "a, b and c".
std::string join_words(const std::vector<std::string>& words) {
    std::string out;
    for (std::size_t i = 0; i < words.size(); ++i) {
        if (i > 0) out += i + 1 == words.size() ? " and " : ", ";
        out += words[i];
    }
    return out;
}

std::vector<std::string> labels(const Report& r, bool present) {
    std::vector<std::string> out;
    for (const auto& entry : enum_names<Evidence>()) {
        if (r.saw(entry.value) == present) out.emplace_back(evidence_label(entry.value));
    }
    return out;
}

// A job's own findings stand for its ranks' ("On 8 of 8 ranks: ..."); a job without any of its
// own counts its ranks'.
void count_findings(const Report& r, std::size_t& count, Severity& worst) {
    for (const auto& f : r.findings) {
        ++count;
        if (f.severity > worst) worst = f.severity;
    }
    if (!r.findings.empty()) return;
    for (const auto& rank : r.ranks) count_findings(rank, count, worst);
}

// "; GPU activity and device memory were not observed", or "" when nothing was missing.
std::string not_observed(const Report& r) {
    if (!r.observed_known) return {};
    const auto missing = labels(r, false);
    if (missing.empty()) return {};
    return "; " + join_words(missing) + (missing.size() == 1 ? " was" : " were") + " not observed";
}

std::string no_findings(const Report& r) {
    const std::string scope = r.input.complete ? "" : " in the part that could be read";
    if (!r.observed_known || r.observed.size() == kEvidenceKinds) {
        return "No problems found" + scope + ".";
    }
    if (r.observed.empty()) {
        return "No problems could be looked for" + scope + ": " + join_words(labels(r, false)) +
               " were not observed.";
    }
    return "No problems found" + scope + (scope.empty() ? " in " : ", in ") +
           join_words(labels(r, true)) + not_observed(r) + ".";
}

}  // namespace

const char* evidence_label(Evidence e) noexcept {
    switch (e) {
        case Evidence::kSteps: return "steps";
        case Evidence::kInputWaits: return "input waits";
        case Evidence::kGpuActivity: return "GPU activity";
        case Evidence::kDeviceMemory: return "device memory";
        case Evidence::kDeviceHealth: return "device health";
    }
    return "unknown";
}

std::string headline(const Report& report) noexcept {
    try {
        std::size_t count = 0;
        Severity worst = Severity::kInfo;
        count_findings(report, count, worst);
        if (count == 0 && report.input.events == 0) {
            return report.input.complete
                       ? "Nothing was observed: the input holds no events, so there is nothing "
                         "to diagnose."
                       : "Nothing was observed in the part that could be read: it holds no "
                         "events, so there is nothing to diagnose.";
        }
        if (count == 0) return no_findings(report);
        return fmt::format("{} {} found, {}{}{}.", count, count == 1 ? "problem" : "problems",
                           count == 1 ? "" : "the worst ", severity_name(worst),
                           not_observed(report));
    } catch (...) {
        return {};
    }
}

}  // namespace gpudiag
