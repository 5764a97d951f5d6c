// SPDX-License-Identifier: Apache-2.0
// CachingAllocatorModel on small programs whose outcome follows from torch's rules by hand.
#include "analysis/allocator/allocator_model.hpp"

#include <gtest/gtest.h>

namespace gpudiag::detail {
namespace {

constexpr std::uint64_t MiB = kMiB;

struct Model {
    explicit Model(AllocatorSettings s = {}, DeviceLimits l = {}) : settings(s), limits(l) {}
    AllocatorSettings settings;
    DeviceLimits limits;
    BumpAddressSource addresses{std::uint64_t{1} << 40};
    CachingAllocatorModel m{settings, limits, addresses};
};

AllocatorSettings with(const char* conf) {
    AllocatorSettings s;
    EXPECT_TRUE(apply_allocator_conf(s, conf).is_ok()) << conf;
    return s;
}

TEST(AllocatorModel, RoundsTo512BytesOrPowerOfTwoDivisions) {
    Model plain;
    EXPECT_EQ(plain.m.round_size(1), 512u);
    EXPECT_EQ(plain.m.round_size(512), 512u);
    EXPECT_EQ(plain.m.round_size(513), 1024u);
    EXPECT_EQ(plain.m.round_size(1000000), 1000448u);
    Model four(with("roundup_power2_divisions:4"));
    // [1 MiB, 2 MiB) in steps of 256 KiB; [2 MiB, 4 MiB) in steps of 512 KiB.
    EXPECT_EQ(four.m.round_size(1258291), 1310720u);
    EXPECT_EQ(four.m.round_size(2 * MiB + 1), 2 * MiB + 512 * 1024);
    EXPECT_EQ(four.m.round_size(3 * MiB), 3 * MiB);
    EXPECT_EQ(four.m.round_size(4 * MiB), 4 * MiB);
    // Too small for 4 divisions of 512 B: plain rounding.
    EXPECT_EQ(four.m.round_size(1000), 1024u);
}

TEST(AllocatorModel, SmallRequestsShareOneTwoMiBSegment) {
    Model t;
    const std::uint64_t a = t.m.malloc(1, 1000, 0);
    const std::uint64_t b = t.m.malloc(2, 1000, 0);
    EXPECT_EQ(b, a + 1024);
    EXPECT_EQ(t.m.stats().device_mallocs, 1u);
    EXPECT_EQ(t.m.stats().reserved, 2 * MiB);
}

TEST(AllocatorModel, MidSizeRequestsShareTwentyMiBSegmentsAndLargeOnesAreRounded) {
    Model t;
    const std::uint64_t a = t.m.malloc(1, 3 * MiB, 0);
    const std::uint64_t b = t.m.malloc(2, 5 * MiB, 0);
    EXPECT_EQ(b, a + 3 * MiB);
    EXPECT_EQ(t.m.stats().reserved, 20 * MiB);
    t.m.malloc(3, 11 * MiB, 0);  // the 12 MiB left in the segment fit it
    EXPECT_EQ(t.m.stats().device_mallocs, 1u);
    t.m.malloc(4, 13 * MiB + 1, 0);  // >= 10 MiB: its own segment, rounded up to 2 MiB
    EXPECT_EQ(t.m.stats().reserved, 20 * MiB + 14 * MiB);
    EXPECT_EQ(t.m.stats().device_mallocs, 2u);
}

TEST(AllocatorModel, RemainderOfOneMiBOrLessStaysWithTheBlock) {
    Model t;
    t.m.malloc(1, 19 * MiB + 512 * 1024, 0);  // 20 MiB segment, 0.5 MiB left: not split
    EXPECT_EQ(t.m.stats().allocated, 20 * MiB);
    t.m.malloc(2, 2 * MiB, 0);  // nothing left in the first segment
    EXPECT_EQ(t.m.stats().device_mallocs, 2u);
}

TEST(AllocatorModel, BestFitTakesTheSmallestBlockThenTheLowestAddress) {
    Model t;
    const std::uint64_t first = t.m.malloc(1, 12 * MiB, 0);
    t.m.malloc(2, 14 * MiB, 0);
    const std::uint64_t third = t.m.malloc(3, 12 * MiB, 0);
    ASSERT_LT(first, third);
    t.m.free(3);
    t.m.free(2);
    t.m.free(1);
    EXPECT_EQ(t.m.malloc(4, 11 * MiB, 0), first);
    EXPECT_EQ(t.m.malloc(5, 11 * MiB, 0), third);
    EXPECT_EQ(t.m.stats().device_mallocs, 3u);
}

TEST(AllocatorModel, FreeBlocksMergeAndOnlyWholeSegmentsAreReleased) {
    Model t;
    t.m.malloc(1, 3 * MiB, 0);
    t.m.malloc(2, 3 * MiB, 0);
    t.m.free(1);
    // 3 MiB freed and the 14 MiB tail are stranded: block 2 pins the segment.
    EXPECT_EQ(t.m.stats().peak_stranded, 17 * MiB);
    t.m.empty_cache();
    EXPECT_EQ(t.m.stats().device_frees, 0u);
    t.m.free(2);
    EXPECT_EQ(t.m.stats().releasable, 20 * MiB);
    t.m.empty_cache();
    EXPECT_EQ(t.m.stats().device_frees, 1u);
    EXPECT_EQ(t.m.stats().reserved, 0u);
    EXPECT_TRUE(t.m.segments().empty());
}

TEST(AllocatorModel, OversizeBlocksServeOnlyLargeRequestsAndAreNotSplit) {
    Model t(with("max_split_size_mb:100"));
    t.m.malloc(1, 150 * MiB, 0);
    t.m.free(1);
    t.m.malloc(2, 50 * MiB, 0);  // below max_split: the cached 150 MiB block is off limits
    EXPECT_EQ(t.m.stats().device_mallocs, 2u);
    t.m.malloc(3, 140 * MiB, 0);  // within 20 MiB of it: reused whole
    EXPECT_EQ(t.m.stats().device_mallocs, 2u);
    EXPECT_EQ(t.m.stats().allocated, 50 * MiB + 150 * MiB);
    t.m.free(3);
    t.m.malloc(4, 120 * MiB, 0);  // 30 MiB smaller: a new segment
    EXPECT_EQ(t.m.stats().device_mallocs, 3u);
}

TEST(AllocatorModel, FailedCudaMallocReleasesTheCacheAndRetries) {
    DeviceLimits limits;
    limits.capacity_bytes = 100 * MiB;
    Model t({}, limits);
    t.m.malloc(1, 60 * MiB, 0);
    t.m.free(1);
    EXPECT_NE(t.m.malloc(2, 70 * MiB, 0), 0u);
    EXPECT_EQ(t.m.stats().alloc_retries, 1u);
    EXPECT_EQ(t.m.stats().device_frees, 1u);
    EXPECT_EQ(t.m.stats().peak_reserved, 70 * MiB);
    EXPECT_EQ(t.m.malloc(3, 40 * MiB, 0), 0u);  // live data leaves no room
    EXPECT_EQ(t.m.stats().ooms, 1u);
}

TEST(AllocatorModel, OversizeReleaseFreesJustEnough) {
    DeviceLimits limits;
    limits.capacity_bytes = 400 * MiB;
    Model t(with("max_split_size_mb:100"), limits);
    t.m.malloc(1, 150 * MiB, 0);
    t.m.malloc(2, 200 * MiB, 0);
    t.m.free(1);
    t.m.free(2);
    EXPECT_NE(t.m.malloc(3, 120 * MiB, 0), 0u);
    // The smallest oversize block large enough went; the 200 MiB one stays cached.
    EXPECT_EQ(t.m.stats().device_frees, 1u);
    EXPECT_EQ(t.m.stats().alloc_retries, 0u);
    EXPECT_EQ(t.m.stats().reserved, 320 * MiB);
}

TEST(AllocatorModel, ExpandableSegmentsGrowByPagesAndUnmapWhenReleased) {
    Model t(with("expandable_segments:True"));
    const std::uint64_t a = t.m.malloc(1, 30 * MiB, 0);
    EXPECT_EQ(t.m.stats().reserved, 40 * MiB);  // two 20 MiB pages
    const std::uint64_t b = t.m.malloc(2, 15 * MiB, 0);
    EXPECT_EQ(b, a + 30 * MiB);  // the free tail grows by one more page
    EXPECT_EQ(t.m.stats().reserved, 60 * MiB);
    EXPECT_EQ(t.m.stats().page_maps, 2u);
    EXPECT_EQ(t.m.stats().device_mallocs, 0u);
    ASSERT_EQ(t.m.segments().size(), 1u);
    EXPECT_EQ(t.m.segments()[0].second, 60 * MiB);
    t.m.free(1);
    t.m.free(2);
    t.m.empty_cache();
    EXPECT_EQ(t.m.stats().reserved, 0u);
    EXPECT_EQ(t.m.stats().page_unmaps, 1u);
    EXPECT_TRUE(t.m.segments().empty());
}

// pytorch PR #193400 (open; c10/cuda/CUDACachingAllocator.cpp get_free_block()): up to torch
// 2.15 max_split_size keeps a large free block of an expandable segment from serving a small
// request, so more pages are mapped (pytorch issue #123548); the PR's rule reuses the block.
TEST(AllocatorModel, OversizeRulesInExpandableSegmentsFollowTheRelease) {
    const auto reserved_after = [](bool pr193400) {
        Model t(with("expandable_segments:True,max_split_size_mb:100"));
        AllocatorRules rules;
        rules.oversize_rules_skip_expandable = pr193400;
        t.m.set_rules(rules);
        t.m.malloc(1, 200 * MiB, 0);
        t.m.malloc(2, 20 * MiB, 0);  // keeps the 200 MiB block off the unmapped tail
        t.m.free(1);
        t.m.malloc(3, 30 * MiB, 0);
        return t.m.stats().peak_reserved;
    };
    EXPECT_EQ(reserved_after(false), 260 * MiB);  // 2.3-2.15: two more pages mapped
    EXPECT_EQ(reserved_after(true), 220 * MiB);   // the PR: the cached pages serve it
    EXPECT_FALSE(rules_for(TorchVersion{2, 15, true}).oversize_rules_skip_expandable);
}

TEST(AllocatorModel, ExpandableSegmentsAbsorbGrowingRequests) {
    // Requests that grow a little each step: fixed segments each need a new one, an expandable
    // segment reuses its free space.
    Model fixed;
    Model grows(with("expandable_segments:True"));
    for (Model* t : {&fixed, &grows}) {
        std::uint64_t handle = 1;
        for (std::uint64_t mib : {12, 14, 16}) {
            t->m.malloc(handle, mib * MiB, 0);
            t->m.free(handle++);
        }
    }
    EXPECT_EQ(fixed.m.stats().peak_reserved, (12 + 14 + 16) * MiB);
    EXPECT_EQ(grows.m.stats().peak_reserved, 20 * MiB);
}

TEST(AllocatorModel, PendingFreesAreNotReusedUntilTheyComplete) {
    Model t;
    const std::uint64_t a = t.m.malloc(1, 1000, 0);
    EXPECT_TRUE(t.m.free_requested(1));
    const std::uint64_t b = t.m.malloc(2, 1000, 0);
    EXPECT_NE(b, a);
    EXPECT_TRUE(t.m.free(1));
    EXPECT_EQ(t.m.malloc(3, 1000, 0), a);
    // A cache release waits for the streams: it completes pending frees.
    t.m.free_requested(3);
    t.m.empty_cache();
    EXPECT_EQ(t.m.live_blocks(), 1u);
    EXPECT_TRUE(t.m.free(3));  // the recorded completion comes later: nothing left to do
    EXPECT_FALSE(t.m.free(3));
    EXPECT_FALSE(t.m.free(99));
}

TEST(AllocatorModel, StreamsKeepTheirOwnBlocks) {
    Model t;
    t.m.malloc(1, 1000, 1);
    t.m.free(1);
    t.m.malloc(2, 1000, 2);
    EXPECT_EQ(t.m.stats().device_mallocs, 2u);
    t.m.malloc(3, 1000, 1);
    EXPECT_EQ(t.m.stats().device_mallocs, 2u);
}

TEST(AllocatorModel, GarbageCollectionReleasesOldCachedSegmentsFirst) {
    DeviceLimits limits;
    limits.device_total_bytes = 200 * MiB;
    AllocatorSettings gc = with("per_process_memory_fraction:0.5,garbage_collection_threshold:0.5");
    Model collected(gc, limits);
    Model plain(with("per_process_memory_fraction:0.5"), limits);
    for (Model* t : {&collected, &plain}) {
        t->m.malloc(1, 30 * MiB, 0);
        t->m.free(1);
        t->m.malloc(2, 40 * MiB, 0);
        t->m.free(2);
        EXPECT_NE(t->m.malloc(3, 44 * MiB, 0), 0u);
    }
    // Reserved 70 MiB is over half the 100 MiB allowed: the older 30 MiB segment goes first,
    // without a failed allocation.
    EXPECT_EQ(collected.m.stats().gc_releases, 1u);
    EXPECT_EQ(collected.m.stats().alloc_retries, 0u);
    EXPECT_EQ(collected.m.stats().reserved, 84 * MiB);
    // Without it the fraction's cap is hit and the whole cache goes.
    EXPECT_EQ(plain.m.stats().alloc_retries, 1u);
    EXPECT_EQ(plain.m.stats().device_frees, 2u);
}

TEST(AllocatorModel, AdoptedSegmentsKeepTheirLayout) {
    Model t;
    // A block allocated before the history, known by its request only: 0.5 MiB of its 20 MiB
    // segment would not have been split off, so it owns the whole segment.
    ASSERT_TRUE(
        t.m.adopt_segment(0x7000000000, 20 * MiB, 0, false, false,
                          {{1, 0x7000000000, 19 * MiB + 512 * 1024, 19 * MiB + 512 * 1024, false}})
            .is_ok());
    EXPECT_EQ(t.m.stats().active, 20 * MiB);
    // Another one leaves a 15 MiB cached tail, which the next fitting request gets.
    ASSERT_TRUE(t.m.adopt_segment(0x8000000000, 20 * MiB, 0, false, false,
                                  {{2, 0x8000000000, 5 * MiB, 5 * MiB, false}})
                    .is_ok());
    EXPECT_EQ(t.m.malloc(3, 10 * MiB, 0), 0x8000000000u + 5 * MiB);
    EXPECT_EQ(t.m.stats().device_mallocs, 0u);
    EXPECT_EQ(t.m.stats().reserved, 40 * MiB);
    EXPECT_FALSE(t.m.adopt_segment(0x9000000000, 2 * MiB, 0, true, false,
                                   {{4, 0x9000000000, 3 * MiB, 3 * MiB, false}})
                     .is_ok());
}

// torch's PrivatePool (CUDA graphs, torch.cuda.MemPool): its own free lists; a request made into it
// is served only by its blocks, its free blocks never serve the default pool, and empty_cache
// leaves its cache while the pool lives.
TEST(AllocatorModel, PrivatePoolsKeepTheirBlocksApart) {
    Model t;
    const std::uint64_t a = t.m.malloc(1, 3 * MiB, 0, 1);
    t.m.free(1);
    const std::uint64_t b = t.m.malloc(2, 3 * MiB, 0);  // the default pool: a segment of its own
    EXPECT_NE(b, a);
    EXPECT_EQ(t.m.stats().device_mallocs, 2u);
    t.m.free(2);
    const std::uint64_t c = t.m.malloc(3, 3 * MiB, 0, 2);
    EXPECT_NE(c, a);
    EXPECT_NE(c, b);
    EXPECT_EQ(t.m.stats().device_mallocs, 3u);   // pool 2 gets neither cached block
    EXPECT_EQ(t.m.malloc(4, 3 * MiB, 0, 1), a);  // pool 1 reuses its own
    EXPECT_EQ(t.m.stats().device_mallocs, 3u);
    t.m.free(3);
    t.m.free(4);
    EXPECT_EQ(t.m.stats().releasable, 20 * MiB);  // the default pool's only
    t.m.empty_cache();
    EXPECT_EQ(t.m.stats().reserved, 40 * MiB);  // pools 1 and 2 keep theirs
    EXPECT_EQ(t.m.segments().size(), 2u);
}

TEST(AllocatorModel, AdoptedPrivateSegmentsServeOnlyTheirPool) {
    Model t;
    ASSERT_TRUE(t.m.adopt_segment(0x7000000000, 20 * MiB, 0, false, false, {}, 1).is_ok());
    EXPECT_NE(t.m.malloc(1, 3 * MiB, 0), 0x7000000000u);
    EXPECT_EQ(t.m.stats().device_mallocs, 1u);
    EXPECT_EQ(t.m.malloc(2, 3 * MiB, 0, 1), 0x7000000000u);
}

TEST(AllocatorModel, PrivatePoolsHaveTheirOwnExpandableSegments) {
    Model t(with("expandable_segments:True"));
    const std::uint64_t a = t.m.malloc(1, 3 * MiB, 0, 1);
    const std::uint64_t b = t.m.malloc(2, 3 * MiB, 0);
    EXPECT_NE(b, a + 3 * MiB);                             // not in pool 1's mapped page
    EXPECT_EQ(t.m.malloc(3, 3 * MiB, 0, 1), a + 3 * MiB);  // pool 1's next block is
    EXPECT_EQ(t.m.stats().reserved, 40 * MiB);
}

}  // namespace
}  // namespace gpudiag::detail
