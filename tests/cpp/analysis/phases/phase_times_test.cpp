// SPDX-License-Identifier: Apache-2.0
// PhaseTimeAnalyzer: time per phase from a real Session's markers around real sleeps (bounded by
// the test's own clock readings, so the checks hold on a loaded machine), and the edge cases
// (unpaired ends, phases never ended, caps, nesting of complete ranges, windows, folding) on
// event sequences of the kinds the importers and capture produce.
#include <gpudiag/analyze.hpp>
#include <gpudiag/event.hpp>
#include <gpudiag/report.hpp>
#include <gpudiag/session.hpp>
#include <gpudiag/string_table.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <variant>
#include <vector>

namespace gpudiag {
namespace {

constexpr std::uint64_t kUs = 1000;
constexpr std::uint64_t kMs = 1000 * kUs;

// One row of the "phase_times" table, by column key.
struct Row {
    std::map<std::string, double> n;
    double operator[](const std::string& key) const {
        auto it = n.find(key);
        return it == n.end() ? -1.0 : it->second;
    }
};

const Table* phase_table(const Report& r) {
    const Section* s = r.section("phases");
    if (s == nullptr) return nullptr;
    for (const Table& t : s->tables) {
        if (t.id == "phase_times") return &t;
    }
    return nullptr;
}

std::map<std::string, Row> rows_of(const Report& r) {
    std::map<std::string, Row> out;
    const Table* t = phase_table(r);
    if (t == nullptr) return out;
    for (const auto& cells : t->rows) {
        Row row;
        for (std::size_t c = 1; c < cells.size() && c < t->columns.size(); ++c) {
            row.n[t->columns[c]] = std::get<double>(cells[c]);
        }
        out[std::get<std::string>(cells[0])] = row;
    }
    return out;
}

bool has_note(const Report& r, const std::string& text) {
    for (const auto& n : r.notes) {
        if (n.find(text) != std::string::npos) return true;
    }
    return false;
}

double figure(const Report& r, const std::string& key) {
    const Section* s = r.section("phases");
    const Figure* f = s != nullptr ? s->figure(key) : nullptr;
    return f != nullptr ? f->value : -1.0;
}

// ---- a real session ---------------------------------------------------------------------------

// The clock the session stamps its markers with.
std::uint64_t now_ns() {
    return Session::now_ns();
}

// What the test's clock saw of one phase: at least `inner` (its sleeps), at most `outer` (from
// before its begin marker to after its end marker).
struct Bounds {
    std::uint64_t inner = 0;
    std::uint64_t outer = 0;
};

void sleep_ms(int ms, Bounds& b) {
    std::uint64_t t0 = now_ns();
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    b.inner += now_ns() - t0;
}

TEST(PhaseTimes, ASessionsPhasesGetTheirSleepsPerStep) {
    SessionOptions o;
    o.capture_gpu = false;
    o.nvml_hz = 0;
    o.flush_period_ms = 5;
    auto created = Session::create(o);
    ASSERT_TRUE(created.is_ok()) << created.status().to_string();
    Session& s = **created;
    ASSERT_TRUE(s.start().is_ok());

    constexpr int kSteps = 4;
    Bounds forward, attention, backward, eval, steps, in_phases;
    for (int i = 0; i < kSteps; ++i) {
        std::uint64_t step0 = now_ns();
        s.step_begin(static_cast<std::uint64_t>(i));
        std::uint64_t f0 = now_ns();
        s.phase_begin("forward");
        sleep_ms(6, forward);
        std::uint64_t a0 = now_ns();
        s.phase_begin("attention");
        sleep_ms(4, attention);
        s.phase_end();
        attention.outer += now_ns() - a0;
        s.phase_end();
        forward.outer += now_ns() - f0;
        std::uint64_t b0 = now_ns();
        s.phase_begin("backward");
        sleep_ms(8, backward);
        s.phase_end();
        backward.outer += now_ns() - b0;
        Bounds outside_phases;
        sleep_ms(2, outside_phases);
        s.step_end(static_cast<std::uint64_t>(i));
        steps.outer += now_ns() - step0;
    }
    std::uint64_t e0 = now_ns();
    s.phase_begin("eval");  // after the last step: outside every step
    sleep_ms(3, eval);
    s.phase_end();
    eval.outer += now_ns() - e0;
    ASSERT_TRUE(s.stop().is_ok());
    auto report = s.report();
    ASSERT_TRUE(report.is_ok()) << report.status().to_string();

    auto rows = rows_of(*report);
    ASSERT_EQ(rows.size(), 4u) << render_text(*report);
    const Row& fwd = rows["forward"];
    const Row& att = rows["attention"];
    const Row& bwd = rows["backward"];
    const Row& ev = rows["eval"];
    EXPECT_EQ(fwd["calls"], kSteps);
    EXPECT_EQ(att["calls"], kSteps);
    EXPECT_EQ(bwd["calls"], kSteps);
    EXPECT_EQ(ev["calls"], 1);
    // Inclusive time lies between the sleeps inside and the clock readings around each phase.
    const double forward_inner = static_cast<double>(forward.inner + attention.inner);
    EXPECT_GE(fwd["total_ns"], forward_inner);
    EXPECT_LE(fwd["total_ns"], static_cast<double>(forward.outer));
    EXPECT_GE(att["total_ns"], static_cast<double>(attention.inner));
    EXPECT_LE(att["total_ns"], static_cast<double>(attention.outer));
    EXPECT_GE(bwd["total_ns"], static_cast<double>(backward.inner));
    EXPECT_LE(bwd["total_ns"], static_cast<double>(backward.outer));
    EXPECT_DOUBLE_EQ(bwd["mean_per_call_ns"], bwd["total_ns"] / kSteps);
    // Self time: forward's own part plus attention's whole is forward's inclusive time.
    EXPECT_NEAR(fwd["self_per_step_ns"] * kSteps + att["total_ns"], fwd["total_ns"], 1.0);
    EXPECT_GE(fwd["self_per_step_ns"] * kSteps, static_cast<double>(forward.inner));
    EXPECT_NEAR(att["self_per_step_ns"] * kSteps, att["total_ns"], 1.0);
    EXPECT_EQ(fwd["self_outside_steps_ns"], 0);
    EXPECT_EQ(ev["self_per_step_ns"], 0);
    EXPECT_GE(ev["self_outside_steps_ns"], static_cast<double>(eval.inner));
    EXPECT_LE(ev["self_outside_steps_ns"], static_cast<double>(eval.outer));
    // Shares of step time add up to at most the step, and to at least what the sleeps fill.
    double shares = fwd["self_share_of_step"] + att["self_share_of_step"] +
                    bwd["self_share_of_step"] + ev["self_share_of_step"];
    EXPECT_LE(shares, 1.0);
    in_phases.inner = forward.inner + attention.inner + backward.inner;
    EXPECT_GE(shares, static_cast<double>(in_phases.inner) / static_cast<double>(steps.outer));
    EXPECT_NEAR(figure(*report, "phase_share_of_step"), shares, 1e-9);
    EXPECT_EQ(figure(*report, "steps"), kSteps);
    // The text report shows the table with its headings.
    std::string text = render_text(*report);
    EXPECT_NE(text.find("Time per phase"), std::string::npos) << text;
    EXPECT_NE(text.find("self share of step"), std::string::npos) << text;
}

// ---- event sequences --------------------------------------------------------------------------

class Events {
public:
    StringTable strings;
    std::vector<Event> events;

