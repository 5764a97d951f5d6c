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
    void consume(std::span<const Event> events) override {
        seen.insert(seen.end(), events.begin(), events.end());
    }
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
        ASSERT_EQ(w.strings.lookup(static_cast<StringId>(id)),
                  s.strings.lookup(static_cast<StringId>(id)));
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
    std::string t = bare_array
                        ? "[\n"
                        : R"({"schemaVersion": 1, "distributedInfo": {"rank": 2, "world_size": 4},
  "traceEvents": [
)";
    for (int i = 0; i < events; ++i) {
        if (i > 0) t += ",\n";
        const std::string ts = std::to_string(5000 - (i % 9) * 40 + i * 3);  // out of order
        switch (i % 6) {
            case 0:
                t += R"(  {"ph": "X", "cat": "cpu_op", "name": "aten::op)" +
                     std::to_string(i % 13) + R"(", "pid": 1, "tid": 2, "ts": )" + ts +
                     R"(, "dur": 5, "args": {"Input Dims": [[1, 2]]}})";
                break;
            case 1:
                t += R"(  {"ph": "X", "cat": "kernel", "name": "kernel_)" +
                     std::to_string(i * 31 % 17) + R"(", "pid": 0, "tid": "stream 7", "ts": )" +
                     ts +
                     R"(, "dur": 3, "args": {"device": 0, )"
                     R"("stream": 7, "correlation": )" +
                     std::to_string(i) + R"(, "grid": [2, 1, 1]}})";
                break;
            case 2:
                t +=
                    R"(  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": )" +
                    ts + R"(, "dur": 2, "args": {"correlation": )" + std::to_string(i) + "}}";
                break;
            case 3:
                t +=
                    R"J(  {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, )J"
                    R"("tid": 7, "ts": )" +
                    ts + R"(, "dur": 4, "args": {"bytes": 4096, "device": 0}})";
                break;
            case 4:
                t += R"(  {"ph": "X", "cat": "odd_)" + std::to_string(i % 11) +
                     R"(", "name": "x", "pid": 1, "tid": 2, "ts": )" + ts + R"(, "dur": 1})";
                break;
            default:
                t += R"(  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#)" +
                     std::to_string(i) + R"(", "pid": 1, "tid": 2, "ts": )" + ts + R"(, "dur": 9})";
                break;
        }
    }
    if (bare_array) return t + "\n]\n";
    t += "\n  ]";
    if (tail_array)
        t += R"(,
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

// A ByteStream that hands out the text in small reads and never all at once (as files are read).
class PiecemealStream final : public ByteStream {
public:
    explicit PiecemealStream(std::string text, bool truncated = false)
        : text_(std::move(text)), truncated_(truncated) {}
    Result<std::size_t> read(char* dst, std::size_t n) override {
        const std::size_t take = std::min({n, std::size_t{777}, text_.size() - pos_});
        std::memcpy(dst, text_.data() + pos_, take);
        pos_ += take;
        return take;
    }
    [[nodiscard]] std::uint64_t consumed() const noexcept override { return pos_; }
    [[nodiscard]] std::uint64_t total() const noexcept override { return text_.size(); }
    [[nodiscard]] bool truncated() const noexcept override {
        return truncated_ && pos_ == text_.size();
    }

private:
    std::string text_;
    std::size_t pos_ = 0;
    bool truncated_;
};

StreamOutcome stream_piecemeal(const std::string& text, KinetoStreamResult& out,
                               bool truncated = false,
                               std::size_t max_held = std::size_t{64} << 20) {
    PiecemealStream in(text, truncated);
    KinetoStreamOptions options;
    options.piece_bytes = 1024;
    options.max_threads = 2;
    options.max_held_bytes = max_held;
    return stream_kineto_trace(in, "t", options, out);
}

TEST(KinetoStream, BlankLinesAndTrailingSpacesBetweenEventsAreCuts) {
    // "}, \n\n  {": whitespace around line breaks between events (it once hung the cut search).
    std::string text = R"({"traceEvents": [)";
    for (int i = 0; i < 300; ++i) {
        if (i > 0) text += i % 2 ? ", \n\n  " : ",\n \t\n";
        text += R"({"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": )" +
                std::to_string(100 + i) + R"(, "dur": 1})";
    }
    text += "]}";
    Whole w;
    parse_whole(text, w);
    Streamed s;
    parse_streamed(text, s, 300, 2);
    expect_same(w, s);
    KinetoStreamResult r;
    EXPECT_EQ(stream_piecemeal(text, r), StreamOutcome::kRead);
}

