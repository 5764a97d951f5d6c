// SPDX-License-Identifier: Apache-2.0
// The streamed Kineto parse (pieces, compact runs, merged replay) against the whole-document
// parse: the same events in the same order, the same string ids, the same source and summary; or,
// for input it cannot verify, no result and nothing interned.
#include "importers/kineto/kineto_stream.hpp"
#include "importers/kineto/parse_thread_budget.hpp"
#include "importers/kineto/trace_buffer.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace gpudiag::detail {
namespace {

namespace fs = std::filesystem;

class Collect final : public EventSink {
public:
    void consume(std::span<const Event> events) override { seen.insert(seen.end(), events.begin(), events.end()); }
    std::vector<Event> seen;
};

struct Whole {
    Status status;
    KinetoParseResult result;
    StringTable strings;
};

void parse_whole(const std::string& text, Whole& w) {
    TraceBuffer b(text.size());
    std::memcpy(b.data(), text.data(), text.size());
    b.resize(text.size());
    w.status = parse_kineto_trace(b, "t", w.strings, w.result);
}

struct Streamed {
    bool ok = false;
    KinetoStreamResult result;
    StringTable strings;
    std::vector<Event> events;
};

void parse_streamed(const std::string& text, Streamed& s, std::size_t piece_bytes, unsigned threads,
                    ParseThreadBudget* budget = nullptr) {
    auto in = memory_stream(text.data(), text.size());
    KinetoStreamOptions options;
    options.piece_bytes = piece_bytes;
    options.max_threads = threads;
    options.thread_budget = budget;
    s.ok = stream_kineto_events(*in, "t", s.strings, options, s.result);
    if (!s.ok) return;
    Collect sink;
    s.result.runs.replay(sink);
    s.events = std::move(sink.seen);
}

void expect_same(const Whole& w, const Streamed& s) {
    ASSERT_TRUE(w.status.is_ok()) << w.status.to_string();
    ASSERT_TRUE(s.ok);
    const auto& a = w.result;
    const auto& b = s.result.parse;
    ASSERT_EQ(a.events.size(), s.events.size());
    for (std::size_t i = 0; i < a.events.size(); ++i) {
        ASSERT_EQ(0, std::memcmp(&a.events[i], &s.events[i], sizeof(Event))) << "event " << i;
    }
    ASSERT_EQ(w.strings.size(), s.strings.size());
    for (std::size_t id = 0; id < w.strings.size(); ++id) {
        ASSERT_EQ(w.strings.lookup(static_cast<StringId>(id)), s.strings.lookup(static_cast<StringId>(id)));
    }
    EXPECT_EQ(a.info.properties, b.info.properties);
    EXPECT_EQ(a.info.devices.size(), b.info.devices.size());
    EXPECT_EQ(a.info.rank, b.info.rank);
    EXPECT_EQ(a.info.world_size, b.info.world_size);
    EXPECT_EQ(a.info.wall_clock_offset_ns, b.info.wall_clock_offset_ns);
    EXPECT_EQ(a.summary.events, b.summary.events);
    EXPECT_EQ(a.summary.dropped, b.summary.dropped);
    EXPECT_EQ(a.summary.truncated, b.summary.truncated);
    EXPECT_EQ(a.summary.notes, b.summary.notes);
    EXPECT_EQ(a.gpu_activities, b.gpu_activities);
    EXPECT_EQ(a.ignored, b.ignored);
    EXPECT_EQ(a.device_vendor, b.device_vendor);
}

// Events of every kind the parser reads, laid out as Kineto writes them (an event per line).
std::string kineto_text(int events, bool bare_array = false, bool tail_array = false) {
    std::string t = bare_array ? "[\n" : R"({"schemaVersion": 1, "distributedInfo": {"rank": 2, "world_size": 4},
  "traceEvents": [
)";
    for (int i = 0; i < events; ++i) {
        if (i > 0) t += ",\n";
        const std::string ts = std::to_string(5000 - (i % 9) * 40 + i * 3);  // out of order
        switch (i % 6) {
            case 0:
                t += R"(  {"ph": "X", "cat": "cpu_op", "name": "aten::op)" + std::to_string(i % 13) +
                     R"(", "pid": 1, "tid": 2, "ts": )" + ts + R"(, "dur": 5, "args": {"Input Dims": [[1, 2]]}})";
                break;
            case 1:
                t += R"(  {"ph": "X", "cat": "kernel", "name": "kernel_)" + std::to_string(i * 31 % 17) +
                     R"(", "pid": 0, "tid": "stream 7", "ts": )" + ts + R"(, "dur": 3, "args": {"device": 0, )"
                     R"("stream": 7, "correlation": )" + std::to_string(i) + R"(, "grid": [2, 1, 1]}})";
                break;
            case 2:
                t += R"(  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": )" +
                     ts + R"(, "dur": 2, "args": {"correlation": )" + std::to_string(i) + "}}";
                break;
            case 3:
                t += R"J(  {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, )J"
                     R"("tid": 7, "ts": )" + ts + R"(, "dur": 4, "args": {"bytes": 4096, "device": 0}})";
                break;
            case 4:
                t += R"(  {"ph": "X", "cat": "odd_)" + std::to_string(i % 11) + R"(", "name": "x", "pid": 1, "tid": 2, "ts": )" +
                     ts + R"(, "dur": 1})";
                break;
            default:
                t += R"(  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#)" + std::to_string(i) +
                     R"(", "pid": 1, "tid": 2, "ts": )" + ts + R"(, "dur": 9})";
                break;
        }
    }
    if (bare_array) return t + "\n]\n";
    t += "\n  ]";
    if (tail_array) t += R"(,
  "deviceProperties": [
    {"id": 0, "name": "GPU A", "totalGlobalMem": 100},
    {"id": 1, "name": "GPU B", "totalGlobalMem": 200}
  ])";
    return t + R"(, "traceName": "t.json", "baseTimeNanoseconds": 1700000000000000000
})";
}

