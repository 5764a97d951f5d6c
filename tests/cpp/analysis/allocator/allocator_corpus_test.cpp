// SPDX-License-Identifier: Apache-2.0
// The caching allocator model against real programs: each corpus snapshot's history replayed
// under the settings the snapshot recorded must reproduce what torch's allocator did.
//
// Exactness per snapshot (what these tests hold to):
//  * decomfl (full history, 61 segments) and silmont2000 (full history, 9 segments): every
//    cudaMalloc in the same order, size and address, every block at its recorded address, the
//    same peak reserved and the same final segments.
//  * bcrafton and magma27 (history starts after all their segments existed: the state at the
//    first trace entry is rebuilt from the final state and the trace): no segment is allocated
//    or freed in the window, as recorded; every block at its recorded address; peak reserved
//    and final segments equal.
#include <gpudiag/whatif.hpp>

#include "corpus.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace gpudiag {
namespace {

struct Snapshot {
    const char* file;
    bool full_history;
    std::uint64_t segments_allocated;  // cudaMalloc calls recorded in the trace
    std::uint64_t allocations;
    std::uint64_t peak_reserved;  // the recorded allocator's peak over the trace
    std::uint64_t final_segments;
};

// Figures of the recordings themselves (counted from the pickles' traces and segment lists).
constexpr Snapshot kCorpus[] = {
    {"decomfl_memory.pickle", true, 61, 7946, 1897922560, 61},
    {"silmont2000_cs336a2_mem_snapshot.pickle", true, 9, 36, 3781165056, 9},
    {"bcrafton_cs336a2_memory_snapshot.pickle", false, 0, 2162, 4238344192, 96},
    {"magma27_cs336a2_memory_snapshot.pickle", false, 0, 1721, 14180941824, 216},
};

using testing::corpus_snapshot;

class WhatIfCorpus : public ::testing::TestWithParam<Snapshot> {
protected:
    void SetUp() override {
        if (!std::filesystem::exists(corpus_snapshot(GetParam().file))) {
            GTEST_SKIP() << "corpus snapshot absent: " << corpus_snapshot(GetParam().file);
        }
    }
};

TEST_P(WhatIfCorpus, ReproducesTheRecordedAllocatorExactly) {
    const Snapshot& s = GetParam();
    auto r = whatif_file(corpus_snapshot(s.file));
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    const WhatIfReproduction& p = r->reproduction;
    EXPECT_TRUE(r->settings_recorded);
    EXPECT_EQ(r->history_from_start, s.full_history);
    ASSERT_TRUE(p.checked);
    EXPECT_TRUE(p.exact) << p.first_difference;
    EXPECT_EQ(p.recorded_segment_actions, s.segments_allocated);
    EXPECT_EQ(p.modelled_segment_actions, s.segments_allocated);
    EXPECT_EQ(p.matching_segment_actions, s.segments_allocated);
    EXPECT_EQ(p.allocations, s.allocations);
    EXPECT_EQ(p.allocations_at_recorded_address, s.allocations);
    EXPECT_EQ(p.recorded_peak_reserved_bytes, s.peak_reserved);
    EXPECT_EQ(p.modelled_peak_reserved_bytes, s.peak_reserved);
    EXPECT_EQ(p.recorded_final_segments, s.final_segments);
    EXPECT_TRUE(p.final_segments_match);
    // Snapshots do not record their torch version: the newest modelled release is assumed and
    // said so, and its rules reproduce every corpus program (torch 2.6-2.10) exactly.
    EXPECT_EQ(r->torch_version, "2.15");
    EXPECT_EQ(r->torch_version_origin, "assumed");
    EXPECT_TRUE(r->history_complete);
    ASSERT_FALSE(r->outcomes.empty());
    EXPECT_EQ(r->outcomes[0].label, "recorded");
    EXPECT_EQ(r->outcomes[0].peak_reserved_bytes, s.peak_reserved);
    EXPECT_EQ(r->outcomes[0].device_mallocs, s.segments_allocated);
}

TEST_P(WhatIfCorpus, SweepsTheUsualSettings) {
    const Snapshot& s = GetParam();
    auto r = whatif_file(corpus_snapshot(s.file));
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    std::vector<std::string> changes;
    for (const auto& o : r->outcomes) changes.push_back(o.change);
    for (const char* c :
         {"expandable_segments:True", "max_split_size_mb:128", "max_split_size_mb:256",
          "max_split_size_mb:512", "roundup_power2_divisions:4"}) {
        EXPECT_NE(std::find(changes.begin(), changes.end(), c), changes.end()) << c;
    }
    const WhatIfStart expected =
        s.full_history ? WhatIfStart::kRecordedState : WhatIfStart::kLiveBlocks;
    for (std::size_t i = 1; i < r->outcomes.size(); ++i) {
        const WhatIfOutcome& o = r->outcomes[i];
        EXPECT_EQ(o.start, expected) << o.change;
        EXPECT_TRUE(o.replayed_to_end) << o.change;
        EXPECT_GT(o.peak_reserved_bytes, 0u) << o.change;
        // Reserved memory always covers the live blocks.
        EXPECT_GE(o.peak_reserved_bytes, o.peak_allocated_bytes) << o.change;
        if (o.change == "expandable_segments:True") {
            EXPECT_EQ(o.device_mallocs, 0u);
            EXPECT_GT(o.page_maps, 0u);
        }
    }
    EXPECT_FALSE(r->advice.empty());
}

TEST_P(WhatIfCorpus, RendersTextAndJson) {
    const Snapshot& s = GetParam();
    auto r = whatif_file(corpus_snapshot(s.file));
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    const std::string text = whatif_text(*r);
    EXPECT_NE(text.find("Reproduction under the recorded settings: exact"), std::string::npos)
        << text;
    EXPECT_NE(text.find("Allocator modelled: torch 2.15 (assumed"), std::string::npos) << text;
    EXPECT_NE(text.find("expandable_segments:True"), std::string::npos);
    const std::string json = whatif_json(*r);
    EXPECT_NE(json.find("\"exact\": true"), std::string::npos);
    EXPECT_NE(json.find("\"peak_reserved_bytes\": " + std::to_string(s.peak_reserved)),
              std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Snapshots, WhatIfCorpus, ::testing::ValuesIn(kCorpus),
                         [](const ::testing::TestParamInfo<Snapshot>& param) {
                             std::string name = param.param.file;
                             return name.substr(0, name.find('_'));
                         });

}  // namespace
}  // namespace gpudiag