TEST(KinetoStream, InputCutShortKeepsTheEventsBeforeTheCut) {
    const std::string text = kineto_text(2000);
    Whole w;
    parse_whole(text, w);
    // A gzip stream that ends early: the events before the cut, said to be partial.
    const std::string cut = text.substr(0, text.size() / 2);
    KinetoStreamResult r;
    ASSERT_EQ(stream_piecemeal(cut, r, true), StreamOutcome::kPartial) << r.why;
    EXPECT_TRUE(r.parse.summary.truncated);
    ASSERT_EQ(r.parse.summary.missing.size(), 1u);
    EXPECT_NE(r.parse.summary.missing[0].find("gzip stream ends early"), std::string::npos);
    // As many as the whole-document parse recovers from the same text.
    Whole w_cut;
    parse_whole(cut, w_cut);
    ASSERT_TRUE(w_cut.result.summary.truncated);
    EXPECT_EQ(r.runs.events(), w_cut.result.events.size());
    EXPECT_GT(r.runs.events(), w.result.events.size() / 3);
    EXPECT_EQ(r.parse.info.rank, 2);  // what came before the array is read
    // The same text from a plain file: the array never closes.
    KinetoStreamResult plain;
    ASSERT_EQ(stream_piecemeal(cut, plain), StreamOutcome::kUnclosed) << plain.why;
    EXPECT_EQ(plain.runs.events(), r.runs.events());
    // Nothing reaches the caller's strings until published, and then the names the events use.
    StringTable strings;
    publish_stream_names(r, strings);
    Collect sink;
    r.runs.replay(sink);
    for (const Event& e : sink.seen) {
        if (e.kind == EventKind::kKernel) {
            EXPECT_EQ(strings.lookup(e.kernel.name).substr(0, 7), "kernel_");
        }
    }
}

TEST(KinetoStream, BytesJsonCannotHoldEndTheReading) {
    const std::string text = kineto_text(600);
    std::string zeroed = text.substr(0, text.size() / 3) + std::string(100000, '\0');
    for (bool piecemeal : {true, false}) {
        KinetoStreamResult r;
        StreamOutcome outcome;
        if (piecemeal) {
            outcome = stream_piecemeal(zeroed, r);
        } else {
            auto in = memory_stream(zeroed.data(), zeroed.size());
            KinetoStreamOptions options;
            options.piece_bytes = 1024;
            outcome = stream_kineto_trace(*in, "t", options, r);
        }
        ASSERT_EQ(outcome, StreamOutcome::kPartial) << r.why;
        ASSERT_FALSE(r.parse.summary.missing.empty());
        EXPECT_NE(r.parse.summary.missing[0].find("byte " + std::to_string(text.size() / 3) +
                                                  " of the trace's text is 0x00"),
                  std::string::npos)
            << r.parse.summary.missing[0];
        EXPECT_GT(r.runs.events(), 150u);
        // The whole-document parse stops at the same byte and keeps the same events.
        Whole w;
        parse_whole(zeroed, w);
        ASSERT_TRUE(w.status.is_ok()) << w.status.message();
        EXPECT_TRUE(w.result.summary.truncated);
        ASSERT_FALSE(w.result.summary.missing.empty());
        EXPECT_EQ(w.result.summary.missing[0].substr(0, 60),
                  r.parse.summary.missing[0].substr(0, 60));
        EXPECT_EQ(w.result.events.size(), r.runs.events());
    }
    // Zeros after the trace's end are nobody's loss: the trace is whole, for both parses.
    KinetoStreamResult after;
    const std::string zeros_after = text + std::string(5000, '\0');
    EXPECT_EQ(stream_piecemeal(zeros_after, after), StreamOutcome::kRead) << after.why;
    Whole w;
    parse_whole(zeros_after, w);
    ASSERT_TRUE(w.status.is_ok()) << w.status.message();
    EXPECT_FALSE(w.result.summary.truncated);
    EXPECT_EQ(after.runs.events(), w.result.events.size());
    EXPECT_EQ(after.parse.summary.notes, w.result.summary.notes);
}

