// SPDX-License-Identifier: Apache-2.0
// MemoryLedger throughput (block alloc/free events per second on one core) and its memory cost
// per live allocation, on the address space a caching allocator produces.
//
// The workload (CachingAllocatorWorkload) models torch's CUDA caching allocator: requests up to
// 1 MiB are carved from 2 MiB segments (small pool), 1-10 MiB from 20 MiB segments (large
// pool), bigger ones get a segment of their own rounded up to 2 MiB; block sizes are rounded to
// 512 B and segments sit at 2 MiB-aligned addresses with gaps between them, as the driver hands
// them out. Twice the live-set size of block slots is laid out (128 GiB of them on average, so a
// live set fills a 64 GiB device: a million live blocks are small ones); half are live. The timed
// churn frees a live block chosen uniformly at random and allocates a free slot chosen the same
// way: no temporal locality at all, the worst case for the ledger's caches. Real programs reuse
// recently freed blocks (LIFO free lists), so they run at least this fast.
//
// The "live" counter is the ledger's own count of live blocks after the run: it must equal the
// live-set size argument (every event matched, no address aliasing).
#include "analysis/memory/memory_ledger.hpp"

#include <benchmark/benchmark.h>
#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <span>
#include <vector>

namespace {

using namespace gpudiag;
using namespace gpudiag::detail;

constexpr std::uint64_t kBase = 0x7f0000000000;
constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr std::uint64_t kSmallSegment = 2 * kMiB;
constexpr std::uint64_t kLargeSegment = 20 * kMiB;
constexpr std::uint64_t kDeviceBytes = std::uint64_t{128} << 30;  // address space of all slots
constexpr std::size_t kBatch = 4096;  // what SnapshotSource and the capture ring deliver at once
constexpr StringId kSites = 64;

Event memory_event(EventKind kind, std::uint64_t t, std::uint64_t addr, std::uint64_t bytes,
                   std::uint64_t requested, StringId site) {
    Event e;
    e.kind = kind;
    e.device = 0;
    e.stream = 7;
    e.start_ns = e.end_ns = t;
    e.memory.address = addr;
    e.memory.bytes = bytes;
    e.memory.aux = requested;
    e.memory.site = site;
    return e;
}

struct Slot {
    std::uint64_t address = 0;
    std::uint64_t size = 0;
    std::uint64_t requested = 0;
    StringId site = kNoString;
};

class CachingAllocatorWorkload {
public:
    explicit CachingAllocatorWorkload(std::size_t live, std::uint64_t seed = 1) : rng_(seed) {
        const std::size_t slots = live * 2;
        max_size_ = max_size_for(slots);
        slots_.reserve(slots);
        for (std::size_t i = 0; i < slots; ++i) slots_.push_back(draw_slot());
        // Pack the slots into segments in a shuffled order, so neighbours in address differ in
        // size class as they do in a real pool.
        std::vector<std::size_t> order(slots);
        for (std::size_t i = 0; i < slots; ++i) order[i] = i;
        std::shuffle(order.begin(), order.end(), rng_);
        std::uint64_t small_cursor = 0, small_end = 0, large_cursor = 0, large_end = 0;
        for (std::size_t i : order) {
            Slot& s = slots_[i];
            if (s.size <= kMiB) {
                if (small_cursor + s.size > small_end) {
                    small_cursor = new_segment(kSmallSegment);
                    small_end = small_cursor + kSmallSegment;
                }
                s.address = small_cursor;
                small_cursor += s.size;
            } else if (s.size <= 10 * kMiB) {
                if (large_cursor + s.size > large_end) {
                    large_cursor = new_segment(kLargeSegment);
                    large_end = large_cursor + kLargeSegment;
                }
                s.address = large_cursor;
                large_cursor += s.size;
            } else {
                s.address =
                    new_segment((s.size + kSmallSegment - 1) / kSmallSegment * kSmallSegment);
            }
        }
        // A random half is live at the start.
        std::shuffle(order.begin(), order.end(), rng_);
        live_.assign(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(live));
        free_.assign(order.begin() + static_cast<std::ptrdiff_t>(live), order.end());
    }

    [[nodiscard]] std::size_t segments() const { return segments_.size(); }
    [[nodiscard]] double max_block_bytes() const { return max_size_; }

    /// Segment allocations, then the initial live set.
    void setup(MemoryLedger& ledger) {
        setup_segments_then([] {}, ledger);
    }
    /// The same, calling `between()` after the segments and before the blocks.
    template <typename Fn>
    void setup_segments_then(Fn&& between, MemoryLedger& ledger) {
        for (const Event& e : segments_) ledger.apply(e);
        between();
        for (std::size_t i : live_) ledger.apply(alloc_event(i));
    }

    /// `n` churn events (free, alloc pairs) into `out`, and their exact inverse into `undo`.
    void churn(std::size_t n, std::vector<Event>& out, std::vector<Event>& undo) {
        out.clear();
        undo.clear();
        std::vector<std::pair<std::size_t, std::size_t>> moves;  // (victim slot, fresh slot)
        while (out.size() < n) {
            std::size_t k = rng_() % live_.size();
            std::size_t f = rng_() % free_.size();
            std::size_t victim = live_[k];
            std::size_t fresh = free_[f];
            out.push_back(free_event(victim));
            out.push_back(alloc_event(fresh));
            live_[k] = fresh;
            free_[f] = victim;
            moves.emplace_back(victim, fresh);
        }
        for (auto it = moves.rbegin(); it != moves.rend(); ++it) {
            undo.push_back(free_event(it->second));
            undo.push_back(alloc_event(it->first));
        }
    }

private:
    Slot draw_slot() {
        // Log-uniform sizes from 512 B to max_size_ (small tensors are the most numerous, as in
        // any framework's live set), rounded up to 512 B like the allocator does.
        Slot s;
        double x =
            512.0 * std::pow(max_size_ / 512.0, std::uniform_real_distribution<double>(0, 1)(rng_));
        auto requested = static_cast<std::uint64_t>(x);
        s.size = (requested + 511) / 512 * 512;
        s.requested = requested;
        s.site = static_cast<StringId>(2 + rng_() % kSites);
        return s;
    }
    // The largest block size for which all slots fit in kDeviceBytes on average (live blocks
    // take half of that), capped at 256 MiB: a million live blocks on a real GPU are small ones,
    // a thousand can be anything up to a large weight or activation.
    static double max_size_for(std::size_t slots) {
        double target_mean =
            std::min(static_cast<double>(kDeviceBytes) / static_cast<double>(slots),
                     64.0 * static_cast<double>(kMiB));
        double lo = 1024, hi = 256.0 * static_cast<double>(kMiB);
        auto mean = [](double u) { return (u - 512.0) / std::log(u / 512.0); };
        if (mean(hi) <= target_mean) return hi;
        for (int i = 0; i < 100; ++i) {
            double mid = (lo + hi) / 2;
            (mean(mid) < target_mean ? lo : hi) = mid;
        }
        return lo;
    }
    std::uint64_t new_segment(std::uint64_t bytes) {
        // The driver leaves holes between reservations.
        next_ += (rng_() % 4) * kSmallSegment;
        std::uint64_t a = next_;
        next_ += bytes;
        segments_.push_back(memory_event(EventKind::kSegmentAlloc, t_++, a, bytes, 0, 1));
        return a;
    }
    Event alloc_event(std::size_t i) {
        const Slot& s = slots_[i];
        return memory_event(EventKind::kBlockAlloc, t_++, s.address, s.size, s.requested, s.site);
    }
    Event free_event(std::size_t i) {
        const Slot& s = slots_[i];
        return memory_event(EventKind::kBlockFree, t_++, s.address, s.size, s.requested, s.site);
    }

    std::mt19937_64 rng_;
    double max_size_ = 0;
    std::vector<Slot> slots_;
    std::vector<Event> segments_;
    std::vector<std::size_t> live_;
    std::vector<std::size_t> free_;
    std::uint64_t next_ = kBase;
    std::uint64_t t_ = 1;
};

// Times the churn; every kChurn events the ledger is put back (untimed) so the live set stays
// the argument's size and every free matches.
template <bool kBatched>
void run_churn(benchmark::State& state) {
    const auto live = static_cast<std::size_t>(state.range(0));
    constexpr std::size_t kChurn = std::size_t{1} << 20;
    CachingAllocatorWorkload w(live);
    MemoryLedger ledger;
    w.setup(ledger);
    std::vector<Event> events, undo;
    w.churn(kChurn, events, undo);
    std::size_t at = 0;
    for (auto _ : state) {
        std::span<const Event> batch(events.data() + at, kBatch);
        if constexpr (kBatched) {
            ledger.apply(batch);
        } else {
            for (const Event& e : batch) ledger.apply(e);
        }
        at += kBatch;
        if (at == events.size()) {
            state.PauseTiming();
            for (const Event& e : undo) ledger.apply(e);
            at = 0;
            state.ResumeTiming();
        }
    }
    state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(kBatch));
    state.counters["live"] = static_cast<double>(ledger.totals(0).live_blocks);
    state.counters["segments"] = static_cast<double>(w.segments());
    state.counters["max_block"] = w.max_block_bytes();
    state.counters["unmatched"] = static_cast<double>(ledger.unmatched_frees());
}

// One apply(const Event&) call per event.
void BM_LedgerChurnPerEvent(benchmark::State& state) {
    run_churn<false>(state);
}
BENCHMARK(BM_LedgerChurnPerEvent)->Arg(1 << 10)->Arg(1 << 16)->Arg(1 << 20);

// apply(span) on batches of 4096: how EventSink::consume delivers them.
void BM_LedgerChurnBatched(benchmark::State& state) {
    run_churn<true>(state);
}
BENCHMARK(BM_LedgerChurnBatched)->Arg(1 << 10)->Arg(1 << 16)->Arg(1 << 20)->Arg(1 << 22);

// Bytes per live allocation: heap growth while N blocks become live in one ledger (segments
// are applied before the baseline is taken; they are the allocator's, not per allocation).
void BM_LedgerBytesPerLiveAllocation(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    double heap_per_live = 0;
    double table_per_live = 0;
    for (auto _ : state) {
        state.PauseTiming();
        CachingAllocatorWorkload w(n);
        auto* ledger = new MemoryLedger();
        MemoryLedger& l = *ledger;
        struct mallinfo2 empty {};
        std::size_t base_bytes = 0;
        w.setup_segments_then(
            [&] {
                empty = mallinfo2();
                base_bytes = l.memory_bytes();
            },
            l);
        struct mallinfo2 after = mallinfo2();
        heap_per_live =
            static_cast<double>((after.uordblks + after.hblkhd) - (empty.uordblks + empty.hblkhd)) /
            static_cast<double>(n);
        table_per_live =
            static_cast<double>(l.memory_bytes() - base_bytes) / static_cast<double>(n);
        delete ledger;
        state.ResumeTiming();
    }
    state.counters["heap_bytes_per_live"] = heap_per_live;
    state.counters["ledger_bytes_per_live"] = table_per_live;
}
BENCHMARK(BM_LedgerBytesPerLiveAllocation)
    ->Arg(100000)
    ->Arg(1000000)
    ->Arg(3000000)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
