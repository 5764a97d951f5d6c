// SPDX-License-Identifier: Apache-2.0
// The critical path and the what-ifs on synthetic loops whose answer can be worked out by hand:
// each test states what the host and the GPU did, and what removing one cause must give.
#include "analysis/timeline/critical_path.hpp"
#include "synthetic_timeline.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace gpudiag::testing {
namespace {

const Table* table(const Report& r, const std::string& id) {
    const Section* s = r.section("timeline");
    if (s == nullptr) return nullptr;
    for (const auto& t : s->tables) {
        if (t.id == id) return &t;
    }
    return nullptr;
}

double cell(const std::vector<Cell>& row, std::size_t i) {
    return std::get<double>(row.at(i));
}

// The critical path table's ns per step for `part`.
double path_ns(const Report& r, const std::string& part) {
    const Table* t = table(r, "critical_path");
    if (t == nullptr) return -1;
    for (const auto& row : t->rows) {
        if (std::get<std::string>(row[0]) == part) return cell(row, 1);
    }
    return -1;
}

double saving_figure(const Finding& f, const std::string& key) {
    for (const auto& fig : f.predicted_saving) {
        if (fig.key == key) return fig.value;
    }
    return -1;
}

// Step s of an input-bound loop: 4 ms waiting for the batch, then six 1 ms kernels launched
// 20 µs apart (the first starts 10 µs after its launch, the rest queue), a sync that returns
// 5 µs after the GPU is done, and 85 µs of Python before the next step: 10.1 ms in all.
void input_bound_step(SyntheticTimeline& t, int s) {
    const std::uint64_t at = static_cast<std::uint64_t>(s) * 10'100 * kUs;
    t.step(s, at, 10'100 * kUs);
    t.input_wait(at, 4 * kMs);
    for (int k = 0; k < 6; ++k) {
        std::uint64_t launch = at + 4 * kMs + static_cast<std::uint64_t>(k) * 20 * kUs;
        t.kernel(at + 4 * kMs + 10 * kUs + static_cast<std::uint64_t>(k) * kMs, kMs, launch);
    }
    t.sync(at + 4 * kMs + 200 * kUs, 5'815 * kUs);  // returns at 10.015 ms
}

TEST(CriticalPath, RemovingTheInputWaitSavesItWhenTheGpuCanKeepUp) {
    SyntheticTimeline t;
    for (int s = 0; s < 10; ++s) input_bound_step(t, s);
    auto r = t.analyze();
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    // The replay of what was measured gives back the measured timeline.
    EXPECT_NEAR(timeline_figure(*r, "replay_error_ns"), 0, 1);
    const Finding* f = r->finding("input_bound");
    ASSERT_NE(f, nullptr);
    // Without the wait the step is the GPU's 6 ms plus launch, sync and Python: 6.1 ms.
    EXPECT_NEAR(saving_figure(*f, "saving_ns"), 4.0 * kMs, 1);
    EXPECT_NEAR(saving_figure(*f, "step_time_ns"), 6.1 * kMs, 1);
    EXPECT_NEAR(saving_figure(*f, "share"), 4.0 / 10.1, 1e-6);
    EXPECT_EQ(f->saving_ns(), saving_figure(*f, "saving_ns"));
    // The critical path of each step: the wait, the first launch, six kernels, the sync's return,
    // the Python after it.
    EXPECT_EQ(timeline_figure(*r, "critical_path_steps"), 10);
    EXPECT_NEAR(path_ns(*r, "input"), 4.0 * kMs, 1);
    EXPECT_NEAR(path_ns(*r, "compute"), 6.0 * kMs, 1);
    EXPECT_NEAR(path_ns(*r, "launch"), 10.0 * kUs, 1);
    EXPECT_NEAR(path_ns(*r, "sync"), 5.0 * kUs, 1);
    EXPECT_NEAR(path_ns(*r, "cpu"), 85.0 * kUs, 1);
    const Table* per_step = table(*r, "step_critical_path");
    ASSERT_NE(per_step, nullptr);
    EXPECT_EQ(per_step->kind, TableKind::kPartition);
    ASSERT_EQ(per_step->rows.size(), 10u);
    double sum = 0;
    for (std::size_t i = 1; i < per_step->rows[3].size(); ++i) sum += cell(per_step->rows[3], i);
    EXPECT_NEAR(sum, 10.1 * kMs, 1);  // a step's path accounts for all of it
    // The summary says how the saving was found; the number is describe_saving's line alone.
    EXPECT_NE(f->summary.find("the saving below is the critical path replayed"), std::string::npos)
        << f->summary;
    EXPECT_EQ(f->summary.find("saves about"), std::string::npos) << f->summary;
    EXPECT_NE(describe_saving(f->predicted_saving)
                  .find("Fixing this saves about 4 ms per step (39.6 %): 10.1 ms -> 6.1 ms"),
              std::string::npos)
        << describe_saving(f->predicted_saving);
}

// The GPU runs 2 ms kernels one after another; after each, the host syncs and launches the next,
// leaving the GPU idle 10 µs until the next kernel arrives: 20 syncs per step that cost 0.5 % of
// it.
TEST(CriticalPath, ManyCheapSyncsAreSaidToBeNotWorthFixingFirst) {
    SyntheticTimeline t;
    const std::uint64_t step = 20 * 2'010 * kUs + 50 * kUs;
    for (int s = 0; s < 5; ++s) {
        const std::uint64_t at = static_cast<std::uint64_t>(s) * step;
        t.step(s, at, step);
        for (int k = 0; k < 20; ++k) {
            std::uint64_t launch = at + static_cast<std::uint64_t>(k) * 2'010 * kUs;
            t.kernel(launch + 5 * kUs, 2 * kMs, launch, "void gemm_kernel<float>(float*)", 7,
                     4 * kUs);
            t.sync(launch + 4 * kUs, 2'004 * kUs);  // returns 3 µs after the kernel ends
        }
    }
    auto r = t.analyze();
    ASSERT_TRUE(r.is_ok());
    const Finding* f = r->finding("host_sync_stall");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::kInfo);
    EXPECT_NE(f->title.find("20 syncs per step, but they cost < 1 %"), std::string::npos)
        << f->title;
    EXPECT_LT(saving_figure(*f, "share"), 0.01);
    EXPECT_GT(saving_figure(*f, "saving_ns"), 0);
    EXPECT_NE(f->summary.find("off the critical path"), std::string::npos) << f->summary;
    EXPECT_NEAR(timeline_figure(*r, "replay_error_ns"), 0, 1);
}

TEST(CriticalPath, SyncsThatDrainTheQueueAreOnThePathAndRankedByTheirSaving) {
    // Each third of a step: a 2 ms kernel, a sync that waits for it, then 1.2 ms of Python before
    // the next launch; and a 1.5 ms input wait at the start of each step.
    SyntheticTimeline t;
    const std::uint64_t step = 1'500 * kUs + 3 * 3'300 * kUs;
    for (int i = 0; i < 8; ++i) {
        const std::uint64_t s = static_cast<std::uint64_t>(i) * step;
        t.step(i, s, step);
        t.input_wait(s, 1'500 * kUs);
        for (int b = 0; b < 3; ++b) {
            std::uint64_t base = s + 1'500 * kUs + static_cast<std::uint64_t>(b) * 3'300 * kUs;
            t.kernel(base + 10 * kUs, 2 * kMs, base);
            t.sync(base + 20 * kUs, 1'995 * kUs);  // returns 5 µs after the kernel
        }
    }
    auto r = t.analyze();
    ASSERT_TRUE(r.is_ok());
    const Finding* sync = r->finding("host_sync_stall");
    const Finding* input = r->finding("input_bound");
    ASSERT_NE(sync, nullptr);
    ASSERT_NE(input, nullptr);
    // Without the syncs the host no longer waits for each kernel: it needs 1.5 + 3 x 1.305 ms a
    // step, less than the GPU's 3 x 2 ms, so the step becomes the GPU's 6 ms (and the queued
    // kernels' 2 µs gaps): 11.4 -> ~6.0 ms.
    const double sync_saving = saving_figure(*sync, "saving_ns");
    EXPECT_GT(sync_saving, 5.0 * kMs);
    EXPECT_LT(sync_saving, 5.4 * kMs);
    // With the syncs in place the host waits for every kernel anyway: the 1.5 ms goes, no more.
    EXPECT_NEAR(saving_figure(*input, "saving_ns"), 1.5 * kMs, 1);
    // Findings are ranked by what fixing them saves: the syncs before the input wait.
    for (std::size_t i = 1; i < r->findings.size(); ++i) {
        EXPECT_GE(r->findings[i - 1].saving_ns(), r->findings[i].saving_ns()) << i;
    }
    const std::string text = render_text(*r);
    EXPECT_NE(text.find("Fixing this saves about"), std::string::npos);
    EXPECT_LT(text.find("host_sync_stall"), text.find("input_bound"));
}

TEST(CriticalPath, SyncsThatKeepTheInputWaitOffTheGpuAreTitledByWhatTheyHoldBack) {
    // Each step: a 6 ms kernel, a sync that returns with it, then a 4 ms wait for the next batch
    // before the next launch. The GPU idles in the input wait, not after the sync, yet without
    // the sync the host fetches while the kernel runs: the step goes from 10 to about 6 ms.
    SyntheticTimeline t;
    const std::uint64_t step = 10'100 * kUs;
    for (int i = 0; i < 8; ++i) {
        const std::uint64_t s = static_cast<std::uint64_t>(i) * step;
        t.step(i, s, step);
        t.kernel(s + 50 * kUs, 6 * kMs, s + 20 * kUs);
        t.sync(s + 60 * kUs, 5'995 * kUs);
        t.input_wait(s + 6'060 * kUs, 4 * kMs);
    }
    auto r = t.analyze();
    ASSERT_TRUE(r.is_ok());
    const Finding* sync = r->finding("host_sync_stall");
    ASSERT_NE(sync, nullptr);
    EXPECT_GT(saving_figure(*sync, "saving_ns"), 3.5 * kMs);
    EXPECT_NE(sync->title.find("hold the host back: removing them saves"), std::string::npos)
        << sync->title;
    EXPECT_EQ(sync->title.find("idle after syncs"), std::string::npos) << sync->title;
    EXPECT_NE(sync->summary.find("could not overlap"), std::string::npos) << sync->summary;
}

TEST(CriticalPath, PinnedAsyncCopiesLetTheHostWorkWhileTheCopyRuns) {
    // A blocking 2 ms pageable copy, then 3 ms of Python, then 6 ms of kernels and a sync.
    SyntheticTimeline t;
    const std::uint64_t step = 11'200 * kUs;
    for (int i = 0; i < 6; ++i) {
        const std::uint64_t s = static_cast<std::uint64_t>(i) * step;
        t.step(i, s, step);
        t.copy(s + 5 * kUs, 1'995 * kUs, s, 64 << 20, MemoryKind::kPageable,
               CopyDirection::kHostToDevice, 2'010 * kUs);  // the call returns 10 µs after
        const std::uint64_t launch = s + 5'010 * kUs;
        t.kernel(launch + 10 * kUs, 6 * kMs, launch);
        t.sync(launch + 20 * kUs, 6'000 * kUs);  // returns 10 µs after the kernel
    }
    auto r = t.analyze();
    ASSERT_TRUE(r.is_ok());
    const Finding* f = r->finding("pageable_memcpy");
    ASSERT_NE(f, nullptr);
    // Async, the call returns in its own 10 µs and the Python overlaps the copy: 2 ms saved.
    EXPECT_NEAR(saving_figure(*f, "saving_ns"), 2.0 * kMs, 1);
    EXPECT_NEAR(timeline_figure(*r, "replay_error_ns"), 0, 1);
}

TEST(CriticalPath, ACudaGraphRemovesPerKernelHostWorkOfALaunchBoundLoop) {
    // 200 kernels of 8 µs per step, each launched by a 26 µs call right after the one before:
    // the host does nothing but launch, and the GPU idles most of the time.
    SyntheticTimeline t;
    const std::uint64_t per_kernel = 26 * kUs;
    const std::uint64_t step = 200 * per_kernel + 40 * kUs;
    for (int i = 0; i < 5; ++i) {
        const std::uint64_t s = static_cast<std::uint64_t>(i) * step;
        t.step(i, s, step);
        for (int k = 0; k < 200; ++k) {
            std::uint64_t launch = s + 20 * kUs + static_cast<std::uint64_t>(k) * per_kernel;
            t.kernel(launch + 5 * kUs, 8 * kUs, launch, "void add_kernel(float*)", 7, per_kernel);
        }
        t.sync(s + step - 30 * kUs, 20 * kUs);
    }
    auto r = t.analyze();
    ASSERT_TRUE(r.is_ok());
    const Finding* f = r->finding("launch_bound");
    ASSERT_NE(f, nullptr);
    // As one graph the kernels run back to back (the GPU's own gap between them is all that is
    // left of the 26 µs each), so most of the step goes.
    EXPECT_GT(saving_figure(*f, "share"), 0.5);
    EXPECT_LT(saving_figure(*f, "step_time_ns"), 0.5 * static_cast<double>(step));
    const Finding* idle = r->finding("gpu_idle");
    ASSERT_NE(idle, nullptr);
    EXPECT_GE(saving_figure(*idle, "saving_ns"), saving_figure(*f, "saving_ns") - 1);
}

TEST(CriticalPath, AStepStillOpenWhenTheInputEndsIsNeitherCountedNorTabled) {
    // Boundaries at the end of each iteration leave the last step begun and never ended.
    SyntheticTimeline t;
    for (int i = 0; i < 4; ++i) {
        Event b;
        b.kind = EventKind::kStepBegin;
        b.start_ns = b.end_ns = 1'000'000 * kMs + static_cast<std::uint64_t>(i) * 10 * kMs;
        b.process = b.thread = 100;
        b.range.id = static_cast<std::uint64_t>(i);
        t.events.push_back(b);
        if (i < 3) {
            Event e = b;
            e.kind = EventKind::kStepEnd;
            e.start_ns = e.end_ns = b.start_ns + 10 * kMs;
            t.events.push_back(e);
        }
        t.kernel(static_cast<std::uint64_t>(i) * 10 * kMs + 100 * kUs, 5 * kMs,
                 static_cast<std::uint64_t>(i) * 10 * kMs + 50 * kUs);
    }
    auto r = t.analyze();
    ASSERT_TRUE(r.is_ok());
    EXPECT_EQ(timeline_figure(*r, "steps"), 3);
    const Table* steps = table(*r, "steps");
    ASSERT_NE(steps, nullptr);
    ASSERT_EQ(steps->rows.size(), 3u);
    for (const auto& row : steps->rows) EXPECT_GT(cell(row, 2), 0) << "no empty row";
    // The open step's GPU work is outside the complete-steps window.
    EXPECT_NEAR(timeline_figure(*r, "busy_ns"), 15.0 * kMs, 1);
}

TEST(CriticalPath, TheHistoryIsBoundedAndStepsBeyondItAreCountedNotTraced) {
    detail::CriticalPath cp(64);  // nodes kept for tracing back
    Event k;
    k.kind = EventKind::kKernel;
    k.device = 0;
    k.stream = 7;
    const std::uint64_t t0 = 1'000'000;
    cp.add_step(t0, t0 + 10'000'000);
    for (int i = 0; i < 500; ++i) {
        const std::uint64_t launch = t0 + static_cast<std::uint64_t>(i) * 20'000;
        cp.add_host(detail::HostCause::kLaunch, launch, launch + 5'000, 0);
        k.start_ns = launch + 8'000;
        k.end_ns = k.start_ns + 10'000;
        cp.add_gpu(k, launch, detail::PathPart::kCompute, false);
    }
    cp.add_host(detail::HostCause::kLaunch, t0 + 10'000'000, t0 + 10'000'001, 0);
    cp.add_step(t0 + 10'000'001, t0 + 11'000'000);
    cp.finish();
    auto s = cp.summarize(0, cp.steps());
    EXPECT_TRUE(s.available);
    EXPECT_EQ(s.untraced_steps, 1u);  // 1000 nodes in the first step, 64 kept
    EXPECT_EQ(s.traced_steps, 1u);    // the second, small one fits
    EXPECT_EQ(s.steps, 2u);           // the what-ifs cover both
}

TEST(CriticalPath, LoaderSettingsSayWhetherMoreWorkersWouldHelp) {
    // The same input-bound loop, with the DataLoader described live: 2 workers on 16 cores, and
    // then 4 workers on 4 cores.
    for (std::int64_t cores : {16, 4}) {
        SyntheticTimeline t;
        const std::int64_t workers = cores == 16 ? 2 : 4;
        t.annotate(0, "dataloader.num_workers", workers);
        t.annotate(0, "dataloader.pin_memory", 0);
        t.annotate(0, "dataloader.prefetch_factor", 2);
        t.annotate(0, "dataloader.persistent_workers", 0);
        t.annotate(0, "dataloader.batch_size", 32);
        t.annotate(0, "dataloader.cpu_cores", cores);
        for (int s = 0; s < 10; ++s) input_bound_step(t, s);
        auto r = t.analyze();
        ASSERT_TRUE(r.is_ok());
        const Finding* f = r->finding("input_bound");
        ASSERT_NE(f, nullptr);
        std::string evidence;
        for (const auto& e : f->evidence) evidence += e + "\n";
        EXPECT_NE(evidence.find("num_workers=" + std::to_string(workers) +
                                ", pin_memory=False, "
                                "prefetch_factor=2, persistent_workers=False, batch_size=32"),
                  std::string::npos)
            << evidence;
        double needed = -1;
        for (const auto& fig : f->figures) {
            if (fig.key == "workers_needed") needed = fig.value;
        }
        // Each worker spends workers x 10.1 ms per batch; the loop needs one every 6.1 ms.
        EXPECT_EQ(needed, std::ceil(static_cast<double>(workers) * 10.1 / 6.1));
        if (cores == 16) {
            EXPECT_NE(evidence.find("More workers would help"), std::string::npos) << evidence;
            EXPECT_NE(f->advice.front().find("num_workers=4"), std::string::npos)
                << f->advice.front();
        } else {
            EXPECT_NE(evidence.find("the source (decoding, augmentation or disk) is the limit"),
                      std::string::npos)
                << evidence;
        }
        // The verdict replaces the generic advice, which would contradict it on 4 cores.
        for (const auto& a : f->advice) {
            EXPECT_EQ(a.find("Add DataLoader workers"), std::string::npos) << a;
        }
        bool pin = false;
        for (const auto& a : f->advice)
            pin = pin || a.find("pin_memory=True: this loader") != std::string::npos;
        EXPECT_TRUE(pin);
    }
}

}  // namespace
}  // namespace gpudiag::testing
