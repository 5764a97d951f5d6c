// SPDX-License-Identifier: Apache-2.0
// Recordings that are cut short, damaged, or not recordings at all.
#include <gpudiag/recording.hpp>

#include "recording_test_support.hpp"

#include <gtest/gtest.h>

namespace gpudiag {
namespace {

using namespace testing_support;
using detail::record::ChunkType;
using detail::record::kChunkHeaderBytes;

// A small recording of `chunks` events chunks of 10 events each (plus strings chunks).
std::string small_recording(const TempDir& dir, std::vector<Event>& events, int chunks = 8) {
    const std::string path = dir.file("small.gpudiag");
    StringTable strings;
    RecordingWriter writer;
    EXPECT_TRUE(writer.open(path).is_ok());
    writer.begin(sample_source(), strings);
    events.clear();
    for (int c = 0; c < chunks; ++c) {
        std::vector<Event> batch = sample_events(strings, 10);
        for (auto& e : batch) e.start_ns += static_cast<std::uint64_t>(c) * 1000;
        writer.consume(batch);
        EXPECT_TRUE(writer.flush().is_ok());
        events.insert(events.end(), batch.begin(), batch.end());
    }
    SourceSummary summary;
    summary.events = events.size();
    writer.end(summary);
    EXPECT_TRUE(writer.close().is_ok());
    return read_file(path);
}

TEST(RecordingDamage, TruncationAtEveryByteYieldsAPrefix) {
    TempDir dir("truncate");
    std::vector<Event> events;
    const std::string bytes = small_recording(dir, events);
    ASSERT_GT(bytes.size(), 2000u);

    std::size_t previous = 0;
    for (std::size_t len = 0; len <= bytes.size(); ++len) {
        RecordingReader reader;
        const Status opened = reader.open_buffer(bytes.data(), len);
        if (len < detail::record::kFileHeaderBytes) {
            ASSERT_EQ(opened.code(), StatusCode::kCorruptData) << "length " << len;
            ASSERT_FALSE(opened.message().empty());
            continue;
        }
        ASSERT_TRUE(opened.is_ok()) << "length " << len << ": " << opened.to_string();
        CollectingSink sink;
        StringTable strings;
        ASSERT_TRUE(reader.read(sink, strings).is_ok()) << "length " << len;
        ASSERT_EQ(sink.ends, 1);
        // A prefix of what was written, never anything else, growing with the length.
        ASSERT_LE(sink.events.size(), events.size());
        for (std::size_t i = 0; i < sink.events.size(); ++i) {
            ASSERT_TRUE(same_bytes(sink.events[i], events[i]))
                << "length " << len << " event " << i;
        }
        ASSERT_GE(sink.events.size(), previous) << "length " << len;
        previous = sink.events.size();
        const bool complete = len == bytes.size();
        ASSERT_EQ(sink.summary.truncated, !complete) << "length " << len;
        if (!complete) {
            ASSERT_FALSE(sink.summary.missing.empty());
            bool says_so = false;
            for (const auto& note : sink.summary.missing) {
                says_so = says_so || note.find("cut short") != std::string::npos ||
                          note.find("without its closing index") != std::string::npos;
            }
            ASSERT_TRUE(says_so) << "length " << len;
        }
        auto info = reader.info();
        ASSERT_TRUE(info.is_ok());
        ASSERT_EQ(info->truncated, !complete) << "length " << len;
        ASSERT_EQ(info->closed_cleanly, complete);
        ASSERT_GE(info->events, sink.events.size());  // headers-only walk: same or more
    }
    EXPECT_EQ(previous, events.size());
}

TEST(RecordingDamage, TruncatedFileOnDiskReadsItsCompleteChunks) {
    TempDir dir("truncate_file");
    std::vector<Event> events;
    std::string bytes = small_recording(dir, events);
    const auto chunks = list_chunks(bytes);
    // Cut in the middle of the fourth events chunk.
    int seen = 0;
    std::uint64_t cut = 0;
    for (const auto& c : chunks) {
        if (c.header.type == static_cast<std::uint16_t>(ChunkType::kEvents) && ++seen == 4) {
            cut = c.offset + kChunkHeaderBytes + 100;
        }
    }
    ASSERT_GT(cut, 0u);
    bytes.resize(cut);
    const std::string path = dir.file("cut.gpudiag");
    write_file(path, bytes);
    CollectingSink sink;
    StringTable strings;
    ASSERT_TRUE(read_recording(path, sink, strings).is_ok());
    EXPECT_EQ(sink.events.size(), 30u);
    EXPECT_TRUE(sink.summary.truncated);
    EXPECT_EQ(sink.summary.damaged, 10u);  // the partial chunk's events: lost to the cut
    EXPECT_EQ(sink.summary.dropped, 0u);   // not to the capture
    auto info = read_recording_info(path);
    ASSERT_TRUE(info.is_ok());
    EXPECT_TRUE(info->truncated);
    EXPECT_FALSE(info->closed_cleanly);
    EXPECT_EQ(info->events, 30u);
    EXPECT_EQ(info->source.producer, "gpudiag-capture");
}

TEST(RecordingDamage, FlippedPayloadByteSkipsThatChunkOnly) {
    TempDir dir("flip_payload");
    std::vector<Event> events;
    std::string bytes = small_recording(dir, events);
    const auto chunks = list_chunks(bytes);
    std::uint64_t victim = 0;
    int seen = 0;
    for (const auto& c : chunks) {
        if (c.header.type == static_cast<std::uint16_t>(ChunkType::kEvents) && ++seen == 3) {
            victim = c.offset;
        }
    }
    ASSERT_GT(victim, 0u);
    bytes[victim + kChunkHeaderBytes + 77] ^= 0x40;

    RecordingReader reader;
    ASSERT_TRUE(reader.open_buffer(bytes.data(), bytes.size()).is_ok());
    CollectingSink sink;
    StringTable strings;
    ASSERT_TRUE(reader.read(sink, strings).is_ok());
    // The third chunk (events 20..29) is gone; everything else is intact and in order.
    ASSERT_EQ(sink.events.size(), events.size() - 10);
    for (std::size_t i = 0; i < sink.events.size(); ++i) {
        const std::size_t want = i < 20 ? i : i + 10;
        ASSERT_TRUE(same_bytes(sink.events[i], events[want])) << i;
    }
    EXPECT_FALSE(sink.summary.truncated);
    EXPECT_EQ(sink.summary.damaged, 10u);
    EXPECT_EQ(sink.summary.dropped, 0u);
    bool named = false;
    for (const auto& note : sink.summary.missing) {
        named = named || (note.find("CRC") != std::string::npos &&
                          note.find("byte " + std::to_string(victim)) != std::string::npos);
    }
    EXPECT_TRUE(named) << "a note should name the damaged chunk's offset";
}

TEST(RecordingDamage, FlippedHeaderByteResynchronises) {
    TempDir dir("flip_header");
    std::vector<Event> events;
    std::string bytes = small_recording(dir, events);
    const auto chunks = list_chunks(bytes);
    std::uint64_t victim = 0;
    int seen = 0;
    for (const auto& c : chunks) {
        if (c.header.type == static_cast<std::uint16_t>(ChunkType::kEvents) && ++seen == 5) {
            victim = c.offset;
        }
    }
    ASSERT_GT(victim, 0u);
    bytes[victim + 9] ^= 0x01;  // payload length: header CRC now fails

    RecordingReader reader;
    ASSERT_TRUE(reader.open_buffer(bytes.data(), bytes.size()).is_ok());
    CollectingSink sink;
    StringTable strings;
    ASSERT_TRUE(reader.read(sink, strings).is_ok());
    ASSERT_EQ(sink.events.size(), events.size() - 10);
    for (std::size_t i = 0; i < sink.events.size(); ++i) {
        const std::size_t want = i < 40 ? i : i + 10;
        ASSERT_TRUE(same_bytes(sink.events[i], events[want])) << i;
    }
    EXPECT_FALSE(sink.summary.truncated);  // the trailer was still found
    bool damaged = false;
    bool lost = false;
    for (const auto& note : sink.summary.missing) {
        damaged = damaged || note.find("bytes " + std::to_string(victim)) != std::string::npos;
        lost = lost || note.find("1 chunk(s)") != std::string::npos;
    }
    EXPECT_TRUE(damaged);
    EXPECT_TRUE(lost);
}

TEST(RecordingDamage, DamagedSourceInfoStillDeliversEvents) {
    TempDir dir("flip_source");
    std::vector<Event> events;
    std::string bytes = small_recording(dir, events);
    const auto chunks = list_chunks(bytes);
    ASSERT_EQ(chunks.front().header.type, static_cast<std::uint16_t>(ChunkType::kSourceInfo));
    bytes[chunks.front().offset + kChunkHeaderBytes + 3] ^= 0x10;
    RecordingReader reader;
    ASSERT_TRUE(reader.open_buffer(bytes.data(), bytes.size()).is_ok());
    CollectingSink sink;
    StringTable strings;
    ASSERT_TRUE(reader.read(sink, strings).is_ok());
    EXPECT_EQ(sink.begins, 1);
    EXPECT_EQ(sink.source.producer, "unknown");
    EXPECT_EQ(sink.events.size(), events.size());
}

TEST(RecordingDamage, GarbageAndEmptyInputsGiveClearErrors) {
    TempDir dir("garbage");
    RecordingReader reader;
    EXPECT_EQ(reader.open(dir.file("missing.gpudiag")).code(), StatusCode::kNotFound);

    write_file(dir.file("empty"), "");
    Status s = reader.open(dir.file("empty"));
    EXPECT_EQ(s.code(), StatusCode::kCorruptData);
    EXPECT_NE(s.message().find("empty"), std::string::npos);

    write_file(dir.file("text"), "hello, this is not a recording at all");
    s = reader.open(dir.file("text"));
    EXPECT_EQ(s.code(), StatusCode::kCorruptData);
    EXPECT_NE(s.message().find("not a gpudiag recording"), std::string::npos);

    std::string damaged_header("GPUDIAG\0", 8);
    for (int i = 0; i < 500; ++i) damaged_header.push_back(static_cast<char>(i * 37 + 11));
    write_file(dir.file("bad_header"), damaged_header);
    s = reader.open(dir.file("bad_header"));
    EXPECT_EQ(s.code(), StatusCode::kCorruptData);
    EXPECT_NE(s.message().find("header"), std::string::npos);

    EXPECT_EQ(reader.open(dir.file("")).code(), StatusCode::kIoError);  // a directory

    // Reading before a successful open is a precondition error, not a crash.
    CollectingSink sink;
    StringTable strings;
    EXPECT_EQ(reader.read(sink, strings).code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(reader.info().status().code(), StatusCode::kFailedPrecondition);
}

TEST(RecordingDamage, ValidHeaderThenGarbageIsTruncatedWithNoEvents) {
    TempDir dir("header_garbage");
    std::vector<Event> events;
    std::string bytes = small_recording(dir, events);
    bytes.resize(detail::record::kFileHeaderBytes);
    for (int i = 0; i < 4000; ++i) bytes.push_back(static_cast<char>((i * 131) ^ 0x5a));
    RecordingReader reader;
    ASSERT_TRUE(reader.open_buffer(bytes.data(), bytes.size()).is_ok());
    CollectingSink sink;
    StringTable strings;
    ASSERT_TRUE(reader.read(sink, strings).is_ok());
    EXPECT_TRUE(sink.events.empty());
    EXPECT_TRUE(sink.summary.truncated);
    EXPECT_EQ(sink.ends, 1);
}

TEST(RecordingDamage, NewerFormatVersionIsUnsupported) {
    std::vector<unsigned char> head(detail::record::kFileHeaderBytes);
    detail::record::FileHeader h;
    h.version = kRecordingFormatVersion + 1;
    h.writer_version = (9u << 16) | (2u << 8) | 1u;
    detail::record::encode_file_header(h, head.data());
    RecordingReader reader;
    const Status s = reader.open_buffer(head.data(), head.size());
    EXPECT_EQ(s.code(), StatusCode::kUnsupported);
    EXPECT_NE(s.message().find("9.2.1"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("upgrade"), std::string::npos);
}

TEST(RecordingDamage, OversizedChunkLengthIsRejectedWithoutAllocating) {
    // A header with a valid CRC that claims a 1 GiB payload.
    std::string bytes(detail::record::kFileHeaderBytes, '\0');
    detail::record::FileHeader fh;
    fh.version = kRecordingFormatVersion;
    detail::record::encode_file_header(fh, reinterpret_cast<unsigned char*>(bytes.data()));
    detail::record::ChunkHeader ch;
    ch.type = static_cast<std::uint16_t>(ChunkType::kEvents);
    ch.payload_bytes = 1u << 30;
    unsigned char hb[kChunkHeaderBytes];
    detail::record::encode_chunk_header(ch, hb);
    bytes.append(reinterpret_cast<const char*>(hb), sizeof hb);
    bytes.append(1000, 'x');
    RecordingReader reader;
    ASSERT_TRUE(reader.open_buffer(bytes.data(), bytes.size()).is_ok());
    CollectingSink sink;
    StringTable strings;
    ASSERT_TRUE(reader.read(sink, strings).is_ok());
    EXPECT_TRUE(sink.events.empty());
    EXPECT_TRUE(sink.summary.truncated);
    bool mentions_limit = false;
    for (const auto& note : sink.summary.missing) {
        mentions_limit = mentions_limit || note.find("64 MiB") != std::string::npos;
    }
    EXPECT_TRUE(mentions_limit);
}

}  // namespace
}  // namespace gpudiag
