// SPDX-License-Identifier: Apache-2.0
// The timeline analysis on synthetic event streams: one scenario per finding, a healthy run with
// none, HTA's idle categories on a hand-built stream, and the three analysis windows.
#include "synthetic_timeline.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpudiag::testing {
namespace {

const char* kNccl =
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)";

bool has_finding(const Report& r, const std::string& id) {
    return r.finding(id) != nullptr;
}

TEST(TimelineSynthetic, HealthyRunHasNoFindings) {
    // GIVEN kernels back to back, each launched 500 µs before it starts, over 10 steps
    SyntheticTimeline t;
    for (int i = 0; i < 10; ++i) t.step(i, i * 10 * kMs, 10 * kMs);
    for (int k = 0; k < 100; ++k) {
        std::uint64_t start = 600 * kUs + k * kMs;
        t.kernel(start, kMs, start - 500 * kUs);
    }
    // WHEN analysed
    auto r = t.analyze();
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    // THEN the GPU is busy and nothing is reported
    EXPECT_NEAR(timeline_figure(*r, "idle_share"), 0.0, 1e-9);
    EXPECT_EQ(timeline_figure(*r, "steps"), 10);
    EXPECT_TRUE(r->findings.empty()) << r->findings.front().id;
}

TEST(TimelineSynthetic, InputBoundWhenTheLoopWaitsForBatches) {
    SyntheticTimeline t;
    for (int i = 0; i < 10; ++i) {
        std::uint64_t s = i * 10 * kMs;
        t.step(i, s, 10 * kMs);
        t.input_wait(s, 4 * kMs);  // 40 % of every step fetching the batch
        for (int k = 0; k < 6; ++k) {
            std::uint64_t start = s + 4 * kMs + 20 * kUs + k * kMs;
            t.kernel(start, kMs, k == 0 ? s + 4 * kMs + 5 * kUs : start - 500 * kUs);
        }
    }
    auto r = t.analyze();
    ASSERT_TRUE(r.is_ok());
    const Finding* f = r->finding("input_bound");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::kCritical);
    EXPECT_NEAR(timeline_figure(*r, "input_wait_share"), 0.4, 0.01);
    EXPECT_NEAR(timeline_figure(*r, "input_wait_max_ns"), 4.0 * kMs, 1);
    EXPECT_GT(timeline_figure(*r, "idle_input_share"), 0.95);
    EXPECT_FALSE(f->advice.empty());
    EXPECT_NE(f->advice.front().find("num_workers"), std::string::npos);
    EXPECT_FALSE(has_finding(*r, "launch_bound"));
}

// A trainer's callbacks (Lightning's on_train_batch_start/end, Hugging Face's on_step_begin/end)
// mark a step after the batch was fetched: 10 steps of 2 ms, each after an 8 ms fetch, 1.9 ms of
// the trainer's own work between a step's end and the next fetch.
void callback_steps(SyntheticTimeline& t) {
    for (int i = 0; i < 10; ++i) {
        const std::uint64_t base = i * 12 * kMs;
        t.input_wait(base, 8 * kMs);
        t.marked_step(i, base + 8'100 * kUs, 2 * kMs);
    }
}

void expect_fetches_booked_to_the_steps_after_them(const Report& r) {
    // Steps 1-9 start at their fetch (10.1 ms, 8 of them waiting); step 0's fetch came before
    // any step (starting the loader: warm-up) and stays out.
    EXPECT_EQ(timeline_figure(r, "steps"), 10);
    EXPECT_EQ(timeline_figure(r, "lead_in_waits"), 9);
    EXPECT_NEAR(timeline_figure(r, "input_wait_share"), 72.0 / 92.9, 1e-6);
    const Finding* f = r.finding("input_bound");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::kCritical);
    // What is left between the steps is a figure, and a note at this share (17.1 of 110 ms).
    EXPECT_NEAR(timeline_figure(r, "between_steps_ns"), 9 * 1.9 * kMs, 1);
    EXPECT_NEAR(timeline_figure(r, "between_steps_share"), 17.1 / 110.0, 1e-6);
    bool noted = false;
    for (const auto& n : r.notes)
        noted = noted || n.find("fell between steps") != std::string::npos;
    EXPECT_TRUE(noted);
}

