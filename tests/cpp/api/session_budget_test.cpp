// SPDX-License-Identifier: Apache-2.0
// SessionOptions::cost_budget: the governor's judgement on measured periods (fed exact figures,
// so deterministic), the ladder it steps along, and a live session whose sink is made expensive,
// which steps down, and back up once the expense stops.
#include <gpudiag/gpudiag.h>
#include <gpudiag/session.hpp>
#include <gpudiag/sink.hpp>

#include "api/session_cost.hpp"
#include "capture/capture_levels.hpp"
#include "session_test_support.hpp"
#include "thread_cpu.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace gpudiag {
namespace {

using detail::BudgetChange;
using detail::CostGovernor;
using detail::CostSample;

constexpr std::uint64_t kMs = 1'000'000;
constexpr std::uint64_t kPeriodNs = 100 * kMs;

CostBudget budget(double cpu_share = 0.01, double step_share = 0.005) {
    CostBudget b;
    b.cpu_share = cpu_share;
    b.step_share = step_share;
    b.period_ms = 100;
    return b;
}

std::uint32_t top_rung() {
    return static_cast<std::uint32_t>(detail::capture_reductions().size() - 1);
}

// Feeds a governor one sample per period, the process spending `process_ns` of CPU a period and
// gpudiag `own_ns` of it; returns each period's change.
class Periods {
public:
    explicit Periods(const CostBudget& b) : governor(b, top_rung()) {
        EXPECT_FALSE(governor.observe(sample).has_value());  // starts the first period
    }

    std::optional<BudgetChange> run(std::uint64_t own_ns, std::uint64_t process_ns,
                                    std::uint64_t steps = 0, std::uint64_t step_ns = 0) {
        sample.now_ns += kPeriodNs;
        sample.own_cpu_ns += own_ns;
        sample.process_cpu_ns += process_ns;
        sample.steps_ended += steps;
        sample.steps_timed += steps;
        sample.step_ns += steps * step_ns;
        return governor.observe(sample);
    }

    // Runs periods at this cost until a change, at most `limit` of them; the periods it took.
    std::optional<int> until_change(std::uint64_t own_ns, std::uint64_t process_ns, int limit) {
        for (int i = 1; i <= limit; ++i) {
            if (run(own_ns, process_ns)) return i;
        }
        return std::nullopt;
    }

