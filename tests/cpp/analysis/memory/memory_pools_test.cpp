// SPDX-License-Identifier: Apache-2.0
// Private pools in the ledger's layout: segments keep the pool their event names, pending frees
// are counted per segment, and a wholly free segment of a private pool is not what empty_cache()
// returns (torch releases it only once its pool is released). The report's pools on the real
// snapshots: per pool what it holds, the private pools' share of reserved memory, and one default
// pool only where the snapshot has no private pool.
#include <gpudiag/analyze.hpp>

#include "analysis/memory/memory_ledger.hpp"
#include "corpus.hpp"
#include "memory_test_events.hpp"

#include <gtest/gtest.h>

#include <string>
#include <variant>

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

// Reserved held in private pools is tracked as segments come and go, and kept as it was when
// reserved peaked (a later, lower level does not move it).
TEST(MemoryPools, PrivateReservedIsKeptAtThePeakOfReserved) {
    MemoryLedger l;
    l.apply(segment_in_pool(1, 0x10000000, 20 * kMiB, 0));
    l.apply(segment_in_pool(2, 0x20000000, 40 * kMiB, 1));
    l.apply(mem(EventKind::kSegmentFree, 3, 0x20000000, 40 * kMiB));
    l.apply(segment_in_pool(4, 0x30000000, 30 * kMiB, 0));
    l.apply(segment_in_pool(5, 0x40000000, 4 * kMiB, 2));
    EXPECT_EQ(l.totals(0).reserved, 54 * kMiB);
    EXPECT_EQ(l.totals(0).private_pool_reserved, 4 * kMiB);
    EXPECT_EQ(l.peaks(0).reserved, 60 * kMiB);
    EXPECT_EQ(l.peaks(0).private_pool_reserved, 40 * kMiB);
}

const Table* table_of(const Report& r, const char* id) {
    const Section* s = r.section("memory");
    if (s == nullptr) return nullptr;
    for (const Table& t : s->tables) {
        if (t.id == id) return &t;
    }
    return nullptr;
}

// A row's cell in `column`, as T (a failure when the table has no such column).
template <typename T>
T cell(const std::vector<Cell>& row, const Table& t, const char* column) {
    for (std::size_t i = 0; i < t.columns.size() && i < row.size(); ++i) {
        if (t.columns[i] == column) return std::get<T>(row[i]);
    }
    ADD_FAILURE() << "no column " << column;
    return T{};
}
double number(const std::vector<Cell>& row, const Table& t, const char* column) {
    return cell<double>(row, t, column);
}
std::string text(const std::vector<Cell>& row, const Table& t, const char* column) {
    return cell<std::string>(row, t, column);
}

// verl's RL worker at model init: segments with segment_pool_id (0, 0) x59, (0, 1) x44 (Megatron
// weights created under a MemPool) and (0, 2) x24 (vLLM's KV cache). Expected figures from a
// Python read of the pickle (pickle.load; per segment_pool_id the sum of total_size, and of the
// sizes of blocks in state active_allocated / active_pending_free):
//   (0, 0): 59 segments, 3810525184 reserved, 2623884288 allocated, 597377024 pending free;
//   (0, 1): 44 segments,  585105408 reserved,  498546688 allocated;
//   (0, 2): 24 segments, 21793603584 reserved, 21793603584 allocated;
// private pools hold 22378708992 of 26189234176 reserved (85.45 %). The snapshot has no trace:
// its peak is its state, so the share at the peak is the share at the end.
TEST(MemoryPools, VerlPoolsSplitTheDevicesFigures) {
    const std::string path =
        testing::corpus_path("memory_snapshots/verl_megatron_vllm_init.pickle");
    GPUDIAG_REQUIRE_FILES(path);
    auto r = analyze_files({path});
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    const Section* s = r->section("memory");
    ASSERT_NE(s, nullptr);
    const Table* pools = table_of(*r, "pools");
    ASSERT_NE(pools, nullptr) << render_text(*r);
    ASSERT_EQ(pools->rows.size(), 3u);
    struct Expected {
        const char* pool;
        const char* torch_id;
        double segments, reserved, allocated, pending;
    };
    const Expected expected[] = {
        {"default", "(0, 0)", 59, 3810525184.0, 2623884288.0, 597377024.0},
        {"private 1", "(0, 1)", 44, 585105408.0, 498546688.0, 0},
        {"private 2", "(0, 2)", 24, 21793603584.0, 21793603584.0, 0},
    };
    double segments = 0, reserved = 0, allocated = 0, private_reserved = 0;
    for (std::size_t i = 0; i < 3; ++i) {
        const auto& row = pools->rows[i];
        EXPECT_EQ(text(row, *pools, "pool"), expected[i].pool);
        EXPECT_EQ(text(row, *pools, "torch id"), expected[i].torch_id);
        EXPECT_EQ(number(row, *pools, "segments"), expected[i].segments);
        EXPECT_EQ(number(row, *pools, "reserved"), expected[i].reserved);
        EXPECT_EQ(number(row, *pools, "allocated"), expected[i].allocated);
        EXPECT_EQ(number(row, *pools, "pending free"), expected[i].pending);
        EXPECT_EQ(text(row, *pools, "state"), i == 0 ? "shared" : "in use");
        segments += number(row, *pools, "segments");
        reserved += number(row, *pools, "reserved");
        allocated += number(row, *pools, "allocated");
        if (i > 0) private_reserved += number(row, *pools, "reserved");
    }
    // The pools split the device's figures: they add up to them, never more.
    ASSERT_NE(s->figure("reserved_bytes"), nullptr);
    EXPECT_EQ(reserved, s->figure("reserved_bytes")->value);
    EXPECT_EQ(allocated, s->figure("allocated_rounded_bytes")->value);
    EXPECT_EQ(segments, s->figure("segments")->value);
    const Figure* share = s->figure("private_pool_reserved_share");
    const Figure* at_peak = s->figure("private_pool_reserved_share_at_peak");
    ASSERT_TRUE(share != nullptr && at_peak != nullptr) << render_text(*r);
    EXPECT_DOUBLE_EQ(share->value, private_reserved / reserved);
    EXPECT_NEAR(share->value, 0.8545, 1e-4);
    EXPECT_DOUBLE_EQ(at_peak->value, share->value);
    EXPECT_EQ(s->figure("private_pool_reserved_bytes")->value, private_reserved);
    // Both private pools hold live blocks: none keeps memory only for itself.
    EXPECT_EQ(s->figure("idle_private_pool_bytes"), nullptr);
}

