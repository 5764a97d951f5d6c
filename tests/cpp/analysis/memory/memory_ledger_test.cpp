// SPDX-License-Identifier: Apache-2.0
// MemoryLedger: books, reconciliation with the driver view, layout, watches, bounded state.
#include "analysis/memory/memory_ledger.hpp"
#include "analysis/memory/address_table.hpp"
#include "analysis/memory/memory_series.hpp"
#include "memory_test_events.hpp"

#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

namespace gpudiag::detail {
namespace {

using namespace gpudiag::testing;

TEST(AddressTable, MatchesAReferenceMapUnderChurn) {
    AddressTable table;
    std::unordered_map<std::uint64_t, std::uint64_t> ref;
    std::mt19937_64 rng(7);
    for (int i = 0; i < 200000; ++i) {
        std::uint64_t addr = ((rng() % 5000) + 1) * 512;
        if (rng() % 3 != 0) {
            LiveRecord r;
            r.address = addr;
            r.set(i + 1u, 0);
            table.insert(r);
            ref[addr] = i + 1u;
        } else {
            LiveRecord out;
            bool erased = table.erase(addr, &out);
            auto it = ref.find(addr);
            ASSERT_EQ(erased, it != ref.end());
            if (erased) {
                EXPECT_EQ(out.size(), it->second);
                ref.erase(it);
            }
        }
        ASSERT_EQ(table.size(), ref.size());
    }
    for (const auto& [addr, size] : ref) {
        LiveRecord* r = table.find(addr);
        ASSERT_NE(r, nullptr);
        EXPECT_EQ(r->size(), size);
    }
    // Bounded cost per live allocation while the table grows.
    EXPECT_LE(table.memory_bytes(), std::max<std::size_t>(64 * ref.size(), 64 * 24));
}

TEST(MemoryLedger, BlocksSegmentsAndPendingFrees) {
    MemoryLedger l;
    l.apply(mem(EventKind::kSegmentAlloc, 1, 0x1000000, 20 * kMiB));
    Event a = mem(EventKind::kBlockAlloc, 2, 0x1000000, 4 * kMiB);
    a.memory.aux = 4 * kMiB - 100;
    l.apply(a);
    l.apply(mem(EventKind::kBlockAlloc, 3, 0x1000000 + 4 * kMiB, 2 * kMiB));
    LedgerTotals t = l.totals(0);
    EXPECT_EQ(t.reserved, 20 * kMiB);
    EXPECT_EQ(t.allocated_rounded, 6 * kMiB);
    EXPECT_EQ(t.allocated_requested, 6 * kMiB - 100);
    // free_requested: leaves "allocated", still occupies the segment.
    l.apply(
        mem(EventKind::kBlockFree, 4, 0x1000000, 4 * kMiB, kNoString, 0, kEventFlagPendingFree));
    t = l.totals(0);
    EXPECT_EQ(t.allocated_rounded, 2 * kMiB);
    EXPECT_EQ(t.pending_free, 4 * kMiB);
    DeviceLayout layout = l.layout(0);
    EXPECT_EQ(layout.free_in_segments, 14 * kMiB);
    EXPECT_EQ(layout.inactive_split, 14 * kMiB);
    // free_completed.
    l.apply(mem(EventKind::kBlockFree, 5, 0x1000000, 4 * kMiB));
    t = l.totals(0);
    EXPECT_EQ(t.pending_free, 0u);
    layout = l.layout(0);
    EXPECT_EQ(layout.free_in_segments, 18 * kMiB);
    EXPECT_EQ(layout.largest_free, 14 * kMiB);
    EXPECT_EQ(layout.free_blocks, 2u);
    EXPECT_NEAR(layout.external_fragmentation(), 1.0 - 14.0 / 18.0, 1e-12);
    EXPECT_EQ(l.peaks(0).allocated_rounded, 6 * kMiB);
    l.apply(mem(EventKind::kBlockFree, 6, 0xdead, 1));
    EXPECT_EQ(l.unmatched_frees(), 1u);
}

TEST(MemoryLedger, ExpandableSegmentsGrowAndShrink) {
    MemoryLedger l;
    const std::uint64_t base = 0x7f0000000000;
    l.apply(mem(EventKind::kSegmentAlloc, 1, base, 20 * kMiB, kNoString, 0, kEventFlagExpandable));
    l.apply(mem(EventKind::kSegmentAlloc, 2, base + 20 * kMiB, 40 * kMiB, kNoString, 0,
                kEventFlagExpandable));
    EXPECT_EQ(l.totals(0).segments, 1u);
    EXPECT_EQ(l.totals(0).reserved, 60 * kMiB);
    l.apply(mem(EventKind::kBlockAlloc, 3, base + 50 * kMiB, 10 * kMiB));
    l.apply(mem(EventKind::kSegmentFree, 4, base + 20 * kMiB, 20 * kMiB, kNoString, 0,
                kEventFlagExpandable));
    LedgerTotals t = l.totals(0);
    EXPECT_EQ(t.reserved, 40 * kMiB);
    EXPECT_EQ(t.segments, 2u);  // a hole unmapped in the middle splits the range
    DeviceLayout layout = l.layout(0);
    EXPECT_EQ(layout.free_in_segments, 30 * kMiB);
    EXPECT_EQ(layout.releasable, 20 * kMiB);
}

TEST(MemoryLedger, DriverViewReconciledWithFrameworkSegments) {
    MemoryLedger l;
    // torch's own cudaMalloc of a segment, seen by the driver before the allocator reports it.
    l.apply(mem(EventKind::kDeviceAlloc, 1, 0x2000000, 20 * kMiB));
    EXPECT_EQ(l.totals(0).outside(), 20 * kMiB);
    l.apply(mem(EventKind::kSegmentAlloc, 2, 0x2000000, 20 * kMiB));
    EXPECT_EQ(l.totals(0).outside(), 0u);
    // A library's own allocation, a stream-ordered pool and a VM mapping counted by physical bytes.
    l.apply(mem(EventKind::kDeviceAlloc, 3, 0x9000000, 64 * kMiB));
    l.apply(mem(EventKind::kPoolAlloc, 4, 0xA000000, 8 * kMiB));
    Event vm = mem(EventKind::kVmMap, 5, 0xB000000, 32 * kMiB);
    vm.memory.aux = 16 * kMiB;
    l.apply(vm);
    LedgerTotals t = l.totals(0);
    EXPECT_EQ(t.outside_device, 64 * kMiB);
    EXPECT_EQ(t.outside_pool, 8 * kMiB);
    EXPECT_EQ(t.outside_vm, 16 * kMiB);
    Event resize = mem(EventKind::kPoolResize, 6, 0xA000000, 32 * kMiB);
    l.apply(resize);
    EXPECT_EQ(l.totals(0).outside_pool, 32 * kMiB);  // the pool's reserve, not just its live bytes
    l.apply(mem(EventKind::kDeviceFree, 7, 0x9000000, 0));
    EXPECT_EQ(l.totals(0).outside_device, 0u);
    EXPECT_EQ(l.peaks(0).outside, 64 * kMiB + 8 * kMiB + 16 * kMiB + 24 * kMiB);
    EXPECT_EQ(l.totals(0).used(), 20 * kMiB + 32 * kMiB + 16 * kMiB);
}

TEST(MemoryLedger, WatchFiresOncePerUpwardCrossingWithHysteresis) {
    MemoryLedger l;
    l.set_capacity(0, 100 * kMiB);
    std::vector<MemoryWatchCrossing> calls;
    MemoryWatch w;
    w.metric = MemoryMetric::kReserved;
    w.level_fraction = 0.9;
    w.hysteresis_fraction = 0.05;
    int id = l.add_watch(w, [&](const MemoryWatchCrossing& c) { calls.push_back(c); });
    ASSERT_GT(id, 0);
    std::uint64_t t = 0;
    std::uint64_t addr = 0x100000000;
    auto grow = [&](std::uint64_t bytes) {
        l.apply(mem(EventKind::kSegmentAlloc, ++t, addr, bytes));
        addr += bytes;
        return addr - bytes;
    };
    std::uint64_t first = grow(80 * kMiB);
    EXPECT_TRUE(calls.empty());
    std::uint64_t second = grow(12 * kMiB);  // 92 %: fires
    ASSERT_EQ(calls.size(), 1u);
    EXPECT_EQ(calls[0].level_bytes, 90 * kMiB);
    EXPECT_EQ(calls[0].value_bytes, 92 * kMiB);
    EXPECT_EQ(calls[0].watch_id, id);
    grow(2 * kMiB);  // still above: no second call
    EXPECT_EQ(calls.size(), 1u);
    l.apply(mem(EventKind::kSegmentFree, ++t, second, 12 * kMiB));  // 82 %: below 85.5 %, re-arms
    grow(10 * kMiB);                                                // 92 % again: fires again
    EXPECT_EQ(calls.size(), 2u);
    (void)first;
    // A watch on another device never fires here; a throwing callback does not break the books.
    MemoryWatch other = w;
    other.device = 3;
    l.add_watch(other, [&](const MemoryWatchCrossing&) { ADD_FAILURE(); });
    MemoryWatch thrower;
    thrower.metric = MemoryMetric::kAllocated;
    thrower.level_bytes = 1;
    l.add_watch(thrower, [](const MemoryWatchCrossing&) { throw 42; });
    l.apply(mem(EventKind::kBlockAlloc, ++t, 0x100000000, 4 * kMiB));
    EXPECT_EQ(l.totals(0).allocated_rounded, 4 * kMiB);
    // Fraction watches need a capacity; absolute ones need a level.
    EXPECT_EQ(l.add_watch(MemoryWatch{}, [](const MemoryWatchCrossing&) {}), 0);
    l.remove_watch(id);
}

TEST(MemoryLedger, SeriesStepsAndCheckpointsStayBounded) {
    LedgerOptions opt;
    opt.series_points = 64;
    opt.step_points = 32;
    opt.checkpoints = 8;
    MemoryLedger l(opt);
    std::uint64_t t = 1000;
    l.apply(mem(EventKind::kSegmentAlloc, t, 0x10000000, kGiB));
    for (std::uint64_t s = 0; s < 1000; ++s) {
        l.apply(step(EventKind::kStepBegin, t, s));
        for (int k = 0; k < 10; ++k) {
            std::uint64_t a = 0x10000000 + static_cast<std::uint64_t>(k) * kMiB;
            l.apply(mem(EventKind::kBlockAlloc, t += 1000, a, kMiB, static_cast<StringId>(k + 2)));
            l.apply(mem(EventKind::kBlockFree, t += 1000, a, kMiB));
        }
        l.apply(step(EventKind::kStepEnd, t += 1000, s));
    }
    EXPECT_LE(l.series(0).size(), 64u);
    EXPECT_GE(l.series(0).size(), 16u);
    std::vector<StepMark> steps = l.steps(0);
    EXPECT_LE(steps.size(), 33u);
    std::uint64_t covered = 0;
    for (const auto& s : steps) covered += s.steps;
    EXPECT_EQ(covered, 1000u);
    EXPECT_EQ(steps.front().allocated_peak, kMiB);
    EXPECT_EQ(steps.front().allocated_min, 0u);
    EXPECT_LE(l.checkpoint_ticks(0).size(), 8u);
    std::uint32_t slot = 0;
    for (const auto& u : l.sites(0)) {
        if (u.site == 2) slot = u.slot;
    }
    ASSERT_NE(slot, 0u);
    EXPECT_EQ(l.site_checkpoints(0, slot).size(), l.checkpoint_ticks(0).size());
    // Times in the series only move forward.
    auto pts = l.series(0);
    for (std::size_t i = 1; i < pts.size(); ++i) EXPECT_GT(pts[i].start_ns, pts[i - 1].start_ns);
}

TEST(MemorySeries, MergesPairsWhenFull) {
    MemorySeries s(8, 10);
    for (std::uint64_t t = 0; t < 10000; t += 5) s.record(t, MemoryLevels{t, 2 * t, 0});
    auto pts = s.points();
    EXPECT_LE(pts.size(), 8u);
    EXPECT_EQ(pts.back().allocated_last, 9995u);
    EXPECT_EQ(pts.front().allocated_min, 0u);
    std::uint64_t max_seen = 0;
    for (const auto& p : pts) max_seen = std::max(max_seen, p.reserved_max);
    EXPECT_EQ(max_seen, 2 * 9995u);  // peaks survive merging
}

TEST(MemoryLedger, PhasesRecordPeaks) {
    MemoryLedger l;
    l.apply(mem(EventKind::kSegmentAlloc, 1, 0x10000000, 100 * kMiB));
    Event begin;
    begin.kind = EventKind::kRangeBegin;
    begin.start_ns = 2;
    begin.range.name = 5;
    begin.range.category = RangeCategory::kPhase;
    l.apply(begin);
    l.apply(mem(EventKind::kBlockAlloc, 3, 0x10000000, 30 * kMiB));
    l.apply(mem(EventKind::kBlockFree, 4, 0x10000000, 30 * kMiB));
    l.apply(mem(EventKind::kBlockAlloc, 5, 0x10000000, 10 * kMiB));
    Event end = begin;
    end.kind = EventKind::kRangeEnd;
    end.start_ns = 6;
    l.apply(end);
    auto phases = l.phases(0);
    ASSERT_EQ(phases.size(), 1u);
    EXPECT_EQ(phases[0].name, 5u);
    EXPECT_EQ(phases[0].allocated_peak, 30 * kMiB);
    EXPECT_EQ(phases[0].allocated_growth_max, static_cast<std::int64_t>(10 * kMiB));
    EXPECT_EQ(phases[0].runs, 1u);
}

}  // namespace
}  // namespace gpudiag::detail

