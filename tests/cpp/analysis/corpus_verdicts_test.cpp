// SPDX-License-Identifier: Apache-2.0
// Verdicts an expert gives corpus files that no other test states (issue #41 item 6): each test
// analyses one real file in place, says in a comment why an expert reads it so (its SOURCES.md
// row and its own figures), and checks the report says the same. Files of other suites' verdicts
// (memory_corpus_test, timeline_corpus_test, serving_test, ...) are not repeated here.
#include <gpudiag/analyze.hpp>
#include <gpudiag/report.hpp>

#include "corpus.hpp"

#include <gtest/gtest.h>

#include <string>
#include <variant>

namespace gpudiag {
namespace {

using testing::corpus_kineto_trace;
using testing::corpus_nsight_export;
using testing::corpus_snapshot;

constexpr double kMiB = 1024.0 * 1024.0;

const Figure* figure_of(const Report& r, const char* section, const char* key) {
    const Section* s = r.section(section);
    if (s == nullptr) return nullptr;
    for (const auto& f : s->figures) {
        if (f.key == key) return &f;
    }
    return nullptr;
}

const Table* table_of(const Report& r, const char* section, const char* id) {
    const Section* s = r.section(section);
    if (s == nullptr) return nullptr;
    for (const auto& t : s->tables) {
        if (t.id == id) return &t;
    }
    return nullptr;
}

std::string text_of(const Cell& c) {
    const auto* s = std::get_if<std::string>(&c);
    return s != nullptr ? *s : std::string();
}
double number_of(const Cell& c) {
    const auto* v = std::get_if<double>(&c);
    return v != nullptr ? *v : -1.0;
}

bool has_note(const Report& r, const std::string& words) {
    for (const auto& n : r.notes) {
        if (n.find(words) != std::string::npos) return true;
    }
    return false;
}

// ---- verl_megatron_vllm_init.pickle ----
// An RL worker at model init holds Megatron's training state in the default pool and vLLM's
// weights and KV cache in two private pools (segment_pool_id). The KV cache is 24 segments of
// 866 MiB, wholly allocated by vLLM's cache engine: a pre-allocation sized to fill the GPU, not a
// leak and not waste. An operator reads it per pool: what each holds, who filled it; the 9
// active_pending_free blocks are counted.
TEST(CorpusVerdicts, VerlPrivatePoolsAreReportedWithTheirOwners) {
    const std::string path = corpus_snapshot("verl_megatron_vllm_init.pickle");
    GPUDIAG_REQUIRE_FILES(path);
    auto r = analyze_files({path});
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    for (const char* id : {"reserved_unused", "fragmentation", "memory_leak", "out_of_memory"}) {
        EXPECT_EQ(r->finding(id), nullptr) << id << "\n" << render_text(*r);
    }
    const Figure* pools = figure_of(*r, "memory", "private_pools");
    const Figure* pending = figure_of(*r, "memory", "pending_free_blocks");
    ASSERT_TRUE(pools != nullptr && pending != nullptr) << render_text(*r);
    EXPECT_EQ(pools->value, 2.0);
    EXPECT_EQ(pending->value, 9.0);

    const Table* t = table_of(*r, "memory", "pools");
    ASSERT_NE(t, nullptr) << render_text(*r);
    ASSERT_EQ(t->rows.size(), 3u);  // the default pool and two private ones
    EXPECT_EQ(text_of(t->rows[0][0]), "default");
    double reserved = 0;
    bool kv_cache = false;
    for (const auto& row : t->rows) {
        reserved += number_of(row[2]);
        const std::string owner = text_of(row.back());
        if (owner.find("cache_engine.py") == std::string::npos) continue;
        kv_cache = true;
        // 24 segments of 866 MiB, every byte allocated: nothing free to call waste.
        EXPECT_EQ(number_of(row[1]), 24.0);
        EXPECT_EQ(number_of(row[2]), 24.0 * 866.0 * kMiB);
        EXPECT_EQ(number_of(row[3]), number_of(row[2]));
        EXPECT_EQ(number_of(row[6]), 0.0);
        EXPECT_NE(owner.find("_allocate_kv_cache"), std::string::npos) << owner;
    }
    EXPECT_TRUE(kv_cache) << "no pool is owned by vLLM's cache engine\n" << render_text(*r);
    // The pools split the device's reserved bytes; they are not counted again.
    const Figure* total = figure_of(*r, "memory", "reserved_bytes");
    ASSERT_NE(total, nullptr);
    EXPECT_EQ(reserved, total->value);
}

// ---- nvfuser_matmul_8xh100_one_active.sqlite ----
// An nvFuser matmul test on a node whose eight H100 are all listed; only device 0 ran anything
// (19 kernels). The other seven did nothing in this capture: they are not seven idle or starved
// GPUs, and the report must say they were listed without work rather than analyse them.
TEST(CorpusVerdicts, NvfuserMatmulOneActiveGpuSevenListedWithoutWork) {
    const std::string path = corpus_nsight_export("nvfuser_matmul_8xh100_one_active.sqlite");
    GPUDIAG_REQUIRE_FILES(path);
    auto r = analyze_files({path});
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_EQ(r->source.devices.size(), 8u);
    EXPECT_TRUE(has_note(*r, "7 of the 8 GPUs the input lists (devices 1-7) have no event"))
        << render_text(*r);
    // Every finding is about device 0 (or the whole job), none about a GPU without work.
    for (const auto& f : r->findings) EXPECT_LE(f.device, 0) << f.id << ": " << f.title;
    const Figure* devices = figure_of(*r, "overview", "devices");
    ASSERT_NE(devices, nullptr) << render_text(*r);
    EXPECT_EQ(devices->value, 1.0);
    const std::string prometheus = render_prometheus(*r);
    for (int d = 1; d < 8; ++d) {
        EXPECT_EQ(prometheus.find("gpu=\"" + std::to_string(d) + "\""), std::string::npos) << d;
    }
}

// ---- older corpus files whose verdict no other suite states ----

Result<Report> analyze_trace(const std::string& path) {
    return analyze_files({path});
}

double timeline_figure(const Report& r, const char* key) {
    const Figure* f = figure_of(r, "timeline", key);
    return f != nullptr ? f->value : -1.0;
}

// An AlexNet benchmark on one A100 (79 kernels): nearly the whole trace is host time, the GPU idle
// more than 90 % of it, and nothing waits on input or on peers. Its 16 host-to-device copies come
// from pageable memory (233 MiB at 4 GiB/s), which an expert would point out.
TEST(CorpusVerdicts, AlexnetBenchmarkIsHostBoundWithPageableCopies) {
    const std::string path = corpus_kineto_trace(
        "hta_critical_path_alexnet_benchmark_result_2869224_1695835535_trace.json.gz");
    GPUDIAG_REQUIRE_FILES(path);
    auto r = analyze_trace(path);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_NE(r->finding("gpu_idle"), nullptr) << render_text(*r);
    EXPECT_GT(timeline_figure(*r, "idle_share"), 0.9);
    EXPECT_NE(r->finding("pageable_memcpy"), nullptr) << render_text(*r);
    EXPECT_EQ(r->finding("input_bound"), nullptr);
    EXPECT_EQ(r->finding("comm_bound"), nullptr);
}

// Rank 1 of the HTA trace-diff pair: six steps on a V100 kept about 96 % busy. A negative control:
// nothing about idle time, launches or input is worth fixing; ten syncs a step cost under 1 %.
TEST(CorpusVerdicts, TraceDiffTestRankIsABusyGpuWithNothingToFixFirst) {
    const std::string path = corpus_kineto_trace("hta_trace_diff_test.json.gz");
    GPUDIAG_REQUIRE_FILES(path);
    auto r = analyze_trace(path);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_LT(timeline_figure(*r, "idle_share"), 0.1) << render_text(*r);
    EXPECT_EQ(timeline_figure(*r, "steps"), 6.0);
    for (const char* id : {"gpu_idle", "launch_bound", "input_bound", "comm_bound"}) {
        EXPECT_EQ(r->finding(id), nullptr) << id << "\n" << render_text(*r);
    }
    for (const auto& f : r->findings) EXPECT_EQ(f.severity, Severity::kInfo) << f.id;
}

// One Triton kernel launched through the driver (cuLaunchKernel): too little to diagnose
// throughput. What an expert checks first is that the kernel is read at all and joined to its
// driver-API launch. (The 13 s step around a 1.7 us kernel is Triton compiling on first launch:
// naming it a one-off stall is issue #41 item 1, tested with that work.)
TEST(CorpusVerdicts, TritonExampleReadsTheDriverLaunchedKernel) {
    const std::string path = corpus_kineto_trace("hta_triton_example.json.gz");
    GPUDIAG_REQUIRE_FILES(path);
    auto r = analyze_trace(path);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_EQ(timeline_figure(*r, "kernels"), 1.0) << render_text(*r);
    EXPECT_EQ(timeline_figure(*r, "launch_links"), 1.0);
    EXPECT_EQ(r->finding("input_bound"), nullptr);
}

// A tiny inference trace in the old category names (Kernel, Runtime): four kernels of about 5 us,
// each launched by a 12 us call, the GPU idle 98 % in between: launch-bound, as an expert reads
// any loop of kernels shorter than their launches.
TEST(CorpusVerdicts, TinyInferenceTraceIsLaunchBound) {
    const std::string path = corpus_kineto_trace("hta_inference_rank_1.json.gz");
    GPUDIAG_REQUIRE_FILES(path);
    auto r = analyze_trace(path);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_EQ(timeline_figure(*r, "kernels"), 4.0) << render_text(*r);
    EXPECT_NE(r->finding("launch_bound"), nullptr) << render_text(*r);
    EXPECT_GT(timeline_figure(*r, "idle_share"), 0.9);
}

// The CUDA concurrent-kernels sample on a laptop GPU (Nsight, old schema): once its kernels start,
// they keep the GPU busy (idle well under 1 % of the window); the time before the first kernel
// is start-up, not a GPU starved by its host.
TEST(CorpusVerdicts, ConcurrentKernelSampleKeepsItsGpuBusy) {
    const std::string path = corpus_nsight_export("extrap_con_kernel.sqlite");
    GPUDIAG_REQUIRE_FILES(path);
    auto r = analyze_trace(path);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_EQ(timeline_figure(*r, "kernels"), 9.0) << render_text(*r);
    EXPECT_LT(timeline_figure(*r, "idle_share"), 0.01);
    EXPECT_EQ(r->finding("gpu_idle"), nullptr) << render_text(*r);
    EXPECT_EQ(r->finding("launch_bound"), nullptr);
}

// HTA's one-stream event-sync example: the host blocks in cudaEventSynchronize while the GPU runs
// dry, a third of the window idle right after syncs: a host synchronization stall.
TEST(CorpusVerdicts, EventSyncExampleIsAHostSyncStall) {
    const std::string path = corpus_kineto_trace("hta_cuda_event_sync_trace.json.gz");
    GPUDIAG_REQUIRE_FILES(path);
    auto r = analyze_trace(path);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    const Finding* f = r->finding("host_sync_stall");
    ASSERT_NE(f, nullptr) << render_text(*r);
    EXPECT_NE(f->severity, Severity::kInfo) << f->title;
    EXPECT_EQ(r->finding("input_bound"), nullptr);
}

// HTA's three-stream event-sync example: 19.5 ms in which the GPU runs a few short kernels and the
// host waits once in cudaDeviceSynchronize (20 µs) and then does nothing more to launch. The GPU is
// idle almost throughout, but replaying the path without the sync gains microseconds: a tiny
// test program's shape, nothing a user should fix first. So its findings stay at info, they say
// they are not worth fixing first, and the count of syncs names the window (it has no steps).
TEST(CorpusVerdicts, MultiStreamEventSyncExampleHasNothingWorthFixingFirst) {
    const std::string path = corpus_kineto_trace("hta_cuda_event_sync_multi_stream_trace.json.gz");
    GPUDIAG_REQUIRE_FILES(path);
    auto r = analyze_trace(path);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    ASSERT_FALSE(r->findings.empty()) << render_text(*r);
    for (const Finding& f : r->findings) {
        EXPECT_EQ(f.severity, Severity::kInfo) << f.id << ": " << f.title;
    }
    const Finding* sync = r->finding("host_sync_stall");
    ASSERT_NE(sync, nullptr) << render_text(*r);
    EXPECT_NE(sync->title.find("1 sync in the window"), std::string::npos) << sync->title;
    EXPECT_NE(sync->title.find("not worth fixing first"), std::string::npos) << sync->title;
}

}  // namespace
}  // namespace gpudiag