// The other corpus snapshots allocate in the default pool only: no pool table, no pool figures.
TEST(MemoryPools, OtherCorpusSnapshotsHaveOnlyTheDefaultPool) {
    for (const char* file :
         {"decomfl_memory.pickle", "magma27_cs336a2_memory_snapshot.pickle",
          "bcrafton_cs336a2_memory_snapshot.pickle", "silmont2000_cs336a2_mem_snapshot.pickle"}) {
        const std::string path = testing::corpus_snapshot(file);
        GPUDIAG_REQUIRE_FILES(path);
        auto r = analyze_files({path});
        ASSERT_TRUE(r.is_ok()) << file << ": " << r.status().to_string();
        const Section* s = r->section("memory");
        ASSERT_NE(s, nullptr) << file;
        ASSERT_NE(s->figure("segments"), nullptr) << file;
        EXPECT_EQ(table_of(*r, "pools"), nullptr) << file;
        EXPECT_EQ(s->figure("private_pools"), nullptr) << file;
        EXPECT_EQ(s->figure("private_pool_reserved_share"), nullptr) << file;
    }
}

// A private pool with segments but no live block (a CUDA graph's pool after its graph was
// deleted while a reference to the pool lives on, a MemPool not released) keeps 2 GiB nothing
// uses: the pool table says so, the figures count it, and reserved_unused names it, apart from
// what empty_cache() can return now.
TEST(MemoryPools, AnIdlePrivatePoolIsMemoryOnlyThePoolKeeps) {
    StringTable strings;
    std::vector<Event> ev;
    ev.push_back(segment_in_pool(1, 0x100000000, 1 * kGiB, 0));
    ev.push_back(mem(EventKind::kBlockAlloc, 2, 0x100000000, 200 * kMiB));
    ev.push_back(segment_in_pool(3, 0x200000000, 2 * kGiB, 1));  // idle
    ev.push_back(segment_in_pool(4, 0x300000000, 100 * kMiB, 2));
    ev.push_back(mem(EventKind::kBlockAlloc, 5, 0x300000000, 100 * kMiB));
    SourceInfo info;
    info.producer = "torch-snapshot";
    info.properties = {{"private_pool.1.id", "(3, 0)"}, {"private_pool.2.id", "(0, 1)"}};
    info.devices.push_back(DeviceInfo{0, "sim", 80 * kGiB, ""});
    auto r = analyze_events(ev, info, strings);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    const Section* s = r->section("memory");
    ASSERT_NE(s, nullptr);
    const Table* pools = table_of(*r, "pools");
    ASSERT_NE(pools, nullptr) << render_text(*r);
    ASSERT_EQ(pools->rows.size(), 3u);
    EXPECT_EQ(text(pools->rows[1], *pools, "torch id"), "(3, 0)");
    EXPECT_NE(text(pools->rows[1], *pools, "state").find("only the pool keeps it"),
              std::string::npos);
    EXPECT_EQ(text(pools->rows[2], *pools, "state"), "in use");
    ASSERT_NE(s->figure("idle_private_pool_bytes"), nullptr) << render_text(*r);
    EXPECT_EQ(s->figure("idle_private_pool_bytes")->value, 2.0 * kGiB);
    EXPECT_EQ(s->figure("idle_private_pools")->value, 1.0);
    EXPECT_DOUBLE_EQ(s->figure("private_pool_reserved_share")->value,
                     (2.0 * kGiB + 100.0 * kMiB) / (3.0 * kGiB + 100.0 * kMiB));
    const Finding* f = r->finding("reserved_unused");
    ASSERT_NE(f, nullptr) << render_text(*r);
    EXPECT_NE(f->summary.find("kept by 1 private pool with no live block"), std::string::npos)
        << f->summary;
    bool figure = false;
    for (const Figure& x : f->figures) figure = figure || x.key == "idle_private_pool_bytes";
    EXPECT_TRUE(figure);
    ASSERT_FALSE(f->advice.empty());  // the idle pool is most of the cache: its advice first
    EXPECT_EQ(f->advice.front().rfind("Drop the CUDA graphs", 0), 0u) << f->advice.front();
    // Not what empty_cache() returns now: the idle pool's segment is no wholly free default one.
    EXPECT_EQ(s->figure("releasable_bytes")->value, 0.0);
}

}  // namespace
}  // namespace gpudiag::detail
