// SPDX-License-Identifier: Apache-2.0
// Parsing of the caching allocator's settings, with torch's own range checks.
#include "analysis/allocator/allocator_settings.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstdlib>
#include <vector>

namespace gpudiag::detail {
namespace {

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

bool parse_uint(std::string_view s, std::uint64_t& out) {
    s = trim(s);
    if (s.empty()) return false;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && end == s.data() + s.size();
}

bool parse_double(std::string_view s, double& out) {
    std::string text(trim(s));
    if (text.empty()) return false;
    char* end = nullptr;
    out = std::strtod(text.c_str(), &end);
    return end == text.c_str() + text.size();
}

bool parse_bool(std::string_view s, bool& out) {
    s = trim(s);
    if (s == "True" || s == "true" || s == "1") {
        out = true;
        return true;
    }
    if (s == "False" || s == "false" || s == "0") {
        out = false;
        return true;
    }
    return false;
}

// Index of the power-of-two interval a value in MiB names (torch: floor(log2(value)), clamped).
std::size_t interval_index(std::uint64_t mib) {
    std::size_t index = mib == 0 ? 0 : static_cast<std::size_t>(std::bit_width(mib) - 1);
    return std::min(index, kRoundupIntervals - 1);
}

// "4" (every interval) or "[256:1,512:2,>:4]": the first entry also covers the intervals below
// it, ">" fills from the last named interval to the end (torch's parseRoundUpPower2Divisions).
Status parse_divisions(std::string_view value, AllocatorSettings& s) {
    value = trim(value);
    std::uint64_t all = 0;
    if (parse_uint(value, all)) {
        if (all != 0 && !std::has_single_bit(all)) {
            return invalid_argument("roundup_power2_divisions: " + std::string(value) +
                                    " is not a power of 2");
        }
        s.roundup_power2_divisions.fill(static_cast<std::uint32_t>(all));
        return Status::ok();
    }
    if (value.size() < 2 || value.front() != '[' || value.back() != ']') {
        return invalid_argument(
            "roundup_power2_divisions: expected N or [size_mb:N,...,>:N], got " +
            std::string(value));
    }
    std::string_view list = value.substr(1, value.size() - 2);
    bool first = true;
    std::size_t last_index = 0;
    while (!list.empty()) {
        std::size_t comma = list.find(',');
        std::string_view item = trim(list.substr(0, comma));
        list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
        std::size_t colon = item.find(':');
        std::uint64_t divisions = 0;
        if (colon == std::string_view::npos || !parse_uint(item.substr(colon + 1), divisions) ||
            (divisions != 0 && !std::has_single_bit(divisions))) {
            return invalid_argument("roundup_power2_divisions: bad entry '" + std::string(item) +
                                    "' (divisions must be 0 or a power of 2)");
        }
        std::string_view interval = trim(item.substr(0, colon));
        auto d = static_cast<std::uint32_t>(divisions);
        if (interval == ">") {
            std::fill(s.roundup_power2_divisions.begin() + static_cast<std::ptrdiff_t>(last_index),
                      s.roundup_power2_divisions.end(), d);
            continue;
        }
        std::uint64_t mib = 0;
        if (!parse_uint(interval, mib) || !std::has_single_bit(mib)) {
            return invalid_argument("roundup_power2_divisions: interval '" + std::string(interval) +
                                    "' is not a power of 2 (in MB)");
        }
        std::size_t index = interval_index(mib);
        if (first) {
            std::fill(s.roundup_power2_divisions.begin(),
                      s.roundup_power2_divisions.begin() + static_cast<std::ptrdiff_t>(index), d);
            first = false;
        }
        s.roundup_power2_divisions[index] = d;
        last_index = index;
    }
    return Status::ok();
}

Status size_in_mib(std::string_view key, std::string_view value, std::uint64_t minimum_mib,
                   std::uint64_t& out) {
    std::uint64_t mib = 0;
    if (!parse_uint(value, mib)) {
        return invalid_argument(std::string(key) + ": expected a size in MB, got '" +
                                std::string(value) + "'");
    }
    if (mib < minimum_mib) {
        return invalid_argument(
            fmt::format("{} too small: must be >= {} (torch refuses smaller)", key, minimum_mib));
    }
    out = std::min(mib, kNoSplitLimit / kMiB) * kMiB;
    return Status::ok();
}

// Options that do not change which blocks and segments the device allocator uses.
bool ignored_option(std::string_view key) {
    return key == "release_lock_on_cudamalloc" || key == "release_lock_on_hipmalloc" ||
           key.rfind("pinned_", 0) == 0 || key == "graph_capture_record_stream_reuse";
}

}  // namespace

std::uint32_t AllocatorSettings::divisions_for(std::uint64_t size) const {
    // torch indexes by floor(log2(size)) counted from 1 MiB, clamped to the table.
    int log_size = size == 0 ? 0 : static_cast<int>(std::bit_width(size)) - 1;
    int index = std::clamp(log_size - 20, 0, static_cast<int>(kRoundupIntervals) - 1);
    return roundup_power2_divisions[static_cast<std::size_t>(index)];
}

std::string AllocatorSettings::to_conf() const {
    const AllocatorSettings defaults;
    std::vector<std::string> parts;
    if (expandable_segments) parts.emplace_back("expandable_segments:True");
    if (max_split_size != kNoSplitLimit) {
        parts.push_back(fmt::format("max_split_size_mb:{}", max_split_size / kMiB));
    }
    if (max_non_split_rounding_size != defaults.max_non_split_rounding_size) {
        parts.push_back(
            fmt::format("max_non_split_rounding_mb:{}", max_non_split_rounding_size / kMiB));
    }
    if (garbage_collection_threshold > 0) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%g", garbage_collection_threshold);
        parts.push_back(std::string("garbage_collection_threshold:") + buf);
    }
    if (roundup_power2_divisions != defaults.roundup_power2_divisions) {
        bool uniform =
            std::all_of(roundup_power2_divisions.begin(), roundup_power2_divisions.end(),
                        [&](std::uint32_t d) { return d == roundup_power2_divisions[0]; });
        std::string text = "roundup_power2_divisions:";
        if (uniform) {
            text += fmt::to_string(roundup_power2_divisions[0]);
        } else {
            text += '[';
            for (std::size_t i = 0; i < kRoundupIntervals; ++i) {
                if (i > 0) text += ',';
                text += fmt::format("{}:{}", std::uint64_t{1} << i, roundup_power2_divisions[i]);
            }
            text += ']';
        }
        parts.push_back(std::move(text));
    }
    if (large_segment_size != defaults.large_segment_size) {
        parts.push_back(fmt::format("large_segment_size_mb:{}", large_segment_size / kMiB));
    }
    if (memory_fraction < 1.0) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%g", memory_fraction);
        parts.push_back(std::string("per_process_memory_fraction:") + buf);
    }
    std::string out;
    for (const auto& p : parts) {
        if (!out.empty()) out += ',';
        out += p;
    }
    return out;
}

Status set_allocator_option(AllocatorSettings& s, std::string_view key, std::string_view value) {
    key = trim(key);
    value = trim(value);
    if (key == "expandable_segments") {
        if (!parse_bool(value, s.expandable_segments)) {
            return invalid_argument("expandable_segments: expected True or False, got '" +
                                    std::string(value) + "'");
        }
        return Status::ok();
    }
    if (key == "max_split_size_mb") {
        if (value == "none" || value == "None" || value == "-1") {
            s.max_split_size = kNoSplitLimit;
            return Status::ok();
        }
        // torch: at least the large segment size (20 MiB by default).
        return size_in_mib(key, value, s.large_segment_size / kMiB, s.max_split_size);
    }
    if (key == "max_non_split_rounding_mb") {
        return size_in_mib(key, value, 20, s.max_non_split_rounding_size);
    }
    if (key == "large_segment_size_mb") {
        return size_in_mib(key, value, 2, s.large_segment_size);
    }
    if (key == "garbage_collection_threshold") {
        double t = 0;
        if (!parse_double(value, t) || t < 0 || t >= 1.0) {
            return invalid_argument(
                "garbage_collection_threshold: expected a value in (0, 1), got '" +
                std::string(value) + "'");
        }
        s.garbage_collection_threshold = t;
        return Status::ok();
    }
    if (key == "roundup_power2_divisions") return parse_divisions(value, s);
    if (key == "per_process_memory_fraction" || key == "memory_fraction") {
        double f = 0;
        if (!parse_double(value, f) || f <= 0 || f > 1.0) {
            return invalid_argument(
                "per_process_memory_fraction: expected a value in (0, 1], got '" +
                std::string(value) + "'");
        }
        s.memory_fraction = f;
        return Status::ok();
    }
    if (key == "backend") {
        if (value == "native") return Status::ok();
        return unsupported("backend:" + std::string(value) +
                           " is a different allocator (the driver's stream-ordered pool); only "
                           "the native caching allocator is modelled");
    }
    if (ignored_option(key)) return Status::ok();
    return invalid_argument("unknown allocator option '" + std::string(key) +
                            "' (expected expandable_segments, max_split_size_mb, "
                            "garbage_collection_threshold, roundup_power2_divisions, "
                            "max_non_split_rounding_mb, large_segment_size_mb or "
                            "per_process_memory_fraction)");
}