// Found by kineto_stream_fuzz: a control byte inside an event the on-demand parse does not use
// (here one with no timestamp). The whole parse used to skip over it and call the trace whole
// while the stream stopped there; both now stop at the byte and keep the event before it.
TEST(KinetoStream, ControlByteInsideAnEventStopsBothParsesAlike) {
    const std::string text =
        "[{\"ph\": \"X\", \"cat\": \"Operator\", \"name\": \"aten::conv2d\", \"pid\": 1, "
        "\"tid\": 1, \"ts\": 10, \"dur\": 20},\n"
        " {\"ph\": \"X\", \"cat\": \"Runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": \x1d], "
        "\"name\": \"k\", \"pid\": 0}]\n";
    KinetoStreamResult r;
    ASSERT_EQ(stream_piecemeal(text, r), StreamOutcome::kPartial) << r.why;
    Whole w;
    parse_whole(text, w);
    ASSERT_TRUE(w.status.is_ok()) << w.status.message();
    EXPECT_TRUE(w.result.summary.truncated);
    ASSERT_EQ(w.result.summary.missing.size(), 1u);
    EXPECT_NE(w.result.summary.missing[0].find("is 0x1d, which JSON text cannot hold"),
              std::string::npos)
        << w.result.summary.missing[0];
    EXPECT_EQ(w.result.events.size(), 1u);
    EXPECT_EQ(r.runs.events(), 1u);
}

// Found by kineto_stream_fuzz: a trace with a second "traceEvents" array, then a byte JSON text
// cannot hold. The whole parse reads both arrays and calls the trace whole; the stream cannot
// verify that layout, so it must not claim the input lost what followed (kPartial) but leave the
// verdict to the whole parse (kUnclosed: read whole when small).
TEST(KinetoStream, AnUnverifiedCloseBeforeAnUnreadableByteIsNotCalledTheInputsLoss) {
    const std::string op =
        R"({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2, "ts": )";
    const std::string text = "{\"traceEvents\": [\n" + op + "0, \"dur\": 5},\n" + op +
                             "8, \"dur\": 5}],\n \"traceEvents\": [\n  " + op +
                             "20, \"dur\": 5}],\n \"y\": 2}\x01";
    Whole w;
    parse_whole(text, w);
    ASSERT_TRUE(w.status.is_ok()) << w.status.message();
    EXPECT_FALSE(w.result.summary.truncated);
    EXPECT_EQ(w.result.events.size(), 3u);
    KinetoStreamResult r;
    EXPECT_EQ(stream_piecemeal(text, r), StreamOutcome::kUnclosed) << r.why;
    EXPECT_LE(r.runs.events(), w.result.events.size());
    // The text cut before its event array closed is still the input's loss.
    KinetoStreamResult cut;
    EXPECT_EQ(stream_piecemeal(text.substr(0, text.find("8, ")) + "\x01", cut),
              StreamOutcome::kPartial)
        << cut.why;
}

TEST(KinetoStream, WhitespaceIsSqueezedAndBoundlessTextRefused) {
    // Megabytes of whitespace between two events stay out of memory.
    const std::string event =
        R"({"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": 5, "dur": 1})";
    const std::string spaced =
        R"({"traceEvents": [)" + event + "," + std::string(8u << 20, ' ') + "\n" + event + "]}";
    KinetoStreamResult r;
    ASSERT_EQ(stream_piecemeal(spaced, r, false, 1u << 20), StreamOutcome::kRead) << r.why;
    EXPECT_EQ(r.runs.events(), 2u);
    // No boundary between two events within the hold limit: refused, whatever follows.
    const std::string nested = R"({"traceEvents": [)" + std::string(3u << 20, '[');
    KinetoStreamResult n;
    ASSERT_EQ(stream_piecemeal(nested, n, false, 1u << 20), StreamOutcome::kRefused);
    EXPECT_EQ(n.refusal.code(), StatusCode::kCorruptData);
    EXPECT_NE(n.refusal.message().find("no boundary between two events"), std::string::npos);
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
        if (path.find("memory_timeline") != std::string::npos ||
            path.find(".tar") != std::string::npos)
            continue;
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