TEST(TimelineSynthetic, AFetchBeforeACallbackStepIsThatStepsInputWait) {
    SyntheticTimeline t;
    callback_steps(t);
    auto r = t.analyze();
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    expect_fetches_booked_to_the_steps_after_them(*r);
}

TEST(TimelineSynthetic, AFetchThatArrivesAfterItsStepIsBookedToItToo) {
    // Each fetch's range delivered after the step it precedes (a source that writes ranges when
    // they end, after the step's begin marker).
    SyntheticTimeline t;
    callback_steps(t);
    std::vector<Event> reordered;
    for (std::size_t i = 0; i < t.events.size(); i += 3) {
        reordered.push_back(t.events[i + 1]);  // step begin
        reordered.push_back(t.events[i + 2]);  // step end
        reordered.push_back(t.events[i]);      // its fetch
    }
    SourceInfo info;
    info.producer = "simulated";
    auto r = analyze_events(reordered, info, t.strings);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    expect_fetches_booked_to_the_steps_after_them(*r);
}

// A program that fetched its first batch and stopped (it crashed, or was stopped) has no loop to
// be input-bound: one fetch in the whole host time raises nothing; two do.
TEST(TimelineSynthetic, OneFetchWithoutStepsIsNoInputBoundLoop) {
    SyntheticTimeline once;
    once.range(0, 10 * kMs, RangeCategory::kCpuOp, "aten::empty");
    once.input_wait(kMs, 2 * kMs);
    auto r = once.analyze();
    ASSERT_TRUE(r.is_ok());
    EXPECT_FALSE(has_finding(*r, "input_bound"));
    SyntheticTimeline twice;
    twice.range(0, 10 * kMs, RangeCategory::kCpuOp, "aten::empty");
    twice.input_wait(kMs, 2 * kMs);
    twice.input_wait(5 * kMs, 2 * kMs);
    auto r2 = twice.analyze();
    ASSERT_TRUE(r2.is_ok());
    EXPECT_TRUE(has_finding(*r2, "input_bound"));
}

TEST(TimelineSynthetic, StepsThatMeetLeaveNothingBetweenThem) {
    SyntheticTimeline t;
    for (int i = 0; i < 10; ++i) {
        t.marked_step(i, i * 10 * kMs, 10 * kMs);
        t.input_wait(i * 10 * kMs + kMs, 4 * kMs);
    }
    auto r = t.analyze();
    ASSERT_TRUE(r.is_ok());
    EXPECT_NEAR(timeline_figure(*r, "input_wait_share"), 0.4, 1e-9);
    EXPECT_EQ(timeline_figure(*r, "lead_in_waits"), -1);
    EXPECT_EQ(timeline_figure(*r, "between_steps_ns"), -1);
}

// A host-only input with input waits gets a partition of each step into its wait and the rest:
// the chart a CPU session's HTML draws.
TEST(TimelineSynthetic, HostOnlyStepsSplitIntoInputWaitAndTheRest) {
    SyntheticTimeline t;
    for (int i = 0; i < 5; ++i) {
        t.marked_step(i, i * 10 * kMs, 10 * kMs);
        t.input_wait(i * 10 * kMs + kMs, 3 * kMs);
    }
    auto r = t.analyze();
    ASSERT_TRUE(r.is_ok());
    const Section* sec = r->section("timeline");
    ASSERT_NE(sec, nullptr);
    const Table* split = nullptr;
    for (const auto& table : sec->tables) {
        if (table.id == "step_host_breakdown") split = &table;
    }
    ASSERT_NE(split, nullptr);
    EXPECT_EQ(split->kind, TableKind::kPartition);
    ASSERT_EQ(split->rows.size(), 5u);
    for (const auto& row : split->rows) {
        EXPECT_EQ(std::get<double>(row[1]), 3.0 * kMs);
        EXPECT_EQ(std::get<double>(row[1]) + std::get<double>(row[2]), 10.0 * kMs);
    }
}

