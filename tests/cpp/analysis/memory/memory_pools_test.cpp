// SPDX-License-Identifier: Apache-2.0
// Private pools in the ledger's layout: segments keep the pool their event names, pending frees
// are counted per segment, and a wholly free segment of a private pool is not what empty_cache()
// returns (torch releases it only once its pool is released).
#include "analysis/memory/memory_ledger.hpp"
#include "memory_test_events.hpp"

#include <gtest/gtest.h>

namespace gpudiag::detail {
namespace {

using namespace gpudiag::testing;

Event segment_in_pool(std::uint64_t t, std::uint64_t addr, std::uint64_t bytes,
                      std::uint32_t pool) {
    Event e = mem(EventKind::kSegmentAlloc, t, addr, bytes);
    e.memory.extra = pool;
    return e;
}

TEST(MemoryPools, LayoutKeepsPoolsAndPrivateFreeSegmentsAreNotReleasable) {
    MemoryLedger l;
    l.apply(segment_in_pool(1, 0x10000000, 20 * kMiB, 0));  // default pool, empty
    l.apply(segment_in_pool(2, 0x20000000, 20 * kMiB, 1));  // private pool 1, empty
    l.apply(segment_in_pool(3, 0x30000000, 20 * kMiB, 2));  // private pool 2, full
    l.apply(mem(EventKind::kBlockAlloc, 4, 0x30000000, 20 * kMiB));
    l.apply(segment_in_pool(5, 0x40000000, 20 * kMiB, 0));  // default, one pending free
    l.apply(mem(EventKind::kBlockAlloc, 6, 0x40000000, 4 * kMiB));
    l.apply(
        mem(EventKind::kBlockFree, 7, 0x40000000, 4 * kMiB, kNoString, 0, kEventFlagPendingFree));

    const DeviceLayout layout = l.layout(0);
    ASSERT_EQ(layout.segments.size(), 4u);
    EXPECT_EQ(layout.segments[0].segment.pool, 0u);
    EXPECT_EQ(layout.segments[1].segment.pool, 1u);
    EXPECT_EQ(layout.segments[2].segment.pool, 2u);
    EXPECT_EQ(layout.releasable, 20 * kMiB);         // the default pool's empty segment only
    EXPECT_EQ(layout.private_pool_free, 20 * kMiB);  // pool 1's, kept until its pool goes
    EXPECT_EQ(layout.segments[2].free_bytes, 0u);    // a wholly allocated pool wastes nothing
    EXPECT_EQ(layout.pending_blocks, 1u);
    EXPECT_EQ(layout.segments[3].segment.pending_blocks, 1u);
    EXPECT_EQ(layout.segments[3].segment.pending, 4 * kMiB);
    // The pools split the device's figures, never add to them.
    EXPECT_EQ(l.totals(0).reserved, 80 * kMiB);
}

TEST(MemoryPools, ExpandableSegmentsOfDifferentPoolsDoNotMerge) {
    auto expandable = [](std::uint64_t t, std::uint64_t addr, std::uint32_t pool) {
        Event e = segment_in_pool(t, addr, 2 * kMiB, pool);
        e.flags = kEventFlagExpandable;
        return e;
    };
    MemoryLedger l;
    l.apply(expandable(1, 0x10000000, 0));
    l.apply(expandable(2, 0x10000000 + 2 * kMiB, 1));
    EXPECT_EQ(l.layout(0).segments.size(), 2u);  // adjacent, but of two pools
    l.apply(expandable(3, 0x10000000 + 4 * kMiB, 1));
    const DeviceLayout layout = l.layout(0);
    ASSERT_EQ(layout.segments.size(), 2u);  // pool 1's pages extend pool 1's segment
    EXPECT_EQ(layout.segments[1].segment.size, 4 * kMiB);
    EXPECT_EQ(layout.segments[1].segment.pool, 1u);
}

}  // namespace
}  // namespace gpudiag::detail
