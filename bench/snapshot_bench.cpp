// SPDX-License-Identifier: Apache-2.0
// Torch memory snapshot reading speed (bytes of pickle per second) on the largest snapshot in
// the corpus, or on the file GPUDIAG_SNAPSHOT names (bench/snapshot_vs_memory_viz.sh sets it to
// its large generated snapshot): the schema reader alone (one streamed decode), the whole
// SnapshotSource that turns a snapshot into gpudiag Events, and the whole analysis
// (analyze_files). Skipped, with a message, when there is no snapshot.
#include "importers/open_source.hpp"
#include "importers/torch_snapshot/torch_snapshot.hpp"

#include <gpudiag/analyze.hpp>
#include <gpudiag/sink.hpp>

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace {

using namespace gpudiag;
using namespace gpudiag::detail;

// GPUDIAG_SNAPSHOT, else the largest *.pickle under the corpus's memory_snapshots/, else "".
std::string largest_snapshot() {
    namespace fs = std::filesystem;
    if (const char* chosen = std::getenv("GPUDIAG_SNAPSHOT"); chosen != nullptr && *chosen) {
        return chosen;
    }
    std::error_code ec;
    fs::path dir = fs::path(GPUDIAG_CORPUS_DIR) / "memory_snapshots";
    std::string best;
    std::uintmax_t best_size = 0;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        if (it->path().extension() != ".pickle") continue;
        std::uintmax_t size = it->file_size(ec);
        if (!ec && size > best_size) {
            best_size = size;
            best = it->path().string();
        }
    }
    return best;
}

class CountingVisitor final : public SnapshotVisitor {
public:
    Status on_segment(SnapshotSegment& s) override {
        records += 1 + s.blocks.size();
        return Status::ok();
    }
    Status on_trace_entry(const TraceEntry&) override {
        ++records;
        return Status::ok();
    }
    Status on_annotation(const SnapshotAnnotation&) override {
        ++records;
        return Status::ok();
    }
    void on_setting(const std::string&, const std::string&) override {}
    std::uint64_t records = 0;
};

class CountingSink final : public EventSink {
public:
    void consume(std::span<const Event> events) override { count += events.size(); }
    std::uint64_t count = 0;
};

void BM_SnapshotReader(benchmark::State& state) {
    std::string path = largest_snapshot();
    if (path.empty()) {
        state.SkipWithError("no corpus snapshot (GPUDIAG_CORPUS_DIR/memory_snapshots/*.pickle)");
        return;
    }
    std::uint64_t records = 0;
    for (auto _ : state) {
        StringTable strings;
        CountingVisitor visitor;
        Status s = TorchSnapshotReader().read(path, strings, visitor);
        if (!s.is_ok()) {
            state.SkipWithError(s.to_string().c_str());
            return;
        }
        records = visitor.records;
    }
    auto bytes = static_cast<std::int64_t>(std::filesystem::file_size(path));
    state.SetBytesProcessed(state.iterations() * bytes);
    state.SetLabel(std::filesystem::path(path).filename().string());
    state.counters["records"] = static_cast<double>(records);
}
BENCHMARK(BM_SnapshotReader)->Unit(benchmark::kMillisecond);

// The whole source: reading plus everything it does to replay the history as Events.
void BM_SnapshotSource(benchmark::State& state) {
    std::string path = largest_snapshot();
    if (path.empty()) {
        state.SkipWithError("no corpus snapshot (GPUDIAG_CORPUS_DIR/memory_snapshots/*.pickle)");
        return;
    }
    std::uint64_t events = 0;
    for (auto _ : state) {
        auto source = open_snapshot_source(path, AnalysisOptions{});
        if (!source) {
            state.SkipWithError(source.status().to_string().c_str());
            return;
        }
        StringTable strings;
        CountingSink sink;
        Status s = (*source)->run(sink, strings);
        if (!s.is_ok()) {
            state.SkipWithError(s.to_string().c_str());
            return;
        }
        events = sink.count;
    }
    auto bytes = static_cast<std::int64_t>(std::filesystem::file_size(path));
    state.SetBytesProcessed(state.iterations() * bytes);
    state.SetLabel(std::filesystem::path(path).filename().string());
    state.counters["events"] = static_cast<double>(events);
}
BENCHMARK(BM_SnapshotSource)->Unit(benchmark::kMillisecond);

// Everything `gpudiag analyze` does with the file but print: import and every analysis.
void BM_SnapshotAnalyze(benchmark::State& state) {
    std::string path = largest_snapshot();
    if (path.empty()) {
        state.SkipWithError("no corpus snapshot (GPUDIAG_CORPUS_DIR/memory_snapshots/*.pickle)");
        return;
    }
    for (auto _ : state) {
        auto report = analyze_files({path});
        if (!report) {
            state.SkipWithError(report.status().to_string().c_str());
            return;
        }
        benchmark::DoNotOptimize(report->findings.size());
    }
    auto bytes = static_cast<std::int64_t>(std::filesystem::file_size(path));
    state.SetBytesProcessed(state.iterations() * bytes);
    state.SetLabel(std::filesystem::path(path).filename().string());
}
BENCHMARK(BM_SnapshotAnalyze)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