Status apply_allocator_conf(AllocatorSettings& s, std::string_view conf) {
    conf = trim(conf);
    if (conf.empty()) return Status::ok();
    // One "key=value" (the CLI's --set form).
    std::size_t eq = conf.find('=');
    if (eq != std::string_view::npos && conf.find(':') > eq) {
        return set_allocator_option(s, conf.substr(0, eq), conf.substr(eq + 1));
    }
    // "key:value,key:value", where a bracketed value may hold commas and colons of its own.
    std::size_t pos = 0;
    while (pos < conf.size()) {
        std::size_t colon = conf.find(':', pos);
        if (colon == std::string_view::npos) {
            return invalid_argument("allocator settings: expected key:value in '" +
                                    std::string(conf.substr(pos)) + "'");
        }
        std::size_t end = colon + 1;
        while (end < conf.size() && conf[end] == ' ') ++end;
        if (end < conf.size() && conf[end] == '[') {
            end = conf.find(']', end);
            if (end == std::string_view::npos) {
                return invalid_argument("allocator settings: unclosed '[' in '" +
                                        std::string(conf) + "'");
            }
            ++end;
        } else {
            end = conf.find(',', colon);
            if (end == std::string_view::npos) end = conf.size();
        }
        GPUDIAG_RETURN_IF_ERROR(set_allocator_option(s, conf.substr(pos, colon - pos),
                                                     conf.substr(colon + 1, end - colon - 1)));
        pos = end;
        while (pos < conf.size() && (conf[pos] == ',' || conf[pos] == ' ')) ++pos;
    }
    return Status::ok();
}

Status settings_from_source(const SourceInfo& info, AllocatorSettings& s, bool& recorded) {
    recorded = false;
    for (const auto& [key, value] : info.properties) {
        // torch's snapshot names: max_split_size in bytes (-1 or SIZE_MAX: unlimited),
        // booleans as true/false, roundup_power2_divisions as a dict (flattened to [mb:n,...]).
        if (key == "max_split_size") {
            recorded = true;
            std::uint64_t bytes = 0;
            if (value == "-1" || !parse_uint(value, bytes) || bytes == 0) {
                s.max_split_size = kNoSplitLimit;
            } else {
                s.max_split_size = bytes;
            }
        } else if (key == "garbage_collection_threshold") {
            recorded = true;
            double t = 0;
            if (parse_double(value, t) && t > 0 && t < 1) s.garbage_collection_threshold = t;
        } else if (key == "expandable_segments") {
            bool b = false;
            if (parse_bool(value, b)) s.expandable_segments = b;
        } else if (key == "roundup_power2_divisions") {
            recorded = true;
            GPUDIAG_RETURN_IF_ERROR(parse_divisions(value, s));
        }
    }
    return Status::ok();
}

}  // namespace gpudiag::detail
