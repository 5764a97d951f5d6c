// SPDX-License-Identifier: Apache-2.0
// The allocator what-if over gpudiag's own recordings: a recording holding the caching
// allocator's events (written by the real writer, or by a live session) answers as the same
// events do in memory; a live session answers over its recording or window; an input with only
// cudaMalloc-level events gets an error that says what it lacks, never an empty answer.
#include <gpudiag/gpudiag.h>
#include <gpudiag/gpudiag.hpp>

#include "corpus.hpp"
#include "importers/open_source.hpp"
#include "session_test_support.hpp"
#include "temp_dir.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace gpudiag {
namespace {

using testing::corpus_snapshot;
using testing::cpu_options;
using testing::make;
using testing::put;
using testing::TempDir;

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr std::uint64_t kBase = 0x7f0000000000ull;

// Every event of an input, with its source info and names.
struct Collected final : EventSink {
    SourceInfo info;
    std::vector<Event> events;
    void begin(const SourceInfo& i, const StringTable& /*strings*/) override { info = i; }
    void consume(std::span<const Event> e) override {
        events.insert(events.end(), e.begin(), e.end());
    }
    void end(const SourceSummary& /*summary*/) override {}
};

Event memory(EventKind kind, std::uint64_t address, std::uint64_t bytes, std::uint8_t flags = 0) {
    Event e;
    e.kind = kind;
    e.device = 0;
    e.flags = flags;
    e.start_ns = e.end_ns = 1000 + address % 977;
    e.memory.address = address;
    e.memory.bytes = bytes;
    e.memory.aux = kind == EventKind::kSegmentAlloc ? kSegmentPoolLarge : bytes;
    return e;
}

// What torch (defaults) does for 24 MiB, 16 MiB, a free, 12 MiB (split from the cached 24 MiB
// segment) and 30 MiB: three segments, 70 MiB at the peak; the replay must follow it exactly.
std::vector<Event> allocator_program() {
    std::vector<Event> e;
    e.push_back(memory(EventKind::kSegmentAlloc, kBase, 24 * kMiB));
    e.push_back(memory(EventKind::kBlockAlloc, kBase, 24 * kMiB));
    e.push_back(memory(EventKind::kSegmentAlloc, kBase + 64 * kMiB, 16 * kMiB));
    e.push_back(memory(EventKind::kBlockAlloc, kBase + 64 * kMiB, 16 * kMiB));
    e.push_back(memory(EventKind::kBlockFree, kBase, 24 * kMiB, kEventFlagPendingFree));
    e.push_back(memory(EventKind::kBlockFree, kBase, 24 * kMiB));
    e.push_back(memory(EventKind::kBlockAlloc, kBase, 12 * kMiB));
    e.push_back(memory(EventKind::kSegmentAlloc, kBase + 128 * kMiB, 30 * kMiB));
    e.push_back(memory(EventKind::kBlockAlloc, kBase + 128 * kMiB, 30 * kMiB));
    return e;
}

SourceInfo torch_settings_info() {
    SourceInfo info;
    info.producer = "gpudiag-capture";
    info.properties = {{"max_split_size", "-1"}, {"expandable_segments", "false"}};
    return info;
}

// The same answer, the input's name aside.
void expect_same(WhatIfResult a, const WhatIfResult& b) {
    a.source = b.source;
    EXPECT_EQ(whatif_json(a), whatif_json(b));
}

TEST(WhatIfRecording, ARecordingAnswersAsItsEventsDo) {
    TempDir dir("whatif");
    const std::string path = dir.file("allocator.gpudiag");
    const auto events = allocator_program();
    const SourceInfo info = torch_settings_info();
    StringTable strings;
    ASSERT_TRUE(write_recording(path, info, strings, events, SourceSummary{}).is_ok());
    auto from_file = whatif_file(path);
    ASSERT_TRUE(from_file.is_ok()) << from_file.status().to_string();
    auto in_memory = whatif_events(events, info, strings);
    ASSERT_TRUE(in_memory.is_ok()) << in_memory.status().to_string();
    expect_same(*from_file, *in_memory);
    EXPECT_EQ(from_file->source, path);  // a recording names no description of its own
    EXPECT_TRUE(from_file->reproduction.checked);
    EXPECT_TRUE(from_file->reproduction.exact) << from_file->reproduction.first_difference;
    EXPECT_EQ(from_file->reproduction.recorded_peak_reserved_bytes, 70 * kMiB);
    EXPECT_EQ(from_file->allocations, 4u);
    EXPECT_GT(from_file->outcomes.size(), 2u);  // reproduction, baseline, the sweep
}

// A real snapshot's events, through the real writer and back: the same answer as the snapshot.
TEST(WhatIfRecording, ASnapshotRecordedByGpudiagAnswersAsTheSnapshot) {
    const std::string snapshot = corpus_snapshot("decomfl_memory.pickle");
    GPUDIAG_REQUIRE_FILES(snapshot);
    auto source = detail::open_event_source(snapshot, AnalysisOptions{});
    ASSERT_TRUE(source.is_ok()) << source.status().to_string();
    Collected c;
    StringTable strings;
    ASSERT_TRUE((*source)->run(c, strings).is_ok());
    TempDir dir("whatif");
    const std::string path = dir.file("snapshot.gpudiag");
    ASSERT_TRUE(write_recording(path, c.info, strings, c.events, SourceSummary{}).is_ok());
    auto from_recording = whatif_file(path);
    ASSERT_TRUE(from_recording.is_ok()) << from_recording.status().to_string();
    auto from_snapshot = whatif_file(snapshot);
    ASSERT_TRUE(from_snapshot.is_ok()) << from_snapshot.status().to_string();
    auto in_memory = whatif_events(c.events, c.info, strings);
    ASSERT_TRUE(in_memory.is_ok());
    expect_same(*from_recording, *from_snapshot);
    expect_same(*from_recording, *in_memory);
    EXPECT_TRUE(from_recording->reproduction.exact)
        << from_recording->reproduction.first_difference;
}

// A live session handed a snapshot's allocator events answers over its recording while it runs
// and after stop, as `gpudiag whatif` does on the file it wrote.
TEST(WhatIfRecording, ALiveSessionAnswersOverItsRecording) {
    const std::string snapshot = corpus_snapshot("decomfl_memory.pickle");
    GPUDIAG_REQUIRE_FILES(snapshot);
    auto offline = whatif_file(snapshot);
    ASSERT_TRUE(offline.is_ok());
    TempDir dir("whatif");
    for (const bool windowed : {false, true}) {
        SessionOptions o = cpu_options(dir.file(windowed ? "window.gpudiag" : "run.gpudiag"));
        if (windowed) o.record_window_s = 3600;
        auto s = make(o);
        EXPECT_EQ(s->whatif().status().code(), StatusCode::kFailedPrecondition);  // not started
        ASSERT_TRUE(s->start().is_ok());
        ASSERT_TRUE(s->replay(snapshot).is_ok());
        auto live = s->whatif();
        ASSERT_TRUE(live.is_ok()) << live.status().to_string();
        EXPECT_NE(live->source.find("the session"), std::string::npos) << live->source;
        EXPECT_EQ(live->allocations, offline->allocations);
        EXPECT_EQ(live->reproduction.recorded_peak_reserved_bytes,
                  offline->reproduction.recorded_peak_reserved_bytes);
        EXPECT_TRUE(live->reproduction.exact) << live->reproduction.first_difference;
        ASSERT_TRUE(s->stop().is_ok());
        auto stopped = s->whatif();
        ASSERT_TRUE(stopped.is_ok()) << stopped.status().to_string();
        auto file = whatif_file(o.record_path);
        ASSERT_TRUE(file.is_ok()) << file.status().to_string();
        expect_same(*stopped, *file);
        EXPECT_EQ(file->reproduction.recorded_peak_reserved_bytes,
                  offline->reproduction.recorded_peak_reserved_bytes);
        EXPECT_EQ(dir.files("", ".tmp").size(), 0u);  // the window's copy is removed
    }
}

// The planted problem: a cached 600 MiB segment split by a 12 MiB request, then 600 MiB asked
// for again with 300 MiB free on the device. torch's defaults fail (a split segment cannot be
// released); a max_split_size_mb below 600 MiB keeps the big segment whole.
std::vector<Event> split_segment_oom_program() {
    std::vector<Event> e;
    e.push_back(memory(EventKind::kSegmentAlloc, kBase, 600 * kMiB));
    e.push_back(memory(EventKind::kBlockAlloc, kBase, 600 * kMiB));
    e.push_back(memory(EventKind::kBlockFree, kBase, 600 * kMiB, kEventFlagPendingFree));
    e.push_back(memory(EventKind::kBlockFree, kBase, 600 * kMiB));
    e.push_back(memory(EventKind::kBlockAlloc, kBase, 12 * kMiB));
    Event oom;
    oom.kind = EventKind::kOutOfMemory;
    oom.device = 0;
    oom.start_ns = oom.end_ns = 5000;
    oom.oom.requested_bytes = 600 * kMiB;
    oom.oom.free_bytes = 300 * kMiB;
    e.push_back(oom);
    return e;
}

TEST(WhatIfRecording, APlantedSplitSegmentOomIsAnsweredLiveAndThroughTheCApi) {
    TempDir dir("whatif");
    const SessionOptions o = cpu_options(dir.file("oom.gpudiag"));
    auto s = make(o);
    ASSERT_TRUE(s->start().is_ok());
    for (const Event& e : split_segment_oom_program()) put(*s, e);
    const auto live = s->whatif();
    ASSERT_TRUE(live.is_ok()) << live.status().to_string();
    EXPECT_TRUE(live->reproduction.exact) << live->reproduction.first_difference;
    const std::string verdict =
        "With max_split_size_mb:128 the out-of-memory failure would not recur";
    EXPECT_NE(live->advice.find(verdict), std::string::npos) << live->advice;
    ASSERT_TRUE(s->stop().is_ok());
    // A C program asks the same of the file the session wrote, and is told the same.
    char* text = nullptr;
    ASSERT_EQ(gpudiag_whatif_file(o.record_path.c_str(), nullptr, GPUDIAG_FORMAT_TEXT, &text),
              GPUDIAG_OK)
        << gpudiag_last_error();
    EXPECT_NE(std::string(text).find(verdict), std::string::npos) << text;
    gpudiag_free(text);
}

TEST(WhatIfRecording, DeviceLevelEventsAloneSayWhatIsMissing) {
    TempDir dir("whatif");
    auto s = make(cpu_options(dir.file("cuda.gpudiag")));
    ASSERT_TRUE(s->start().is_ok());
    ASSERT_TRUE(s->record_allocation(0, kBase, 64 * kMiB, "engine.cpp:88").is_ok());
    ASSERT_TRUE(s->record_free(0, kBase).is_ok());
    Event oom;  // what the torch integration's OOM observer records: a failure, not a history
    oom.kind = EventKind::kOutOfMemory;
    oom.device = 0;
    oom.oom.requested_bytes = 1024 * kMiB;
    put(*s, oom);
    const auto live = s->whatif();
    ASSERT_TRUE(s->stop().is_ok());
    const auto file = whatif_file(dir.file("cuda.gpudiag"));
    for (const auto* r : {&live, &file}) {
        ASSERT_EQ(r->status().code(), StatusCode::kFailedPrecondition);
        const std::string& m = r->status().message();
        EXPECT_NE(m.find("no caching-allocator operations"), std::string::npos) << m;
        EXPECT_NE(m.find("2 device-memory events are driver-level"), std::string::npos) << m;
        EXPECT_NE(m.find("memory_history"), std::string::npos) << m;
    }
    auto unrecorded = make(cpu_options(""));
    ASSERT_TRUE(unrecorded->start().is_ok());
    put(*unrecorded, memory(EventKind::kBlockAlloc, kBase, kMiB));
    const auto none = unrecorded->whatif();
    EXPECT_EQ(none.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(none.status().message().find("record_path"), std::string::npos);
    ASSERT_TRUE(unrecorded->stop().is_ok());
}

}  // namespace
}  // namespace gpudiag