    CostGovernor governor;
    CostSample sample{1000 * kMs, 0, 0, 0, 0, 0};
};

// A busy program: a whole core each period, so gpudiag's cost is never negligible here.
constexpr std::uint64_t kProcessNs = kPeriodNs;
constexpr std::uint64_t kOver = kProcessNs / 20;           // 5 %: over a 1 % budget
constexpr std::uint64_t kCalm = kProcessNs / 400;          // 0.25 %: under half of it
constexpr std::uint64_t kBetween = kProcessNs * 7 / 1000;  // 0.7 %: under, not under half

TEST(CostBudgetLadder, MildestFirstEachRungKeepingTheOnesBeforeOff) {
    const auto ladder = detail::capture_reductions();
    ASSERT_EQ(ladder.size(), 3u);
    EXPECT_STREQ(ladder[0].name, "full");
    EXPECT_EQ(ladder[0].kinds_off, 0u);
    for (std::size_t r = 1; r < ladder.size(); ++r) {
        EXPECT_EQ(ladder[r].kinds_off & ladder[r - 1].kinds_off, ladder[r - 1].kinds_off) << r;
        EXPECT_NE(ladder[r].kinds_off, ladder[r - 1].kinds_off) << r;
    }
    using detail::reduction_drops;
    EXPECT_TRUE(reduction_drops(ladder[1].kinds_off, EventKind::kApiCall));
    EXPECT_FALSE(reduction_drops(ladder[1].kinds_off, EventKind::kKernel));
    // Copies leave with kernels, never before them: a copy is GPU busy time.
    EXPECT_TRUE(reduction_drops(ladder[2].kinds_off, EventKind::kKernel));
    EXPECT_TRUE(reduction_drops(ladder[2].kinds_off, EventKind::kMemcpy));
    EXPECT_TRUE(ladder[2].gpu_activity_off);
    // Memory, framework and NVML events carry the memory diagnosis: never shed.
    for (EventKind kept :
         {EventKind::kDeviceAlloc, EventKind::kBlockAlloc, EventKind::kStepBegin,
          EventKind::kCounter, EventKind::kRangeBegin, EventKind::kCapturePaused}) {
        EXPECT_FALSE(reduction_drops(ladder.back().kinds_off, kept)) << static_cast<int>(kept);
    }
}

TEST(CostGovernor, OffWithoutAPeriodOrAShare) {
    CostBudget none = budget(0, 0);
    EXPECT_FALSE(CostGovernor(none, top_rung()).enabled());
    CostBudget no_period = budget();
    no_period.period_ms = 0;
    EXPECT_FALSE(CostGovernor(no_period, top_rung()).enabled());
    EXPECT_TRUE(CostGovernor(budget(), top_rung()).enabled());
}

TEST(CostGovernor, StepsDownOneRungAPeriodAndSaysWhy) {
    Periods p(budget());
    // Half a period in: nothing is judged yet.
    p.sample.now_ns += kPeriodNs / 2;
    EXPECT_FALSE(p.governor.observe(p.sample).has_value());
    p.sample.now_ns -= kPeriodNs / 2;

    auto first = p.run(kOver, kProcessNs);
    ASSERT_TRUE(first.has_value());
    EXPECT_EQ(first->from, 0u);
    EXPECT_EQ(first->to, 1u);
    EXPECT_NEAR(first->share, 0.05, 1e-9);
    EXPECT_DOUBLE_EQ(first->budget, 0.01);
    EXPECT_FALSE(first->of_step);
    const std::string note = detail::budget_change_note(*first, 1000 * kMs);
    EXPECT_NE(note.find("gpudiag stepped down to api_calls_off at 100 ms"), std::string::npos)
        << note;
    EXPECT_NE(note.find("its cost was 5 % of the program's CPU time against a budget of 1 %"),
              std::string::npos)
        << note;
    EXPECT_NE(note.find("API calls"), std::string::npos) << note;

    auto second = p.run(kOver, kProcessNs);
    ASSERT_TRUE(second.has_value());
    EXPECT_EQ(second->to, 2u);
    EXPECT_FALSE(p.run(kOver, kProcessNs).has_value());  // the last rung: nowhere further
    EXPECT_EQ(p.governor.rung(), top_rung());
    EXPECT_EQ(p.governor.change_count(), 2u);
}

TEST(CostGovernor, StepsUpOnlyAfterSixCalmPeriodsUnderHalfTheBudget) {
    Periods p(budget());
    ASSERT_TRUE(p.run(kOver, kProcessNs).has_value());
    // Under the budget but over half of it: it stays down however long that lasts.
    EXPECT_FALSE(p.until_change(kBetween, kProcessNs, 30).has_value());
    EXPECT_EQ(p.governor.rung(), 1u);
    // Under half: back up after exactly kCalmPeriods periods.
    const auto took = p.until_change(kCalm, kProcessNs, 30);
    ASSERT_TRUE(took.has_value());
    EXPECT_EQ(*took, static_cast<int>(CostGovernor::kCalmPeriods));
    EXPECT_EQ(p.governor.rung(), 0u);
    const BudgetChange& up = p.governor.changes().back();
    EXPECT_EQ(up.from, 1u);
    EXPECT_EQ(up.to, 0u);
    EXPECT_EQ(up.calm_ns, CostGovernor::kCalmPeriods * kPeriodNs);
    const std::string note = detail::budget_change_note(up, 1000 * kMs);
    EXPECT_NE(note.find("stepped back up to full"), std::string::npos) << note;
    EXPECT_NE(note.find("under half its budget for 600 ms"), std::string::npos) << note;
}

TEST(CostGovernor, AFlappingWorkloadWaitsTwiceAsLongEachTime) {
    Periods p(budget());
    std::vector<int> waits;
    for (int round = 0; round < 6; ++round) {
        ASSERT_TRUE(p.run(kOver, kProcessNs).has_value()) << round;  // down at once
        const auto took = p.until_change(kCalm, kProcessNs, 1000);
        ASSERT_TRUE(took.has_value()) << round;
        waits.push_back(*took);
    }
    const int calm = static_cast<int>(CostGovernor::kCalmPeriods);
    const int most = calm * static_cast<int>(CostGovernor::kMaxCalmFactor);
    EXPECT_EQ(waits, (std::vector<int>{calm, 2 * calm, 4 * calm, 8 * calm, most, most}));
    // A long calm at full capture forgives it: the next step up waits kCalmPeriods again.
    EXPECT_FALSE(p.until_change(kCalm, kProcessNs, most).has_value());
    ASSERT_TRUE(p.run(kOver, kProcessNs).has_value());
    EXPECT_EQ(p.until_change(kCalm, kProcessNs, 1000), calm);
}

TEST(CostGovernor, NeverStepsDownForANegligibleCostOfAnIdleProgram) {
    Periods p(budget());
    // 90 % of an idle process' CPU, but 0.1 % of one core: stepping down would save nothing.
    const std::uint64_t own = kPeriodNs / 1000;
    EXPECT_FALSE(p.until_change(own, own + own / 9, 20).has_value());
    // 0.5 % of a core, 90 % of the process: over.
    EXPECT_TRUE(p.run(5 * own, 5 * own + 5 * own / 9).has_value());
}

TEST(CostGovernor, AStepsShareStepsDownWhereTheCpuShareWouldNot) {
    Periods p(budget(0.5, 0.005));  // a CPU share it never reaches
    // 10 steps of 10 ms, gpudiag 1 ms of CPU in all: 0.1 ms a step, 1 % of a step.
    auto change = p.run(kMs, kProcessNs, 10, 10 * kMs);
    ASSERT_TRUE(change.has_value());
    EXPECT_TRUE(change->of_step);
    EXPECT_NEAR(change->share, 0.01, 1e-9);
    const std::string note = detail::budget_change_note(*change, 1000 * kMs);
    EXPECT_NE(note.find("of a step's time against a budget of 0.5 %"), std::string::npos) << note;
}

TEST(CostGovernor, CountsTheTimeEachRungLeftKindsOut) {
    Periods p(budget());
    ASSERT_TRUE(p.run(kOver, kProcessNs).has_value());  // rung 1 from 100 ms
    ASSERT_TRUE(p.run(kOver, kProcessNs).has_value());  // rung 2 from 200 ms
    (void)p.run(kOver, kProcessNs);                     // still rung 2 at 300 ms
    const std::uint64_t now = p.sample.now_ns;
    EXPECT_EQ(p.governor.ns_at_or_past(1, now), 200 * kMs);
    EXPECT_EQ(p.governor.ns_at_or_past(2, now), 100 * kMs);
    std::vector<std::string> missing;
    detail::add_budget_losses(p.governor, now, missing);
    ASSERT_EQ(missing.size(), 2u);
    EXPECT_NE(missing[0].find("API calls"), std::string::npos) << missing[0];
    EXPECT_NE(missing[0].find("were not observed for 200 ms"), std::string::npos) << missing[0];
    EXPECT_NE(missing[1].find("kernels"), std::string::npos) << missing[1];
}

// ---- a live session ----

using testing::burn_cpu;
using testing::thread_cpu_ns;

// A sink that spends CPU time on every API call record (and kernel, with `kernels_too`) while
// `expensive` holds: the worker runs it, so its time is gpudiag's cost.
class ExpensiveSink final : public EventSink {
public:
    explicit ExpensiveSink(bool kernels_too = false) : kernels_too_(kernels_too) {}
    void consume(std::span<const Event> events) override {
        for (const Event& e : events) {
            const bool api = e.kind == EventKind::kApiCall;
            if (api) api_calls.fetch_add(1, std::memory_order_relaxed);
            if (!api && !(kernels_too_ && e.kind == EventKind::kKernel)) continue;
            if (expensive.load(std::memory_order_relaxed)) burn_cpu(200'000);
        }
    }
    std::atomic<bool> expensive{true};
    std::atomic<std::uint64_t> api_calls{0};

private:
    bool kernels_too_;
};

struct SinkForTests {
    explicit SinkForTests(EventSink* sink) { detail::set_extra_session_sink_for_tests(sink); }
    ~SinkForTests() { detail::set_extra_session_sink_for_tests(nullptr); }
    SinkForTests(const SinkForTests&) = delete;
    SinkForTests& operator=(const SinkForTests&) = delete;
};

Event api_call() {
    Event e;
    e.kind = EventKind::kApiCall;
    e.start_ns = Session::now_ns();
    e.end_ns = e.start_ns + 1000;
    return e;
}

Event kernel() {
    Event e;
    e.kind = EventKind::kKernel;
    e.device = 0;
    e.stream = 7;
    e.start_ns = Session::now_ns();
    e.end_ns = e.start_ns + 100'000;
    return e;
}

double figure(const Report& r, const char* key) {
    const Section* cost = r.section("cost");
    const Figure* f = cost != nullptr ? cost->figure(key) : nullptr;
    return f != nullptr ? f->value : -1;
}

bool has_note(const Report& r, const std::string& text) {
    return std::any_of(r.notes.begin(), r.notes.end(),
                       [&](const std::string& n) { return n.find(text) != std::string::npos; });
}

// Waits (up to 20 s) until the running session's report shows a budget rung `accept` takes.
template <typename Accept>
bool wait_for_rung(Session& s, Accept accept) {
    return testing::wait_for(
        [&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            auto r = s.report();
            return r.is_ok() && accept(figure(*r, "budget_rung"));
        },
        std::chrono::milliseconds(20000));
}

// The program works (half a millisecond of CPU) between API calls, and the sink spends 200 us on
// each: some 30 % of the process' CPU time against a 10 % budget (less than the program's time,
// so the worker keeps up and no backlog outlives the expense). Once the sink is cheap, gpudiag's
// own ticks (every 10 ms) are what it costs: about 2 % of the program's CPU time even when a
// loaded machine gives the program a fifth of a core, well under half the budget. Periods of
// 50 ms keep the test short; both ways are waited for, never timed, so a loaded machine makes it
// slower, not flaky.
TEST(SessionCostBudget, AnExpensiveSinkMakesItStepDownAndBackUpOnceTheExpenseStops) {
    ExpensiveSink sink;
    SinkForTests hook(&sink);
    SessionOptions o = testing::cpu_options();
    o.flush_period_ms = 10;
    o.cost_budget.cpu_share = 0.1;
    o.cost_budget.step_share = 0;
    o.cost_budget.period_ms = 50;
    auto s = testing::make(o);
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(s->start().is_ok());

    std::atomic<bool> done{false};
    std::atomic<std::uint64_t> recorded{0};
    std::thread program([&] {
        while (!done.load()) {
            burn_cpu(500'000);
            if (s->record(api_call())) recorded.fetch_add(1);
        }
    });
    const bool stepped_down = wait_for_rung(*s, [](double rung) { return rung >= 1; });
    sink.expensive.store(false);
    const bool stepped_up =
        stepped_down && wait_for_rung(*s, [](double rung) { return rung == 0; });
    done.store(true);
    program.join();
    ASSERT_TRUE(stepped_down);
    ASSERT_TRUE(stepped_up);
    ASSERT_TRUE(s->stop().is_ok());

    auto r = s->report();
    ASSERT_TRUE(r.is_ok());
    EXPECT_TRUE(has_note(*r, "gpudiag stepped down to api_calls_off at ")) << render_text(*r);
    EXPECT_TRUE(has_note(*r, "against a budget of 10 %")) << render_text(*r);
    EXPECT_TRUE(has_note(*r, "gpudiag stepped back up to full at ")) << render_text(*r);
    EXPECT_GE(figure(*r, "budget_changes"), 2);
    EXPECT_DOUBLE_EQ(figure(*r, "budget_cpu_share"), 0.1);
    // What was left out is counted, and the report says what it did not observe.
    const double shed = figure(*r, "shed_events");
    EXPECT_GT(shed, 0);
    EXPECT_EQ(static_cast<double>(sink.api_calls.load()) + shed,
              static_cast<double>(recorded.load()));
    EXPECT_FALSE(r->input.complete);
    EXPECT_TRUE(std::any_of(r->input.missing.begin(), r->input.missing.end(),
                            [](const std::string& m) {
                                return m.find("API calls") != std::string::npos &&
                                       m.find("were not observed for") != std::string::npos;
                            }))
        << render_text(*r);
}

// With kernels expensive too, leaving API calls out is not enough: it steps down to no GPU
// activity at all, which the timeline counts as unobserved (a pause of capture), never as idle.
TEST(SessionCostBudget, LeavingGpuActivityOutIsAPauseOfCaptureNotAnIdleGpu) {
    ExpensiveSink sink(/*kernels_too=*/true);
    SinkForTests hook(&sink);
    SessionOptions o = testing::cpu_options();
    o.flush_period_ms = 10;
    o.cost_budget.cpu_share = 0.1;
    o.cost_budget.step_share = 0;
    o.cost_budget.period_ms = 50;
    auto s = testing::make(o);
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(s->start().is_ok());
    std::atomic<bool> done{false};
    std::thread program([&] {
        while (!done.load()) {
            burn_cpu(500'000);
            (void)s->record(api_call());
            (void)s->record(kernel());
        }
    });
    const bool down = wait_for_rung(*s, [](double rung) { return rung == 2; });
    sink.expensive.store(false);
    const bool up = down && wait_for_rung(*s, [](double rung) { return rung == 0; });
    done.store(true);
    program.join();
    ASSERT_TRUE(down);
    ASSERT_TRUE(up);
    ASSERT_TRUE(s->stop().is_ok());
    auto r = s->report();
    ASSERT_TRUE(r.is_ok());
    EXPECT_TRUE(has_note(*r, "gpudiag stepped down to gpu_activity_off at ")) << render_text(*r);
    EXPECT_TRUE(has_note(*r, "GPU capture was paused for")) << render_text(*r);
    EXPECT_TRUE(std::any_of(
        r->input.missing.begin(), r->input.missing.end(),
        [](const std::string& m) { return m.find("kernels, copies") != std::string::npos; }))
        << render_text(*r);
}

TEST(SessionCostBudget, BadSharesAreRefused) {
    SessionOptions o = testing::cpu_options();
    o.cost_budget.cpu_share = 1.5;
    EXPECT_EQ(Session::create(o).status().code(), StatusCode::kInvalidArgument);
    o.cost_budget.cpu_share = 0.01;
    o.cost_budget.step_share = -0.1;
    EXPECT_EQ(Session::create(o).status().code(), StatusCode::kInvalidArgument);
}

// The C API carries the budget; a caller built before it existed keeps the defaults.
TEST(SessionCostBudget, TheCApiPassesItOnAndAnOlderStructKeepsTheDefaults) {
    gpudiag_session_options_t o;
    gpudiag_session_options_init(&o);
    EXPECT_DOUBLE_EQ(o.cost_budget_cpu_share, 0.01);
    EXPECT_DOUBLE_EQ(o.cost_budget_step_share, 0.005);
    EXPECT_EQ(o.cost_budget_period_ms, 10000u);
    o.capture_gpu = 0;
    o.nvml_hz = 0;
    o.cost_budget_cpu_share = 2;  // refused: so it was read
    gpudiag_session_t* session = nullptr;
    EXPECT_EQ(gpudiag_session_create(&o, &session), GPUDIAG_INVALID_ARGUMENT);
    EXPECT_NE(std::string(gpudiag_last_error()).find("cost_budget"), std::string::npos);
    o.size = offsetof(gpudiag_session_options_t, cost_budget_cpu_share);  // an older caller's
    ASSERT_EQ(gpudiag_session_create(&o, &session), GPUDIAG_OK) << gpudiag_last_error();
    gpudiag_session_destroy(session);
}

}  // namespace
}  // namespace gpudiag
