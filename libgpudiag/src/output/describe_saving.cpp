// SPDX-License-Identifier: Apache-2.0
// describe_saving: the one sentence that says what fixing a finding is worth (text report, HTML
// report); the finding's summary says why, never the number again.
#include <gpudiag/report.hpp>

#include <exception>
#include <string>
#include <vector>

namespace gpudiag {
namespace {

const Figure* find(const std::vector<Figure>& figures, std::string_view key) noexcept {
    for (const auto& f : figures) {
        if (f.key == key) return &f;
    }
    return nullptr;
}

// `what`: "this" for one finding, "every cause of lost time above together" for the report's
// fix-all saving.
std::string sentence(const std::vector<Figure>& predicted, const std::string& what) {
    const Figure* saving = find(predicted, saving_keys::kSavingNs);
    if (saving == nullptr) return {};
    const Figure* share = find(predicted, saving_keys::kShare);
    const Figure* step = find(predicted, saving_keys::kStepTimeNs);
    const std::string per =
        saving->label.find("per step") != std::string::npos ? " per step" : " over the window";
    if (!(saving->value > 0)) {
        std::string out = "Fixing " + what + (what == "this" ? " alone" : "") + " saves nothing" +
                          per + " now: " + (what == "this" ? "it is" : "they are") +
                          " off the critical path";
        if (step != nullptr) out += " (" + format_figure(step->value, step->unit) + " either way)";
        return out;
    }
    std::string out =
        "Fixing " + what + " saves about " + format_figure(saving->value, saving->unit) + per;
    if (share != nullptr) out += " (" + format_figure(share->value, share->unit) + ")";
    if (step != nullptr) {
        out += ": " + format_figure(step->value + saving->value, step->unit) + " -> " +
               format_figure(step->value, step->unit);
    }
    return out;
}

}  // namespace

std::string describe_saving(const std::vector<Figure>& predicted_saving) noexcept {
    try {
        return sentence(predicted_saving, "this");
    } catch (const std::exception&) {
        return {};
    }
}

std::string describe_fix_all(const std::vector<Figure>& fix_all_saving) noexcept {
    try {
        return sentence(fix_all_saving, "every cause of lost time above together");
    } catch (const std::exception&) {
        return {};
    }
}

std::string describe_shared_saving(const std::vector<std::string>& shared_with) noexcept {
    try {
        if (shared_with.empty()) return {};
        std::string ids;
        for (std::size_t i = 0; i < shared_with.size(); ++i) {
            if (i > 0) ids += i + 1 == shared_with.size() ? " and " : ", ";
            ids += shared_with[i] + "'s";
        }
        return "It comes from the same time as " + ids + " saving" +
               (shared_with.size() > 1 ? "s" : "") + ": they do not add up.";
    } catch (const std::exception&) {
        return {};
    }
}

}  // namespace gpudiag
