// SPDX-License-Identifier: Apache-2.0
#include "api/session_cost.hpp"

#include "analysis/findings/figure_keys.hpp"
#include "capture/capture_levels.hpp"
#include "support/format.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>

namespace gpudiag::detail {
namespace {

std::atomic<EventSink*> g_extra_sink_for_tests{nullptr};

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

void add_budget_figures(const SessionCost& c, std::vector<Figure>& f) {
    if (!c.budget_on) return;
    if (c.budget.cpu_share > 0) {
        f.push_back({"budget_cpu_share", c.budget.cpu_share, Unit::kFraction,
                     "budget: the most of the process' CPU time gpudiag may take"});
    }
    if (c.budget.step_share > 0) {
        f.push_back({"budget_step_share", c.budget.step_share, Unit::kFraction,
                     "budget: the most of a step's time its CPU time per step may be"});
    }
    const auto ladder = capture_reductions();
    const std::uint32_t rung = std::min<std::uint32_t>(c.budget_rung, ladder.size() - 1);
    f.push_back({"budget_rung", d(rung), Unit::kCount,
                 std::string("rung of the budget's ladder now: ") + ladder[rung].name});
    f.push_back({"budget_changes", d(c.budget_changes), Unit::kCount,
                 "steps down and back up to keep the budget"});
    f.push_back(
        {"shed_events", d(c.shed_events), Unit::kCount, "events not taken in to keep the budget"});
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
    add_budget_figures(c, f);
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

void set_extra_session_sink_for_tests(EventSink* sink) noexcept {
    g_extra_sink_for_tests.store(sink);
}

EventSink* extra_session_sink_for_tests() noexcept {
    return g_extra_sink_for_tests.load();
}

CostGovernor::CostGovernor(const CostBudget& budget, std::uint32_t top_rung) noexcept
    : budget_(budget),
      top_rung_(top_rung),
      period_ns_(std::uint64_t{budget.period_ms} * 1'000'000) {
    try {
        spent_ns_.assign(std::size_t{top_rung} + 1, 0);
        kept_.reserve(kMaxChangesKept);
    } catch (...) {  // host memory ran out: the budget is off rather than half kept
        period_ns_ = 0;
    }
}

bool CostGovernor::enabled() const noexcept {
    return period_ns_ > 0 && top_rung_ > 0 && (budget_.cpu_share > 0 || budget_.step_share > 0);
}

// Over: past either share. Calm: every share that applies is under half its budget. Either way
// the cost must be more than negligible to count as over.
CostGovernor::Judgement CostGovernor::judge(const CostSample& s) const noexcept {
    const CostSample& a = period_start_;
    const double own = delta(s.own_cpu_ns, a.own_cpu_ns);
    const double wall = delta(s.now_ns, a.now_ns);
    Judgement j;
    double worst = 0;  // the larger share / budget ratio names the reason
    bool any_over_half = false;
    auto weigh = [&](double share, double budget, bool of_step) {
        if (budget <= 0) return;
        const double ratio = share / budget;
        any_over_half |= ratio > 0.5;
        if (ratio > worst) {
            worst = ratio;
            j.share = share;
            j.budget = budget;
            j.of_step = of_step;
        }
    };
    if (const double process = delta(s.process_cpu_ns, a.process_cpu_ns); process > 0) {
        weigh(std::min(1.0, own / process), budget_.cpu_share, false);
    }
    const double ended = delta(s.steps_ended, a.steps_ended);
    const double timed = delta(s.steps_timed, a.steps_timed);
    const double step_ns = delta(s.step_ns, a.step_ns);
    if (ended > 0 && timed > 0 && step_ns > 0) {
        weigh(own / ended / (step_ns / timed), budget_.step_share, true);  // per step / a step
    }
    const bool negligible = own <= kNegligibleCoreShare * wall;
    j.over = !negligible && worst > 1.0;
    j.calm = negligible || !any_over_half;
    return j;
}

BudgetChange CostGovernor::change_to(std::uint32_t to, const CostSample& s,
                                     const Judgement& j) noexcept {
    BudgetChange c;
    c.at_ns = s.now_ns;
    c.from = rung_;
    c.to = to;
    c.share = j.share;
    c.budget = j.budget;
    c.of_step = j.of_step;
    c.calm_ns = to < rung_ ? std::uint64_t{calm_periods_} * period_ns_ : 0;
    spent_ns_[rung_] += s.now_ns - std::min(entered_ns_, s.now_ns);
    entered_ns_ = s.now_ns;
    rung_ = to;
    calm_periods_ = 0;
    ++changes_;
    if (kept_.size() < kMaxChangesKept) kept_.push_back(c);  // reserved: no allocation
    return c;
}

std::optional<BudgetChange> CostGovernor::observe(const CostSample& s) noexcept {
    if (!enabled()) return std::nullopt;
    if (!started_) {
        started_ = true;
        period_start_ = s;
        entered_ns_ = s.now_ns;
        return std::nullopt;
    }
    if (s.now_ns < period_start_.now_ns + period_ns_) return std::nullopt;
    const Judgement j = judge(s);
    period_start_ = s;
    if (periods_since_up_ != UINT32_MAX) ++periods_since_up_;
    if (j.over) {
        calm_periods_ = 0;
        if (rung_ >= top_rung_) return std::nullopt;
        if (periods_since_up_ <= kCalmPeriods) {  // it stepped up only to step down again
            calm_factor_ = std::min(calm_factor_ * 2, kMaxCalmFactor);
        }
        periods_since_up_ = UINT32_MAX;
        return change_to(rung_ + 1, s, j);
    }
    calm_periods_ = j.calm ? calm_periods_ + 1 : 0;
    if (calm_periods_ < kCalmPeriods * calm_factor_) return std::nullopt;
    if (rung_ == 0) {  // a long calm at full capture forgives earlier flapping
        calm_factor_ = 1;
        calm_periods_ = 0;
        return std::nullopt;
    }
    periods_since_up_ = 0;
    return change_to(rung_ - 1, s, j);
}

std::uint64_t CostGovernor::ns_at_or_past(std::uint32_t rung, std::uint64_t now_ns) const {
    std::uint64_t total = 0;
    for (std::size_t r = rung; r < spent_ns_.size(); ++r) total += spent_ns_[r];
    if (started_ && rung_ >= rung && rung_ < spent_ns_.size()) {
        total += now_ns - std::min(entered_ns_, now_ns);
    }
    return total;
}

std::string budget_change_note(const BudgetChange& c, std::uint64_t started_ns) {
    const auto ladder = capture_reductions();
    const std::uint32_t top = static_cast<std::uint32_t>(ladder.size() - 1);
    const CaptureReduction& to = ladder[std::min(c.to, top)];
    const CaptureReduction& from = ladder[std::min(c.from, top)];
    const std::string at = format_duration_ns(delta(c.at_ns, started_ns));
    if (c.to > c.from) {
        return fmt::format(
            "gpudiag stepped down to {} at {} because its cost was {} of {} against a budget of "
            "{}: {} were not observed from then on.",
            to.name, at, share_text(c.share),
            c.of_step ? "a step's time" : "the program's CPU time", share_text(c.budget), to.lost);
    }
    return fmt::format(
        "gpudiag stepped back up to {} at {}: its cost had stayed under half its budget for {}; "
        "{} are observed again.",
        to.name, at, format_duration_ns(d(c.calm_ns)), from.lost);
}

void add_budget_losses(const CostGovernor& governor, std::uint64_t now_ns,
                       std::vector<std::string>& missing) {
    const auto ladder = capture_reductions();
    for (std::uint32_t r = 1; r < ladder.size(); ++r) {
        const std::uint64_t ns = governor.ns_at_or_past(r, now_ns);
        if (ns == 0) continue;
        missing.push_back(fmt::format(
            "{} were not observed for {} of the session: gpudiag stepped down to keep its cost "
            "budget (SessionOptions::cost_budget); findings drawn from them do not cover that "
            "time",
            ladder[r].lost, format_duration_ns(d(ns))));
    }
}

}  // namespace gpudiag::detail
