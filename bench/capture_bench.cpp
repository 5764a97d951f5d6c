// SPDX-License-Identifier: Apache-2.0
// CPU-side costs of live capture that need no GPU: the NVTX handlers on the application's
// thread (push+pop), decoding CUPTI records through the real libcupti parser (per record), and
// handing an event to a queue.
#include "capture/cupti/activity_decoder.hpp"
#include "capture/nvtx/nvtx_receiver.hpp"
#include "capture/platform/clock_calibration.hpp"
#include "core/event_queue.hpp"

#include <benchmark/benchmark.h>
#include <dlfcn.h>
#if GPUDIAG_HAVE_CUDA_HEADERS
#    include <cupti.h>
#endif

#include <atomic>
#include <cstring>
#include <mutex>
#include <vector>

namespace {

using namespace gpudiag;

// Counts and discards: isolates the producer's own cost.
class DiscardQueue final : public detail::EventQueue {
public:
    bool try_push(const Event&) noexcept override {
        count_.fetch_add(1, std::memory_order_relaxed);
        return true;
    }

private:
    std::atomic<std::uint64_t> count_{0};
};

// A bounded ring behind a mutex: what a simple session queue costs per event.
class MutexRingQueue final : public detail::EventQueue {
public:
    bool try_push(const Event& e) noexcept override {
        std::lock_guard<std::mutex> lock(mutex_);
        if (size_ == ring_.size()) return false;
        ring_[(head_ + size_++) % ring_.size()] = e;
        if (size_ == ring_.size()) {  // the consumer: drain in bulk
            head_ = 0;
            size_ = 0;
        }
        return true;
    }

private:
    std::mutex mutex_;
    std::vector<Event> ring_ = std::vector<Event>(1 << 16);
    std::size_t head_ = 0;
    std::size_t size_ = 0;
};

void BM_NvtxPushPopAttached(benchmark::State& state) {
    DiscardQueue queue;
    StringTable strings;
    auto& rx = detail::NvtxReceiver::instance();
    rx.attach(queue, strings);
    for (auto _ : state) {
        rx.push(0, "forward");
        rx.pop(0);
    }
    rx.detach();
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_NvtxPushPopAttached)->ThreadRange(1, 2);

void BM_NvtxPushPopDetached(benchmark::State& state) {
    auto& rx = detail::NvtxReceiver::instance();
    for (auto _ : state) {
        rx.push(0, "forward");
        rx.pop(0);
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_NvtxPushPopDetached);

#if GPUDIAG_HAVE_CUDA_HEADERS
void BM_DecodeRecords(benchmark::State& state) {
    void* h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) h = dlopen("/usr/local/cuda/lib64/libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
    auto next = h != nullptr ? reinterpret_cast<decltype(&cuptiActivityGetNextRecord)>(
                                   dlsym(h, "cuptiActivityGetNextRecord"))
                             : nullptr;
    if (next == nullptr) {
        state.SkipWithError("libcupti.so.13 not found");
        return;
    }
    // A buffer shaped like a training step: mostly kernels and launch API records.
    static const char kName[] = "_ZN2at6native29vectorized_elementwise_kernelILi4EEEviT_";
    std::vector<std::uint64_t> storage;
    auto add = [&](const auto& r) {
        std::size_t at = storage.size();
        storage.resize(at + sizeof(r) / 8);
        std::memcpy(storage.data() + at, &r, sizeof(r));
    };
    std::size_t records = 0;
    for (int i = 0; i < 1000; ++i) {
        CUpti_ActivityKernel10 k{};
        k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        k.start = 1'700'000'000'000'000'000ULL + i * 1000;
        k.end = k.start + 500;
        k.gridX = k.gridY = k.gridZ = k.blockX = k.blockY = k.blockZ = 1;
        k.correlationId = i;
        k.name = kName;
        add(k);
        CUpti_ActivityAPI a{};
        a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
        a.cbid = 211;
        a.start = k.start - 3000;
        a.end = k.start - 1000;
        a.correlationId = i;
        add(a);
        records += 2;
    }
    DiscardQueue queue;
    StringTable strings;
    detail::ClockCalibration clock;
    clock.add_pair(1'700'000'000'000'000'000ULL, 1000);
    detail::ActivityDecoder decoder(queue, strings, clock);
    auto* bytes = reinterpret_cast<std::uint8_t*>(storage.data());
    for (auto _ : state) {
        decoder.decode_buffer(next, bytes, storage.size() * 8);
    }
    state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(records));
}
BENCHMARK(BM_DecodeRecords);
#endif

void BM_QueuePush(benchmark::State& state) {
    MutexRingQueue queue;
    Event e;
    e.kind = EventKind::kKernel;
    for (auto _ : state) benchmark::DoNotOptimize(queue.try_push(e));
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_QueuePush)->ThreadRange(1, 2);

}  // namespace

BENCHMARK_MAIN();
