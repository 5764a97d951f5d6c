// SPDX-License-Identifier: Apache-2.0
// EventChannel throughput: events/s per producer with 1 and 2 producers and a draining consumer.
#include "core/event_channel.hpp"

#include <benchmark/benchmark.h>

#include <atomic>
#include <memory>
#include <thread>

namespace gpudiag::detail {
namespace {

constexpr std::size_t kCapacity = std::size_t{1} << 16;

class CountingSink final : public EventSink {
public:
    void consume(std::span<const Event> events) override {
        count_ += events.size();
        // Touch the data so the copy out of the channel is not optimised away.
        for (const Event& e : events) checksum_ += e.start_ns;
    }
    std::uint64_t count_ = 0;
    std::uint64_t checksum_ = 0;
};

// Shared by the benchmark threads; thread 0 sets it up before the timed loop (Google Benchmark
// starts every thread's loop together, after thread 0's setup).
struct Shared {
    std::unique_ptr<EventChannel> channel;
    std::thread consumer;
    std::atomic<bool> stop{false};
    CountingSink sink;
};
Shared g_shared;

void start_consumer() {
    g_shared.channel = std::move(EventChannel::create(kCapacity).value());
    g_shared.stop.store(false);
    g_shared.sink = CountingSink();
    g_shared.consumer = std::thread([] {
        while (!g_shared.stop.load(std::memory_order_relaxed)) {
            if (g_shared.channel->drain(g_shared.sink) == 0) std::this_thread::yield();
        }
        g_shared.channel->drain(g_shared.sink);
    });
}

void stop_consumer(benchmark::State& state) {
    g_shared.stop.store(true);
    g_shared.consumer.join();
    const ChannelStats s = g_shared.channel->stats();
    state.counters["dropped"] = static_cast<double>(s.dropped);
    state.counters["drop_fraction"] =
        static_cast<double>(s.dropped) / static_cast<double>(s.dropped + s.pushed);
    state.counters["high_water"] = static_cast<double>(s.high_water);
    state.counters["delivered_ok"] = (g_shared.sink.count_ == s.pushed) ? 1 : 0;
    // Accepted (not dropped) events per second, all producers together: the consumer's pace.
    state.counters["accepted_per_s"] =
        benchmark::Counter(static_cast<double>(s.pushed), benchmark::Counter::kIsRate);
}

// Producers push as fast as they can; whatever the consumer cannot keep up with is dropped.
void BM_PushConcurrentDrain(benchmark::State& state) {
    if (state.thread_index() == 0) start_consumer();
    Event e;
    e.kind = EventKind::kKernel;
    e.thread = static_cast<std::uint32_t>(state.thread_index());
    std::uint64_t i = 0;
    for (auto _ : state) {
        e.start_ns = ++i;
        benchmark::DoNotOptimize(g_shared.channel->try_push(e));
    }
    state.counters["attempts_per_s_per_producer"] =
        benchmark::Counter(static_cast<double>(state.iterations()),
                           benchmark::Counter::kIsRate | benchmark::Counter::kAvgThreads);
    if (state.thread_index() == 0) stop_consumer(state);
}
BENCHMARK(BM_PushConcurrentDrain)->Threads(1)->Threads(2)->UseRealTime();

// Producers push bursts of kBurst events and then wait until the consumer has caught up, so
// at most threads * kBurst (< capacity) events are ever queued: no event may be dropped.
constexpr std::size_t kBurst = kCapacity / 8;
void BM_BurstsBelowCapacity(benchmark::State& state) {
    if (state.thread_index() == 0) start_consumer();
    Event e;
    e.kind = EventKind::kKernel;
    std::uint64_t refused = 0;
    for (auto _ : state) {
        for (std::size_t k = 0; k < kBurst; ++k) {
            e.start_ns = k;
            if (!g_shared.channel->try_push(e)) ++refused;
        }
        state.PauseTiming();
        const std::uint64_t target = g_shared.channel->stats().pushed;
        while (g_shared.channel->stats().drained < target) std::this_thread::yield();
        state.ResumeTiming();
    }
    state.counters["events_per_s_per_producer"] =
        benchmark::Counter(static_cast<double>(state.iterations() * kBurst),
                           benchmark::Counter::kIsRate | benchmark::Counter::kAvgThreads);
    state.counters["refused"] = static_cast<double>(refused);
    if (state.thread_index() == 0) stop_consumer(state);
}
BENCHMARK(BM_BurstsBelowCapacity)->Threads(1)->Threads(2)->UseRealTime();

// The producer's own cost with no contention: push a batch, then drain it on the same thread.
void BM_PushThenDrainOneThread(benchmark::State& state) {
    auto channel = std::move(EventChannel::create(kCapacity).value());
    CountingSink sink;
    Event e;
    e.kind = EventKind::kKernel;
    constexpr std::size_t kBatch = 4096;
    for (auto _ : state) {
        for (std::size_t k = 0; k < kBatch; ++k) {
            e.start_ns = k;
            benchmark::DoNotOptimize(channel->try_push(e));
        }
        channel->drain(sink);
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kBatch));
    state.counters["dropped"] = static_cast<double>(channel->stats().dropped);
}
BENCHMARK(BM_PushThenDrainOneThread);

}  // namespace
}  // namespace gpudiag::detail

BENCHMARK_MAIN();
