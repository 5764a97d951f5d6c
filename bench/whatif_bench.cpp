// SPDX-License-Identifier: Apache-2.0
// Allocator what-if replay speed: history entries replayed per second on one core.
//
// The trace is REPLICATED, not a longer recording: the allocation histories of the corpus
// snapshots whose trace starts at the device's first segment (decomfl_memory.pickle,
// silmont2000_cs336a2_mem_snapshot.pickle) are read as gpudiag reads them, concatenated, and
// the concatenation repeated with every address shifted by 1 TiB per copy (so copies never
// share blocks) until it holds at least a million entries (allocations, frees requested and
// completed). Each copy leaves the blocks its program left live, so the live set grows copy by
// copy as a long-running program's would. Timed: one replay through the model, as the what-if
// runs it (no reproduction log), under the recorded settings and three others.
#include "analysis/allocator/allocation_history.hpp"
#include "analysis/allocator/allocator_replay.hpp"
#include "importers/open_source.hpp"

#include <benchmark/benchmark.h>

#include <filesystem>
#include <memory>
#include <string>

namespace {

using namespace gpudiag;
using namespace gpudiag::detail;

constexpr std::size_t kTargetEntries = 1000000;
constexpr std::uint64_t kShift = std::uint64_t{1} << 40;

struct Trace {
    DeviceHistory history;
    std::string label;
    std::string error;
};

const Trace& replicated_trace() {
    static const Trace trace = [] {
        Trace t;
        std::vector<HistoryOp> one_copy;
        for (const char* file :
             {"decomfl_memory.pickle", "silmont2000_cs336a2_mem_snapshot.pickle"}) {
            const std::string path = std::string(GPUDIAG_CORPUS_DIR) + "/memory_snapshots/" + file;
            if (!std::filesystem::exists(path)) continue;
            auto source = open_snapshot_source(path, AnalysisOptions{});
            if (!source) continue;
            StringTable strings;
            AllocationHistory history;
            if (!(*source)->run(history, strings).is_ok() || history.devices().empty()) continue;
            const DeviceHistory& d = history.devices()[0];
            if (!d.start.empty()) continue;  // only histories that start from nothing
            one_copy.insert(one_copy.end(), d.ops.begin(), d.ops.end());
            t.label += std::string(t.label.empty() ? "" : "+") + file;
        }
        if (one_copy.empty()) {
            t.error = "no full-history corpus snapshot (GPUDIAG_CORPUS_DIR/memory_snapshots)";
            return t;
        }
        std::size_t copies = 0;
        while (t.history.ops.size() < kTargetEntries) {
            for (HistoryOp op : one_copy) {
                if (op.kind != HistoryOp::Kind::kOom && op.handle != 0) {
                    op.handle += kShift * copies;
                }
                t.history.ops.push_back(op);
            }
            ++copies;
        }
        t.label += " x" + std::to_string(copies) + " (replicated, addresses shifted)";
        return t;
    }();
    return trace;
}

void BM_Replay(benchmark::State& state, const char* conf) {
    const Trace& trace = replicated_trace();
    if (!trace.error.empty()) {
        state.SkipWithError(trace.error.c_str());
        return;
    }
    ReplayConfig config;
    if (!apply_allocator_conf(config.settings, conf).is_ok()) {
        state.SkipWithError("bad settings");
        return;
    }
    std::uint64_t peak = 0;
    for (auto _ : state) {
        ReplayOutcome out = replay(trace.history, config);
        peak = out.stats.peak_reserved;
        benchmark::DoNotOptimize(peak);
    }
    const auto entries = static_cast<double>(trace.history.ops.size());
    state.counters["entries"] = entries;
    state.counters["entries_per_s"] =
        benchmark::Counter(entries, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["peak_reserved_GiB"] = static_cast<double>(peak) / (1 << 30);
    state.SetLabel(trace.label);
}

BENCHMARK_CAPTURE(BM_Replay, recorded_settings, "")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Replay, expandable_segments, "expandable_segments:True")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Replay, max_split_128, "max_split_size_mb:128")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Replay, roundup_4, "roundup_power2_divisions:4")
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
