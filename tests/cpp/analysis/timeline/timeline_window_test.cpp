// SPDX-License-Identifier: Apache-2.0
// One window per finding, one-off stalls kept out of it, and the verdicts an expert gives three
// recordings of 2024-2025 (../shared/corpus/SOURCES.md, "Added 2026-12-03").
//
// Every timeline finding states the window its figures describe (figure "window_ns") and its
// predicted saving the window the critical path was replayed over (saving "window_ns"); they
// must be one window, on every trace and Nsight export of the corpus (snapshots have no
// timeline).
#include <gpudiag/analyze.hpp>
#include <gpudiag/report.hpp>

#include "analysis/findings/figure_keys.hpp"
#include "analysis/findings/finding_catalog.hpp"
#include "corpus.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace gpudiag {
namespace {

namespace fs = std::filesystem;
using detail::FindingArea;
using detail::kFindingWindowKey;

const Report& analysed(const std::string& path) {
    static std::map<std::string, Report> cache;
    auto it = cache.find(path);
    if (it == cache.end()) {
        auto r = analyze_files({path});
        EXPECT_TRUE(r.is_ok()) << path << ": " << r.status().to_string();
        it = cache.emplace(path, r.is_ok() ? *r : Report{}).first;
    }
    return it->second;
}

const Figure* find(const std::vector<Figure>& figures, const char* key) {
    for (const auto& f : figures) {
        if (f.key == key) return &f;
    }
    return nullptr;
}

const Finding* finding(const Report& r, const char* id) {
    for (const auto& f : r.findings) {
        if (f.id == id) return &f;
    }
    return nullptr;
}

double section_figure(const Report& r, const char* key) {
    const Section* s = r.section("timeline");
    const Figure* f = s != nullptr ? s->figure(key) : nullptr;
    return f != nullptr ? f->value : -1.0;
}

bool is_timeline(const Finding& f) {
    const auto id = detail::finding_id(f.id);
    return id && detail::finding_area(*id) == FindingArea::kTimeline;
}

// Every Kineto trace and Nsight export of the corpus (the memory timeline and the CSV exports
// are no timeline gpudiag reads).
std::vector<std::string> every_timeline_input() {
    std::vector<std::string> out;
    for (const char* folder : {"kineto_traces", "nsight_sqlite"}) {
        const fs::path dir = testing::corpus_path(folder);
        if (!fs::exists(dir)) continue;
        for (const auto& e : fs::directory_iterator(dir)) {
            const std::string name = e.path().filename().string();
            if (name.find("memory_timeline") != std::string::npos || e.path().extension() == ".csv")
                continue;
            out.push_back(e.path().string());
        }
    }
    std::sort(out.begin(), out.end());
    return out;
}

// The figures' window and the saving's window of each timeline finding are one (to the replay's
// rounding: a microsecond), and the summary names it.
TEST(TimelineWindow, FiguresAndSavingShareOneWindowOnEveryInput) {
    const auto inputs = every_timeline_input();
    if (inputs.size() < 10) GTEST_SKIP() << "corpus absent under " << GPUDIAG_CORPUS_DIR;
    std::size_t checked = 0;
    std::vector<std::pair<std::string, const Report*>> reports;
    for (const auto& path : inputs) {
        const Report& r = analysed(path);
        reports.emplace_back(path, &r);
        for (const auto& rank : r.ranks)
            reports.emplace_back(path + " rank " + std::to_string(rank.source.rank), &rank);
    }
    for (const auto& [where, report] : reports) {
        for (const auto& f : report->findings) {
            if (!is_timeline(f) || f.predicted_saving.empty()) continue;
            SCOPED_TRACE(where + ": " + f.id);
            const Figure* figures = find(f.figures, kFindingWindowKey);
            const Figure* saving = find(f.predicted_saving, kFindingWindowKey);
            ASSERT_NE(figures, nullptr);
            ASSERT_NE(saving, nullptr);
            EXPECT_NEAR(figures->value, saving->value, std::max(1e3, 1e-6 * figures->value));
            EXPECT_NE(f.summary.find("Figures and saving are "), std::string::npos);
            // A saving larger than its window would be time from outside it.
            EXPECT_LE(f.saving_ns(), saving->value * 1.001 + 1e3);
            ++checked;
        }
    }
    EXPECT_GT(checked, 20u);
}

// Without steps the window is the GPU window (first to last GPU work) less the one-off costs:
// the same span the timeline section reports as "GPU time in the window".
TEST(TimelineWindow, WithoutStepsTheWindowIsTheGpuWindow) {
    const auto inputs = every_timeline_input();
    if (inputs.size() < 10) GTEST_SKIP() << "corpus absent under " << GPUDIAG_CORPUS_DIR;
    std::size_t checked = 0;
    for (const auto& path : inputs) {
        const Report& r = analysed(path);
        const Finding* idle = finding(r, "gpu_idle");
        if (idle == nullptr || section_figure(r, "steps") > 0) continue;
        const Figure* window = find(idle->figures, kFindingWindowKey);
        ASSERT_NE(window, nullptr) << path;
        const double span = section_figure(r, "window_span_ns");
        if (span < 0) continue;  // a job's report: its ranks have the timelines
        const double unobserved = std::max(0.0, section_figure(r, "unobserved_ns"));
        EXPECT_NEAR(window->value, span + unobserved, std::max(1e3, 1e-6 * span)) << path;
        ++checked;
    }
    EXPECT_GT(checked, 2u);
}

// ---- verdicts ----------------------------------------------------------------------------------

// switchtransformers_batch4_seq128.json: one Switch-Transformer forward pass profiled without
// warm-up, no ProfilerStep. The host spends ~500 ms before the first kernel inside the first
// cudaLaunchKernel (the CUDA context and the first kernel's module loading), and the first launch
// of each later kernel loads its module too (5-26 ms each, against ~9 µs for every later launch).
// An expert reads that as a cold start, reported once with "profile after warm-up"; the per-step
// findings describe what is left (the GPU window without those one-off costs), where the
// synchronizing timing prints and host work between launches are what keep the GPU idle, and no
// saving counts the pre-GPU stall (before: "saves about 693.7 ms" of a 313 ms GPU window).
TEST(TimelineVerdict, SwitchTransformersBatch4IsAColdStartThenHostBound) {
    const std::string path = testing::corpus_kineto_trace("switchtransformers_batch4_seq128.json");
    GPUDIAG_REQUIRE_FILES(path);
    const Report& r = analysed(path);
    const Finding* stall = finding(r, "one_off_stall");
    ASSERT_NE(stall, nullptr);
    EXPECT_EQ(stall->severity, Severity::kWarning);  // no warm-up before it
    EXPECT_GE(find(stall->figures, "stall_ns")->value, 400e6);
    EXPECT_NE(stall->title.find("before the first GPU work"), std::string::npos);
    EXPECT_NE(stall->title.find("module loading"), std::string::npos) << stall->title;
    EXPECT_NE(stall->summary.find("without warm-up"), std::string::npos);
    ASSERT_FALSE(stall->advice.empty());
    EXPECT_NE(stall->advice[0].find("torch.profiler.schedule"), std::string::npos);
    EXPECT_TRUE(stall->predicted_saving.empty());  // it is no per-step cost to replay away

    // Every saving covers the GPU window less the one-off costs: far less than the stall.
    const Finding* idle = finding(r, "gpu_idle");
    ASSERT_NE(idle, nullptr);
    EXPECT_NE(idle->title.find("waiting for the host"), std::string::npos) << idle->title;
    const double window = find(idle->figures, kFindingWindowKey)->value;
    EXPECT_LT(window, 313e6);  // the GPU window, less the modules' first launches
    for (const auto& f : r.findings) {
        if (!is_timeline(f) || f.saving_ns() < 0) continue;
        EXPECT_LT(f.saving_ns(), window) << f.id;
    }
    EXPECT_LT(r.fix_all_saving.empty() ? 0.0 : r.fix_all_saving[0].value, 150e6);
    // The timing prints' synchronizations are named, and are worth more than CUDA graphs here.
    const Finding* sync = finding(r, "host_sync_stall");
    ASSERT_NE(sync, nullptr);
    const Finding* launch = finding(r, "launch_bound");
    if (launch != nullptr) {
        EXPECT_LT(launch->saving_ns(), sync->saving_ns());
    }
}

// switchtransformers_batch8_seq1024.json: the same forward pass at 8 x 1024 tokens keeps the GPU
// busy (~81 %, FP32 SIMT GEMMs). What idle time there is comes from the cold start: the first
// launch (~320 ms before any GPU work), modules loading on each kernel's first launch and 168
// cudaMalloc of a cold caching allocator. All of it is one-off: the verdict is "profile after
// warm-up", not a per-step launch-bound loop (before: launch_bound with CUDA-graph advice,
// "saves about 421.6 ms").
TEST(TimelineVerdict, SwitchTransformersBatch8IsBusyAfterAOneOffColdStart) {
    const std::string path = testing::corpus_kineto_trace("switchtransformers_batch8_seq1024.json");
    GPUDIAG_REQUIRE_FILES(path);
    const Report& r = analysed(path);
    const Finding* stall = finding(r, "one_off_stall");
    ASSERT_NE(stall, nullptr);
    bool allocator = false;
    for (const auto& e : stall->evidence)
        allocator |= e.find("cold caching allocator") != std::string::npos;
    EXPECT_TRUE(allocator) << "the cold allocator's cudaMalloc calls are named as warm-up";
    EXPECT_EQ(finding(r, "launch_bound"), nullptr);
    const Finding* idle = finding(r, "gpu_idle");
    if (idle != nullptr) {
        EXPECT_LT(find(idle->figures, detail::kFindingShareKey)->value, detail::kIdleSevere);
    }
    EXPECT_LT(section_figure(r, "idle_share"), detail::kIdleWorthExplaining);
}

// nvfuser_crossentropy_h200_nsys2025.sqlite: an nvFuser cross-entropy benchmark captured from
// process start: 4.1 s of start-up before the first GPU work, then the GPU busy ~1 % while the
// host compiles fusions (two gaps of 566 ms and 271 ms lie wholly inside nvFuser's compile
// ranges: FusionKernelRuntime::compileFusionParallel, executor_utils::NVRTC) and runs unnamed host
// work. The expert verdict: a capture of one-off work, not of a loop; compilation is named with
// its own remedy (warm up, cache compiled kernels), not generic "CPU work" advice.
TEST(TimelineVerdict, NvfuserCaptureIsStartUpAndCompilation) {
    const std::string path =
        testing::corpus_nsight_export("nvfuser_crossentropy_h200_nsys2025.sqlite");
    GPUDIAG_REQUIRE_FILES(path);
    const Report& r = analysed(path);
    const Finding* stall = finding(r, "one_off_stall");
    ASSERT_NE(stall, nullptr);
    EXPECT_GE(find(stall->figures, "stall_ns")->value, 3e9);
    EXPECT_NE(stall->summary.find("without warm-up"), std::string::npos);
    const Finding* idle = finding(r, "gpu_idle");
    ASSERT_NE(idle, nullptr);
    EXPECT_GE(find(idle->figures, "idle_compile_share")->value, detail::kCauseSevere);
    bool compile_advice = false;
    for (const auto& a : idle->advice)
        compile_advice |= a.find("TORCHINDUCTOR_CACHE_DIR") != std::string::npos;
    EXPECT_TRUE(compile_advice);
    bool named = false;
    for (const auto& e : idle->evidence) named |= e.find("compiling") != std::string::npos;
    EXPECT_TRUE(named);
}

}  // namespace
}  // namespace gpudiag
