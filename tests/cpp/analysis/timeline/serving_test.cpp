// SPDX-License-Identifier: Apache-2.0
// LLM serving traces: an engine's iterations (prefill, decode) are the steps where the program
// marked none of its own, a host-bound eager engine gets its own CUDA-graph remedy, and
// communication kernels count by what they do. Synthetic streams state each case exactly; the
// corpus' vLLM trace is the verdict an expert gives it.

#include <gpudiag/analyze.hpp>
#include <gpudiag/report.hpp>

#include "corpus.hpp"
#include "synthetic_timeline.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <variant>
#include <vector>

namespace gpudiag {
namespace {

using testing::kMs;
using testing::kUs;
using testing::SyntheticTimeline;

double figure(const Report& r, const char* section, const char* key) {
    const Section* s = r.section(section);
    const Figure* f = s != nullptr ? s->figure(key) : nullptr;
    return f != nullptr ? f->value : -1.0;
}

const Finding* finding(const Report& r, const std::string& id) {
    for (const auto& f : r.findings) {
        if (f.id == id) return &f;
    }
    return nullptr;
}

bool has_note(const Report& r, const std::string& text) {
    return std::any_of(r.notes.begin(), r.notes.end(),
                       [&](const std::string& n) { return n.find(text) != std::string::npos; });
}

bool any_contains(const std::vector<std::string>& lines, const std::string& text) {
    return std::any_of(lines.begin(), lines.end(),
                       [&](const std::string& l) { return l.find(text) != std::string::npos; });
}

// A phase_times row's calls, by the row's name; -1 when absent.
double phase_calls(const Report& r, const std::string& phase) {
    const Section* s = r.section("phases");
    if (s == nullptr) return -1;
    for (const Table& t : s->tables) {
        if (t.id != "phase_times") continue;
        for (const auto& row : t.rows) {
            const auto* name = std::get_if<std::string>(row.data());
            if (name != nullptr && *name == phase) return std::get<double>(row[1]);
        }
    }
    return -1;
}

// An eager engine iteration: `kernels` short kernels, each launched from the host 40 µs after
// the last one ended (the Python between eager launches, or a launch call that long), in one
// range named `name`.
std::uint64_t eager_iteration(SyntheticTimeline& t, std::uint64_t at, const std::string& name,
                              int kernels, RangeCategory category = RangeCategory::kUserAnnotation,
                              std::uint64_t launch_call = 5 * kUs) {
    std::uint64_t now = at + 20 * kUs;
    for (int k = 0; k < kernels; ++k) {
        const bool all_reduce = k % 4 == 3;
        t.kernel(now + 8 * kUs, 6 * kUs, now,
                 all_reduce ? "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(int)"
                            : "void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(float*)",
                 7, launch_call);
        now += 8 * kUs + 6 * kUs + 40 * kUs;
    }
    const std::uint64_t end = now + 20 * kUs;
    t.range(at, end - at, category, name);
    return end;
}

TEST(ServingSteps, VllmIterationsAreStepsWithTheirKindAndPhaseTimes) {
    SyntheticTimeline t;
    std::uint64_t at = eager_iteration(t, 0, "execute_context_1(512)_generation_0(0)", 40);
    at = eager_iteration(t, at + 100 * kUs, "execute_context_0(0)_generation_1(1)", 20);
    eager_iteration(t, at + 100 * kUs, "execute_context_0(0)_generation_1(1)", 20);
    auto r = t.analyze();
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_EQ(figure(*r, "timeline", "steps"), 3);
    EXPECT_TRUE(has_note(*r,
                         "Steps: 3 vLLM engine iterations (\"execute_context_1(512)_"
                         "generation_0(0)\") read as steps: 1 prefill, 2 decode."))
        << render_text(*r);
    // Per-phase time: one row per kind, whatever the token counts in the names.
    EXPECT_EQ(phase_calls(*r, "prefill (vLLM iterations)"), 1);
    EXPECT_EQ(phase_calls(*r, "decode (vLLM iterations)"), 2);
    // The custom all-reduce is communication although no NCCL kernel ran.
    EXPECT_GT(figure(*r, "timeline", "communication_share"), 0.0);
    EXPECT_TRUE(has_note(*r, "Communication kernels, by what they do: custom all-reduce"));
}

TEST(ServingSteps, HostBoundEagerVllmGetsVllmsRemedyFirst) {
    SyntheticTimeline t;
    std::uint64_t at = 0;
    for (int i = 0; i < 4; ++i) {
        at = eager_iteration(t, at + 100 * kUs, "execute_context_0(0)_generation_8(8)", 30);
    }
    auto r = t.analyze();
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    const Finding* idle = finding(*r, "gpu_idle");
    ASSERT_NE(idle, nullptr) << render_text(*r);
    ASSERT_FALSE(idle->advice.empty());
    EXPECT_NE(idle->advice[0].find("--enforce-eager"), std::string::npos) << idle->advice[0];
    EXPECT_NE(idle->advice[0].find("cudagraph_capture_sizes"), std::string::npos);
    EXPECT_TRUE(any_contains(idle->evidence, "Serving engine: vLLM, from its iteration ranges"));
    EXPECT_TRUE(any_contains(idle->evidence, "No CUDA graph was launched"));
}

TEST(ServingSteps, WithoutAnEngineTheAdviceStaysGeneric) {
    SyntheticTimeline t;
    std::uint64_t now = 0;
    for (int k = 0; k < 100; ++k) {
        t.kernel(now + 8 * kUs, 6 * kUs, now);
        now += 54 * kUs;
    }
    auto r = t.analyze();
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    const Finding* idle = finding(*r, "gpu_idle");
    ASSERT_NE(idle, nullptr);
    EXPECT_FALSE(any_contains(idle->advice, "enforce"));
    EXPECT_FALSE(any_contains(idle->evidence, "Serving engine"));
}

// TensorRT-LLM iterations, NVTX ranges as Nsight gives them, with a CUDA graph launched in each
// and the rest of the kernels launched one by one; `launch_call`: how long each launch call took.
Report trtllm_with_graphs(std::uint64_t launch_call) {
    SyntheticTimeline t;
    std::uint64_t at = 0;
    for (int i = 0; i < 3; ++i) {
        t.api(at + 10 * kUs, 8 * kUs, "cudaGraphLaunch");
        at = eager_iteration(
            t, at + 100 * kUs,
            "[Executor] _forward_step " + std::to_string(i) + ": 2 ctx reqs, 6 gen reqs", 30,
            RangeCategory::kGeneric, launch_call);
    }
    auto r = t.analyze();
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    return r.is_ok() ? *r : Report{};
}

TEST(ServingSteps, GraphLaunchesAndSlowLaunchCallsGetTheWiderCaptureRemedy) {
    const Report r = trtllm_with_graphs(45 * kUs);  // the host is inside launch calls
    EXPECT_EQ(figure(r, "timeline", "steps"), 3);
    EXPECT_TRUE(has_note(r, "3 TensorRT-LLM engine iterations")) << render_text(r);
    EXPECT_EQ(phase_calls(r, "mixed prefill+decode (TensorRT-LLM iterations)"), 3);
    const Finding* idle = finding(r, "gpu_idle");
    ASSERT_NE(idle, nullptr) << render_text(r);
    EXPECT_TRUE(any_contains(idle->evidence, "3 CUDA graph launches")) << render_text(r);
    ASSERT_FALSE(idle->advice.empty());
    EXPECT_NE(idle->advice[0].find("TensorRT-LLM replays CUDA graphs only"), std::string::npos)
        << idle->advice[0];
}

TEST(ServingSteps, WithGraphsRunningCpuWorkIsNotTheGraphSettings) {
    // The gaps are host work outside launch calls while the engine does launch graphs: its
    // scheduler's or sampler's, which capture sizes do not change.
    const Report r = trtllm_with_graphs(5 * kUs);
    const Finding* idle = finding(r, "gpu_idle");
    ASSERT_NE(idle, nullptr) << render_text(r);
    EXPECT_NE(idle->title.find("CPU work between launches"), std::string::npos) << idle->title;
    EXPECT_FALSE(any_contains(idle->advice, "TensorRT-LLM"));
}

TEST(ServingSteps, TheProgramsOwnStepsWin) {
    SyntheticTimeline t;
    std::uint64_t at = 0;
    for (int i = 0; i < 2; ++i) {
        const std::uint64_t start = at + 100 * kUs;
        at = eager_iteration(t, start, "execute_context_0(0)_generation_4(4)", 10);
        t.step(i, start - 10 * kUs, at - start + 20 * kUs);
    }
    auto r = t.analyze();
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_EQ(figure(*r, "timeline", "steps"), 2);  // the ProfilerSteps, not four steps
    EXPECT_TRUE(has_note(*r, "the trace's own steps (ProfilerStep) set the window"))
        << render_text(*r);
}

TEST(ServingSteps, ARangeNamedDecodeIsAPhaseNotAStep) {
    SyntheticTimeline t;
    std::uint64_t now = 0;
    for (int k = 0; k < 20; ++k) {
        t.kernel(now + 8 * kUs, 6 * kUs, now);
        now += 54 * kUs;
    }
    t.range(0, now, RangeCategory::kPhase, "decode");  // one range around a whole loop
    auto r = t.analyze();
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_EQ(figure(*r, "timeline", "steps"), -1) << render_text(*r);
    EXPECT_EQ(phase_calls(*r, "decode"), 1);
    EXPECT_FALSE(has_note(*r, "engine iteration"));
}

// The corpus' vLLM v1 trace (SOURCES.md): gpt-oss MoE on 8× B200, TP 8, rank 0, eager mode. An
// expert reads it as a launch-bound eager prefill: the GPU is busy ~14 % of 84.5 ms, its median
// kernel runs ~6 µs while the host spends tens of µs of Python between launches, and no CUDA
// graph ran. The remedy is vLLM's own (CUDA graphs on: no enforce_eager, compilation_config),
// and the tensor-parallel all-reduce is a symmetric-memory (multimem) kernel, not an NCCL one.
TEST(ServingVerdict, VllmEagerPrefillIsHostBoundAndGetsVllmsCudaGraphs) {
    const std::string path =
        testing::corpus_kineto_trace("tracelens_vllm_gptoss_b200_eager_rank0.json.gz");
    GPUDIAG_REQUIRE_FILES(path);
    auto r = analyze_files({path}, AnalysisOptions{});
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    const std::string text = render_text(*r);
    // One vLLM iteration, a prefill, recognised as the one step (the trace has no ProfilerStep).
    EXPECT_EQ(figure(*r, "timeline", "steps"), 1) << text;
    EXPECT_TRUE(has_note(*r,
                         "Steps: 1 vLLM engine iteration (\"execute_context_1(888_788544)_"
                         "generation_0(0)\") read as steps: 1 prefill."))
        << text;
    EXPECT_EQ(phase_calls(*r, "prefill (vLLM iterations)"), 1);
    // Mostly idle, waiting for the host, between kernels of a few µs.
    EXPECT_GT(figure(*r, "timeline", "idle_share"), 0.8);
    EXPECT_LT(figure(*r, "timeline", "kernel_median_ns"), 10'000);
    const Finding* idle = finding(*r, "gpu_idle");
    ASSERT_NE(idle, nullptr) << text;
    EXPECT_NE(idle->title.find("waiting for the host"), std::string::npos) << idle->title;
    // vLLM's remedy first: CUDA graphs on, not "torch.compile your training step".
    ASSERT_FALSE(idle->advice.empty());
    EXPECT_NE(idle->advice[0].find("vLLM ran eager: drop --enforce-eager"), std::string::npos)
        << idle->advice[0];
    EXPECT_TRUE(any_contains(idle->evidence, "Serving engine: vLLM, from its iteration ranges"));
    EXPECT_TRUE(any_contains(idle->evidence, "No CUDA graph was launched"));
    // Its 73 all-reduces are communication: symmetric memory, recognised by what they do.
    EXPECT_GT(figure(*r, "timeline", "communication_share"), 0.01) << text;
    EXPECT_TRUE(has_note(*r,
                         "symmetric-memory all-reduce (void (anonymous "
                         "namespace)::multimem_all_reduce_kernel"))
        << text;
}

}  // namespace
}  // namespace gpudiag
