// SPDX-License-Identifier: Apache-2.0
#include "api/session_cost.hpp"

#include "analysis/findings/figure_keys.hpp"
#include "support/format.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace gpudiag::detail {
namespace {

double d(std::uint64_t v) {
    return static_cast<double>(v);
}

double delta(std::uint64_t now, std::uint64_t then) {
    return now > then ? d(now - then) : 0.0;
}

// The mean step time and the step count of the report's timeline, when it has steps.
std::pair<double, double> steps_of(const Report& report) {
    const Section* timeline = report.section(timeline_keys::kSection);
    if (timeline == nullptr) return {0, 0};
    const Figure* steps = timeline->figure(timeline_keys::kSteps);
    const Figure* step_ns = timeline->figure(timeline_keys::kStepTimeNs);
    if (steps == nullptr || step_ns == nullptr || steps->value <= 0) return {0, 0};
    return {steps->value, step_ns->value};
}

// Small shares keep two decimals: "0.04 %", not "0.0 %".
std::string share_text(double fraction) {
    return fraction < 0.001 ? fmt::format("{:.2f} %", fraction * 100.0) : format_percent(fraction);
}

}  // namespace

Section cost_section(const SessionCost& c, const Report& report) {
    Section s;
    s.id = "cost";
    s.title = "What gpudiag cost";
    const double threads = delta(c.cpu_now.threads_ns, c.cpu_at_start.threads_ns);
    const double elsewhere = delta(c.cpu_now.elsewhere_ns, c.cpu_at_start.elsewhere_ns);
    const double cpu = threads + elsewhere;
    const double process = delta(c.process_cpu_now_ns, c.process_cpu_at_start_ns);
    auto& f = s.figures;
    f.push_back({"cpu_ns", cpu, Unit::kNanoseconds, "CPU time of gpudiag's work"});
    f.push_back({"threads_cpu_ns", threads, Unit::kNanoseconds, "on its own threads"});
    f.push_back({"elsewhere_cpu_ns", elsewhere, Unit::kNanoseconds,
                 "on threads not its own (CUPTI's, the program's; handing events over sampled)"});
    if (process > 0) {
        f.push_back({"cpu_share_of_process", std::min(1.0, cpu / process), Unit::kFraction,
                     "share of the process' CPU time"});
    }
    if (c.wall_ns > 0) {
        f.push_back({"cpu_share_of_wall", cpu / d(c.wall_ns), Unit::kFraction,
                     "share of one core over the session's wall time"});
    }
    if (c.events > 0) {
        f.push_back({"cpu_ns_per_event", cpu / d(c.events), Unit::kNanoseconds,
                     "CPU time per event handled"});
    }
    if (const auto [steps, step_ns] = steps_of(report); steps > 0 && step_ns > 0) {
        f.push_back({"cpu_ns_per_step", cpu / steps, Unit::kNanoseconds, "CPU time per step"});
        f.push_back(
            {"share_of_step", cpu / steps / step_ns, Unit::kFraction, "of the mean step time"});
    }
    f.push_back({"memory_bytes", d(c.queue_bytes + c.names_bytes), Unit::kBytes,
                 "memory held: the hand-off and the name table"});
    if (c.window_disk_bytes > 0) {
        f.push_back({"window_disk_bytes", d(c.window_disk_bytes), Unit::kBytes,
                     "the window's files on disk"});
    }
    f.push_back({"events", d(c.events), Unit::kCount, "events handled"});
    f.push_back({"dropped", d(c.dropped), Unit::kCount, "events dropped"});
    f.push_back({"threads", d(c.cpu_now.threads_running), Unit::kCount,
                 "gpudiag threads running when measured"});
    return s;
}

std::string cost_note(const Section& cost) {
    const Figure* cpu = cost.figure("cpu_ns");
    if (cpu == nullptr) return {};
    std::string note =
        fmt::format("gpudiag's own cost: {} of CPU time", format_duration_ns(cpu->value));
    if (const Figure* p = cost.figure("cpu_share_of_process")) {
        note += fmt::format(", {} of the process'", share_text(p->value));
    }
    if (const Figure* step = cost.figure("share_of_step")) {
        note += fmt::format(", {} of a step", share_text(step->value));
    }
    return note + " (measured in this run: section \"cost\").";
}

}  // namespace gpudiag::detail