TEST(KinetoStream, ManyPiecesOnAnyThreadCountEqualTheWholeParse) {
    const std::string text = kineto_text(3000);
    Whole w;
    parse_whole(text, w);
    for (unsigned threads : {1u, 2u, 4u}) {
        for (std::size_t piece : {std::size_t{300}, std::size_t{4096}, std::size_t{1} << 20}) {
            ParseThreadBudget budget(3);
            Streamed s;
            parse_streamed(text, s, piece, threads, &budget);
            SCOPED_TRACE(::testing::Message() << threads << " threads, pieces of " << piece);
            expect_same(w, s);
            if (piece == 300) {
                EXPECT_GT(s.result.pieces, 100u);
            }
            EXPECT_EQ(budget.available(), 3u);  // helpers given back
        }
    }
}

TEST(KinetoStream, BareArraysAndArraysAfterTheEventsAreRead) {
    for (bool bare : {true, false}) {
        const std::string text = kineto_text(500, bare, !bare);
        Whole w;
        parse_whole(text, w);
        Streamed s;
        parse_streamed(text, s, 1024, 2);
        expect_same(w, s);
        if (!bare) {
            EXPECT_EQ(s.result.parse.info.devices.size(), 2u);
        }
    }
}

TEST(KinetoStream, NoHelperThreadsLeftStillStreams) {
    ParseThreadBudget empty(0);
    const std::string text = kineto_text(800);
    Whole w;
    parse_whole(text, w);
    Streamed s;
    parse_streamed(text, s, 2048, 4, &empty);
    expect_same(w, s);
}

TEST(KinetoStream, WhatItCannotVerifyItLeavesAloneAndInternsNothing) {
    std::string cut = kineto_text(400);
    cut.resize(cut.size() * 2 / 3);  // a killed writer
    std::string garbage = "{\"traceEvents\": [ {\"ph\": \"X\", \"ts\": 1,, ]}";
    std::string not_a_trace = "[[1, 2], [3, 4]]";
    for (const std::string* text : {&cut, &garbage, &not_a_trace}) {
        Streamed s;
        parse_streamed(*text, s, 512, 2);
        EXPECT_FALSE(s.ok);
        EXPECT_EQ(s.strings.size(), 2u);  // only the two reserved ids
    }
}

TEST(KinetoStream, CutsInsideStringsOfOneLineFilesAreCaught) {
    // json.dumps writes a trace on one line; names holding "}, {" offer cuts inside strings.
    std::string text = R"({"traceEvents": [)";
    for (int i = 0; i < 400; ++i) {
        if (i > 0) text += ", ";
        text += R"({"ph": "X", "cat": "cpu_op", "name": "a}, {b)" + std::to_string(i % 5) +
                R"(", "pid": 1, "tid": 1, "ts": )" + std::to_string(100 + i) + R"(, "dur": 1})";
    }
    text += "]}";
    Whole w;
    parse_whole(text, w);
    Streamed s;
    parse_streamed(text, s, 700, 2);
    if (s.ok) {
        expect_same(w, s);
    } else {
        EXPECT_EQ(s.strings.size(), 2u);
    }
}

TEST(KinetoStream, CorpusTracesStreamExactly) {
    const fs::path dir = fs::path(GPUDIAG_CORPUS_DIR) / "kineto_traces";
    if (!fs::is_directory(dir)) GTEST_SKIP() << "corpus not found at " << dir;
    int streamed = 0;
    for (const auto& entry : fs::directory_iterator(dir)) {
        const std::string path = entry.path().string();
        if (path.find("memory_timeline") != std::string::npos || path.find(".tar") != std::string::npos) continue;
        bool truncated = false;
        auto buffer = load_trace_file(path, &truncated, nullptr);
        ASSERT_TRUE(buffer.is_ok()) << path;
        const std::string text(buffer->view());
        Whole w;
        parse_whole(text, w);
        Streamed s;
        parse_streamed(text, s, std::size_t{1} << 20, 2);
        SCOPED_TRACE(path);
        expect_same(w, s);
        ++streamed;
    }
    EXPECT_GE(streamed, 20);
}

}  // namespace
}  // namespace gpudiag::detail
