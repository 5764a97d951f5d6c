// SPDX-License-Identifier: Apache-2.0
// describe_saving: the one sentence that says what fixing a finding is worth (text report, HTML
// report); the finding's summary says why, never the number again.
#include <gpudiag/report.hpp>

#include <exception>

namespace gpudiag {
namespace {

const Figure* find(const std::vector<Figure>& figures, std::string_view key) noexcept {
    for (const auto& f : figures) {
        if (f.key == key) return &f;
    }
    return nullptr;
}

std::string sentence(const std::vector<Figure>& predicted) {
    const Figure* saving = find(predicted, "saving_ns");
    if (saving == nullptr) return {};
    const Figure* share = find(predicted, "share");
    const Figure* step = find(predicted, "step_time_ns");
    const std::string per =
        saving->label.find("per step") != std::string::npos ? " per step" : " over the window";
    if (!(saving->value > 0)) {
        std::string out =
            "Fixing this alone saves nothing" + per + " now: it is off the critical path";
        if (step != nullptr) out += " (" + format_figure(step->value, step->unit) + " either way)";
        return out;
    }
    std::string out = "Fixing this saves about " + format_figure(saving->value, saving->unit) + per;
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
        return sentence(predicted_saving);
    } catch (const std::exception&) {
        return {};
    }
}

}  // namespace gpudiag
