// SPDX-License-Identifier: Apache-2.0
#include "analysis/compare/delta_builder.hpp"

#include "analysis/compare/robust_sample.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

namespace gpudiag::detail {
namespace {

// The caching allocator rounds large blocks to 2 MiB and sizes segments in whole blocks: the
// same program with the same shapes reaches the same peak to within that.
constexpr double kAllocatorGranularity = 2.0 * 1024 * 1024;
// A share from NVML samples (one every ~100 ms) moves by a few points from sampling alone.
constexpr double kSampledShareNoise = 0.05;
// A snapshot's fragmentation is one moment's: freeing or allocating one block moves it by a few
// points, so smaller moves are not a change in how the program uses memory.
constexpr double kFragmentationNoise = 0.05;
// Sites below this share of the peak on both sides are left out: they cannot decide anything.
constexpr double kMinSiteShare = 0.05;
constexpr std::size_t kMaxSites = 8;

struct StepFigure {
    const char* key;
    const char* label;
    CompareArea area;
};

// The per-step figures compared, in the order a reader wants them: the step, what its critical
// path was made of, then the GPU's view.
constexpr StepFigure kStepFigures[] = {
    {"critical_path_input_ns", "step time waiting for input", CompareArea::kTime},
    {"critical_path_cpu_ns", "step time in CPU work", CompareArea::kTime},
    {"critical_path_launch_ns", "step time launching kernels", CompareArea::kTime},
    {"critical_path_sync_ns", "step time blocked in synchronizations", CompareArea::kTime},
    {"critical_path_copy_ns", "step time in synchronous copies", CompareArea::kTime},
    {"critical_path_compute_ns", "step time in GPU compute", CompareArea::kTime},
    {"critical_path_communication_ns", "step time in communication", CompareArea::kTime},
    {"critical_path_memory_ns", "step time in GPU copies and memsets", CompareArea::kTime},
    {"critical_path_gpu_gap_ns", "step time in gaps between GPU work", CompareArea::kTime},
    {"gpu_busy_ns", "GPU busy per step", CompareArea::kGpu},
    {"gpu_idle_ns", "GPU idle per step", CompareArea::kGpu},
    {"gpu_idle_input_ns", "GPU idle waiting for input, per step", CompareArea::kGpu},
    {"gpu_idle_host_ns", "GPU idle waiting for the host, per step", CompareArea::kGpu},
    {"gpu_idle_other_ns", "GPU idle for other reasons, per step", CompareArea::kGpu},
    {"compute_ns", "GPU compute per step", CompareArea::kGpu},
    {"communication_ns", "GPU communication per step", CompareArea::kGpu},
    {"memory_ns", "GPU copies and memsets per step", CompareArea::kGpu},
};

CompareDelta& named(CompareDelta& d, std::string key, std::string label, Unit unit,
                    CompareArea area, bool outcome) {
    d.key = std::move(key);
    d.label = std::move(label);
    d.unit = unit;
    d.area = area;
    d.outcome = outcome;
    return d;
}

// A part neither run's typical step has tells nothing.
bool both_zero(const std::vector<double>& b, const std::vector<double>& a) {
    return RobustSample::of(b).median == 0 && RobustSample::of(a).median == 0;
}

}  // namespace

std::vector<CompareDelta> DeltaBuilder::build(std::vector<std::string>& not_compared) const {
    std::vector<CompareDelta> out;
    if (steps_enough()) {
        step_deltas(out);
    } else if (before_.timeline != nullptr && after_.timeline != nullptr) {
        window_deltas(out);
    }
    memory_deltas(out, not_compared);
    health_deltas(out);
    rank_deltas(out);
    return out;
}

bool DeltaBuilder::steps_enough() const {
    return before_.steps >= options_.min_steps && after_.steps >= options_.min_steps &&
           before_.step_values("duration_ns") != nullptr &&
           after_.step_values("duration_ns") != nullptr;
}

void DeltaBuilder::step_deltas(std::vector<CompareDelta>& out) const {
    const auto& b = *before_.step_values("duration_ns");
    const auto& a = *after_.step_values("duration_ns");
    CompareDelta step = judge_.per_step(b, a);
    out.push_back(named(step, "step_time_ns", "median step time", Unit::kNanoseconds,
                        CompareArea::kTime, true));
    phase_deltas(out, step);
    CompareDelta spread = judge_.spread(b, a);
    out.push_back(named(spread, "step_time_spread_ns", "step time spread (robust)",
                        Unit::kNanoseconds, CompareArea::kTime, false));
    for (const auto& f : kStepFigures) {
        const auto* vb = before_.step_values(f.key);
        const auto* va = after_.step_values(f.key);
        if (vb == nullptr || va == nullptr || both_zero(*vb, *va)) continue;
        CompareDelta d = judge_.per_step(*vb, *va);
        out.push_back(named(d, f.key, f.label, Unit::kNanoseconds, f.area, false));
    }
    const auto& ib = before_.step_idle_share;
    const auto& ia = after_.step_idle_share;
    const Figure* fb = before_.figure(before_.timeline, "idle_share");
    const Figure* fa = after_.figure(after_.timeline, "idle_share");
    if (fb != nullptr && fa != nullptr && ib.size() >= options_.min_steps &&
        ia.size() >= options_.min_steps) {
        const double se = std::hypot(RobustSample::of(ib).median_standard_error(),
                                     RobustSample::of(ia).median_standard_error());
        CompareDelta d = judge_.single(
            fb->value, fa->value, options_.noise_multiplier * se,
            fmt::format("{:g} x the standard error from the step-to-step spread of the per-step "
                        "idle share ({} and {} steps)",
                        options_.noise_multiplier, ib.size(), ia.size()),
            true);
        out.push_back(named(d, "idle_share", "GPU idle share of the window", Unit::kFraction,
                            CompareArea::kGpu, false));
    }
}

// A phase's time per step is a mean over the steps with no per-step values of its own: it is
// judged against the step time's noise, since a phase is part of a step and a change the step
// time cannot resolve is not resolved in one of its parts either.
void DeltaBuilder::phase_deltas(std::vector<CompareDelta>& out, const CompareDelta& step) const {
    const std::string basis =
        "the median step time's noise (a phase's time has no per-step "
        "values; it is part of the step)";
    std::size_t added = 0;
    for (const auto& [name, before] : before_.phase_per_step) {
        if (added == kMaxSites) break;
        for (const auto& [other, after] : after_.phase_per_step) {
            if (other != name) continue;
            const double larger = std::max(before, after);
            if (step.before <= 0 || larger / step.before < kMinSiteShare) break;
            CompareDelta d = judge_.single(before, after, step.noise, basis, true);
            out.push_back(named(d, "phase:" + name, "phase " + name + " per step",
                                Unit::kNanoseconds, CompareArea::kTime, false));
            ++added;
            break;
        }
    }
}

// Without enough steps the noise is unknown: equal figures are still equal (within the floor),
// anything more is not comparable.
void DeltaBuilder::window_deltas(std::vector<CompareDelta>& out) const {
    const std::string basis =
        "no step-to-step spread (too few steps): only a change under the relative floor counts "
        "as none";
    struct WindowFigure {
        const char* key;
        const char* label;
        Unit unit;
        CompareArea area;
        bool outcome;
    };
    const WindowFigure figures[] = {
        {"window_span_ns", "time the GPU work spanned", Unit::kNanoseconds, CompareArea::kTime,
         true},
        {"busy_ns", "GPU busy", Unit::kNanoseconds, CompareArea::kGpu, false},
        {"idle_share", "GPU idle share of the window", Unit::kFraction, CompareArea::kGpu, false},
    };
    for (const auto& f : figures) {
        const Figure* fb = before_.figure(before_.timeline, f.key);
        const Figure* fa = after_.figure(after_.timeline, f.key);
        if (fb == nullptr || fa == nullptr) continue;
        CompareDelta d = judge_.single(fb->value, fa->value, 0, basis, false);
        out.push_back(named(d, f.key, f.label, f.unit, f.area, f.outcome));
    }
}

double DeltaBuilder::memory_noise(std::string& basis) const {
    const auto& b = before_.step_peak_allocated;
    const auto& a = after_.step_peak_allocated;
    if (b.size() >= options_.min_steps && a.size() >= options_.min_steps) {
        const double spread = std::hypot(RobustSample::of(b).sigma, RobustSample::of(a).sigma);
        if (options_.noise_multiplier * spread > kAllocatorGranularity) {
            basis = fmt::format(
                "{:g} x the step-to-step spread of the per-step peaks ({} and {} "
                "steps)",
                options_.noise_multiplier, b.size(), a.size());
            return options_.noise_multiplier * spread;
        }
    }
    basis =
        "the caching allocator's 2 MiB rounding: the same program with the same shapes "
        "reaches the same peak to within it";
    return kAllocatorGranularity;
}

void DeltaBuilder::memory_deltas(std::vector<CompareDelta>& out,
                                 std::vector<std::string>& nc) const {
    if (before_.memory == nullptr || after_.memory == nullptr) return;
    // Without the allocator's segments a trace's "allocated" is a running sum of allocation
    // events; with them it is the allocator's own count: two different measures.
    const bool rb = before_.figure(before_.memory, "peak_reserved_bytes") != nullptr;
    const bool ra = after_.figure(after_.memory, "peak_reserved_bytes") != nullptr;
    if (rb != ra) {
        nc.push_back(fmt::format(
            "device memory peaks: the {} run's input has the allocator's own figures, the {} "
            "run's only allocation events (a running sum that misses what was allocated before "
            "it began), so the peaks are measured differently",
            rb ? "before" : "after", rb ? "after" : "before"));
        return;
    }
    std::string basis;
    const double noise = memory_noise(basis);
    for (const char* key : {"peak_allocated_bytes", "peak_reserved_bytes"}) {
        const Figure* fb = before_.figure(before_.memory, key);
        const Figure* fa = after_.figure(after_.memory, key);
        if (fb == nullptr || fa == nullptr) continue;
        CompareDelta d = judge_.single(fb->value, fa->value, noise, basis, true);
        out.push_back(named(d, key, fb->label, Unit::kBytes, CompareArea::kMemory, true));
    }
    const Figure* xb = before_.figure(before_.memory, "external_fragmentation");
    const Figure* xa = after_.figure(after_.memory, "external_fragmentation");
    if (xb != nullptr && xa != nullptr) {
        CompareDelta d = judge_.single(
            xb->value, xa->value, kFragmentationNoise,
            "5 points: one snapshot's fragmentation moves that much with a single block", true);
        out.push_back(named(d, "external_fragmentation", "fragmentation of the free memory",
                            Unit::kFraction, CompareArea::kMemory, false));
    }
    site_deltas(out, noise, basis);
}

void DeltaBuilder::site_deltas(std::vector<CompareDelta>& out, double noise,
                               const std::string& basis) const {
    if (before_.peak_sites.empty() || after_.peak_sites.empty()) return;
    auto total = [](const RunFigures& r) {
        double t = 0;
        for (const auto& [site, bytes] : r.peak_sites) t += bytes;
        return t;
    };
    auto bytes_at = [](const RunFigures& r, const std::string& site) {
        for (const auto& [s, b] : r.peak_sites) {
            if (s == site) return b;
        }
        return 0.0;
    };
    const double tb = total(before_);
    const double ta = total(after_);
    std::set<std::string> chosen;
    for (const RunFigures* r : {&before_, &after_}) {
        const double t = r == &before_ ? tb : ta;
        for (const auto& [site, bytes] : r->peak_sites) {
            // "<unknown site>", "<no block detail>": a placeholder is not a place in the code.
            if (site.empty() || site.front() == '<') continue;
            if (chosen.size() < kMaxSites && t > 0 && bytes / t >= kMinSiteShare) {
                chosen.insert(site);
            }
        }
    }
    for (const auto& site : chosen) {
        CompareDelta d =
            judge_.single(bytes_at(before_, site), bytes_at(after_, site), noise, basis, true);
        out.push_back(named(d, "peak_site:" + site, "live at the peak: " + site, Unit::kBytes,
                            CompareArea::kMemory, false));
    }
}

void DeltaBuilder::health_deltas(std::vector<CompareDelta>& out) const {
    if (before_.health == nullptr || after_.health == nullptr) return;
    const char* basis =
        "5 points: NVML samples the card about every 100 ms, so a share moves that much from "
        "sampling alone";
    for (const char* key : {"thermal_throttle_share", "power_throttle_share"}) {
        const Figure* fb = before_.figure(before_.health, key);
        const Figure* fa = after_.figure(after_.health, key);
        if (fb == nullptr || fa == nullptr) continue;
        CompareDelta d = judge_.single(fb->value, fa->value, kSampledShareNoise, basis, true);
        out.push_back(named(d, key, fb->label, Unit::kFraction, CompareArea::kHealth, false));
    }
}

void DeltaBuilder::rank_deltas(std::vector<CompareDelta>& out) const {
    for (const auto& [rank, b] : before_.rank_steps) {
        auto it = after_.rank_steps.find(rank);
        if (it == after_.rank_steps.end()) continue;
        const auto& a = it->second;
        CompareDelta d;
        if (b.size() >= options_.min_steps && a.size() >= options_.min_steps) {
            d = judge_.per_step(b, a);
        } else {
            d = judge_.single(RobustSample::of(b).median, RobustSample::of(a).median, 0,
                              "no step-to-step spread (too few steps on this rank)", false);
        }
        named(d, "step_time_ns", fmt::format("median step time of rank {}", rank),
              Unit::kNanoseconds, CompareArea::kTime, false);
        d.rank = rank;
        out.push_back(std::move(d));
    }
}

}  // namespace gpudiag::detail
