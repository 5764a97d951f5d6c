// SPDX-License-Identifier: Apache-2.0
// Comparisons of real pairs of the corpus (issue #35 item 5): each gets the verdict an expert
// gives it, for the reason its comment states from the files' own figures.
#include <gpudiag/analyze.hpp>
#include <gpudiag/compare.hpp>
#include <gpudiag/report.hpp>

#include "corpus.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace gpudiag {
namespace {

using testing::corpus_kineto_trace;
using testing::corpus_nsight_export;
using testing::corpus_snapshot;

const char* const kResnet0 = "kineto_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz";
const char* const kResnet4 = "kineto_resnet50_num_workers_4_worker0.1623212756351.pt.trace.json.gz";

Report analyzed(const std::string& path) {
    auto r = analyze_files({path});
    EXPECT_TRUE(r.is_ok()) << path << ": " << r.status().to_string();
    return r.is_ok() ? *r : Report{};
}

Comparison compared(const Report& before, const Report& after) {
    auto c = compare_reports(before, after);
    EXPECT_TRUE(c.is_ok()) << c.status().to_string();
    return c.is_ok() ? *c : Comparison{};
}

std::vector<std::string> deciding(const Comparison& c) {
    std::vector<std::string> keys;
    for (const auto& d : c.deltas) {
        if (d.deciding) keys.push_back(d.key);
    }
    return keys;
}

bool has_reason(const Comparison& c, const std::string& id) {
    return std::any_of(c.reasons.begin(), c.reasons.end(),
                       [&](const CompareReason& r) { return r.id == id; });
}

const CompareDelta* delta(const Comparison& c, const std::string& key) {
    for (const auto& d : c.deltas) {
        if (d.key == key && d.rank < 0) return &d;
    }
    return nullptr;
}

bool mentions(const std::vector<std::string>& lines, const std::string& word) {
    return std::any_of(lines.begin(), lines.end(),
                       [&](const std::string& l) { return l.find(word) != std::string::npos; });
}

// The same ResNet-50 training on one V100, DataLoader(num_workers=0) then 4. With 0 the loop
// waits 62-73 ms for every batch (415.8 ms of DataLoader time over 6 steps, REFERENCE.md); with 4
// workers the wait is about 1 ms and the median step falls from 176 ms to 127 ms, far beyond
// either run's step-to-step spread. The input wait decided it; the reverse order is the same
// change undone.
TEST(CompareCorpus, ResnetMoreDataLoaderWorkersIsAnImprovementDecidedByTheInputWait) {
    GPUDIAG_REQUIRE_FILES(corpus_kineto_trace(kResnet0), corpus_kineto_trace(kResnet4));
    const Report nw0 = analyzed(corpus_kineto_trace(kResnet0));
    const Report nw4 = analyzed(corpus_kineto_trace(kResnet4));

    const Comparison forward = compared(nw0, nw4);
    EXPECT_EQ(forward.verdict, CompareVerdict::kImprovement) << forward.headline;
    EXPECT_TRUE(forward.comparable);
    const auto keys = deciding(forward);
    EXPECT_NE(std::find(keys.begin(), keys.end(), "critical_path_input_ns"), keys.end());
    EXPECT_NE(std::find(keys.begin(), keys.end(), "step_time_ns"), keys.end());
    const CompareDelta* step = delta(forward, "step_time_ns");
    ASSERT_NE(step, nullptr);
    EXPECT_EQ(step->judgement, DeltaJudgement::kImproved);
    EXPECT_GT(step->before, 170e6);
    EXPECT_LT(step->after, 135e6);
    EXPECT_NE(forward.headline.find("waiting for input"), std::string::npos) << forward.headline;
    const auto resolved =
        std::find_if(forward.findings.begin(), forward.findings.end(),
                     [](const FindingChange& f) { return f.id == "input_bound"; });
    ASSERT_NE(resolved, forward.findings.end());
    EXPECT_EQ(resolved->change, FindingChangeKind::kResolved);

    const Comparison reverse = compared(nw4, nw0);
    EXPECT_EQ(reverse.verdict, CompareVerdict::kRegression) << reverse.headline;
    const auto back = deciding(reverse);
    EXPECT_NE(std::find(back.begin(), back.end(), "critical_path_input_ns"), back.end());
}

// A saved report (render_json, read back) is the run it describes: compared with the live report
// it is unchanged, and a pair of saved reports compares exactly as the live pair does.
TEST(CompareCorpus, SavedJsonReportComparesAsTheLiveReport) {
    GPUDIAG_REQUIRE_FILES(corpus_kineto_trace(kResnet0), corpus_kineto_trace(kResnet4));
    const Report nw0 = analyzed(corpus_kineto_trace(kResnet0));
    const Report nw4 = analyzed(corpus_kineto_trace(kResnet4));
    auto saved0 = parse_report_json(render_json(nw0));
    auto saved4 = parse_report_json(render_json(nw4));
    ASSERT_TRUE(saved0.is_ok() && saved4.is_ok());

    const Comparison self = compared(*saved0, nw0);
    EXPECT_EQ(self.verdict, CompareVerdict::kUnchanged) << self.headline;
    EXPECT_TRUE(self.comparable);
    EXPECT_EQ(render_comparison_json(compared(*saved0, *saved4)),
              render_comparison_json(compared(nw0, nw4)));
}

// Nothing differs between a run and itself, whatever the input kind: a trace with steps, a trace
// without, a memory snapshot, an Nsight Systems export.
TEST(CompareCorpus, ARunAgainstItselfIsUnchanged) {
    const std::vector<std::string> inputs = {
        corpus_kineto_trace(kResnet0),
        corpus_kineto_trace("kineto_pr1318_before_fix_trace.json"),
        corpus_snapshot("magma27_cs336a2_memory_snapshot.pickle"),
        corpus_nsight_export("nvfuser_crossentropy_h200_nsys2025.sqlite"),
    };
    for (const auto& path : inputs) {
        if (testing::first_missing({path}) != "") continue;
        const Report r = analyzed(path);
        const Comparison c = compared(r, r);
        EXPECT_EQ(c.verdict, CompareVerdict::kUnchanged) << path << ": " << c.headline;
        EXPECT_FALSE(c.deltas.empty()) << path;
        for (const auto& d : c.deltas) {
            EXPECT_EQ(d.judgement, DeltaJudgement::kWithinNoise) << path << ": " << d.key;
        }
    }
}

// The ResNet-50 trace ran on a V100, the SwitchTransformers trace on an A100 80GB: whatever
// moved, the GPU alone can explain it.
TEST(CompareCorpus, DifferentGpuModelsAreAtBestInconclusive) {
    const std::string v100 = corpus_kineto_trace(kResnet0);
    const std::string a100 = corpus_kineto_trace("switchtransformers_batch4_seq128.json");
    GPUDIAG_REQUIRE_FILES(v100, a100);
    const Comparison c = compared(analyzed(v100), analyzed(a100));
    EXPECT_EQ(c.verdict, CompareVerdict::kInconclusive) << c.headline;
    EXPECT_FALSE(c.comparable);
    EXPECT_TRUE(has_reason(c, "gpu_model"));
}

// HTA's trace-diff example pairs rank 3 of an 8-GPU A100 job (steps 76-81 ms, steady) with rank
// 1 of a 2-GPU V100 job (steps 82-166 ms). Another GPU model and another GPU count: an expert
// compares nothing here, even though the test run's step time moved by less than its own wide
// spread.
TEST(CompareCorpus, HtaTraceDiffPairRanOnOtherGpusAndIsInconclusive) {
    const std::string control = corpus_kineto_trace("hta_trace_diff_control.json.gz");
    const std::string test = corpus_kineto_trace("hta_trace_diff_test.json.gz");
    GPUDIAG_REQUIRE_FILES(control, test);
    const Comparison c = compared(analyzed(control), analyzed(test));
    EXPECT_EQ(c.verdict, CompareVerdict::kInconclusive) << c.headline;
    EXPECT_TRUE(has_reason(c, "gpu_model"));
    EXPECT_TRUE(has_reason(c, "gpu_count"));
    EXPECT_FALSE(has_reason(c, "input_shapes"));  // both fed batches of 1024
}

// Kineto PR 1318 changed how the trace records a stream synchronization, not the program: both
// traces hold the same one kernel of 20 ns in a 130 ns window. Unchanged, with the caveat that
// there are no steps to measure noise with.
TEST(CompareCorpus, KinetoPr1318FixChangesNothingTheProgramDid) {
    const std::string before = corpus_kineto_trace("kineto_pr1318_before_fix_trace.json");
    const std::string after = corpus_kineto_trace("kineto_pr1318_after_fix_trace.json");
    GPUDIAG_REQUIRE_FILES(before, after);
    const Comparison c = compared(analyzed(before), analyzed(after));
    EXPECT_EQ(c.verdict, CompareVerdict::kUnchanged) << c.headline;
    EXPECT_TRUE(has_reason(c, "too_few_steps"));
}

// One SwitchTransformers inference at batch 8 x 1024 tokens, then at batch 4 x 128 (16x fewer
// tokens; the file names and the embedding's input shapes say so). Its GPU time falls from 606 to
// 124 ms and its peak from 21.5 to 3.2 GiB because the input shrank, not because anything got
// better; with no steps either run's noise is unknown. An expert calls it inconclusive, and says
// the layers were fed different batches (the traces' Input Dims).
TEST(CompareCorpus, SwitchTransformersAtAnotherBatchIsInconclusive) {
    const std::string b8 = corpus_kineto_trace("switchtransformers_batch8_seq1024.json");
    const std::string b4 = corpus_kineto_trace("switchtransformers_batch4_seq128.json");
    GPUDIAG_REQUIRE_FILES(b8, b4);
    const Comparison c = compared(analyzed(b8), analyzed(b4));
    EXPECT_EQ(c.verdict, CompareVerdict::kInconclusive) << c.headline;
    EXPECT_FALSE(c.comparable);
    const CompareDelta* span = delta(c, "window_span_ns");
    ASSERT_NE(span, nullptr);
    EXPECT_EQ(span->judgement, DeltaJudgement::kNotComparable);
    ASSERT_TRUE(has_reason(c, "input_shapes"));
    for (const auto& r : c.reasons) {
        if (r.id != "input_shapes") continue;
        EXPECT_NE(r.text.find("8x1024 before, 4x128 after"), r.text.npos) << r.text;
    }
}

// Two students' snapshots of the same assignment: magma27's peak (13.0 GiB allocated) is made by
// the model's forward pass (model.py:39 forward, silu, softmax), bcrafton's (3.6 GiB) by the
// optimizer step (optimizer.py:78). The peaks come from different code, so their sizes cannot say
// that either program improved: inconclusive.
TEST(CompareCorpus, Cs336a2SnapshotsPeakInDifferentCodeAndAreInconclusive) {
    const std::string magma = corpus_snapshot("magma27_cs336a2_memory_snapshot.pickle");
    const std::string bcrafton = corpus_snapshot("bcrafton_cs336a2_memory_snapshot.pickle");
    GPUDIAG_REQUIRE_FILES(magma, bcrafton);
    const Comparison c = compared(analyzed(magma), analyzed(bcrafton));
    EXPECT_EQ(c.verdict, CompareVerdict::kInconclusive) << c.headline;
    EXPECT_TRUE(has_reason(c, "different_code"));
    const CompareDelta* peak = delta(c, "peak_allocated_bytes");
    ASSERT_NE(peak, nullptr);
    EXPECT_EQ(peak->judgement, DeltaJudgement::kImproved);
    EXPECT_TRUE(peak->deciding);
    // A snapshot does not record its GPU: that both ran on the same one is assumed, and said.
    EXPECT_TRUE(mentions(c.notes, "GPU model"));
}

// A trace and a snapshot share only device memory: the comparison says the GPU's activity and
// the steps were observed by the trace alone, and compares memory.
TEST(CompareCorpus, TraceAgainstSnapshotSaysWhatItCouldNotCompare) {
    const std::string trace = corpus_kineto_trace("switchtransformers_batch4_seq128.json");
    const std::string snapshot = corpus_snapshot("silmont2000_cs336a2_mem_snapshot.pickle");
    GPUDIAG_REQUIRE_FILES(trace, snapshot);
    const Comparison c = compared(analyzed(trace), analyzed(snapshot));
    EXPECT_EQ(c.compared, std::vector<Evidence>{Evidence::kDeviceMemory});
    EXPECT_TRUE(mentions(c.not_compared, "GPU activity: only the before run observed it"));
    EXPECT_TRUE(has_reason(c, "input_kinds"));
    EXPECT_EQ(c.verdict, CompareVerdict::kInconclusive) << c.headline;
    EXPECT_NE(delta(c, "peak_reserved_bytes"), nullptr);
    EXPECT_EQ(delta(c, "step_time_ns"), nullptr);
}

// One trace analysed over complete steps and over HTA's window times different parts of it: the
// comparison refuses to call the difference a change.
TEST(CompareCorpus, OneTraceOverAnotherWindowIsInconclusive) {
    const std::string path = corpus_kineto_trace(kResnet0);
    GPUDIAG_REQUIRE_FILES(path);
    AnalysisOptions hta;
    hta.window = AnalysisWindow::kHta;
    auto windowed = analyze_files({path}, hta);
    ASSERT_TRUE(windowed.is_ok());
    const Comparison c = compared(analyzed(path), *windowed);
    EXPECT_TRUE(has_reason(c, "analysis_window"));
    EXPECT_EQ(c.verdict, CompareVerdict::kInconclusive) << c.headline;
}

// A job compares rank by rank as well as as a whole.
TEST(CompareCorpus, AJobAgainstItselfComparesEveryRank) {
    const std::string job = corpus_kineto_trace("param_dlrm_kineto_8ranks.tar.gz");
    GPUDIAG_REQUIRE_FILES(job);
    const Report r = analyzed(job);
    const Comparison c = compared(r, r);
    EXPECT_EQ(c.verdict, CompareVerdict::kUnchanged) << c.headline;
    EXPECT_EQ(c.before.ranks, 8);
    const auto ranks = std::count_if(c.deltas.begin(), c.deltas.end(),
                                     [](const CompareDelta& d) { return d.rank >= 0; });
    EXPECT_EQ(ranks, 8);
}

}  // namespace
}  // namespace gpudiag
