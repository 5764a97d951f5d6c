// SPDX-License-Identifier: Apache-2.0
#include "core/range_names.hpp"

#include <cctype>
#include <cstdint>

namespace gpudiag::detail {
namespace {

bool starts_with(std::string_view s, std::string_view p) noexcept {
    return s.size() >= p.size() && s.compare(0, p.size(), p) == 0;
}

// An optionally negative decimal integer, nothing else, within int64.
bool parse_number(std::string_view digits, std::int64_t& n) noexcept {
    std::size_t i = 0;
    const bool negative = !digits.empty() && digits[0] == '-';
    if (negative) ++i;
    if (i == digits.size()) return false;
    std::int64_t v = 0;
    for (; i < digits.size(); ++i) {
        char c = digits[i];
        if (c < '0' || c > '9' || v > (INT64_MAX - 9) / 10) return false;
        v = v * 10 + (c - '0');
    }
    n = negative ? -v : v;
    return true;
}

bool equal_ci(std::string_view a, std::string_view b) noexcept {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (std::tolower(static_cast<unsigned char>(a[i])) !=
            std::tolower(static_cast<unsigned char>(b[i]))) {
            return false;
        }
    }
    return true;
}

// "<word><separators><number>": "step 12", "Step#12", "iteration_3".
bool numbered(std::string_view name, std::string_view word, std::int64_t& n) noexcept {
    if (name.size() <= word.size() || !equal_ci(name.substr(0, word.size()), word)) return false;
    std::size_t at = word.size();
    std::size_t separators = 0;
    while (at < name.size() && (name[at] == ' ' || name[at] == '#' || name[at] == '_' ||
                                name[at] == ':' || name[at] == '-' || name[at] == '=')) {
        ++at;
        ++separators;
    }
    return separators > 0 && separators <= 3 && parse_number(name.substr(at), n);
}

}  // namespace

RangeMeaning range_meaning(std::string_view name) noexcept {
    RangeMeaning m;
    if (starts_with(name, "ProfilerStep#") && parse_number(name.substr(13), m.step)) {
        m.known = true;
        m.category = RangeCategory::kStep;
        return m;
    }
    // torch.utils.data wraps every batch fetch in this record_function; Lightning's profiler
    // action names the same wait.
    if (starts_with(name, "enumerate(DataLoader)#") ||
        name.find("train_dataloader_next") != std::string_view::npos) {
        m.known = true;
        m.category = RangeCategory::kInputWait;
        return m;
    }
    if (starts_with(name, "nccl:") || starts_with(name, "gloo:") || starts_with(name, "c10d::") ||
        starts_with(name, "record_param_comms")) {
        m.known = true;
        m.category = RangeCategory::kCommunication;
    }
    return m;
}

RangeMeaning nvtx_range_meaning(std::string_view name) noexcept {
    RangeMeaning m = range_meaning(name);
    if (m.known) return m;
    for (std::string_view word : {"step", "iteration", "iter"}) {
        if (numbered(name, word, m.step)) {
            m.known = true;
            m.category = RangeCategory::kStep;
            return m;
        }
    }
    for (std::string_view phase : {"forward", "backward", "optimizer", "optimizer.step",
                                   "optimizer_step", "zero_grad", "prefill", "decode"}) {
        if (equal_ci(name, phase)) {
            m.known = true;
            m.category = RangeCategory::kPhase;
            return m;
        }
    }
    return m;
}

}  // namespace gpudiag::detail
