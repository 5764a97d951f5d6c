// SPDX-License-Identifier: Apache-2.0
// The Kineto import pipeline by phase on the corpus' largest trace (53.7 MB of JSON, 216k events):
// inflate, parse to events, timeline analysis, and the whole of analyze_files.
#include "importers/kineto/kineto_parser.hpp"
#include "importers/kineto/trace_buffer.hpp"

#include <gpudiag/analyze.hpp>

#include <benchmark/benchmark.h>

#include <filesystem>
#include <string>

namespace {

const std::string kTrace =
    std::string(GPUDIAG_CORPUS_DIR) + "/kineto_traces/hta_df_index_resolver.json.gz";

bool have_trace(benchmark::State& state) {
    if (std::filesystem::exists(kTrace)) return true;
    state.SkipWithError("corpus trace absent");
    return false;
}

void BM_Inflate(benchmark::State& state) {
    if (!have_trace(state)) return;
    for (auto _ : state) {
        bool truncated = false;
        auto buffer = gpudiag::detail::load_trace_file(kTrace, &truncated, nullptr);
        benchmark::DoNotOptimize(buffer.is_ok());
        state.SetBytesProcessed(state.bytes_processed() +
                                static_cast<std::int64_t>(buffer->size()));
    }
}

void BM_ParseToEvents(benchmark::State& state) {
    if (!have_trace(state)) return;
    bool truncated = false;
    auto buffer = gpudiag::detail::load_trace_file(kTrace, &truncated, nullptr);
    for (auto _ : state) {
        gpudiag::StringTable strings;
        gpudiag::detail::KinetoParseResult parsed;
        auto st = gpudiag::detail::parse_kineto_trace(*buffer, "bench", strings, parsed);
        benchmark::DoNotOptimize(st.is_ok());
        state.SetBytesProcessed(state.bytes_processed() +
                                static_cast<std::int64_t>(buffer->size()));
        state.counters["events"] = static_cast<double>(parsed.events.size());
    }
}

void BM_AnalyzeEvents(benchmark::State& state) {
    if (!have_trace(state)) return;
    bool truncated = false;
    auto buffer = gpudiag::detail::load_trace_file(kTrace, &truncated, nullptr);
    gpudiag::StringTable strings;
    gpudiag::detail::KinetoParseResult parsed;
    (void)gpudiag::detail::parse_kineto_trace(*buffer, "bench", strings, parsed);
    gpudiag::AnalysisOptions options;
    options.window = static_cast<gpudiag::AnalysisWindow>(state.range(0));
    for (auto _ : state) {
        auto report = gpudiag::analyze_events(parsed.events, parsed.info, strings, options);
        benchmark::DoNotOptimize(report.is_ok());
        state.SetItemsProcessed(state.items_processed() +
                                static_cast<std::int64_t>(parsed.events.size()));
    }
}

void BM_AnalyzeFiles(benchmark::State& state) {
    if (!have_trace(state)) return;
    for (auto _ : state) {
        auto report = gpudiag::analyze_files({kTrace});
        benchmark::DoNotOptimize(report.is_ok());
    }
}

BENCHMARK(BM_Inflate)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ParseToEvents)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AnalyzeEvents)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AnalyzeFiles)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