TEST(TimelineSynthetic, HostSyncStallWhenSyncsDrainTheQueue) {
    SyntheticTimeline t;
    for (int i = 0; i < 10; ++i) {
        std::uint64_t s = i * 10 * kMs;
        t.step(i, s, 10 * kMs);
        for (int b = 0; b < 3; ++b) {
            std::uint64_t base = s + b * 3300 * kUs;
            t.kernel(base + 100 * kUs, 2 * kMs, base);
            // .item(): the host blocks until the GPU is done, then runs Python before relaunching
            t.api(base + 10 * kUs, 2090 * kUs, "cudaStreamSynchronize");
        }
    }
    auto r = t.analyze();
    ASSERT_TRUE(r.is_ok());
    const Finding* f = r->finding("host_sync_stall");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::kCritical);
    EXPECT_NE(f->title.find("stall the GPU"), std::string::npos) << f->title;
    EXPECT_NE(f->summary.find("ran out of work"), std::string::npos) << f->summary;
    EXPECT_GT(timeline_figure(*r, "idle_sync_share"), 0.9);
    EXPECT_EQ(timeline_figure(*r, "sync_calls"), 30);
    ASSERT_FALSE(f->sites.empty());
    EXPECT_EQ(f->sites.front().location, "cudaStreamSynchronize");
}

TEST(TimelineSynthetic, PageableCopiesAreReportedWithBandwidth) {
    SyntheticTimeline t;
    for (int i = 0; i < 10; ++i) {
        std::uint64_t s = i * 10 * kMs;
        t.step(i, s, 10 * kMs);
        t.copy(s + 100 * kUs, 2 * kMs, s + 50 * kUs, 8 << 20, MemoryKind::kPageable);
        for (int k = 0; k < 7; ++k) {
            std::uint64_t start = s + 2100 * kUs + k * kMs;
            t.kernel(start, kMs, start - 300 * kUs);
        }
    }
    auto r = t.analyze();
    ASSERT_TRUE(r.is_ok());
    const Finding* f = r->finding("pageable_memcpy");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::kWarning);
    double bytes = 0, count = 0, bw = 0;
    for (const auto& fig : f->figures) {
        if (fig.key == "bytes") bytes = fig.value;
        if (fig.key == "count") count = fig.value;
        if (fig.key == "bandwidth") bw = fig.value;
    }
    EXPECT_EQ(bytes, 10.0 * (8 << 20));
    EXPECT_EQ(count, 10);
    EXPECT_NEAR(bw, (8 << 20) / 0.002, 1e3);  // 8 MiB in 2 ms
    EXPECT_NE(f->advice.front().find("pin_memory"), std::string::npos);
}

// 3 µs kernels, each launched by a 12 µs call right after the one before: the host does nothing
// but launch, and the GPU idles between kernels.
TEST(TimelineSynthetic, LaunchBoundWhenKernelsAreShorterThanLaunches) {
    SyntheticTimeline t;
    for (int i = 0; i < 10; ++i) {
        std::uint64_t s = i * 10 * kMs;
        t.step(i, s, 10 * kMs);
        for (int k = 0; k < 800; ++k) {
            std::uint64_t launch = s + k * 12 * kUs;
            t.kernel(launch + 8 * kUs, 3 * kUs, launch, "void add_kernel(float*)", 7, 12 * kUs);
        }
    }
    auto r = t.analyze();
    ASSERT_TRUE(r.is_ok());
    const Finding* f = r->finding("launch_bound");
    ASSERT_NE(f, nullptr) << (r->findings.empty() ? "none" : r->findings.front().id);
    EXPECT_EQ(f->severity, Severity::kCritical);
    EXPECT_GT(timeline_figure(*r, "idle_share"), 0.5);
    EXPECT_GT(timeline_figure(*r, "idle_launch_share"), 0.5);
    EXPECT_NE(f->advice.front().find("CUDA graph"), std::string::npos);
    EXPECT_FALSE(has_finding(*r, "input_bound"));
}