    Event& marker(EventKind kind, std::uint64_t t, RangeCategory c, const std::string& name = "",
                  std::uint32_t thread = 1, std::uint64_t id = 0) {
        Event e;
        e.kind = kind;
        e.process = 100;
        e.thread = thread;
        e.start_ns = e.end_ns = t;
        e.range.category = c;
        e.range.name = name.empty() ? kNoString : strings.intern(name);
        e.range.id = id;
        events.push_back(e);
        return events.back();
    }
    void begin(std::uint64_t t, const std::string& name, std::uint32_t thread = 1) {
        marker(EventKind::kRangeBegin, t, RangeCategory::kPhase, name, thread);
    }
    void end(std::uint64_t t, std::uint32_t thread = 1) {
        marker(EventKind::kRangeEnd, t, RangeCategory::kPhase, "", thread);
    }
    void step(std::uint64_t number, std::uint64_t start, std::uint64_t end) {
        marker(EventKind::kStepBegin, start, RangeCategory::kStep).range.id = number;
        marker(EventKind::kStepEnd, end, RangeCategory::kStep).range.id = number;
    }
    // A complete range as the Kineto importer gives it.
    Event& range(std::uint64_t start, std::uint64_t dur, const std::string& name, RangeCategory c,
                 std::uint64_t id = 0) {
        Event& e = marker(EventKind::kRange, start, c, name);
        e.end_ns = start + dur;
        e.range.id = id;
        return e;
    }

