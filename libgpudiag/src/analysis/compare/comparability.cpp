// SPDX-License-Identifier: Apache-2.0
#include "analysis/compare/comparability.hpp"

#include "analysis/findings/finding_catalog.hpp"

#include "support/format.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace gpudiag::detail {
namespace {

constexpr CompareArea kTime = CompareArea::kTime;
constexpr CompareArea kGpu = CompareArea::kGpu;
constexpr CompareArea kMemory = CompareArea::kMemory;
constexpr CompareArea kHealth = CompareArea::kHealth;

void add(std::vector<CompareReason>& out, const char* id, std::string text,
         std::vector<CompareArea> explains) {
    out.push_back(CompareReason{id, std::move(text), std::move(explains)});
}

std::set<std::string> models(const RunFigures& run) {
    std::set<std::string> out;
    for (const auto& m : run.device_models) {
        if (!m.empty()) out.insert(m);
    }
    return out;
}

std::string joined(const std::set<std::string>& names) {
    return fmt::format("{}", fmt::join(names, ", "));
}

// At most `most` names, each cut to a readable length (C++ frames run to hundreds of characters).
std::string joined_short(const std::set<std::string>& names, std::size_t most) {
    constexpr std::size_t kLongest = 60;
    std::vector<std::string> out;
    for (const auto& n : names) {
        if (out.size() == most) {
            out.emplace_back(fmt::format("{} more", names.size() - most));
            break;
        }
        out.push_back(n.size() > kLongest ? n.substr(0, kLongest) + "..." : n);
    }
    return fmt::format("{}", fmt::join(out, ", "));
}

// The number of GPUs a run used: its ranks, else the devices its events name.
double gpus_used(const RunFigures& run) {
    if (run.report->source.world_size > 0) return run.report->source.world_size;
    const Section* overview = run.report->section("overview");
    const Figure* devices = overview != nullptr ? overview->figure("devices") : nullptr;
    return devices != nullptr ? devices->value : 0;
}

// Memory other processes held on the run's GPUs (0: none seen; -1: not observed).
double foreign_memory(const RunFigures& run) {
    if (const Finding* f =
            run.finding(std::string(finding_name(FindingId::kForeignProcessMemory)))) {
        for (const auto& fig : f->figures) {
            if (fig.key == "foreign_memory_bytes") return fig.value;
        }
        return 1;
    }
    const Figure* max = run.figure(run.health, "max_foreign_memory_bytes");
    if (max != nullptr) return max->value;
    return run.report->saw(Evidence::kDeviceHealth) ? 0 : -1;
}

bool throttled(const RunFigures& run) {
    return run.finding(std::string(finding_name(FindingId::kThermalThrottle))) != nullptr ||
           run.finding(std::string(finding_name(FindingId::kPowerThrottle))) != nullptr;
}

// Sites that hold at least this share of a peak are what the peak is made of.
constexpr double kMainSiteShare = 0.05;

// The named allocation sites that make up a run's memory peak ("<unknown site>" and the like
// name nothing).
std::set<std::string> main_sites(const RunFigures& run) {
    double total = 0;
    for (const auto& [site, bytes] : run.peak_sites) total += bytes;
    std::set<std::string> out;
    for (const auto& [site, bytes] : run.peak_sites) {
        if (total > 0 && bytes / total >= kMainSiteShare && !site.empty() && site.front() != '<') {
            out.insert(site);
        }
    }
    return out;
}

const char* side(bool before) {
    return before ? "the before run" : "the after run";
}

}  // namespace

std::vector<CompareReason> ComparabilityCheck::reasons(std::vector<std::string>& notes) const {
    std::vector<CompareReason> out;
    check_inputs(out);
    check_input_kinds(out);
    check_window(out);
    check_gpu_model(out, notes);
    check_gpu_count(out);
    check_software(out);
    check_foreign_processes(out);
    check_throttling(out);
    check_steps(out);
    check_input_shapes(out);
    check_peak_sites(out);
    return out;
}

void ComparabilityCheck::check_gpu_model(std::vector<CompareReason>& out,
                                         std::vector<std::string>& notes) const {
    const auto b = models(before_);
    const auto a = models(after_);
    if (!b.empty() && !a.empty()) {
        if (b != a) {
            add(out, "gpu_model",
                fmt::format("different GPU models: {} before, {} after", joined(b), joined(a)),
                {kTime, kGpu, kMemory});
        }
        return;
    }
    if (b.empty() && a.empty()) {
        notes.emplace_back(
            "Neither input recorded its GPU model: that both runs used the same GPU is assumed, "
            "not checked.");
    } else {
        notes.push_back(fmt::format(
            "Only {} recorded its GPU model ({}): that both runs used the same GPU is assumed, "
            "not checked.",
            side(!b.empty()), joined(b.empty() ? a : b)));
    }
}

void ComparabilityCheck::check_gpu_count(std::vector<CompareReason>& out) const {
    const double b = gpus_used(before_);
    const double a = gpus_used(after_);
    if (b > 0 && a > 0 && b != a) {
        add(out, "gpu_count",
            fmt::format("a different number of GPUs: {:g} before, {:g} after", b, a),
            {kTime, kGpu});
    }
}

