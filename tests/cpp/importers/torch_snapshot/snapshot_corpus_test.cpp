// SPDX-License-Identifier: Apache-2.0
// The four corpus snapshots against torch's own `_memory_viz.py stats` (corpus REFERENCE.md).
#include <gpudiag/analyze.hpp>
#include <gpudiag/memory.hpp>

#include "corpus.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace gpudiag {
namespace {

struct Expected {
    const char* file;
    int segments;
    // Exact bytes behind REFERENCE.md's rounded figures, computed with _memory_viz.py's segsum
    // rules (allocated = sum of requested_size of active_allocated blocks; free = reserved -
    // allocated, internal rounding waste included).
    double reserved;
    double allocated_requested;
    double free;
    // REFERENCE.md as printed by _memory_viz.py (GiB/MiB with one decimal).
    const char* reserved_text;
    const char* allocated_text;
    const char* free_text;
};

constexpr Expected kCorpus[] = {
    {"decomfl_memory.pickle", 61, 1897922560, 1011485828, 886436732, "1.8 GiB", "964.6 MiB",
     "845.4 MiB"},
    {"magma27_cs336a2_memory_snapshot.pickle", 216, 14180941824, 1373919236, 12807022588,
     "13.2 GiB", "1.3 GiB", "11.9 GiB"},
    {"bcrafton_cs336a2_memory_snapshot.pickle", 96, 4238344192, 3064418304, 1173925888, "3.9 GiB",
     "2.9 GiB", "1.1 GiB"},
    {"silmont2000_cs336a2_mem_snapshot.pickle", 9, 3781165056, 31719428, 3749445628, "3.5 GiB",
     "30.3 MiB", "3.5 GiB"},
};

using testing::corpus_snapshot;

// _memory_viz.py's Bytes formatting: one decimal, binary units.
std::string viz_bytes(double b) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (b >= 1024 && u < 4) {
        b /= 1024;
        ++u;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f %s", b, units[u]);
    return buf;
}

double figure(const Report& r, const char* key) {
    const Section* s = r.section("memory");
    if (s == nullptr) return -1;
    const Figure* f = s->figure(key);
    return f != nullptr ? f->value : -1;
}

class CorpusSnapshot : public ::testing::TestWithParam<Expected> {
protected:
    void SetUp() override {
        if (!std::filesystem::exists(corpus_snapshot(GetParam().file))) {
            GTEST_SKIP() << "corpus snapshot absent: " << corpus_snapshot(GetParam().file);
        }
    }
};

TEST_P(CorpusSnapshot, FiguresEqualMemoryVizStats) {
    const Expected& x = GetParam();
    auto report = analyze_files({corpus_snapshot(x.file)});
    ASSERT_TRUE(report.is_ok()) << report.status().to_string();
    EXPECT_EQ(figure(*report, "segments"), x.segments);
    EXPECT_EQ(figure(*report, "reserved_bytes"), x.reserved);
    EXPECT_EQ(figure(*report, "allocated_requested_bytes"), x.allocated_requested);
    EXPECT_EQ(figure(*report, "free_bytes"), x.free);
    EXPECT_EQ(viz_bytes(figure(*report, "reserved_bytes")), x.reserved_text);
    EXPECT_EQ(viz_bytes(figure(*report, "allocated_requested_bytes")), x.allocated_text);
    EXPECT_EQ(viz_bytes(figure(*report, "free_bytes")), x.free_text);
    // The two allocated definitions differ only by rounding waste, which stays small.
    double rounded = figure(*report, "allocated_rounded_bytes");
    EXPECT_GE(rounded, x.allocated_requested);
    EXPECT_EQ(rounded - x.allocated_requested, figure(*report, "rounding_waste_bytes"));
    // free = free blocks in segments + rounding waste (no pending frees in these snapshots).
    EXPECT_EQ(figure(*report, "free_in_segments_bytes") + figure(*report, "rounding_waste_bytes"),
              x.free);
    // The replayed history must end in the snapshot's state: nothing left unmatched.
    EXPECT_LT(figure(*report, "unmatched_frees"), 0) << "no unmatched frees expected";
    // The JSON report carries the same figures.
    std::string json = render_json(*report);
    EXPECT_NE(json.find("\"allocated_requested_bytes\""), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Corpus, CorpusSnapshot, ::testing::ValuesIn(kCorpus),
                         [](const auto& param_info) {
                             std::string n = param_info.param.file;
                             return n.substr(0, n.find('_'));
                         });

TEST(CorpusSnapshotFindings, Magma27IsReservedUnused) {
    std::string path = corpus_snapshot("magma27_cs336a2_memory_snapshot.pickle");
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "corpus absent";
    auto report = analyze_files({path});
    ASSERT_TRUE(report.is_ok());
    const Finding* f = report->finding("reserved_unused");
    ASSERT_NE(f, nullptr) << render_text(*report);
    EXPECT_EQ(f->severity, Severity::kWarning);
    EXPECT_NE(f->title.find("13.2 GiB"), std::string::npos) << f->title;
    // Mostly whole free segments: a bloated cache, not fragmentation.
    EXPECT_EQ(report->finding("fragmentation"), nullptr);
    EXPECT_EQ(report->finding("memory_leak"), nullptr);
}

TEST(CorpusSnapshotFindings, BusySnapshotsAreNotReservedUnused) {
    for (const char* file : {"decomfl_memory.pickle", "bcrafton_cs336a2_memory_snapshot.pickle"}) {
        std::string path = corpus_snapshot(file);
        if (!std::filesystem::exists(path)) GTEST_SKIP() << "corpus absent";
        auto report = analyze_files({path});
        ASSERT_TRUE(report.is_ok());
        EXPECT_EQ(report->finding("reserved_unused"), nullptr) << file;
    }
}

TEST(CorpusSnapshotFindings, GrowthSitesNamedFromTheTrace) {
    std::string path = corpus_snapshot("decomfl_memory.pickle");
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "corpus absent";
    auto report = analyze_files({path});
    ASSERT_TRUE(report.is_ok());
    const Section* s = report->section("memory");
    ASSERT_NE(s, nullptr);
    const Table* growth = nullptr;
    for (const auto& t : s->tables) {
        if (t.id == "growth_sites") growth = &t;
    }
    ASSERT_NE(growth, nullptr);
    ASSERT_FALSE(growth->rows.empty());
    // Sites are the program's own frames, not torch internals.
    const auto& site = std::get<std::string>(growth->rows.front().front());
    EXPECT_EQ(site.find("torch/"), std::string::npos) << site;
    EXPECT_NE(site.find(".py:"), std::string::npos) << site;
}

TEST(CorpusSnapshotFindings, ExplainOomInSnapshotRejectsAZeroRequest) {
    std::string path = corpus_snapshot("magma27_cs336a2_memory_snapshot.pickle");
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "corpus absent";
    auto zero = explain_oom_in_snapshot(path, 0, 0);
    EXPECT_EQ(zero.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpudiag
