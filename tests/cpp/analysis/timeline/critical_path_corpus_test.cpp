// SPDX-License-Identifier: Apache-2.0
// The critical path and the what-ifs on the corpus' real traces, checked against real
// before/after pairs of the same program (../shared/corpus/SOURCES.md).
#include <gpudiag/analyze.hpp>

#include "corpus.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

namespace gpudiag {
namespace {

namespace fs = std::filesystem;

using testing::corpus_kineto_trace;

const char* kWorkers0 = "kineto_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz";
const char* kWorkers4 = "kineto_resnet50_num_workers_4_worker0.1623212756351.pt.trace.json.gz";

const Report& analysed(const std::string& name, AnalysisWindow window = AnalysisWindow::kSteps) {
    static std::map<std::pair<std::string, int>, Report> cache;
    auto key = std::make_pair(name, static_cast<int>(window));
    auto it = cache.find(key);
    if (it == cache.end()) {
        AnalysisOptions options;
        options.window = window;
        auto r = analyze_files({corpus_kineto_trace(name)}, options);
        EXPECT_TRUE(r.is_ok()) << r.status().to_string();
        it = cache.emplace(key, r.is_ok() ? *r : Report{}).first;
    }
    return it->second;
}

double figure(const Report& r, const char* key) {
    const Section* s = r.section("timeline");
    const Figure* f = s != nullptr ? s->figure(key) : nullptr;
    return f != nullptr ? f->value : -1.0;
}

const Table* table(const Report& r, const std::string& id) {
    const Section* s = r.section("timeline");
    if (s == nullptr) return nullptr;
    for (const auto& t : s->tables) {
        if (t.id == id) return &t;
    }
    return nullptr;
}

// ns per step of a critical-path part ("cpu", "launch", ...).
double path(const Report& r, const std::string& part) {
    const Table* t = table(r, "critical_path");
    if (t == nullptr) return -1;
    for (const auto& row : t->rows) {
        if (std::get<std::string>(row[0]) == part) return std::get<double>(row[1]);
    }
    return -1;
}

double predicted(const Finding& f, const std::string& key) {
    for (const auto& fig : f.predicted_saving) {
        if (fig.key == key) return fig.value;
    }
    return -1;
}

// ResNet-50 fed by DataLoader(num_workers=0) and the same training with num_workers=4 (the
// fix). Replaying the first without its input wait predicts the second's step time.
TEST(CriticalPathCorpus, NumWorkers0WithoutItsInputWaitPredictsNumWorkers4) {
    GPUDIAG_REQUIRE_FILES(corpus_kineto_trace(kWorkers0));
    GPUDIAG_REQUIRE_FILES(corpus_kineto_trace(kWorkers4));
    const Report& before = analysed(kWorkers0);
    const Report& after = analysed(kWorkers4);
    const Finding* input = before.finding("input_bound");
    ASSERT_NE(input, nullptr);
    const double measured_before = figure(before, "step_time_ns");
    const double prediction = predicted(*input, "step_time_ns");
    const double measured_after = figure(after, "step_time_ns");
    const double error = prediction / measured_after - 1;
    std::cout << "num_workers=0: " << measured_before / 1e6 << " ms per step, input wait "
              << figure(before, "input_wait_per_step_ns") / 1e6 << " ms; predicted without it "
              << prediction / 1e6 << " ms; num_workers=4 measured " << measured_after / 1e6
              << " ms (" << 100 * error << " %)\n";
    EXPECT_NEAR(prediction / measured_after, 1.0, 0.30);
    // Removing the wait saves less than the wait: without it the host meets GPU work of the
    // previous batch still running at the step's syncs.
    EXPECT_LT(measured_before - prediction, figure(before, "input_wait_per_step_ns"));

    // The residual, from the two traces. The prediction keeps the first run's host speed, but
    // the loop's own host work on the critical path (CPU and launches: the same Python issuing
    // the same kernels) is much longer per step with four worker processes sharing the CPUs, and
    // the same cudaLaunchKernel calls are slower.
    const double host_before = path(before, "cpu") + path(before, "launch");
    const double host_after = path(after, "cpu") + path(after, "launch");
    const double residual = measured_after - prediction;
    EXPECT_GT(residual, 0);
    EXPECT_GT(host_after - host_before, residual);
    EXPECT_GT(figure(after, "launch_median_ns"), 1.2 * figure(before, "launch_median_ns"));
    // The rest of the account: beyond its host work and copies, the prediction holds GPU work the
    // host then waits for; the second run's slower host hides it behind its own work, still waits
    // a little for batches and copies more slowly.
    const double gpu_wait_before = prediction - host_before - path(before, "memory");
    const double explained = (host_after - host_before) - gpu_wait_before + path(after, "input") +
                             (path(after, "memory") - path(before, "memory"));
    std::cout << "residual " << residual / 1e6 << " ms: host work on the path " << host_before / 1e6
              << " -> " << host_after / 1e6 << " ms (launch call median "
              << figure(before, "launch_median_ns") / 1e3 << " -> "
              << figure(after, "launch_median_ns") / 1e3 << " us), GPU waits the slower host hides "
              << gpu_wait_before / 1e6 << " ms, input wait left " << path(after, "input") / 1e6
              << " ms, copies " << path(before, "memory") / 1e6 << " -> "
              << path(after, "memory") / 1e6 << " ms: " << explained / 1e6 << " ms explained\n";
    EXPECT_NEAR(explained, residual, 0.1 * residual);
}

// Kineto PR #1318: the same tiny program traced before and after a fix that fills in which
// stream and cudaEventRecord an event wait is for when the record's activity arrived out of
// order (before: wait_on_stream -1). The fix changes what the trace says, not the program.
TEST(CriticalPathCorpus, Kineto1318NamesTheEventWaitAndChangesNoPrediction) {
    const char* kBefore = "kineto_pr1318_before_fix_trace.json";
    const char* kAfter = "kineto_pr1318_after_fix_trace.json";
    GPUDIAG_REQUIRE_FILES(corpus_kineto_trace(kBefore));
    GPUDIAG_REQUIRE_FILES(corpus_kineto_trace(kAfter));
    const Report& before = analysed(kBefore);
    const Report& after = analysed(kAfter);
    // Before the fix the event sync is joined to the GPU work by timing; after it, to the stream
    // the trace names.
    EXPECT_EQ(figure(before, "sync_links_named"), 0);
    EXPECT_EQ(figure(before, "sync_links_inferred"), 1);
    EXPECT_EQ(figure(after, "sync_links_named"), 1);
    EXPECT_EQ(figure(after, "sync_links_inferred"), 0);
    // Both reach the same kernel, so the replays and every what-if agree to the nanosecond.
    for (const char* key : {"replay_step_ns", "replay_error_ns", "launch_links", "sync_waits"}) {
        EXPECT_EQ(figure(before, key), figure(after, key)) << key;
    }
    const Table* a = table(before, "what_if");
    const Table* b = table(after, "what_if");
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(a->rows, b->rows);
    EXPECT_EQ(figure(after, "replay_error_ns"), 0);
}

TEST(CriticalPathCorpus, EventSyncTracesJoinEverySyncToTheStreamItNames) {
    for (const char* name :
         {"hta_cuda_event_sync_trace.json.gz", "hta_cuda_event_sync_multi_stream_trace.json.gz"}) {
        GPUDIAG_REQUIRE_FILES(corpus_kineto_trace(name));
        const Report& r = analysed(name);
        EXPECT_GT(figure(r, "sync_links_named"), 0) << name;
        EXPECT_EQ(figure(r, "replay_error_ns"), 0) << name;
    }
    // The multi-stream trace's cudaStreamWaitEvent: stream 24 waits for stream 20.
    EXPECT_EQ(
        figure(analysed("hta_cuda_event_sync_multi_stream_trace.json.gz"), "stream_wait_links"), 1);
}

// On every real trace the replay of what was measured gives back the measured span: the graph
// (launches, stream order, syncs, waits) accounts for when everything ran.
TEST(CriticalPathCorpus, TheReplayReproducesEveryTrace) {
    if (!fs::exists(corpus_kineto_trace(""))) GTEST_SKIP() << "corpus absent";
    int checked = 0;
    for (const auto& e : fs::directory_iterator(corpus_kineto_trace(""))) {
        std::string name = e.path().filename().string();
        if (name.find(".tar.") != std::string::npos ||
            name.find("memory_timeline") != std::string::npos)
            continue;
        const Report& r = analysed(name);
        const double span = figure(r, "replay_step_ns");
        if (span <= 0) continue;  // no host timeline (CPU-only, MTIA, GPU-only)
        const double steps = std::max(1.0, figure(r, "steps"));
        std::cout << name << ": replay error " << figure(r, "replay_error_ns") / 1e3 << " us over "
                  << span * steps / 1e6 << " ms\n";
        EXPECT_LE(figure(r, "replay_error_ns"), 0.01 * span * steps) << name;
        ++checked;
    }
    EXPECT_GE(checked, 15);
}

// The timeline findings: each says what fixing it is worth wherever the program could be replayed.
bool is_timeline_finding(const std::string& id) {
    for (const char* t : {"input_bound", "host_sync_stall", "pageable_memcpy", "launch_bound",
                          "comm_bound", "gpu_idle"}) {
        if (id == t) return true;
    }
    return false;
}

// Nsight Systems exports (SQLite) go through the same graph: launches, syncs and stream waits
// joined, the replay reproducing the measured span, every timeline finding priced, and the price
// kept through the JSON report.
TEST(CriticalPathCorpus, NsightExportsAreReplayedAndTheirFindingsPriced) {
    int findings = 0;
    for (const char* name :
         {"extrap_con_kernel.sqlite", "pipit_perlmutter-cloverleaf-cuda.sqlite"}) {
        const std::string path = std::string(GPUDIAG_CORPUS_DIR) + "/nsight_sqlite/" + name;
        if (!fs::exists(path)) GTEST_SKIP() << "corpus file absent: " << path;
        auto r = analyze_files({path}, AnalysisOptions{});
        ASSERT_TRUE(r.is_ok()) << r.status().to_string();
        const double span = figure(*r, "replay_step_ns");
        EXPECT_GT(figure(*r, "launch_links"), 0) << name;
        EXPECT_GT(figure(*r, "sync_waits"), 0) << name;
        EXPECT_GT(span, 0) << name;
        EXPECT_LE(figure(*r, "replay_error_ns"), 0.01 * span) << name;
        auto parsed = parse_report_json(render_json(*r));
        ASSERT_TRUE(parsed.is_ok()) << parsed.status().to_string();
        for (const auto& f : parsed->findings) {
            if (!is_timeline_finding(f.id)) continue;
            ++findings;
            EXPECT_GE(f.saving_ns(), 0) << name << " " << f.id;
            EXPECT_GE(predicted(f, "share"), 0) << name << " " << f.id;
        }
    }
    EXPECT_GT(findings, 0);
}

// Across the Kineto corpus: wherever the trace has a host timeline to replay, every timeline
// finding carries its predicted saving, and findings come out ordered by it.
TEST(CriticalPathCorpus, EveryTimelineFindingIsPricedAndRankedByIt) {
    if (!fs::exists(corpus_kineto_trace(""))) GTEST_SKIP() << "corpus absent";
    int priced = 0;
    for (const auto& e : fs::directory_iterator(corpus_kineto_trace(""))) {
        std::string name = e.path().filename().string();
        if (name.find(".tar.") != std::string::npos ||
            name.find("memory_timeline") != std::string::npos)
            continue;
        const Report& r = analysed(name);
        if (figure(r, "replay_step_ns") <= 0) continue;
        double previous = -1;
        bool priced_part = true;
        for (const auto& f : r.findings) {
            if (is_timeline_finding(f.id)) {
                EXPECT_GE(f.saving_ns(), 0) << name << " " << f.id;
                ++priced;
            }
            // Priced findings first (after any failure), largest saving first.
            if (f.saving_ns() < 0) {
                priced_part = priced_part && f.severity == Severity::kCritical && previous < 0;
                continue;
            }
            if (previous >= 0) {
                EXPECT_LE(f.saving_ns(), previous) << name << " " << f.id;
            }
            EXPECT_TRUE(priced_part)
                << name << " " << f.id << ": a priced finding after an unpriced one";
            previous = f.saving_ns();
        }
    }
    EXPECT_GT(priced, 10);
}

}  // namespace
}  // namespace gpudiag