void ComparabilityCheck::check_software(std::vector<CompareReason>& out) const {
    struct Part {
        const char* key;
        const char* id;
        const char* what;
        std::vector<CompareArea> explains;
    };
    const Part parts[] = {
        {"driver", "driver", "NVIDIA driver", {kTime, kGpu}},
        {"cuda_driver", "driver", "CUDA driver API", {kTime, kGpu}},
        {"cuda", "cuda", "CUDA runtime", {kTime, kGpu, kMemory}},
        {"framework", "framework", "framework", {kTime, kGpu, kMemory}},
    };
    for (const auto& p : parts) {
        const std::string b = before_.software_version(p.key);
        const std::string a = after_.software_version(p.key);
        if (b.empty() || a.empty() || a == b) continue;
        add(out, p.id, fmt::format("a different {}: {} before, {} after", p.what, b, a),
            p.explains);
    }
}

void ComparabilityCheck::check_foreign_processes(std::vector<CompareReason>& out) const {
    const double b = foreign_memory(before_);
    const double a = foreign_memory(after_);
    if (b <= 0 && a <= 0) return;
    std::string text;
    if (b > 0 && a > 0) {
        text = fmt::format("other processes used the GPU in both runs ({} before, {} after)",
                           format_bytes(b), format_bytes(a));
    } else {
        text = fmt::format(
            "another process used the GPU in {} ({}){}", side(b > 0), format_bytes(b > 0 ? b : a),
            (b > 0 ? a : b) < 0 ? " and the other run did not sample the card" : " only");
    }
    add(out, "foreign_process", std::move(text), {kTime, kGpu, kHealth});
}

void ComparabilityCheck::check_throttling(std::vector<CompareReason>& out) const {
    const bool b = throttled(before_);
    const bool a = throttled(after_);
    if (b == a) return;
    add(out, "throttling", fmt::format("the GPU was throttled in {} only", side(b)), {kTime, kGpu});
}

void ComparabilityCheck::check_steps(std::vector<CompareReason>& out) const {
    const bool timed =
        before_.report->saw(Evidence::kGpuActivity) && after_.report->saw(Evidence::kGpuActivity);
    if (!timed) return;
    const std::size_t fewest = std::min(before_.steps, after_.steps);
    if (fewest >= options_.min_steps) return;
    add(out, "too_few_steps",
        fmt::format("too few steps to tell a change in time from step-to-step noise: {} before, "
                    "{} after (at least {} each)",
                    before_.steps, after_.steps, options_.min_steps),
        {kTime, kGpu});
}

void ComparabilityCheck::check_input_shapes(std::vector<CompareReason>& out) const {
    const std::string b = before_.report->source.property("input_shapes");
    const std::string a = after_.report->source.property("input_shapes");
    if (b.empty() || a.empty() || a == b) return;
    add(out, "input_shapes",
        fmt::format("the layers were fed different batches: {} before, {} after (from the "
                    "traces' recorded input shapes)",
                    b, a),
        {kTime, kGpu, kMemory});
}

// Peaks made of entirely different code are peaks of different programs (or of different phases
// of one): their sizes say nothing about a change.
void ComparabilityCheck::check_peak_sites(std::vector<CompareReason>& out) const {
    const auto b = main_sites(before_);
    const auto a = main_sites(after_);
    if (b.empty() || a.empty()) return;
    for (const auto& site : b) {
        if (a.count(site) > 0) return;
    }
    add(out, "different_code",
        fmt::format("the memory peaks come from different code ({} before; {} after): different "
                    "programs, or different phases of one",
                    joined_short(b, 2), joined_short(a, 2)),
        {kMemory});
}

// Two profilers (a Kineto trace and a memory snapshot, an Nsight export and a recording) measure
// different windows of a program with different overheads: what they share is not measured alike.
void ComparabilityCheck::check_input_kinds(std::vector<CompareReason>& out) const {
    const std::string& b = before_.report->source.producer;
    const std::string& a = after_.report->source.producer;
    if (b.empty() || a.empty() || a == b) return;
    add(out, "input_kinds",
        fmt::format("different kinds of input: {} before, {} after (other windows of the program, "
                    "measured with other overheads)",
                    b, a),
        {kTime, kGpu, kMemory});
}

// Reports analysed over different windows (complete steps, HTA's, everything) time different
// parts of their inputs.
void ComparabilityCheck::check_window(std::vector<CompareReason>& out) const {
    const Figure* b = before_.figure(before_.timeline, "window");
    const Figure* a = after_.figure(after_.timeline, "window");
    if (b == nullptr || a == nullptr || b->value == a->value) return;
    add(out, "analysis_window",
        fmt::format("the timelines were analysed over different windows (window {:g} before, "
                    "{:g} after; {})",
                    b->value, a->value, b->label),
        {kTime, kGpu});
}

void ComparabilityCheck::check_inputs(std::vector<CompareReason>& out) const {
    for (const RunFigures* run : {&before_, &after_}) {
        const bool is_before = run == &before_;
        if (!run->report->input.complete) {
            add(out, "incomplete_input",
                fmt::format("{} was not read to its end: its figures cover part of it",
                            side(is_before)),
                {kTime, kGpu, kMemory, kHealth});
        }
        if (run->report->source.simulated) {
            add(out, "simulated", fmt::format("{} is simulated, not observed", side(is_before)),
                {kTime, kGpu, kMemory, kHealth});
        }
    }
}

}  // namespace gpudiag::detail
