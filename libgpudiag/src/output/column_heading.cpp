// SPDX-License-Identifier: Apache-2.0
// column_heading: a table column's key as reports head it. Keys spell their unit ("step_time_ns")
// so they stay unambiguous in JSON; the cells below already print it ("615.1 ms"), so the heading
// drops the word that restates the declared unit and reads as words ("step time").
#include <gpudiag/report.hpp>

#include <exception>
#include <vector>

namespace gpudiag {
namespace {

// The key's words that name `unit` itself.
bool names_unit(std::string_view word, Unit unit) noexcept {
    switch (unit) {
        case Unit::kNanoseconds: return word == "ns";
        case Unit::kMicroseconds: return word == "us";
        case Unit::kMilliseconds: return word == "ms";
        case Unit::kSeconds: return word == "s" || word == "seconds";
        case Unit::kBytes: return word == "bytes";
        case Unit::kPercent: return word == "pct" || word == "percent";
        default: return false;
    }
}

// A snake_case key ("step_time_ns", "timeline.step_time_ns") reads as words; anything else is a
// name (an allocation site "cs336_basics/nn_utils.py:7 softmax", "other sites") whose underscores
// are its own.
bool snake_case_key(std::string_view key) noexcept {
    for (char c : key) {
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.'))
            return false;
    }
    return true;
}

std::string heading(std::string_view key, Unit unit) {
    if (!snake_case_key(key)) return std::string(key);
    std::vector<std::string_view> words;
    for (std::size_t start = 0; start <= key.size();) {
        std::size_t end = key.find('_', start);
        if (end == std::string_view::npos) end = key.size();
        if (end > start) words.push_back(key.substr(start, end - start));
        start = end + 1;
    }
    std::string out;
    for (std::string_view w : words) {
        if (names_unit(w, unit)) continue;
        if (!out.empty()) out += ' ';
        out += w;
    }
    return out.empty() ? std::string(key) : out;  // "bytes" in bytes stays "bytes"
}

}  // namespace

std::string column_heading(std::string_view key, Unit unit) noexcept {
    try {
        return heading(key, unit);
    } catch (const std::exception&) {
        return {};
    }
}

std::string column_heading(std::string_view key, std::string_view unit) noexcept {
    return column_heading(key, unit_from_name(unit));
}

}  // namespace gpudiag
