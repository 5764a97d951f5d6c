// SPDX-License-Identifier: Apache-2.0
// Memory verdicts on the real corpus: the OOM explainer names the cause an expert would on every
// snapshot, no real recording is called a leak, and what an input cannot measure is absent (not
// 0) with a note that says why.
#include <gpudiag/analyze.hpp>
#include <gpudiag/memory.hpp>
#include <gpudiag/whatif.hpp>

#include "corpus.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <variant>

namespace gpudiag {
namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

using testing::corpus_path;

// torch's segment size for a large request: 2 MiB multiples (requests here are all > 10 MiB).
std::uint64_t segment_for(std::uint64_t bytes) {
    return (bytes + 2 * kMiB - 1) / (2 * kMiB) * (2 * kMiB);
}

struct SnapshotCase {
    const char* file;
    // Why an expert names these causes for this snapshot (its own figures, from the state).
    const char* reasoning;
};

constexpr SnapshotCase kSnapshots[] = {
    {"decomfl_memory.pickle",
     "1.8 GiB reserved, 967 MiB allocated; of the 843 MiB free, 620 MiB are wholly free segments "
     "and 223 MiB sit in partly used ones; the largest block is 148 MiB"},
    {"magma27_cs336a2_memory_snapshot.pickle",
     "13.2 GiB reserved, 1.3 GiB allocated; 11.0 GiB are wholly free segments, 982 MiB stranded in "
     "partly used ones; the largest block is 314 MiB: a bloated cache"},
    {"bcrafton_cs336a2_memory_snapshot.pickle",
     "3.9 GiB reserved, 2.9 GiB allocated; 940 MiB wholly free segments, 172 MiB stranded; the "
     "largest block is 148 MiB"},
    {"silmont2000_cs336a2_mem_snapshot.pickle",
     "3.5 GiB reserved, 30 MiB allocated; 3.0 GiB wholly free segments, 504 MiB stranded; the "
     "largest block is 512 MiB"},
};

class SnapshotOom : public ::testing::TestWithParam<SnapshotCase> {
protected:
    void SetUp() override {
        path_ = corpus_path(std::string("memory_snapshots/") + GetParam().file);
        if (!std::filesystem::exists(path_)) GTEST_SKIP() << "corpus snapshot absent: " << path_;
    }
    OomExplanation explain(std::uint64_t request) {
        auto x = explain_oom_in_snapshot(path_, request, 0);
        EXPECT_TRUE(x.is_ok()) << x.status().to_string();
        return x.is_ok() ? *x : OomExplanation{};
    }
    std::string path_;
};

// A request just larger than the largest free block cannot reuse a cached block, so the
// allocator needs a new segment. It first releases its wholly free segments and retries; on every
// corpus snapshot those cover the new segment many times over. So the request cannot fail inside
// torch's allocator: if such a request fails, it came from outside the cache, which the bloated
// cache starves. Whether the device's free memory is known does not change that (the snapshots do
// not record it). Expandable segments would not help; empty_cache() would.
TEST_P(SnapshotOom, JustLargerThanTheLargestBlockIsABloatedCache) {
    OomExplanation probe = explain(kGiB);
    const std::uint64_t request = probe.largest_free_block_bytes + kMiB;
    OomExplanation x = explain(request);
    SCOPED_TRACE(GetParam().reasoning);
    ASSERT_GT(request, x.largest_free_block_bytes);
    ASSERT_GE(x.releasable_bytes, segment_for(request)) << "the premise of this case";
    EXPECT_EQ(x.cause, OomCause::kBloatedCache) << x.summary;
    EXPECT_NE(x.advice.front().find("empty_cache"), std::string::npos);
    for (const auto& a : x.advice) EXPECT_EQ(a.find("expandable_segments"), std::string::npos) << a;
    EXPECT_FALSE(x.evidence.empty());
}

// A request larger than the wholly free segments but within all the free space of the cache:
// after releasing those segments the allocator still cannot map the new segment (a failure says
// so), while the space stranded between live blocks in partly used segments would have covered
// it: fragmentation, which expandable segments address.
TEST_P(SnapshotOom, BeyondTheReleasableButWithinAllFreeIsFragmentation) {
    OomExplanation probe = explain(kGiB);
    const std::uint64_t releasable = probe.releasable_bytes;
    const std::uint64_t free_total = releasable + probe.inactive_split_bytes;
    // Halfway between: its segment is larger than what release returns, and it fits in total.
    const std::uint64_t request = (releasable + free_total) / 2 / (2 * kMiB) * (2 * kMiB);
    SCOPED_TRACE(GetParam().reasoning);
    ASSERT_GT(segment_for(request), releasable);
    ASSERT_LE(request, free_total);
    OomExplanation x = explain(request);
    EXPECT_EQ(x.cause, OomCause::kFragmentation) << x.summary;
    EXPECT_NE(x.advice.front().find("expandable_segments:True"), std::string::npos);
}

// Beyond all the free space of the cache: whether the working set is too large for the device or
// other holders (the CUDA context, other processes) took the rest cannot be told without the
// device's capacity, which torch snapshots do not record. An expert would not guess; the
// explainer says what it would need.
TEST_P(SnapshotOom, BeyondAllFreeSpaceWithoutCapacityIsLeftOpen) {
    OomExplanation probe = explain(kGiB);
    const std::uint64_t request = probe.releasable_bytes + probe.inactive_split_bytes + kGiB;
    OomExplanation x = explain(request);
    EXPECT_EQ(x.capacity_bytes, 0u);
    EXPECT_EQ(x.cause, OomCause::kUnknown) << x.summary;
    EXPECT_NE(x.summary.find("unknown"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Corpus, SnapshotOom, ::testing::ValuesIn(kSnapshots),
                         [](const auto& param_info) {
                             std::string n = param_info.param.file;
                             return n.substr(0, n.find('_'));
                         });

// The findings an allocator setting could change (fragmentation, reserved_unused) quote what the
// allocator what-if predicts for the program: its sentence, computed here by the public what-if
// on the same file, leads their advice when the replay reproduced the recorded allocator (and
// closes it when not: a prediction is trusted no further than the model proved itself).
TEST(MemoryCorpus, AllocatorFindingsQuoteTheWhatIfPrediction) {
    int snapshots = 0, quoted = 0;
    for (const SnapshotCase& c : kSnapshots) {
        const std::string path = corpus_path(std::string("memory_snapshots/") + c.file);
        if (!std::filesystem::exists(path)) continue;
        ++snapshots;
        auto r = analyze_files({path});
        ASSERT_TRUE(r.is_ok()) << r.status().to_string();
        for (const Finding& f : r->findings) {
            if (f.id != "fragmentation" && f.id != "reserved_unused") continue;
            WhatIfOptions options;
            options.device = f.device;
            auto whatif = whatif_file(path, options);
            ASSERT_TRUE(whatif.is_ok()) << c.file << ": " << whatif.status().to_string();
            ASSERT_FALSE(whatif->advice.empty());
            ASSERT_FALSE(f.advice.empty());
            const std::string& quoting =
                whatif->reproduction.exact ? f.advice.front() : f.advice.back();
            EXPECT_NE(quoting.find(whatif->advice), std::string::npos)
                << c.file << " " << f.id << ": " << quoting << "\nexpected: " << whatif->advice;
            ++quoted;
        }
    }
    if (snapshots == 0) GTEST_SKIP() << "corpus snapshots absent";
    EXPECT_GT(quoted, 0)
        << "every corpus snapshot has a bloated or fragmented cache (see kSnapshots)";
}

// Real recordings of healthy programs: no snapshot (one iteration or a benchmark, memory growing
// within it by design) and no profiler trace is a leak.
TEST(MemoryCorpus, NoRealRecordingIsALeak) {
    std::vector<std::string> files;
    for (const char* dir : {"memory_snapshots", "kineto_traces"}) {
        std::string d = corpus_path(dir);
        if (!std::filesystem::exists(d)) continue;
        for (const auto& e : std::filesystem::directory_iterator(d)) {
            std::string name = e.path().filename().string();
            if (name.find(".pickle") != std::string::npos ||
                name.find(".json") != std::string::npos) {
                files.push_back(e.path().string());
            }
        }
    }
    if (files.empty()) GTEST_SKIP() << "corpus absent";
    for (const auto& f : files) {
        auto r = analyze_files({f});
        if (!r.is_ok()) continue;  // formats other tests cover (an MTIA trace, say)
        EXPECT_EQ(r->finding("memory_leak"), nullptr) << f << "\n" << render_text(*r);
        for (const auto& rank : r->ranks) EXPECT_EQ(rank.finding("memory_leak"), nullptr) << f;
    }
}

const Figure* memory_figure(const Report& r, const char* key) {
    const Section* s = r.section("memory");
    return s != nullptr ? s->figure(key) : nullptr;
}

bool has_note(const Report& r, const char* words) {
    for (const auto& n : r.notes) {
        if (n.find(words) != std::string::npos) return true;
    }
    return false;
}

// A 2021 trace's [memory] events carry sizes but no addresses and no totals: the allocated level
// is their running sum (peak about 2.6 GiB; the Python test recounts it from the file), reserved
// and every segment figure are absent with a note, and the capacity is the one V100 the program
// used, not the four the trace lists.
TEST(MemoryCorpus, KinetoEventsWithoutAddressesStillGiveTheAllocatedLevel) {
    std::string path = corpus_path(
        "kineto_traces/kineto_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz");
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "corpus absent";
    auto r = analyze_files({path});
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    const Figure* peak = memory_figure(*r, "peak_allocated_bytes");
    ASSERT_NE(peak, nullptr) << render_text(*r);
    EXPECT_GT(peak->value, 2.4 * static_cast<double>(kGiB));
    EXPECT_LT(peak->value, 2.8 * static_cast<double>(kGiB));
    for (const char* absent :
         {"reserved_bytes", "free_in_segments_bytes", "external_fragmentation",
          "largest_free_block_bytes", "releasable_bytes", "peak_reserved_bytes"}) {
        EXPECT_EQ(memory_figure(*r, absent), nullptr) << absent;
    }
    EXPECT_TRUE(has_note(*r, "running sum"));
    EXPECT_TRUE(has_note(*r, "Reserved memory is not in the input"));
    const Figure* capacity = memory_figure(*r, "capacity_bytes");
    ASSERT_NE(capacity, nullptr);
    EXPECT_LT(capacity->value, 33.0 * static_cast<double>(kGiB));  // one 32 GB V100, not four
    const Section* s = r->section("memory");
    for (const auto& t : s->tables) EXPECT_NE(t.id, "devices") << "only one device was used";
}

// With totals ("Total Allocated/Reserved") the framework's own figures are the level, although
// the block events only cover the trace's window.
TEST(MemoryCorpus, KinetoTotalsAreTheLevel) {
    std::string path = corpus_path("kineto_traces/hta_df_index_resolver.json.gz");
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "corpus absent";
    auto r = analyze_files({path});
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    const Report& rank = r->ranks.empty() ? *r : r->ranks.front();
    const Figure* reserved = memory_figure(rank, "reserved_bytes");
    ASSERT_NE(reserved, nullptr) << render_text(rank);
    EXPECT_GT(reserved->value, 11.0 * static_cast<double>(kGiB));  // "Total Reserved" 12.78e9
    EXPECT_EQ(memory_figure(rank, "free_in_segments_bytes"), nullptr);
    EXPECT_EQ(memory_figure(rank, "live_blocks"), nullptr);  // only the window's blocks are seen
}

// A trace with no memory events says so instead of an all-clear about memory.
TEST(MemoryCorpus, MemoryNotObservedIsSaid) {
    std::string path =
        corpus_path("kineto_traces/hta_cpu_only_rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz");
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "corpus absent";
    auto r = analyze_files({path});
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_EQ(r->section("memory"), nullptr);
    EXPECT_TRUE(has_note(*r, "Device memory was not observed"));
}

// verl's RL worker at model init (SOURCES: "a pre-allocation, not a leak; private pools"): of
// 24.4 GiB reserved, 23.2 GiB is live, 20.3 GiB of it vLLM's KV cache in a private pool of 24
// wholly allocated segments. The cache holds only 1.2 GiB free (5 %), 274 MiB of it in wholly
// free segments: empty_cache() would return next to nothing, so no reserved_unused; the free
// space inside partly used segments (370 MiB, 1.5 % of reserved) is no fragmentation; and the
// capacity is not in the snapshot, which a note says instead of judging near_oom.
TEST(MemoryCorpus, VerlWorkerKvCachePreallocationIsNoMemoryProblem) {
    const std::string path = corpus_path("memory_snapshots/verl_megatron_vllm_init.pickle");
    GPUDIAG_REQUIRE_FILES(path);
    auto r = analyze_files({path});
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    for (const char* id :
         {"reserved_unused", "fragmentation", "memory_leak", "near_oom", "out_of_memory"}) {
        EXPECT_EQ(r->finding(id), nullptr) << id << "\n" << render_text(*r);
    }
    const Figure* reserved = memory_figure(*r, "reserved_bytes");
    const Figure* allocated = memory_figure(*r, "allocated_rounded_bytes");
    const Figure* releasable = memory_figure(*r, "releasable_bytes");
    ASSERT_TRUE(reserved != nullptr && allocated != nullptr && releasable != nullptr)
        << render_text(*r);
    EXPECT_EQ(reserved->value, 26189234176.0);  // 127 segments' total_size
    EXPECT_GT(allocated->value, 0.95 * reserved->value);
    EXPECT_LT(releasable->value, 300.0 * kMiB);
    // What holds the memory is named: vLLM's rollout engine (the KV cache) first.
    const Section* s = r->section("memory");
    ASSERT_NE(s, nullptr);
    const Table* live = nullptr;
    for (const auto& t : s->tables) {
        if (t.id == "top_sites") live = &t;
    }
    ASSERT_NE(live, nullptr) << render_text(*r);
    ASSERT_FALSE(live->rows.empty());
    EXPECT_NE(std::get<std::string>(live->rows.front().front()).find("vllm_rollout"),
              std::string::npos);
    EXPECT_TRUE(has_note(*r, "capacity is not in the input"));
}

}  // namespace
}  // namespace gpudiag
