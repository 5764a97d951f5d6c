// SPDX-License-Identifier: Apache-2.0
// .gpudiag write and read throughput: 10 M events (640 MB) through a file in /tmp. The read runs
// right after the write, so it is served from the page cache (warm): it measures the reader
// (syscalls, CRC32, hand-off to the sink), not the disk.
#include <gpudiag/recording.hpp>

#include <benchmark/benchmark.h>

#include <unistd.h>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace gpudiag {
namespace {

constexpr std::size_t kEvents = 10'000'000;
constexpr std::size_t kBatch = 4096;

std::string bench_path() {
    return (std::filesystem::temp_directory_path() /
            ("gpudiag_recording_bench_" + std::to_string(::getpid()) + ".gpudiag"))
        .string();
}

// One batch reused for every consume(): realistic contents, no 640 MB source array.
std::vector<Event> make_batch(StringTable& strings) {
    std::vector<Event> batch(kBatch);
    for (std::size_t i = 0; i < kBatch; ++i) {
        Event& e = batch[i];
        e.kind = EventKind::kKernel;
        e.device = 0;
        e.stream = 7;
        e.start_ns = i * 100;
        e.end_ns = i * 100 + 50;
        e.kernel.name = strings.intern("kernel_" + std::to_string(i % 64));
        e.kernel.grid_size = static_cast<std::uint32_t>(i);
    }
    return batch;
}

Status write_file(const std::string& path, const StringTable& strings, std::vector<Event>& batch) {
    RecordingWriter writer;
    GPUDIAG_RETURN_IF_ERROR(writer.open(path));
    SourceInfo info;
    info.producer = "bench";
    writer.begin(info, strings);
    for (std::size_t done = 0; done < kEvents; done += kBatch) {
        for (auto& e : batch) e.start_ns += kBatch * 100;  // keep time moving forward
        writer.consume(std::span<const Event>(batch.data(), std::min(kBatch, kEvents - done)));
    }
    SourceSummary summary;
    summary.events = kEvents;
    writer.end(summary);
    return writer.close();
}

class TouchingSink final : public EventSink {
public:
    void consume(std::span<const Event> events) override {
        for (const Event& e : events) sum_ += e.end_ns - e.start_ns;
        count_ += events.size();
    }
    std::uint64_t sum_ = 0;
    std::uint64_t count_ = 0;
};

void BM_WriteRecording(benchmark::State& state) {
    const std::string path = bench_path();
    StringTable strings;
    std::vector<Event> batch = make_batch(strings);
    for (auto _ : state) {
        if (Status s = write_file(path, strings, batch); !s) {
            state.SkipWithError(s.to_string().c_str());
            break;
        }
    }
    state.SetBytesProcessed(
        static_cast<std::int64_t>(state.iterations() * kEvents * sizeof(Event)));
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kEvents));
    std::filesystem::remove(path);
}
BENCHMARK(BM_WriteRecording)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

void BM_ReadRecordingWarm(benchmark::State& state) {
    const std::string path = bench_path();
    StringTable strings;
    std::vector<Event> batch = make_batch(strings);
    if (Status s = write_file(path, strings, batch); !s) {
        state.SkipWithError(s.to_string().c_str());
        return;
    }
    for (auto _ : state) {
        StringTable read_strings;
        TouchingSink sink;
        if (Status s = read_recording(path, sink, read_strings); !s || sink.count_ != kEvents) {
            state.SkipWithError("read failed or incomplete");
            break;
        }
        benchmark::DoNotOptimize(sink.sum_);
    }
    state.SetBytesProcessed(
        static_cast<std::int64_t>(state.iterations() * kEvents * sizeof(Event)));
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kEvents));
    state.counters["file_MB"] = static_cast<double>(std::filesystem::file_size(path)) / 1e6;
    std::filesystem::remove(path);
}
BENCHMARK(BM_ReadRecordingWarm)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(5);

void BM_InfoFromIndex(benchmark::State& state) {
    const std::string path = bench_path();
    StringTable strings;
    std::vector<Event> batch = make_batch(strings);
    if (Status s = write_file(path, strings, batch); !s) {
        state.SkipWithError(s.to_string().c_str());
        return;
    }
    for (auto _ : state) {
        auto info = read_recording_info(path);
        if (!info || info->events != kEvents) {
            state.SkipWithError("info failed");
            break;
        }
    }
    std::filesystem::remove(path);
}
BENCHMARK(BM_InfoFromIndex)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gpudiag

BENCHMARK_MAIN();
