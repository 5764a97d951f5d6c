// SPDX-License-Identifier: Apache-2.0
// Snapshot format variants (tests/data/memory/make_test_pickles.py) through the importer and
// the whole pipeline.
#include <gpudiag/analyze.hpp>

#include "importers/torch_snapshot/torch_snapshot.hpp"

#include <gtest/gtest.h>

#include <string>

namespace gpudiag {
namespace {

constexpr double kMiB = 1 << 20;

std::string data(const char* name) {
    return std::string(GPUDIAG_TEST_DATA_DIR) + "/memory/" + name;
}

double figure(const Report& r, const char* key) {
    const Section* s = r.section("memory");
    const Figure* f = s != nullptr ? s->figure(key) : nullptr;
    return f != nullptr ? f->value : -1;
}

class Collect final : public detail::SnapshotVisitor {
public:
    Status on_segment(detail::SnapshotSegment& s) override {
        segments.push_back(s);
        return Status::ok();
    }
    Status on_trace_entry(const detail::TraceEntry& e) override {
        entries.push_back(e);
        return Status::ok();
    }
    Status on_annotation(const detail::SnapshotAnnotation& a) override {
        annotations.push_back(a);
        return Status::ok();
    }
    void on_setting(const std::string& k, const std::string& v) override {
        settings.emplace_back(k, v);
    }
    std::vector<detail::SnapshotSegment> segments;
    std::vector<detail::TraceEntry> entries;
    std::vector<detail::SnapshotAnnotation> annotations;
    std::vector<std::pair<std::string, std::string>> settings;
};

TEST(TorchSnapshotReader, ModernVariantDecodes) {
    StringTable strings;
    Collect c;
    detail::TorchSnapshotReader reader;
    ASSERT_TRUE(reader.read(data("snapshot_modern_expandable.pickle"), strings, c).is_ok());
    ASSERT_EQ(c.segments.size(), 1u);
    EXPECT_TRUE(c.segments[0].expandable);
    ASSERT_EQ(c.segments[0].blocks.size(), 3u);
    EXPECT_EQ(c.segments[0].blocks[1].state,
              detail::BlockState::kPendingFree);  // awaiting spelling
    EXPECT_EQ(c.segments[0].blocks[0].requested, 40 * (1u << 20) - 100);
    // The site is the program's frame, not torch's.
    EXPECT_EQ(strings.lookup(c.segments[0].blocks[0].site), "u/train.py:42 step");
    // user_defined trace entries become annotations; snapshot entries stay as entries.
    EXPECT_EQ(c.entries.size(), 7u);
    EXPECT_EQ(c.annotations.size(), 4u);
    EXPECT_EQ(c.entries[5].action, detail::TraceAction::kOom);
    EXPECT_EQ(c.entries[5].device_free, 30u << 20);
    bool expandable = false;
    for (const auto& [k, v] : c.settings)
        expandable = expandable || (k == "expandable_segments" && v == "true");
    EXPECT_TRUE(expandable);
}

TEST(TorchSnapshotReader, Legacy20HistoryComputesAddresses) {
    StringTable strings;
    Collect c;
    detail::TorchSnapshotReader reader;
    ASSERT_TRUE(reader.read(data("snapshot_legacy_2_0.pickle"), strings, c).is_ok());
    ASSERT_EQ(c.segments.size(), 2u);
    const auto& b = c.segments[0].blocks;
    ASSERT_EQ(b.size(), 3u);
    EXPECT_EQ(b[1].address, 0x10000000u + (2u << 20));
    EXPECT_EQ(b[2].address, 0x10000000u + (8u << 20));
    EXPECT_EQ(b[0].requested, (2u << 20) - 512);
    EXPECT_EQ(c.segments[1].device, 1);
}

TEST(TorchSnapshotReader, NotASnapshot) {
    StringTable strings;
    Collect c;
    detail::TorchSnapshotReader reader;
    Status s = reader.read(data("datatypes_p4.pickle"), strings, c);
    EXPECT_EQ(s.code(), StatusCode::kCorruptData);
    EXPECT_NE(s.message().find("not a torch memory snapshot"), std::string::npos) << s.message();
    EXPECT_EQ(reader.read("/nonexistent.pickle", strings, c).code(), StatusCode::kNotFound);
}

TEST(SnapshotAnalysis, ModernExpandableReplayEndsInFinalState) {
    auto r = analyze_files({data("snapshot_modern_expandable.pickle")});
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_EQ(figure(*r, "reserved_bytes"), 80 * kMiB);
    EXPECT_EQ(figure(*r, "allocated_rounded_bytes"), 40 * kMiB);
    EXPECT_EQ(figure(*r, "allocated_requested_bytes"), 40 * kMiB - 100);
    EXPECT_EQ(figure(*r, "pending_free_bytes"), 20 * kMiB);
    EXPECT_EQ(figure(*r, "free_in_segments_bytes"), 20 * kMiB);
    EXPECT_EQ(figure(*r, "segments"), 1);
    EXPECT_EQ(r->source.property("expandable_segments"), "true");
    EXPECT_EQ(r->capture.notes.size(), 0u) << r->capture.notes.front();
    // The oom entry is explained with the state at that moment: 900 MiB against 30 MiB free on
    // the device and 20 MiB in the segment: too little memory, and it says expandable is on.
    const Finding* oom = r->finding("out_of_memory");
    ASSERT_NE(oom, nullptr) << render_text(*r);
    EXPECT_NE(oom->title.find("too_little_memory"), std::string::npos) << oom->title;
    bool says_on = false;
    for (const auto& a : oom->advice)
        says_on = says_on || a.find("already on") != std::string::npos;
    EXPECT_TRUE(says_on);
}

TEST(SnapshotAnalysis, LegacyAndBareVariants) {
    auto legacy = analyze_files({data("snapshot_legacy_2_0.pickle")});
    ASSERT_TRUE(legacy.is_ok()) << legacy.status().to_string();
    EXPECT_EQ(figure(*legacy, "reserved_bytes"), 22 * kMiB);
    EXPECT_EQ(figure(*legacy, "allocated_requested_bytes"), 14 * kMiB - 512);
    EXPECT_EQ(legacy->source.devices.size(), 2u);
    auto bare = analyze_files({data("snapshot_bare_segments.pickle")});
    ASSERT_TRUE(bare.is_ok()) << bare.status().to_string();
    EXPECT_EQ(figure(*bare, "reserved_bytes"), 2 * kMiB);
    EXPECT_EQ(figure(*bare, "allocated_requested_bytes"), 100);
    EXPECT_EQ(figure(*bare, "allocated_rounded_bytes"), 512);
}

TEST(SnapshotAnalysis, MaliciousFileGivesAClearErrorThroughThePipeline) {
    auto r = analyze_files({data("malicious.pickle")});
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), StatusCode::kCorruptData);
    EXPECT_NE(r.status().message().find("STACK_GLOBAL"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace gpudiag