namespace gpudiag::detail {
namespace {

using namespace gpudiag::testing;

// Steps given as complete ranges (ProfilerStep#N from an importer or the demo generator) arrive
// back to back at their start times; each must still be closed before the next begins.
TEST(MemoryLedger, BackToBackStepRangesAreEachKept) {
    MemoryLedger l;
    l.apply(mem(EventKind::kSegmentAlloc, 1, 0x1000000, 64 * kMiB));
    std::uint64_t t = 10;
    for (std::uint64_t s = 0; s < 5; ++s) {
        Event r = step(EventKind::kRange, t, s);
        r.end_ns = t + 100;
        l.apply(r);
        l.apply(mem(EventKind::kBlockAlloc, t + 10, 0x1000000 + s * 2 * kMiB, 2 * kMiB));
        t += 100;  // the next step starts exactly where this one ends
    }
    std::vector<StepMark> steps = l.steps(0);
    ASSERT_EQ(steps.size(), 4u);  // the fifth is still open
    EXPECT_EQ(steps[0].allocated_min, 0u);
    EXPECT_EQ(steps[3].allocated_min, 3 * 2 * kMiB);
}

}  // namespace
}  // namespace gpudiag::detail

namespace gpudiag::detail {
namespace {

using namespace gpudiag::testing;

// One ledger fed event by event and another fed the same events in batches of random length
// must keep identical books; per-segment occupancy must equal what the live blocks say, also
// when blocks arrive before their segment or outlive it.
TEST(MemoryLedger, BatchedApplyKeepsTheSameBooks) {
    std::mt19937_64 rng(5);
    std::vector<Event> events;
    const std::uint64_t base = 0x7f0000000000;
    std::vector<std::uint64_t> seg_live(64, 0);
    std::unordered_map<std::uint64_t, bool> live;  // address -> pending
    std::uint64_t t = 1;
    for (int i = 0; i < 60000; ++i) {
        std::uint64_t seg = rng() % 64;
        std::uint64_t seg_addr = base + seg * 32 * kMiB;
        unsigned r = static_cast<unsigned>(rng() % 100);
        if (r < 2) {
            std::uint64_t addr = seg_addr;
            events.push_back(
                mem(seg_live[seg] != 0 ? EventKind::kSegmentFree : EventKind::kSegmentAlloc, t++,
                    addr, 20 * kMiB));
            seg_live[seg] ^= 1;
        } else if (r < 55 || live.empty()) {
            std::uint64_t addr = seg_addr + (rng() % 40) * 512 * 1024;  // some fall past 20 MiB
            if (live.count(addr) != 0) continue;
            Event e = mem(EventKind::kBlockAlloc, t++, addr, 512 * 1024,
                          static_cast<StringId>(2 + rng() % 5));
            e.memory.aux = 512 * 1024 - rng() % 512;
            events.push_back(e);
            live[addr] = false;
        } else {
            auto it = live.begin();
            std::advance(
                it, static_cast<std::ptrdiff_t>(rng() % std::min<std::size_t>(live.size(), 16)));
            bool pending = !it->second && rng() % 3 == 0;
            events.push_back(mem(EventKind::kBlockFree, t++, it->first, 0, kNoString, 0,
                                 pending ? kEventFlagPendingFree : 0));
            if (pending) {
                it->second = true;
            } else {
                live.erase(it);
            }
        }
    }
    MemoryLedger one;
    MemoryLedger batched;
    for (const Event& e : events) one.apply(e);
    for (std::size_t at = 0; at < events.size();) {
        std::size_t n = std::min<std::size_t>(1 + rng() % 100, events.size() - at);
        batched.apply(std::span<const Event>(events.data() + at, n));
        at += n;
    }
    LedgerTotals a = one.totals(0);
    LedgerTotals b = batched.totals(0);
    EXPECT_EQ(a.allocated_rounded, b.allocated_rounded);
    EXPECT_EQ(a.allocated_requested, b.allocated_requested);
    EXPECT_EQ(a.pending_free, b.pending_free);
    EXPECT_EQ(a.live_blocks, b.live_blocks);
    EXPECT_EQ(a.live_blocks, live.size());
    EXPECT_EQ(a.reserved, b.reserved);
    DeviceLayout la = one.layout(0);
    DeviceLayout lb = batched.layout(0);
    ASSERT_EQ(la.segments.size(), lb.segments.size());
    std::vector<LedgerBlock> blocks = one.blocks(0);
    for (std::size_t i = 0; i < la.segments.size(); ++i) {
        const LedgerSegment& s = la.segments[i].segment;
        EXPECT_EQ(s.allocated, lb.segments[i].segment.allocated);
        EXPECT_EQ(la.segments[i].free_bytes, lb.segments[i].free_bytes);
        std::uint64_t bytes = 0, count = 0, pending = 0;
        for (const LedgerBlock& blk : blocks) {
            if (blk.address >= s.address && blk.address - s.address < s.size) {
                bytes += blk.size;
                ++count;
                if (blk.pending) pending += blk.size;
            }
        }
        EXPECT_EQ(s.allocated, bytes) << i;
        EXPECT_EQ(s.blocks, count) << i;
        EXPECT_EQ(s.pending, pending) << i;
    }
}

// Phase watermarks for any device ordinal an event carries, including one first seen while the
// phase is open.
TEST(MemoryLedger, PhasesCoverDevicesPastSeven) {
    MemoryLedger l;
    l.apply(mem(EventKind::kSegmentAlloc, 1, 0x10000000, 100 * kMiB, kNoString, 12));
    Event begin;
    begin.kind = EventKind::kRangeBegin;
    begin.start_ns = 2;
    begin.range.name = 5;
    begin.range.category = RangeCategory::kPhase;
    l.apply(begin);
    l.apply(mem(EventKind::kBlockAlloc, 3, 0x10000000, 30 * kMiB, kNoString, 12));
    l.apply(mem(EventKind::kBlockFree, 4, 0x10000000, 30 * kMiB, kNoString, 12));
    l.apply(mem(EventKind::kBlockAlloc, 5, 0x10000000, 10 * kMiB, kNoString, 12));
    l.apply(mem(EventKind::kSegmentAlloc, 5, 0x20000000, 64 * kMiB, kNoString, 300));
    l.apply(mem(EventKind::kBlockAlloc, 5, 0x20000000, 8 * kMiB, kNoString, 300));
    Event end = begin;
    end.kind = EventKind::kRangeEnd;
    end.start_ns = 6;
    l.apply(end);
    auto phases = l.phases(12);
    ASSERT_EQ(phases.size(), 1u);
    EXPECT_EQ(phases[0].allocated_peak, 30 * kMiB);
    EXPECT_EQ(phases[0].reserved_peak, 100 * kMiB);
    EXPECT_EQ(phases[0].allocated_growth_max, static_cast<std::int64_t>(10 * kMiB));
    auto late = l.phases(300);
    ASSERT_EQ(late.size(), 1u);
    EXPECT_EQ(late[0].allocated_peak, 8 * kMiB);
    EXPECT_EQ(late[0].allocated_growth_max, static_cast<std::int64_t>(8 * kMiB));
    EXPECT_EQ(l.devices(), (std::vector<std::uint16_t>{12, 300}));
}

// The cap is on distinct devices, not on the ordinal's value; events past it are counted.
TEST(MemoryLedger, DistinctDevicesAreCappedWithCountedDrops) {
    LedgerOptions opt;
    opt.max_devices = 2;
    MemoryLedger l(opt);
    l.apply(mem(EventKind::kSegmentAlloc, 1, 0x10000000, 2 * kMiB, kNoString, 900));
    l.apply(mem(EventKind::kSegmentAlloc, 2, 0x10000000, 2 * kMiB, kNoString, 5));
    l.apply(mem(EventKind::kSegmentAlloc, 3, 0x10000000, 2 * kMiB, kNoString, 12));
    l.apply(mem(EventKind::kSegmentAlloc, 4, 0x20000000, 2 * kMiB, kNoString, 900));
    EXPECT_EQ(l.devices(), (std::vector<std::uint16_t>{5, 900}));
    EXPECT_EQ(l.dropped_events(), 1u);
    EXPECT_EQ(l.totals(900).reserved, 4 * kMiB);
    EXPECT_EQ(l.totals(12).reserved, 0u);
}

// Host and managed allocations go to process-wide books, whatever device the record names,
// and never into a device's totals.
TEST(MemoryLedger, HostAndManagedMemoryAreBookedApartFromDevices) {
    MemoryLedger l;
    auto pinned = static_cast<std::uint8_t>(MemoryKind::kPinned);
    auto managed = static_cast<std::uint8_t>(MemoryKind::kManaged);
    l.apply(mem(EventKind::kDeviceAlloc, 1, 0x7f0000000000, 64 * kMiB));
    l.apply(mem(EventKind::kHostAlloc, 2, 0x200000000, 512 * kMiB, kNoString, 0, pinned));
    l.apply(mem(EventKind::kHostAlloc, 3, 0x300000000, 8 * kMiB, kNoString, kNoDevice,
                static_cast<std::uint8_t>(MemoryKind::kPageable)));
    l.apply(mem(EventKind::kManagedAlloc, 4, 0x7f8000000000, 256 * kMiB, kNoString, 1, managed));
    l.apply(mem(EventKind::kHostFree, 5, 0x200000000, 0, kNoString, 0, pinned));
    l.apply(mem(EventKind::kHostAlloc, 6, 0x210000000, 128 * kMiB, kNoString, 0, pinned));
    l.apply(mem(EventKind::kHostFree, 7, 0x999000000, 0, kNoString, 0, pinned));  // never seen
    EXPECT_EQ(l.devices(), (std::vector<std::uint16_t>{0}));  // device 1 only had managed memory
    EXPECT_EQ(l.totals(0).outside(), 64 * kMiB);
    const HostMemoryTotals& h = l.host_totals();
    EXPECT_TRUE(h.seen);
    EXPECT_EQ(h.pinned, 128 * kMiB);
    EXPECT_EQ(h.peak_pinned, 512 * kMiB);
    EXPECT_EQ(h.pageable, 8 * kMiB);
    EXPECT_EQ(h.managed, 256 * kMiB);
    EXPECT_EQ(h.live, 3u);
    EXPECT_EQ(l.unmatched_frees(), 1u);
}

// Past LedgerOptions::max_tracked_allocations a table stops growing: allocations are booked by
// size, at their sites, and frees of them (which say their size) take the bytes back off the
// totals; only the sites cannot be told, and that is counted.
TEST(MemoryLedger, AllocationsPastTheCapAreBookedBySizeAndFreedBySize) {
    LedgerOptions o;
    o.max_tracked_allocations = 4;
    MemoryLedger l(o);
    constexpr std::uint64_t kCount = 10;
    auto pinned = static_cast<std::uint8_t>(MemoryKind::kPinned);
    for (std::uint64_t i = 0; i < kCount; ++i) {
        l.apply(mem(EventKind::kBlockAlloc, 1 + i, 0x1000000 + i * kMiB, kMiB));
        l.apply(mem(EventKind::kDeviceAlloc, 1 + i, 0x7f0000000000 + i * 2 * kMiB, 2 * kMiB));
        l.apply(
            mem(EventKind::kHostAlloc, 1 + i, 0x200000000 + i * kMiB, kMiB, kNoString, 0, pinned));
    }
    UntrackedAllocations u = l.untracked();
    EXPECT_EQ(u.booked, 3 * (kCount - 4));
    EXPECT_EQ(u.live, 3 * (kCount - 4));
    EXPECT_EQ(u.live_bytes, (kCount - 4) * 4 * kMiB);
    EXPECT_EQ(l.totals(0).allocated_rounded, kCount * kMiB);
    EXPECT_EQ(l.totals(0).outside_device, kCount * 2 * kMiB);
    EXPECT_EQ(l.totals(0).live_blocks, kCount);
    EXPECT_EQ(l.host_totals().pinned, kCount * kMiB);
    for (std::uint64_t i = 0; i < kCount; ++i) {
        l.apply(mem(EventKind::kBlockFree, 20 + i, 0x1000000 + i * kMiB, kMiB));
        l.apply(mem(EventKind::kDeviceFree, 20 + i, 0x7f0000000000 + i * 2 * kMiB, 2 * kMiB));
        l.apply(
            mem(EventKind::kHostFree, 20 + i, 0x200000000 + i * kMiB, kMiB, kNoString, 0, pinned));
    }
    u = l.untracked();
    EXPECT_EQ(u.live, 0u);
    EXPECT_EQ(u.live_bytes, 0u);
    EXPECT_EQ(u.unsited_freed_bytes, (kCount - 4) * 3 * kMiB);  // host memory has no sites
    EXPECT_EQ(l.totals(0).allocated_rounded, 0u);
    EXPECT_EQ(l.totals(0).outside_device, 0u);
    EXPECT_EQ(l.totals(0).live_blocks, 0u);
    EXPECT_EQ(l.host_totals().pinned, 0u);
    EXPECT_EQ(l.host_totals().live, 0u);
    EXPECT_EQ(l.unmatched_frees(), 0u);
    // With none of them live, a free of an unknown address is unmatched again.
    l.apply(mem(EventKind::kBlockFree, 40, 0xdead000, kMiB));
    EXPECT_EQ(l.unmatched_frees(), 1u);
}

}  // namespace
}  // namespace gpudiag::detail
