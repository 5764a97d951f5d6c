// SPDX-License-Identifier: Apache-2.0
#include "analysis/compare/run_figures.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <string_view>
#include <variant>

namespace gpudiag::detail {
namespace {

/// step number -> key -> value
using StepRows = std::map<double, std::map<std::string, double>>;

const Table* find_table(const Section* section, std::string_view id) {
    if (section == nullptr) return nullptr;
    for (const auto& t : section->tables) {
        if (t.id == id) return &t;
    }
    return nullptr;
}

double number(const Cell& cell) {
    if (const double* d = std::get_if<double>(&cell)) return *d;
    return std::numeric_limits<double>::quiet_NaN();
}

// The key a per-step column is compared under; "" for columns that are not per-step amounts.
std::string step_key(std::string_view table, const std::string& column) {
    if (column == "step") return {};
    if (table == "steps") {
        return column == "start_s" || column == "sync_calls" ? std::string() : column;
    }
    if (table == "step_critical_path") return "critical_path_" + column + "_ns";
    constexpr std::string_view kIdle = "idle: ";
    if (table == "step_breakdown" && column.rfind(kIdle, 0) == 0) {
        const std::string cause = column.substr(kIdle.size());
        return "gpu_idle_" + cause.substr(0, cause.find(' ')) + "_ns";
    }
    return {};
}

void read_step_table(const Section* timeline, std::string_view id, StepRows& rows) {
    const Table* t = find_table(timeline, id);
    if (t == nullptr || t->columns.empty() || t->columns.front() != "step") return;
    for (const auto& row : t->rows) {
        if (row.empty()) continue;
        const double step = number(row.front());
        if (std::isnan(step)) continue;
        for (std::size_t c = 1; c < row.size() && c < t->columns.size(); ++c) {
            const std::string key = step_key(id, t->columns[c]);
            const double v = number(row[c]);
            if (!key.empty() && !std::isnan(v)) rows[step][key] = v;
        }
    }
}

StepRows step_rows(const Report& report) {
    StepRows rows;
    const Section* timeline = report.section("timeline");
    for (std::string_view id : {"steps", "step_critical_path", "step_breakdown"}) {
        read_step_table(timeline, id, rows);
    }
    return rows;
}

// A job steps as fast as its slowest rank: a step's duration is the longest of the ranks'; the
// parts are the ranks' mean.
StepRows join_ranks(const std::vector<Report>& ranks, std::map<int, std::vector<double>>& out) {
    std::map<double, std::map<std::string, std::pair<double, int>>> sums;
    StepRows joined;
    for (std::size_t i = 0; i < ranks.size(); ++i) {
        const int rank = ranks[i].source.rank >= 0 ? ranks[i].source.rank : static_cast<int>(i);
        for (const auto& [step, values] : step_rows(ranks[i])) {
            for (const auto& [key, v] : values) {
                auto& [sum, count] = sums[step][key];
                sum += v;
                ++count;
                if (key == "duration_ns") {
                    out[rank].push_back(v);
                    double& longest = joined[step][key];
                    longest = std::max(longest, v);
                }
            }
        }
    }
    for (const auto& [step, values] : sums) {
        for (const auto& [key, sc] : values) {
            if (key != "duration_ns") joined[step][key] = sc.first / sc.second;
        }
    }
    return joined;
}

std::vector<double> series_values(const Section* section, std::string_view id) {
    std::vector<double> out;
    if (section == nullptr) return out;
    for (const auto& s : section->series) {
        if (s.id != id) continue;
        for (const auto& [x, v] : s.points) out.push_back(v);
    }
    return out;
}

std::vector<std::pair<std::string, double>> read_peak_sites(const Section* memory) {
    std::map<std::string, double> bytes;
    const Table* t = find_table(memory, "peak_sites");
    if (t == nullptr) return {};
    for (const auto& row : t->rows) {
        if (row.size() < 3) continue;
        const auto* site = std::get_if<std::string>(&row[0]);
        const double b = number(row[2]);
        if (site != nullptr && !std::isnan(b)) bytes[*site] += b;
    }
    std::vector<std::pair<std::string, double>> out(bytes.begin(), bytes.end());
    std::stable_sort(out.begin(), out.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    return out;
}

std::vector<std::pair<std::string, double>> read_phases(const Section* phases) {
    std::vector<std::pair<std::string, double>> out;
    const Table* t = find_table(phases, "phase_times");
    if (t == nullptr) return out;
    const auto column = std::find(t->columns.begin(), t->columns.end(), "self_per_step_ns");
    if (column == t->columns.end()) return out;
    const auto c = static_cast<std::size_t>(column - t->columns.begin());
    for (const auto& row : t->rows) {
        if (row.size() <= c) continue;
        const auto* name = std::get_if<std::string>(&row[0]);
        const double v = number(row[c]);
        if (name != nullptr && !std::isnan(v)) out.emplace_back(*name, v);
    }
    return out;
}

// Kineto writes CUDA versions as the API's integer (12090); stacks say "12.9".
std::string cuda_version(const std::string& v) {
    int n = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc() || end != v.data() + v.size() || n < 1000) return v;
    return fmt::format("{}.{}", n / 1000, (n % 1000) / 10);
}

std::vector<std::pair<std::string, std::string>> read_software(const SourceInfo& s) {
    std::vector<std::pair<std::string, std::string>> out;
    auto put = [&](const char* key, const std::string& value) {
        if (!value.empty()) out.emplace_back(key, value);
    };
    put("driver", s.property("stack.driver"));
    put("cuda_driver",
        cuda_version(s.property("stack.driver_cuda", s.property("cuda_driver_version"))));
    put("cuda",
        cuda_version(s.property("stack.framework_cuda", s.property("cuda_runtime_version"))));
    const std::string framework = s.property("stack.framework");
    const std::string version = s.property("stack.framework_version");
    if (!version.empty()) put("framework", framework.empty() ? version : framework + " " + version);
    return out;
}

}  // namespace

RunFigures RunFigures::read(const Report& report) {
    RunFigures f;
    f.report = &report;
    f.timeline = report.section("timeline");
    f.memory = report.section("memory");
    f.health = report.section("health");
    f.job = report.section("job");
    const StepRows rows = f.timeline == nullptr && !report.ranks.empty()
                              ? join_ranks(report.ranks, f.rank_steps)
                              : step_rows(report);
    for (const auto& [step, values] : rows) {
        if (values.count("duration_ns") == 0) continue;
        ++f.steps;
        for (const auto& [key, v] : values) f.per_step[key].push_back(v);
    }
    f.step_idle_share = series_values(f.timeline, "step_idle_share");
    f.step_peak_allocated = series_values(f.memory, "step_peak_allocated");
    f.peak_sites = read_peak_sites(f.memory);
    f.phase_per_step = read_phases(report.section("phases"));
    for (const auto& d : report.source.devices) f.device_models.push_back(d.name);
    f.software = read_software(report.source);
    return f;
}

const Figure* RunFigures::figure(const Section* section, const std::string& key) const {
    return section != nullptr ? section->figure(key) : nullptr;
}

const std::vector<double>* RunFigures::step_values(const std::string& key) const {
    auto it = per_step.find(key);
    return it != per_step.end() ? &it->second : nullptr;
}

std::string RunFigures::software_version(const std::string& key) const {
    for (const auto& [k, v] : software) {
        if (k == key) return v;
    }
    return {};
}

const Finding* RunFigures::finding(const std::string& id) const {
    return report != nullptr ? report->finding(id) : nullptr;
}

}  // namespace gpudiag::detail