// The same kernels with 30 µs of Python between launches: the GPU waits for the host's CPU work,
// not for its launches. That is gpu_idle's, with advice about the host's work, not launch_bound's
// (whose CUDA graphs would not be the first fix).
TEST(TimelineSynthetic, CpuWorkBetweenLaunchesIsNotLaunchBound) {
    SyntheticTimeline t;
    for (int i = 0; i < 10; ++i) {
        std::uint64_t s = i * 10 * kMs;
        t.step(i, s, 10 * kMs);
        for (int k = 0; k < 200; ++k) {
            std::uint64_t launch = s + k * 42 * kUs + 30 * kUs;
            t.kernel(launch + 8 * kUs, 3 * kUs, launch, "void add_kernel(float*)", 7, 12 * kUs);
        }
    }
    auto r = t.analyze();
    ASSERT_TRUE(r.is_ok());
    EXPECT_FALSE(has_finding(*r, "launch_bound"));
    const Finding* idle = r->finding("gpu_idle");
    ASSERT_NE(idle, nullptr);
    EXPECT_NE(idle->title.find("CPU work"), std::string::npos) << idle->title;
    EXPECT_NE(idle->advice.front().find("py-spy"), std::string::npos) << idle->advice.front();
}

TEST(TimelineSynthetic, CommBoundWhenCollectivesAreNotOverlapped) {
    SyntheticTimeline t;
    for (int i = 0; i < 10; ++i) {
        std::uint64_t s = i * 10 * kMs;
        t.step(i, s, 10 * kMs);
        t.kernel(s + 100 * kUs, 4 * kMs, s);
        t.kernel(s + 4100 * kUs, 4 * kMs, s + 10 * kUs, kNccl, 20);
        t.kernel(s + 8100 * kUs, 1850 * kUs, s + 20 * kUs);
        t.api(s + 30 * kUs, 9925 * kUs, "cudaStreamSynchronize");  // loss.item() at the end
    }
    auto r = t.analyze();
    ASSERT_TRUE(r.is_ok());
    const Finding* f = r->finding("comm_bound");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::kCritical);
    // Hidden behind compute, the 4 ms all-reduce leaves the step (the compute after it waited
    // for it on the GPU: a cross-stream wait inferred from the timing).
    EXPECT_NEAR(f->saving_ns(), 4.0 * kMs, 1);
    EXPECT_EQ(timeline_figure(*r, "stream_wait_links_inferred"), 20);
    EXPECT_NEAR(timeline_figure(*r, "communication_share"), 0.4, 0.01);
    EXPECT_NEAR(timeline_figure(*r, "comm_overlap_share"), 0.0, 1e-9);
}

TEST(TimelineSynthetic, OverlappedCommunicationIsNotCommBound) {
    SyntheticTimeline t;
    for (int i = 0; i < 10; ++i) {
        std::uint64_t s = i * 10 * kMs;
        t.step(i, s, 10 * kMs);
        t.kernel(s + 100 * kUs, 9900 * kUs, s);
        t.kernel(s + 1000 * kUs, 4 * kMs, s + 10 * kUs, kNccl, 20);  // hidden behind compute
    }
    auto r = t.analyze();
    ASSERT_TRUE(r.is_ok());
    EXPECT_FALSE(has_finding(*r, "comm_bound"));
    EXPECT_NEAR(timeline_figure(*r, "comm_overlap_share"), 1.0, 1e-9);
}

TEST(TimelineSynthetic, HtaIdleCategoriesOnOneStream) {
    SyntheticTimeline t;
    t.kernel(0, kMs, 0);                            // A: 0 .. 1 ms
    t.kernel(kMs + 10 * kUs, kMs, 100 * kUs);       // queued early, 10 µs gap: kernel wait
    t.kernel(2 * kMs + 110 * kUs, kMs, 200 * kUs);  // queued early, 100 µs gap: other
    t.kernel(3 * kMs + 510 * kUs, kMs, 3 * kMs + 400 * kUs);  // launched after the GPU ran dry
    auto r = t.analyze(AnalysisWindow::kAll);
    ASSERT_TRUE(r.is_ok());
    EXPECT_EQ(timeline_figure(*r, "kernel_wait_ns"), 10.0 * kUs);
    EXPECT_EQ(timeline_figure(*r, "other_wait_ns"), 100.0 * kUs);
    EXPECT_EQ(timeline_figure(*r, "host_wait_ns"), 400.0 * kUs);
    EXPECT_EQ(timeline_figure(*r, "idle_ns"), 510.0 * kUs);
}

