// SPDX-License-Identifier: Apache-2.0
// Snapshot format variants (tests/data/memory/make_test_pickles.py) through the importer and
// the whole pipeline.
#include <gpudiag/analyze.hpp>

#include "importers/torch_snapshot/torch_snapshot.hpp"

#include <gtest/gtest.h>

#include <algorithm>
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
    Status on_host_segment(detail::SnapshotSegment& s) override {
        host_segments.push_back(s);
        return Status::ok();
    }
    Status on_host_trace_entry(const detail::TraceEntry& e) override {
        host_entries.push_back(e);
        return Status::ok();
    }
    void on_root_key(const std::string& k) override { root_keys.push_back(k); }
    [[nodiscard]] std::string setting(const std::string& key) const {
        for (const auto& [k, v] : settings) {
            if (k == key) return v;
        }
        return "(absent)";
    }
    std::vector<detail::SnapshotSegment> host_segments;
    std::vector<detail::TraceEntry> host_entries;
    std::vector<std::string> root_keys;
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

// The keys torch 2.12-2.15 added (pinned host memory, PR #182407) or proposed (the trace
// overflow flags, PR #179276), in a snapshot make_test_pickles.py wrote for tests: both forms of
// the flags, host segments and trace as host records, an unknown root key noted, not fatal.
TEST(TorchSnapshotReader, Keys2026AreRead) {
    for (const char* name : {"snapshot_2026_keys_made_for_tests.pickle",
                             "snapshot_2026_keys_per_device_made_for_tests.pickle"}) {
        SCOPED_TRACE(name);
        StringTable strings;
        Collect c;
        detail::TorchSnapshotReader reader;
        ASSERT_TRUE(reader.read(data(name), strings, c).is_ok());
        EXPECT_EQ(c.segments.size(), 1u);
        EXPECT_EQ(c.entries.size(), 4u);  // the device trace only: host entries go apart
        ASSERT_EQ(c.host_segments.size(), 1u);
        EXPECT_EQ(c.host_segments[0].total_size, 8u << 20);
        ASSERT_EQ(c.host_entries.size(), 4u);
        EXPECT_EQ(c.host_entries[3].action, detail::TraceAction::kSegmentFree);
        const std::string suffix =
            std::string(name).find("per_device") != std::string::npos ? ".0" : "";
        EXPECT_EQ(c.setting("trace_alloc_overflowed" + suffix), "true");
        EXPECT_EQ(c.setting("trace_alloc_max_entries" + suffix), "4");
        EXPECT_EQ(c.setting("graph_capture_record_stream_reuse"), "false");
        EXPECT_NE(std::find(c.root_keys.begin(), c.root_keys.end(), "future_2027_key"),
                  c.root_keys.end());
        EXPECT_FALSE(detail::known_snapshot_root_key("future_2027_key"));
        EXPECT_TRUE(detail::known_snapshot_root_key("host_traces"));
    }
}

// Through the pipeline: the cut history is in input.missing with the time it is complete from;
// pinned host memory is host memory (its own figures, peak 10 MiB), never the device's.
TEST(SnapshotAnalysis, Keys2026CutHistoryAndPinnedHost) {
    for (const char* name : {"snapshot_2026_keys_made_for_tests.pickle",
                             "snapshot_2026_keys_per_device_made_for_tests.pickle"}) {
        SCOPED_TRACE(name);
        auto r = analyze_files({data(name)});
        ASSERT_TRUE(r.is_ok()) << r.status().to_string();
        bool cut = false;
        for (const std::string& m : r->input.missing) {
            cut = cut || (m.find("trace_alloc_overflowed") != std::string::npos &&
                          m.find("keeps its last 4 entries") != std::string::npos &&
                          m.find("time_us 1760000000000000") != std::string::npos);
        }
        EXPECT_TRUE(cut) << render_text(*r);
        EXPECT_FALSE(r->input.complete);
        EXPECT_EQ(r->source.property("snapshot_history_cut.0"), "true");
        EXPECT_EQ(figure(*r, "reserved_bytes"), 20 * kMiB);  // the device only
        EXPECT_EQ(figure(*r, "pinned_host_bytes"), 8 * kMiB);
        EXPECT_EQ(figure(*r, "peak_pinned_host_bytes"), 10 * kMiB);
        bool unknown_noted = false;
        for (const std::string& n : r->capture.notes)
            unknown_noted = unknown_noted || n.find("future_2027_key") != std::string::npos;
        EXPECT_TRUE(unknown_noted);
    }
}

TEST(SnapshotAnalysis, MaliciousFileGivesAClearErrorThroughThePipeline) {
    auto r = analyze_files({data("malicious.pickle")});
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), StatusCode::kCorruptData);
    EXPECT_NE(r.status().message().find("STACK_GLOBAL"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace gpudiag
