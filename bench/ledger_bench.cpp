// SPDX-License-Identifier: Apache-2.0
// MemoryLedger throughput (alloc/free events per second on one core) and its memory cost per
// live allocation (heap growth measured with mallinfo2 while N allocations are live).
#include "analysis/memory/memory_ledger.hpp"

#include <benchmark/benchmark.h>
#include <malloc.h>

#include <random>
#include <vector>

namespace {

using namespace gpudiag;
using namespace gpudiag::detail;

constexpr std::uint64_t kBase = 0x7f0000000000;
constexpr std::uint64_t kSegment = std::uint64_t{1} << 30;

Event block(EventKind kind, std::uint64_t t, std::uint64_t addr, std::uint64_t bytes, StringId site) {
    Event e;
    e.kind = kind;
    e.device = 0;
    e.start_ns = e.end_ns = t;
    e.memory.address = addr;
    e.memory.bytes = bytes;
    e.memory.aux = bytes - 100;
    e.memory.site = site;
    return e;
}

// A steady state: `live` blocks in 16 segments, each iteration frees one at random and
// allocates another (sizes 512 B to 8 MiB, 64 sites), as a training step's churn does.
void BM_LedgerAllocFree(benchmark::State& state) {
    const auto live = static_cast<std::size_t>(state.range(0));
    MemoryLedger ledger;
    std::uint64_t t = 1;
    for (std::uint64_t s = 0; s < 16; ++s) {
        Event seg;
        seg.kind = EventKind::kSegmentAlloc;
        seg.device = 0;
        seg.memory.address = kBase + s * kSegment;
        seg.memory.bytes = kSegment;
        ledger.apply(seg);
    }
    // Precomputed churn so the loop measures the ledger, not the generator.
    std::mt19937_64 rng(1);
    const std::size_t slots = live * 2;
    std::vector<std::uint64_t> addr(slots);
    for (std::size_t i = 0; i < slots; ++i) addr[i] = kBase + (i * 4096 * 1024 + (rng() % 64) * 512) % (16 * kSegment);
    std::vector<bool> used(slots, false);
    std::vector<Event> events;
    events.reserve(1 << 20);
    std::vector<std::size_t> live_slots;
    for (std::size_t i = 0; i < live; ++i) {
        ledger.apply(block(EventKind::kBlockAlloc, t++, addr[i], 512u << (i % 15), static_cast<StringId>(2 + i % 64)));
        used[i] = true;
        live_slots.push_back(i);
    }
    std::vector<std::size_t> free_slots;
    for (std::size_t i = live; i < slots; ++i) free_slots.push_back(i);
    while (events.size() < (1u << 20)) {
        std::size_t k = rng() % live_slots.size();
        std::size_t victim = live_slots[k];
        events.push_back(block(EventKind::kBlockFree, t++, addr[victim], 0, 0));
        std::size_t f = rng() % free_slots.size();
        std::size_t fresh = free_slots[f];
        events.push_back(block(EventKind::kBlockAlloc, t++, addr[fresh], 512u << (fresh % 15),
                               static_cast<StringId>(2 + fresh % 64)));
        live_slots[k] = fresh;
        free_slots[f] = victim;
    }
    std::size_t i = 0;
    for (auto _ : state) {
        ledger.apply(events[i]);
        if (++i == events.size()) {
            // Replaying the list again would free blocks that are not live; turn around instead.
            state.PauseTiming();
            for (std::size_t j = events.size(); j-- > 0;) {
                Event undo = events[j];
                undo.kind = undo.kind == EventKind::kBlockAlloc ? EventKind::kBlockFree : EventKind::kBlockAlloc;
                if (undo.kind == EventKind::kBlockAlloc) undo.memory.bytes = 4096;
                ledger.apply(undo);
            }
            i = 0;
            state.ResumeTiming();
        }
    }
    state.SetItemsProcessed(state.iterations());
    state.counters["live"] = static_cast<double>(ledger.totals(0).live_blocks);
}
BENCHMARK(BM_LedgerAllocFree)->Arg(1 << 10)->Arg(1 << 16)->Arg(1 << 20);

// Bytes per live allocation: heap growth while N blocks are live in one ledger.
void BM_LedgerBytesPerLiveAllocation(benchmark::State& state) {
    const auto n = static_cast<std::uint64_t>(state.range(0));
    double heap_per_live = 0;
    double table_per_live = 0;
    for (auto _ : state) {
        state.PauseTiming();
        struct mallinfo2 before = mallinfo2();
        auto* ledger = new MemoryLedger();
        Event seg;
        seg.kind = EventKind::kSegmentAlloc;
        seg.device = 0;
        seg.memory.address = kBase;
        seg.memory.bytes = n * 4096;
        ledger->apply(seg);
        std::size_t base_bytes = ledger->memory_bytes();
        struct mallinfo2 empty = mallinfo2();
        state.ResumeTiming();
        for (std::uint64_t i = 0; i < n; ++i) {
            ledger->apply(block(EventKind::kBlockAlloc, i + 1, kBase + i * 4096, 4096,
                                static_cast<StringId>(2 + i % 64)));
        }
        state.PauseTiming();
        struct mallinfo2 after = mallinfo2();
        heap_per_live = static_cast<double>((after.uordblks + after.hblkhd) - (empty.uordblks + empty.hblkhd)) /
                        static_cast<double>(n);
        table_per_live = static_cast<double>(ledger->memory_bytes() - base_bytes) / static_cast<double>(n);
        delete ledger;
        (void)before;
        state.ResumeTiming();
    }
    state.counters["heap_bytes_per_live"] = heap_per_live;
    state.counters["ledger_bytes_per_live"] = table_per_live;
    state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(n));
}
BENCHMARK(BM_LedgerBytesPerLiveAllocation)->Arg(100000)->Arg(1000000)->Arg(3000000)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