TEST(TimelineSynthetic, WindowsChooseDifferentWork) {
    SyntheticTimeline t(100 * kMs);
    t.kernel(0, kMs, 0);  // launched before the first step (at -6 ms relative to step 0)
    for (int i = 0; i < 3; ++i) {
        std::uint64_t s = 6 * kMs + i * 10 * kMs;  // step 0 starts 6 ms after the first launch
        t.step(i, s, 10 * kMs);
        t.kernel(s + kMs, 5 * kMs, s);
    }
    auto all = t.analyze(AnalysisWindow::kAll);
    auto steps = t.analyze(AnalysisWindow::kSteps);
    auto hta = t.analyze(AnalysisWindow::kHta);
    ASSERT_TRUE(all.is_ok() && steps.is_ok() && hta.is_ok());
    // all: 16 ms busy + 3 gaps of 5-6 ms
    EXPECT_EQ(timeline_figure(*all, "busy_ns"), 16.0 * kMs);
    EXPECT_EQ(timeline_figure(*all, "window_span_ns"), 32.0 * kMs);
    // steps: the three step kernels and the gaps before them
    EXPECT_EQ(timeline_figure(*steps, "busy_ns"), 15.0 * kMs);
    EXPECT_EQ(timeline_figure(*steps, "window_span_ns"), 31.0 * kMs);
    EXPECT_EQ(timeline_figure(*steps, "steps"), 3);
    // HTA: everything launched before the last step began
    EXPECT_EQ(timeline_figure(*hta, "busy_ns"), 11.0 * kMs);
    EXPECT_EQ(timeline_figure(*hta, "window_span_ns"), 22.0 * kMs);
    EXPECT_EQ(timeline_figure(*hta, "steps"), 2);
}

TEST(TimelineSynthetic, ReorderBufferAbsorbsOutOfOrderGpuRecords) {
    SyntheticTimeline t;
    for (int k = 0; k < 200; ++k) {
        std::uint64_t start = 100 * kUs + k * kMs;
        t.kernel(start, kMs, start - 50 * kUs);
    }
    std::stable_sort(t.events.begin(), t.events.end(),
                     [](const Event& a, const Event& b) { return a.start_ns < b.start_ns; });
    // Swap neighbouring kernels, as CUPTI buffers from different streams may arrive.
    std::vector<std::size_t> kernels;
    for (std::size_t i = 0; i < t.events.size(); ++i) {
        if (t.events[i].kind == EventKind::kKernel) kernels.push_back(i);
    }
    for (std::size_t i = 0; i + 1 < kernels.size(); i += 2) {
        std::swap(t.events[kernels[i]], t.events[kernels[i + 1]]);
    }
    SourceInfo info;
    AnalysisOptions options;
    options.window = AnalysisWindow::kAll;
    auto r = analyze_events(t.events, info, t.strings, options);
    ASSERT_TRUE(r.is_ok());
    EXPECT_NEAR(timeline_figure(*r, "idle_share"), 0.0, 1e-9);
    EXPECT_EQ(timeline_figure(*r, "busy_ns"), 200.0 * kMs);
}

TEST(TimelineSynthetic, StepMarkersAndNvtxRangesDefineSteps) {
    SyntheticTimeline t;
    for (int i = 0; i < 4; ++i) {
        Event b;
        b.kind = EventKind::kStepBegin;
        b.start_ns = b.end_ns = 1'000'000 * kMs + i * 10 * kMs;
        b.range.id = static_cast<std::uint64_t>(i);
        Event e = b;
        e.kind = EventKind::kStepEnd;
        e.start_ns = e.end_ns = b.start_ns + 9 * kMs;
        t.events.push_back(b);
        t.events.push_back(e);
        t.kernel(i * 10 * kMs + kMs, 5 * kMs, i * 10 * kMs);
    }
    auto r = t.analyze();
    ASSERT_TRUE(r.is_ok());
    EXPECT_EQ(timeline_figure(*r, "steps"), 4);
    EXPECT_EQ(timeline_figure(*r, "step_time_ns"), 9.0 * kMs);
}

TEST(TimelineSynthetic, NoGpuActivityGivesASectionAndNoFindings) {
    SyntheticTimeline t;
    t.step(1, 0, 10 * kMs);
    t.range(kMs, kMs, RangeCategory::kCpuOp, "aten::add");
    auto r = t.analyze();
    ASSERT_TRUE(r.is_ok());
    ASSERT_NE(r->section("timeline"), nullptr);  // the step is host time worth reporting
    EXPECT_EQ(timeline_figure(*r, "steps"), 1);
    EXPECT_EQ(timeline_figure(*r, "gpu_activities"), -1);  // no GPU figure without GPU work
    EXPECT_EQ(timeline_figure(*r, "idle_share"), -1);
    EXPECT_TRUE(r->findings.empty());
}

TEST(TimelineSynthetic, ACapturePauseIsUnobservedNotIdle) {
    // GIVEN a busy GPU, capture yielded to torch.profiler for 200 ms, then busy again
    SyntheticTimeline t;
    for (int k = 0; k < 50; ++k) t.kernel(k * kMs + kMs, kMs, k * kMs + 500 * kUs);
    t.capture_paused(51 * kMs);
    t.capture_resumed(251 * kMs);
    for (int k = 0; k < 50; ++k)
        t.kernel(252 * kMs + k * kMs, kMs, 251 * kMs + k * kMs + 500 * kUs);
    // WHEN analysed
    auto r = t.analyze(AnalysisWindow::kAll);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    // THEN the paused window is neither busy nor idle: the GPU was not watched. Only the 1 ms
    // between the resume and the next kernel was seen idle.
    EXPECT_EQ(timeline_figure(*r, "unobserved_ns"), 200.0 * kMs);
    EXPECT_EQ(timeline_figure(*r, "idle_ns"), 1.0 * kMs);
    EXPECT_EQ(timeline_figure(*r, "busy_ns"), 100.0 * kMs);
    EXPECT_TRUE(r->findings.empty()) << r->findings.front().id;
    bool noted = false;
    for (const auto& n : r->notes) noted = noted || n.find("paused") != std::string::npos;
    EXPECT_TRUE(noted);
}

TEST(TimelineSynthetic, IdleTimeObservedAroundAPauseStaysIdle) {
    // GIVEN the GPU idle 10 ms before a pause, and 15 ms after it until the host launches again
    SyntheticTimeline t;
    t.kernel(kMs, 49 * kMs, 500 * kUs);  // busy until 50 ms
    t.capture_paused(60 * kMs);
    t.capture_resumed(160 * kMs);
    t.kernel(175 * kMs, kMs, 170 * kMs);  // launched 10 ms after the resume
    auto r = t.analyze(AnalysisWindow::kAll);
    ASSERT_TRUE(r.is_ok());
    // THEN only the 100 ms pause is excluded; what was seen idle stays idle, and the part after
    // the resume is the host's doing (its launch came late)
    EXPECT_EQ(timeline_figure(*r, "unobserved_ns"), 100.0 * kMs);
    EXPECT_EQ(timeline_figure(*r, "idle_ns"), 25.0 * kMs);
    EXPECT_EQ(timeline_figure(*r, "host_wait_ns"), 15.0 * kMs);
    EXPECT_EQ(timeline_figure(*r, "other_wait_ns"), 10.0 * kMs);
}

TEST(TimelineSynthetic, APauseNeverResumedHidesEverythingAfterIt) {
    SyntheticTimeline t;
    t.kernel(kMs, 9 * kMs, 500 * kUs);
    t.capture_paused(10 * kMs, "stalled");
    t.kernel(500 * kMs, kMs, 499 * kMs);  // a late record from before the stall was noticed
    auto r = t.analyze(AnalysisWindow::kAll);
    ASSERT_TRUE(r.is_ok());
    EXPECT_EQ(timeline_figure(*r, "idle_ns"), 0);
    EXPECT_EQ(timeline_figure(*r, "unobserved_ns"), 490.0 * kMs);
}

}  // namespace
}  // namespace gpudiag::testing
