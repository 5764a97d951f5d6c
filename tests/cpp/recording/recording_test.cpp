// SPDX-License-Identifier: Apache-2.0
#include <gpudiag/analyze.hpp>
#include <gpudiag/recording.hpp>

#include "recording/file_layout.hpp"
#include "recording_test_support.hpp"

#include <gtest/gtest.h>

namespace gpudiag {
namespace {

using namespace testing_support;

TEST(Recording, RoundTripKeepsEverything) {
    TempDir dir("roundtrip");
    const std::string path = dir.file("run.gpudiag");
    StringTable strings;
    const SourceInfo info = sample_source();
    SourceSummary summary;
    summary.events = 5000;
    summary.dropped = 17;
    summary.notes = {"17 events dropped by a full channel", "second note"};

    // GIVEN a writer fed like a sink, with strings interned between batches
    RecordingWriterOptions options;
    options.chunk_bytes = 64 << 10;  // 1024 events per chunk: several chunks
    RecordingWriter writer(options);
    ASSERT_TRUE(writer.open(path).is_ok());
    writer.begin(info, strings);
    std::vector<Event> all;
    for (int batch = 0; batch < 10; ++batch) {
        std::vector<Event> events = sample_events(strings, 500);
        for (auto& e : events) e.start_ns += static_cast<std::uint64_t>(batch) * 100000;
        writer.consume(events);
        all.insert(all.end(), events.begin(), events.end());
    }
    writer.end(summary);
    ASSERT_TRUE(writer.close().is_ok()) << writer.status().to_string();
    EXPECT_EQ(writer.events_written(), all.size());
    EXPECT_EQ(writer.events_dropped(), 0u);

    // WHEN it is read back into a fresh table
    StringTable read_strings;
    CollectingSink sink;
    ASSERT_TRUE(read_recording(path, sink, read_strings).is_ok());

    // THEN events, strings, source info and summary are identical
    EXPECT_EQ(sink.begins, 1);
    EXPECT_EQ(sink.ends, 1);
    EXPECT_GE(sink.batches, 5);
    ASSERT_EQ(sink.events.size(), all.size());
    for (std::size_t i = 0; i < all.size(); ++i) {
        ASSERT_TRUE(same_bytes(sink.events[i], all[i])) << "event " << i;
    }
    ASSERT_EQ(read_strings.size(), strings.size());
    for (StringId id = 0; id < strings.size(); ++id) {
        EXPECT_EQ(read_strings.lookup(id), strings.lookup(id)) << "string " << id;
    }
    const SourceInfo& got = sink.source;
    EXPECT_EQ(got.producer, info.producer);
    EXPECT_EQ(got.description, info.description);
    EXPECT_EQ(got.simulated, info.simulated);
    EXPECT_EQ(got.rank, info.rank);
    EXPECT_EQ(got.world_size, info.world_size);
    EXPECT_EQ(got.pid, info.pid);
    EXPECT_EQ(got.hostname, info.hostname);
    EXPECT_EQ(got.wall_clock_offset_ns, info.wall_clock_offset_ns);
    ASSERT_EQ(got.devices.size(), 2u);
    EXPECT_EQ(got.devices[1].ordinal, 1);
    EXPECT_EQ(got.devices[1].name, "NVIDIA H200 MIG 3g.71gb");
    EXPECT_EQ(got.devices[1].total_memory_bytes, 150'000'000'000ull);
    EXPECT_EQ(got.devices[1].uuid, "MIG-def");
    EXPECT_EQ(got.devices[1].pci_bus_id, "00000000:2a:00.0");
    EXPECT_EQ(got.devices[1].parent_uuid, "GPU-parent");
    EXPECT_EQ(got.devices[1].gpu_instance, 2);
    EXPECT_EQ(got.devices[1].compute_instance, 1);
    EXPECT_EQ(got.devices[0].gpu_instance, -1);
    EXPECT_EQ(got.properties, info.properties);
    EXPECT_EQ(sink.summary.events, all.size());
    EXPECT_EQ(sink.summary.dropped, 17u);
    EXPECT_FALSE(sink.summary.truncated);
    EXPECT_EQ(sink.summary.notes, summary.notes);
}

// The devices' PCI bus ids and MIG placement follow the fields that readers before them know, so
// a recording written without them (gpudiag 0.1) still reads, with those fields unknown.
TEST(Recording, SourceInfoWithoutDeviceExtrasStillReads) {
    const SourceInfo info = sample_source();
    std::string bytes;
    detail::record::encode_source_info(info, bytes);
    std::size_t extras = 0;
    for (const DeviceInfo& d : info.devices)
        extras += 4 + d.pci_bus_id.size() + 4 + d.parent_uuid.size() + 8;
    ASSERT_GT(bytes.size(), extras);
    const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
    SourceInfo old;
    ASSERT_TRUE(detail::record::decode_source_info(data, bytes.size() - extras, old));
    ASSERT_EQ(old.devices.size(), 2u);
    EXPECT_EQ(old.devices[1].uuid, "MIG-def");
    EXPECT_EQ(old.devices[1].pci_bus_id, "");
    EXPECT_EQ(old.devices[1].gpu_instance, -1);
    EXPECT_EQ(old.properties, info.properties);
    SourceInfo cut;  // cut inside the extras: damage, said as such
    EXPECT_FALSE(detail::record::decode_source_info(data, bytes.size() - 3, cut));
}

TEST(Recording, InfoFromIndexMatchesContent) {
    TempDir dir("info");
    const std::string path = dir.file("run.gpudiag");
    StringTable strings;
    const std::vector<Event> events = sample_events(strings, 3000);
    SourceSummary summary;
    summary.events = events.size();
    RecordingWriterOptions options;
    options.chunk_bytes = 64 << 10;
    ASSERT_TRUE(write_recording(path, sample_source(), strings, events, summary, options).is_ok());

    auto info = read_recording_info(path);
    ASSERT_TRUE(info.is_ok()) << info.status().to_string();
    EXPECT_EQ(info->format_version, kRecordingFormatVersion);
    EXPECT_EQ(info->writer_version, "0.1.0");
    EXPECT_TRUE(info->closed_cleanly);
    EXPECT_FALSE(info->truncated);
    EXPECT_EQ(info->events, 3000u);
    EXPECT_EQ(info->source.hostname, "node-17");
    EXPECT_EQ(info->summary.events, 3000u);
    EXPECT_EQ(info->first_ns, events.front().start_ns);
    EXPECT_EQ(info->last_ns, events.back().end_ns);
    EXPECT_EQ(info->file_bytes, std::filesystem::file_size(path));
    // source info + strings + 3 events chunks + summary at least
    EXPECT_GE(info->chunks, 6u);
}

TEST(Recording, ReaderRemapsIdsWhenTheTableIsAlreadyInUse) {
    TempDir dir("remap");
    const std::string path = dir.file("run.gpudiag");
    StringTable strings;
    const std::vector<Event> events = sample_events(strings, 200);
    ASSERT_TRUE(write_recording(path, sample_source(), strings, events, {}).is_ok());

    // GIVEN a table whose ids already mean other things
    StringTable busy;
    for (int i = 0; i < 50; ++i) busy.intern("unrelated " + std::to_string(i));
    CollectingSink sink;
    ASSERT_TRUE(read_recording(path, sink, busy).is_ok());
    ASSERT_EQ(sink.events.size(), events.size());
    // THEN every name still resolves to the text the writer meant
    for (std::size_t i = 0; i < events.size(); ++i) {
        const Event& want = events[i];
        const Event& got = sink.events[i];
        switch (want.kind) {
            case EventKind::kKernel:
                EXPECT_EQ(busy.lookup(got.kernel.name), strings.lookup(want.kernel.name));
                break;
            case EventKind::kBlockAlloc:
                EXPECT_EQ(busy.lookup(got.memory.site), strings.lookup(want.memory.site));
                break;
            case EventKind::kRange:
                EXPECT_EQ(busy.lookup(got.range.name), strings.lookup(want.range.name));
                break;
            case EventKind::kApiCall:
                EXPECT_EQ(busy.lookup(got.api.name), strings.lookup(want.api.name));
                break;
            default: break;
        }
    }
}

TEST(Recording, EmptyRecordingIsValid) {
    TempDir dir("empty_rec");
    const std::string path = dir.file("none.gpudiag");
    StringTable strings;
    ASSERT_TRUE(write_recording(path, sample_source(), strings, {}, {}).is_ok());
    CollectingSink sink;
    StringTable read_strings;
    ASSERT_TRUE(read_recording(path, sink, read_strings).is_ok());
    EXPECT_EQ(sink.begins, 1);
    EXPECT_EQ(sink.ends, 1);
    EXPECT_TRUE(sink.events.empty());
    EXPECT_FALSE(sink.summary.truncated);
    auto info = read_recording_info(path);
    ASSERT_TRUE(info.is_ok());
    EXPECT_EQ(info->events, 0u);
    EXPECT_TRUE(info->closed_cleanly);
}

TEST(Recording, AnalyzeFilesReadsRecordings) {
    TempDir dir("analyze");
    const std::string path = dir.file("run.bin");  // detected by content, not extension
    StringTable strings;
    const std::vector<Event> events = sample_events(strings, 1000);
    SourceSummary summary;
    summary.events = events.size();
    ASSERT_TRUE(write_recording(path, sample_source(), strings, events, summary).is_ok());
    EXPECT_EQ(*detect_format(path), InputFormat::kRecording);
    auto report = analyze_files({path});
    ASSERT_TRUE(report.is_ok()) << report.status().to_string();
    EXPECT_EQ(report->capture.events, 1000u);
    EXPECT_FALSE(report->capture.truncated);
    EXPECT_EQ(report->source.hostname, "node-17");
    EXPECT_TRUE(report->source.simulated);
}

TEST(Recording, AnalyzeFilesReportsATruncatedRecording) {
    TempDir dir("analyze_cut");
    const std::string path = dir.file("run.gpudiag");
    StringTable strings;
    const std::vector<Event> events = sample_events(strings, 3000);
    RecordingWriterOptions options;
    options.chunk_bytes = 64 << 10;
    ASSERT_TRUE(write_recording(path, sample_source(), strings, events, {}, options).is_ok());
    std::string bytes = read_file(path);
    bytes.resize(bytes.size() * 2 / 3);
    write_file(path, bytes);
    auto report = analyze_files({path});
    ASSERT_TRUE(report.is_ok()) << report.status().to_string();
    EXPECT_TRUE(report->capture.truncated);
    EXPECT_GT(report->capture.events, 0u);
    EXPECT_LT(report->capture.events, 3000u);
}

TEST(RecordingWriter, ErrorsAreStatusesNotCrashes) {
    TempDir dir("writer_errors");
    RecordingWriter writer;
    EXPECT_EQ(writer.open("/nonexistent-dir/x.gpudiag").code(), StatusCode::kNotFound);
    EXPECT_EQ(writer.close().code(), StatusCode::kFailedPrecondition);

    RecordingWriter early;
    ASSERT_TRUE(early.open(dir.file("a.gpudiag")).is_ok());
    EXPECT_EQ(early.open(dir.file("b.gpudiag")).code(), StatusCode::kFailedPrecondition);
    Event e;
    early.consume(std::span<const Event>(&e, 1));  // before begin()
    EXPECT_EQ(early.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(early.events_dropped(), 1u);
    EXPECT_EQ(early.close().code(), StatusCode::kFailedPrecondition);
    // The file is still a readable (empty) recording.
    auto info = read_recording_info(dir.file("a.gpudiag"));
    ASSERT_TRUE(info.is_ok()) << info.status().to_string();
    EXPECT_TRUE(info->closed_cleanly);
}

TEST(RecordingWriter, DiskFullIsAnIoError) {
    if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full on this system";
    RecordingWriter writer;
    const Status s = writer.open("/dev/full");
    EXPECT_EQ(s.code(), StatusCode::kIoError);
    EXPECT_NE(s.message().find("No space"), std::string::npos) << s.message();
}

TEST(RecordingWriter, FlushMakesEventsDurableAndCloseIsIdempotentlyReported) {
    TempDir dir("flush");
    const std::string path = dir.file("live.gpudiag");
    StringTable strings;
    RecordingWriter writer;
    ASSERT_TRUE(writer.open(path).is_ok());
    writer.begin(sample_source(), strings);
    const std::vector<Event> events = sample_events(strings, 10);
    writer.consume(events);
    ASSERT_TRUE(writer.flush().is_ok());

    // A reader looking at the unfinished file sees the flushed events, marked truncated.
    CollectingSink sink;
    StringTable read_strings;
    ASSERT_TRUE(read_recording(path, sink, read_strings).is_ok());
    EXPECT_EQ(sink.events.size(), 10u);
    EXPECT_TRUE(sink.summary.truncated);
    EXPECT_EQ(read_strings.lookup(sink.events[0].kernel.name), "kernel_name_0");

    EXPECT_TRUE(writer.close().is_ok());
    EXPECT_EQ(writer.close().code(), StatusCode::kFailedPrecondition);  // already closed
    auto info = read_recording_info(path);
    ASSERT_TRUE(info.is_ok());
    EXPECT_TRUE(info->closed_cleanly);
    EXPECT_FALSE(info->truncated);
    EXPECT_EQ(info->events, 10u);
    ASSERT_FALSE(info->summary.notes.empty());  // closed without end(): says so
}

TEST(RecordingWriter, IndexStaysBoundedAndCorrectOverManyChunks) {
    TempDir dir("index");
    const std::string path = dir.file("many.gpudiag");
    StringTable strings;
    RecordingWriter writer;
    ASSERT_TRUE(writer.open(path).is_ok());
    writer.begin(sample_source(), strings);
    // More chunks than the index has entries (16384): forces pairwise merging.
    constexpr std::uint64_t kChunks = 40000;
    Event e;
    e.kind = EventKind::kCounter;
    for (std::uint64_t i = 0; i < kChunks; ++i) {
        e.start_ns = 100 + i;
        e.end_ns = 100 + i;
        writer.consume(std::span<const Event>(&e, 1));
        ASSERT_TRUE(writer.flush().is_ok());
    }
    writer.end({});
    ASSERT_TRUE(writer.close().is_ok());

    auto info = read_recording_info(path);
    ASSERT_TRUE(info.is_ok());
    EXPECT_TRUE(info->closed_cleanly);
    EXPECT_EQ(info->events, kChunks);
    EXPECT_EQ(info->first_ns, 100u);
    EXPECT_EQ(info->last_ns, 100 + kChunks - 1);
    // The index is at most 16384 entries of 40 bytes.
    const auto chunks = list_chunks(read_file(path));
    ASSERT_FALSE(chunks.empty());
    EXPECT_EQ(chunks.back().header.type,
              static_cast<std::uint16_t>(detail::record::ChunkType::kIndex));
    EXPECT_LE(chunks.back().header.payload_bytes, 40u + 16384u * 40u);

    CollectingSink sink;
    StringTable read_strings;
    ASSERT_TRUE(read_recording(path, sink, read_strings).is_ok());
    EXPECT_EQ(sink.events.size(), kChunks);
}

TEST(RecordingReader, ProgressIsReported) {
    TempDir dir("progress");
    const std::string path = dir.file("p.gpudiag");
    StringTable strings;
    const std::vector<Event> events = sample_events(strings, 3000);
    RecordingWriterOptions options;
    options.chunk_bytes = 64 << 10;
    ASSERT_TRUE(write_recording(path, sample_source(), strings, events, {}, options).is_ok());
    RecordingReader reader;
    ASSERT_TRUE(reader.open(path).is_ok());
    std::uint64_t calls = 0;
    std::uint64_t last = 0;
    std::uint64_t total = 0;
    reader.set_progress([&](std::uint64_t done, std::uint64_t all) {
        ++calls;
        EXPECT_GE(done, last);
        last = done;
        total = all;
    });
    CollectingSink sink;
    StringTable read_strings;
    ASSERT_TRUE(reader.read(sink, read_strings).is_ok());
    EXPECT_GE(calls, 3u);
    EXPECT_EQ(total, std::filesystem::file_size(path));
    EXPECT_EQ(reader.last_summary().events, 3000u);
}

}  // namespace
}  // namespace gpudiag