    Report analyze(AnalysisWindow window = AnalysisWindow::kSteps) const {
        SourceInfo info;
        info.producer = "test";
        AnalysisOptions options;
        options.window = window;
        auto r = analyze_events(events, info, strings, options);
        EXPECT_TRUE(r.is_ok()) << r.status().to_string();
        return r.is_ok() ? *r : Report{};
    }
};

TEST(PhaseTimes, NoPhasesNoSection) {
    Events ev;
    ev.step(0, 0, 10 * kMs);
    // An NVTX range of some library is not a phase of the program.
    ev.marker(EventKind::kRangeBegin, 1 * kMs, RangeCategory::kGeneric, "cudnn internals");
    ev.marker(EventKind::kRangeEnd, 2 * kMs, RangeCategory::kGeneric);
    ev.range(3 * kMs, 1 * kMs, "aten::mm", RangeCategory::kCpuOp);
    Report r = ev.analyze();
    EXPECT_EQ(r.section("phases"), nullptr);
}

TEST(PhaseTimes, OtherRangesInsideAPhaseNeitherTakeItsTimeNorEndIt) {
    Events ev;
    ev.step(0, 0, 10 * kMs);
    ev.begin(1 * kMs, "forward");
    ev.marker(EventKind::kRangeBegin, 2 * kMs, RangeCategory::kInputWait, "wait");
    ev.marker(EventKind::kRangeEnd, 3 * kMs, RangeCategory::kInputWait);
    ev.end(6 * kMs);
    auto rows = rows_of(ev.analyze());
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_EQ(rows["forward"]["calls"], 1);
    EXPECT_EQ(rows["forward"]["total_ns"], 5 * kMs);
    EXPECT_EQ(rows["forward"]["self_per_step_ns"], 5 * kMs);
    EXPECT_DOUBLE_EQ(rows["forward"]["self_share_of_step"], 0.5);
}

TEST(PhaseTimes, AnEndWithoutABeginIsCountedAndIgnored) {
    Events ev;
    ev.end(1 * kMs);  // its phase began before capture started
    ev.begin(2 * kMs, "forward");
    ev.end(5 * kMs);
    Report r = ev.analyze();
    auto rows = rows_of(r);
    EXPECT_EQ(rows["forward"]["calls"], 1);
    EXPECT_EQ(rows["forward"]["total_ns"], 3 * kMs);
    EXPECT_TRUE(has_note(r, "1 phase end had no phase open")) << render_text(r);
    // Without steps there are no per-step columns, only self time.
    EXPECT_EQ(rows["forward"]["self_ns"], 3 * kMs);
    EXPECT_EQ(rows["forward"]["self_per_step_ns"], -1);
    EXPECT_EQ(figure(r, "steps"), -1);
}

TEST(PhaseTimes, APhaseThatNeverEndsCountsNoCallButItsTimeBeforeItsLastBoundary) {
    Events ev;
    ev.begin(1 * kMs, "forward");
    ev.begin(3 * kMs, "attention");
    ev.end(4 * kMs);
    // the input ends with forward open
    Report r = ev.analyze();
    auto rows = rows_of(r);
    EXPECT_EQ(rows["attention"]["calls"], 1);
    EXPECT_EQ(rows["forward"]["calls"], 0);
    EXPECT_EQ(rows["forward"]["total_ns"], 0);
    EXPECT_TRUE(std::isnan(rows["forward"]["mean_per_call_ns"]));
    EXPECT_EQ(rows["forward"]["self_ns"], 2 * kMs);  // 1..3 ms; after 4 ms nothing says
    EXPECT_TRUE(has_note(r, "1 phase never ended before the input did (\"forward\")"))
        << render_text(
               r);  // A mean the input cannot give is absent (null in JSON), and reads back so.
    auto back = parse_report_json(render_json(r));
    ASSERT_TRUE(back.is_ok()) << back.status().to_string();
    EXPECT_TRUE(std::isnan(rows_of(*back)["forward"]["mean_per_call_ns"]));
    EXPECT_EQ(rows_of(*back)["attention"]["total_ns"], 1 * kMs);
}

TEST(PhaseTimes, NamesPastTheCapShareOneRowAndTheTableStaysShort) {
    Events ev;
    constexpr int kNames = 300;
    for (int i = 0; i < kNames; ++i) {
        ev.begin(static_cast<std::uint64_t>(i) * kMs, "request " + std::to_string(i));
        ev.end(static_cast<std::uint64_t>(i) * kMs + 500 * kUs);
    }
    Report r = ev.analyze();
    const Table* t = phase_table(r);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->rows.size(), 40u);
    double calls = 0;
    double total = 0;
    for (const auto& row : t->rows) {
        calls += std::get<double>(row[1]);
        total += std::get<double>(row[2]);
    }
    EXPECT_EQ(calls, kNames);  // every range counted, in its own row or the summed ones
    EXPECT_EQ(total, kNames * 500.0 * kUs);
    EXPECT_EQ(figure(r, "phases"), 257);  // 256 names and the row of the names past them
    EXPECT_TRUE(has_note(r, "more than 256 distinct names; 44 ranges")) << render_text(r);
}

TEST(PhaseTimes, NestingPastTheCapStillPairsEveryEnd) {
    Events ev;
    constexpr std::uint64_t kDepth = 100;
    for (std::uint64_t i = 0; i < kDepth; ++i) ev.begin(i * kUs, "level");
    for (std::uint64_t i = 0; i < kDepth; ++i) ev.end(kMs + i * kUs);
    ev.begin(2 * kMs, "after");
    ev.end(3 * kMs);
    Report r = ev.analyze();
    auto rows = rows_of(r);
    EXPECT_EQ(rows["after"]["calls"], 1);
    EXPECT_EQ(rows["after"]["total_ns"], 1 * kMs);
    // One call: the levels inside it repeat its name. It ends with the last end.
    EXPECT_EQ(rows["level"]["calls"], 1);
    EXPECT_EQ(rows["level"]["total_ns"], kMs + (kDepth - 1) * kUs);
    EXPECT_TRUE(has_note(r, "36 phases were not timed")) << render_text(r);
}

TEST(PhaseTimes, ComplexRangesNestByTimeWhateverTheirOrder) {
    Events ev;
    // ProfilerStep ranges make the steps; user annotations are phases; the GPU copy of an
    // annotation is not a host phase.
    ev.range(0, 10 * kMs, "ProfilerStep#1", RangeCategory::kStep, 1);
    ev.range(1 * kMs, 4 * kMs, "DistributedDataParallel.forward", RangeCategory::kUserAnnotation);
    ev.range(1 * kMs, 5 * kMs, "## forward ##", RangeCategory::kUserAnnotation);  // the parent
    ev.range(7 * kMs, 2 * kMs, "Optimizer.step#SGD.step", RangeCategory::kUserAnnotation);
    ev.range(7 * kMs, 1 * kMs, "aten::add_", RangeCategory::kCpuOp);
    Event& gpu = ev.range(7 * kMs, 3 * kMs, "## forward ##", RangeCategory::kUserAnnotation);
    gpu.device = 0;
    ev.range(10 * kMs, 10 * kMs, "ProfilerStep#2", RangeCategory::kStep, 2);
    Report r = ev.analyze();
    auto rows = rows_of(r);
    ASSERT_EQ(rows.size(), 3u) << render_text(r);
    EXPECT_EQ(rows["## forward ##"]["total_ns"], 5 * kMs);
    EXPECT_EQ(rows["## forward ##"]["self_per_step_ns"], 1 * kMs / 2.0);  // 2 steps
    EXPECT_EQ(rows["DistributedDataParallel.forward"]["self_per_step_ns"], 4 * kMs / 2.0);
    EXPECT_EQ(rows["Optimizer.step#SGD.step"]["self_per_step_ns"], 2 * kMs / 2.0);
    EXPECT_DOUBLE_EQ(figure(r, "phase_share_of_step"), 7.0 / 20.0);
}

TEST(PhaseTimes, HtasWindowLeavesTheLastStepOut) {
    Events ev;
    for (std::uint64_t i = 0; i < 3; ++i) {
        ev.step(i, i * 10 * kMs, (i + 1) * 10 * kMs);
        ev.begin(i * 10 * kMs + 1 * kMs, "forward");
        ev.end(i * 10 * kMs + 5 * kMs);
    }
    Report steps = ev.analyze(AnalysisWindow::kSteps);
    EXPECT_EQ(figure(steps, "steps"), 3);
    EXPECT_EQ(rows_of(steps)["forward"]["self_outside_steps_ns"], 0);
    Report hta = ev.analyze(AnalysisWindow::kHta);
    EXPECT_EQ(figure(hta, "steps"), 2);
    auto rows = rows_of(hta);
    EXPECT_EQ(rows["forward"]["self_per_step_ns"], 4 * kMs);
    EXPECT_EQ(rows["forward"]["self_outside_steps_ns"], 4 * kMs);
    EXPECT_DOUBLE_EQ(rows["forward"]["self_share_of_step"], 0.4);
}

// 20,000 steps of 2 phases each: the pieces are folded many times while the events flow (in the
// batches analyze_events feeds), and the totals stay exact.
TEST(PhaseTimes, ALongRunIsFoldedWithoutLosingTime) {
    Events ev;
    constexpr std::uint64_t kSteps = 20'000;
    for (std::uint64_t i = 0; i < kSteps; ++i) {
        std::uint64_t t = i * 10 * kUs;
        ev.range(t, 8 * kUs, "ProfilerStep#" + std::to_string(i), RangeCategory::kStep, i);
        ev.range(t + 1 * kUs, 4 * kUs, "forward", RangeCategory::kUserAnnotation);
        ev.range(t + 8 * kUs, 1 * kUs, "logging", RangeCategory::kUserAnnotation);  // between
    }
    Report r = ev.analyze(AnalysisWindow::kHta);
    auto rows = rows_of(r);
    EXPECT_EQ(figure(r, "steps"), kSteps - 1);
    EXPECT_EQ(rows["forward"]["calls"], kSteps);
    EXPECT_EQ(rows["forward"]["self_per_step_ns"], 4 * kUs);
    EXPECT_EQ(rows["forward"]["self_outside_steps_ns"], 4 * kUs);  // the last step's
    EXPECT_DOUBLE_EQ(rows["forward"]["self_share_of_step"], 0.5);
    EXPECT_EQ(rows["logging"]["self_per_step_ns"], 0);
    EXPECT_EQ(rows["logging"]["self_outside_steps_ns"], kSteps * 1.0 * kUs);
    EXPECT_FALSE(has_note(r, "counted before the step ended")) << render_text(r);
}

// A step holding more pieces than are kept: the earliest are counted before the step closes,
// and the report says so.
TEST(PhaseTimes, AStepOfMorePiecesThanKeptIsSaidSo) {
    Events ev;
    ev.marker(EventKind::kStepBegin, 0, RangeCategory::kStep).range.id = 0;
    constexpr std::uint64_t kPhases = 20'000;
    for (std::uint64_t i = 0; i < kPhases; ++i) {
        ev.begin(1 * kUs + i * 10 * kUs, "item " + std::to_string(i % 2));
        ev.end(1 * kUs + i * 10 * kUs + 5 * kUs);
    }
    ev.marker(EventKind::kStepEnd, kPhases * 10 * kUs, RangeCategory::kStep).range.id = 0;
    Report r = ev.analyze();
    auto rows = rows_of(r);
    EXPECT_EQ(rows["item 0"]["calls"] + rows["item 1"]["calls"], kPhases);
    EXPECT_EQ(rows["item 0"]["total_ns"] + rows["item 1"]["total_ns"], kPhases * 5.0 * kUs);
    EXPECT_GT(rows["item 0"]["self_outside_steps_ns"], 0);
    EXPECT_TRUE(has_note(r, "counted before the step ended")) << render_text(r);
}

TEST(PhaseTimes, NvtxEndsPairByIdAcrossDomains) {
    Events ev;
    ev.step(0, 0, 10 * kMs);
    // Another domain's range begun outside the phase ends inside it: it must not end the phase.
    ev.marker(EventKind::kRangeBegin, 1 * kMs, RangeCategory::kGeneric, "library", 1, 77);
    ev.marker(EventKind::kRangeBegin, 2 * kMs, RangeCategory::kPhase, "forward", 1, 78);
    ev.marker(EventKind::kRangeEnd, 3 * kMs, RangeCategory::kGeneric, "", 1, 77);
    ev.marker(EventKind::kRangeEnd, 6 * kMs, RangeCategory::kPhase, "", 1, 78);
    auto rows = rows_of(ev.analyze());
    EXPECT_EQ(rows["forward"]["calls"], 1);
    EXPECT_EQ(rows["forward"]["total_ns"], 4 * kMs);
}

TEST(PhaseTimes, PhasesOnTwoThreadsAtOnceAreSaidToOverlap) {
    Events ev;
    ev.step(0, 0, 10 * kMs);
    ev.begin(0, "forward", 1);
    ev.begin(0, "prefetch", 2);
    ev.end(8 * kMs, 1);
    ev.end(8 * kMs, 2);
    Report r = ev.analyze();
    EXPECT_DOUBLE_EQ(figure(r, "phase_share_of_step"), 1.6);
    EXPECT_TRUE(has_note(r, "several threads at once")) << render_text(r);
}

}  // namespace
}  // namespace gpudiag
