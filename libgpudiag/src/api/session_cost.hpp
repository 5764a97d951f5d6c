// SPDX-License-Identifier: Apache-2.0
// What a live session cost the program it runs in, as the "cost" section of its report: CPU time
// of gpudiag's threads and of its work on the program's threads, against the process' CPU time,
// the wall time and the step time; the memory it holds; the events it handled and dropped.
// Always-on tools lead with their cost; a service's change review asks for it first.
#pragma once

#include "support/own_cpu.hpp"

#include <gpudiag/report.hpp>
#include <gpudiag/session.hpp>
#include <gpudiag/sink.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpudiag::detail {

struct SessionCost {
    OwnCpu cpu_at_start;
    OwnCpu cpu_now;
    std::uint64_t process_cpu_at_start_ns = 0;
    std::uint64_t process_cpu_now_ns = 0;
    std::uint64_t wall_ns = 0;            ///< since start()
    std::uint64_t events = 0;             ///< handed over
    std::uint64_t dropped = 0;            ///< lost to full buffers
    std::uint64_t queue_bytes = 0;        ///< the hand-off's slots
    std::uint64_t names_bytes = 0;        ///< the name table's text
    std::uint64_t window_disk_bytes = 0;  ///< the window's files (0: no window)
    // The budget (SessionOptions::cost_budget), when it is on.
    bool budget_on = false;
    CostBudget budget;
    std::uint32_t budget_rung = 0;     ///< the ladder's rung now (0: full capture)
    std::uint64_t budget_changes = 0;  ///< steps down and up so far
    std::uint64_t shed_events = 0;     ///< events not taken in because of the budget
};

/// The "cost" section; the step share is read from the report's timeline (when it has steps).
Section cost_section(const SessionCost& cost, const Report& report);
/// One sentence for the report's notes: the CPU share and, with steps, the share of a step.
std::string cost_note(const Section& cost);

/// What the session has cost so far, read at a worker tick: cumulative figures, so that the
/// governor takes the difference over its period.
struct CostSample {
    std::uint64_t now_ns = 0;
    std::uint64_t own_cpu_ns = 0;      ///< gpudiag's threads and its work elsewhere
    std::uint64_t process_cpu_ns = 0;  ///< the whole process'
    std::uint64_t steps_ended = 0;     ///< step_end() calls
    std::uint64_t steps_timed = 0;     ///< of those, the ones whose step_begin was matched
    std::uint64_t step_ns = 0;         ///< the timed steps' durations, summed
};

/// One step down or up the ladder (capture_reductions()).
struct BudgetChange {
    std::uint64_t at_ns = 0;
    std::uint32_t from = 0;
    std::uint32_t to = 0;
    double share = 0;           ///< the share measured over the period that decided it
    double budget = 0;          ///< the budget it was held against
    bool of_step = false;       ///< a share of the step time, not of the process' CPU time
    std::uint64_t calm_ns = 0;  ///< a step up: how long the cost had stayed under half
};

/// Keeps a session within its CostBudget: fed a sample at every worker tick, it judges each
/// period and decides at most one step a period. Not thread-safe (the session holds its sink lock).
///
/// Why these numbers: a step down waits for a whole period's measurement (10 s by default), so
/// a burst shorter than that costs nothing; one rung a period lets each rung's saving show before
/// the next. A step up needs kCalmPeriods periods (a minute by default) under half the budget:
/// half, so that the cost a rung gives back (about what it saved) does not land over the budget
/// at once; a minute, so that a program's quiet phase (evaluation, checkpointing) does not bring
/// full capture back for a moment only. When a step up is followed within kCalmPeriods by a step
/// down, the wait doubles (up to kMaxCalmFactor times, 16 min by default): a workload whose
/// full-capture cost sits over the budget is probed ever more rarely instead of flapping.
class CostGovernor {
public:
    static constexpr std::uint32_t kCalmPeriods = 6;
    static constexpr std::uint32_t kMaxCalmFactor = 16;
    /// Under this much of one core (2.5 ms of CPU a second) gpudiag never steps down, whatever
    /// the share: an idle program makes any share large, and stepping down would lose data to
    /// save nothing that any program could notice (gpudiag's idle ticks cost about a tenth of it).
    static constexpr double kNegligibleCoreShare = 0.0025;
    /// At most this many changes are kept for the report (the first ones); the rest are counted.
    static constexpr std::size_t kMaxChangesKept = 32;

    /// `top_rung`: the ladder's last rung (capture_reductions().size() - 1).
    CostGovernor(const CostBudget& budget, std::uint32_t top_rung) noexcept;
    [[nodiscard]] bool enabled() const noexcept;
    /// The first sample starts the first period; later ones return the change a completed period
    /// calls for, if any.
    std::optional<BudgetChange> observe(const CostSample& sample) noexcept;

    [[nodiscard]] std::uint32_t rung() const noexcept { return rung_; }
    [[nodiscard]] const std::vector<BudgetChange>& changes() const noexcept { return kept_; }
    [[nodiscard]] std::uint64_t change_count() const noexcept { return changes_; }
    /// How long the session has spent at `rung` or a lower one (more shed) up to `now_ns`.
    [[nodiscard]] std::uint64_t ns_at_or_past(std::uint32_t rung, std::uint64_t now_ns) const;

private:
    struct Judgement {
        bool over = false;
        bool calm = false;
        double share = 0;
        double budget = 0;
        bool of_step = false;
    };
    [[nodiscard]] Judgement judge(const CostSample& s) const noexcept;
    BudgetChange change_to(std::uint32_t to, const CostSample& s, const Judgement& j) noexcept;

    CostBudget budget_;
    std::uint32_t top_rung_;
    std::uint64_t period_ns_;
    bool started_ = false;
    CostSample period_start_;
    std::uint32_t rung_ = 0;
    std::uint32_t calm_periods_ = 0;
    std::uint32_t calm_factor_ = 1;
    std::uint32_t periods_since_up_ = UINT32_MAX;  // UINT32_MAX: never stepped up
    std::uint64_t changes_ = 0;
    std::vector<BudgetChange> kept_;
    std::uint64_t entered_ns_ = 0;         // when the stay at rung_ began
    std::vector<std::uint64_t> spent_ns_;  // by rung: time spent there in past stays
};

/// Tests only: a sink that sessions started from now on feed besides their analyses (the cost
/// budget's test makes it artificially expensive); nullptr, the default, for none.
void set_extra_session_sink_for_tests(EventSink* sink) noexcept;
EventSink* extra_session_sink_for_tests() noexcept;

/// "gpudiag stepped down to api_calls_off at 12.3 s because its cost was 3.1 % of the
/// program's CPU time against a budget of 1 %: ..." (`started_ns`: the session's start).
std::string budget_change_note(const BudgetChange& change, std::uint64_t started_ns);
/// The report's coverage lines: for each rung the session went to, what was not observed and
/// for how long.
void add_budget_losses(const CostGovernor& governor, std::uint64_t now_ns,
                       std::vector<std::string>& missing);

}  // namespace gpudiag::detail
