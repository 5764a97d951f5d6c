// SPDX-License-Identifier: Apache-2.0
// The Kineto parser's multi-threaded path: splits forced on small inputs (the size threshold set to
// zero) must give exactly what the single-threaded parse gives, events, string ids and all, or
// fall back to it when a candidate cut is not at an event boundary or a slice is malformed.
#include "importers/kineto/kineto_parser.hpp"
#include "importers/kineto/parse_thread_budget.hpp"
#include "importers/kineto/trace_buffer.hpp"
#include "importers/kineto/trace_split.hpp"

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

TraceBuffer buffer_of(const std::string& text) {
    TraceBuffer b(text.size());
    std::memcpy(b.data(), text.data(), text.size());
    b.resize(text.size());
    return b;
}

struct Parsed {
    Status status;
    KinetoParseResult result;
    std::unique_ptr<StringTable> strings = std::make_unique<StringTable>();
};

Parsed parse(const TraceBuffer& buffer, unsigned threads, std::size_t piece_bytes = 0,
             ParseThreadBudget* budget = nullptr) {
    Parsed p;
    KinetoParseOptions options;
    options.thread_budget = budget;
    options.split_min_bytes = threads > 1 ? 0 : options.split_min_bytes;
    options.max_threads = threads;
    if (piece_bytes > 0) options.piece_bytes = piece_bytes;
    p.status = parse_kineto_events(buffer, "t", *p.strings, p.result, options);
    return p;
}

// Everything a consumer can observe must match the serial parse.
void expect_same(const Parsed& serial, const Parsed& split) {
    ASSERT_EQ(serial.status.code(), split.status.code()) << split.status.message();
    EXPECT_EQ(serial.status.message(), split.status.message());
    const auto& a = serial.result;
    const auto& b = split.result;
    ASSERT_EQ(a.events.size(), b.events.size());
    for (std::size_t i = 0; i < a.events.size(); ++i) {
        ASSERT_EQ(0, std::memcmp(&a.events[i], &b.events[i], sizeof(Event))) << "event " << i;
    }
    ASSERT_EQ(serial.strings->size(), split.strings->size());
    for (std::size_t id = 0; id < serial.strings->size(); ++id) {
        ASSERT_EQ(serial.strings->lookup(static_cast<StringId>(id)),
                  split.strings->lookup(static_cast<StringId>(id)))
            << "string id " << id;
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

// A trace of every kind of event the parser reads, with names that repeat and names first seen late
// (so slices intern in different orders), and eleven unknown categories (the note lists eight).
std::string synthetic_trace(int events) {
    std::string t = R"({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "Tesla V100", )"
                    R"("totalGlobalMem": 34089730048}], "distributedInfo": {"rank": 3, )"
                    R"("world_size": 8, "backend": "nccl"},
  "traceEvents": [
)";
    for (int i = 0; i < events; ++i) {
        if (i > 0) t += ",\n";
        std::string ts = std::to_string(1000 + i * 7);
        switch (i % 7) {
            case 0:
                if (i % 21 == 0) {
                    // Layer calls, half at batch 4 x 8 then half at 2 x 8: the tie goes to the
                    // shape seen first, so slices must merge their counts in file order.
                    t += R"(  {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, )"
                         R"("tid": 2, "ts": )" +
                         ts + R"(, "dur": 5, "args": {"Input Dims": [[)" +
                         (i < events / 2 ? "4" : "2") + R"(, 8, 16], [32, 16], [32]]}})";
                    break;
                }
                t += R"(  {"ph": "X", "cat": "cpu_op", "name": "aten::op)" +
                     std::to_string(i % 13) + R"(", "pid": 1, "tid": 2, "ts": )" + ts +
                     R"(, "dur": 5, "args": {"Input Dims": [[1, 2]], )"
                     R"("stack": [{"a": 1}, {"b": "}, {"}]}})";
                break;
            case 1:
                t += R"(  {"ph": "X", "cat": "kernel", "name": "kernel_)" +
                     std::to_string(i * 31 % 17) + R"(", "pid": 0, "tid": "stream 7", "ts": )" +
                     ts +
                     R"(.5, "dur": 3, "args": {"device": 0, )"
                     R"("stream": 7, "correlation": )" +
                     std::to_string(i) + R"(, "grid": [2, 1, 1], "block": [128, 1, 1]}})";
                break;
            case 2:
                t +=
                    R"(  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": )" +
                    ts + R"(, "dur": 2, "args": {"correlation": )" + std::to_string(i) +
                    R"(, "cbid": 211}})";
                break;
            case 3:
                t +=
                    R"J(  {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, )J"
                    R"("tid": 7, "ts": )" +
                    ts + R"(, "dur": 4, "args": {"bytes": 4096, "device": 0}})";
                break;
            case 4:
                t += R"(  {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 2, "ts": )" +
                     ts +
                     R"(, "args": {"Device Type": 1, "Device Id": 0, "Addr": 1234, "Bytes": 512, )"
                     R"("Total Allocated": 512, "Total Reserved": 2048}})";
                break;
            case 5:
                t += R"(  {"ph": "X", "cat": "odd_cat_)" + std::to_string(i % 11) +
                     R"(", "name": "x", "pid": 1, )"
                     R"("tid": 2, "ts": )" +
                     ts + R"(, "dur": 1})";
                break;
            default:
                t += R"(  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#)" +
                     std::to_string(i) + R"(", "pid": 1, "tid": 2, "ts": )" + ts +
                     R"(, "dur": 9, "args": {"External id": 4}})";
                break;
        }
    }
    t += R"(
  ],
  "traceName": "x.json", "displayTimeUnit": "ms", "baseTimeNanoseconds": 1700000000000000000
})";
    return t;
}

// The scan is done in blocks of 64 bytes: a bad byte is found wherever it falls, in a block, on
// either side of a block's edge or in the tail; tab, line feed and carriage return are JSON.
TEST(KinetoSplitTest, NonJsonBytesAreFoundAtTheirOffset) {
    std::string text(64 * 3 + 17, ' ');
    for (std::size_t i = 0; i < text.size(); i += 5) text[i] = "\n\r\t{"[i % 4];
    EXPECT_EQ(find_non_json_byte(text), std::string_view::npos);
    EXPECT_EQ(find_non_json_byte(""), std::string_view::npos);
    for (std::size_t at : {std::size_t{0}, std::size_t{63}, std::size_t{64}, std::size_t{65},
                           std::size_t{191}, std::size_t{192}, text.size() - 1}) {
        for (char bad : {'\0', '\x01', '\x1f', '\x0b'}) {
            std::string damaged = text;
            damaged[at] = bad;
            if (at + 1 < damaged.size()) damaged.back() = '\x02';  // only the first counts
            EXPECT_EQ(find_non_json_byte(damaged), at) << "at " << at;
        }
    }
    EXPECT_EQ(find_non_json_byte(std::string_view("ab\x7f\xff\x20", 5)), std::string_view::npos);
}

TEST(KinetoSplitTest, FindsCutsAtEventBoundaries) {
    std::string text = synthetic_trace(40);
    TraceSplit split;
    ASSERT_TRUE(find_trace_split(text, 3, split));
    EXPECT_EQ(text[split.array_open], '[');
    EXPECT_EQ(text[split.array_close], ']');
    ASSERT_GE(split.slices.size(), 2u);
    EXPECT_EQ(split.slices.front().begin, split.array_open + 1);
    EXPECT_EQ(split.slices.back().end, split.array_close);
    for (std::size_t k = 1; k < split.slices.size(); ++k) {
        EXPECT_EQ(text[split.slices[k - 1].end], ',');
        EXPECT_EQ(split.slices[k].begin, split.slices[k - 1].end + 1);
    }
    EXPECT_FALSE(find_trace_split(R"({"traceEvents": []})", 2, split));
    EXPECT_FALSE(find_trace_split(R"([{"ph": "X"}, {"ph": "X"}])", 2, split));
    EXPECT_FALSE(find_trace_split(text, 1, split));
}

TEST(KinetoSplitTest, SplitParseEqualsSerialParse) {
    TraceBuffer buffer = buffer_of(synthetic_trace(700));
    Parsed serial = parse(buffer, 1);
    ASSERT_TRUE(serial.status.is_ok());
    EXPECT_EQ(serial.result.slices, 1u);
    EXPECT_EQ(serial.result.info.property("input_shapes"), "4x8");
    for (unsigned threads : {2u, 3u, 4u}) {
        SCOPED_TRACE(threads);
        Parsed split = parse(buffer, threads);
        // The stack args hold "}, {" and ", {" in strings and nested arrays: cuts may land there
        // and be refused, but the synthetic trace has plenty of real boundaries too.
        expect_same(serial, split);
        EXPECT_GT(split.result.slices, 1u);
        // Many small pieces per thread, through each thread's one reused buffer.
        Parsed pieces = parse(buffer, threads, 2048);
        expect_same(serial, pieces);
        EXPECT_EQ(pieces.result.slices, threads);
    }
}

TEST(KinetoSplitTest, HelperThreadsComeFromABudget) {
    TraceBuffer buffer = buffer_of(synthetic_trace(700));
    Parsed serial = parse(buffer, 1);
    ASSERT_TRUE(serial.status.is_ok());

    ParseThreadBudget budget(3);
    {
        // Another parse holds two helpers: this one gets the last, so two threads, not four.
        ParseThreadBudget::Lease other(budget, 2);
        ASSERT_EQ(other.granted(), 2u);
        Parsed shared = parse(buffer, 4, 0, &budget);
        expect_same(serial, shared);
        EXPECT_EQ(shared.result.slices, 2u);
        EXPECT_EQ(budget.available(), 1u) << "the parse gave its helper back";
        {
            ParseThreadBudget::Lease rest(budget, 5);
            EXPECT_EQ(rest.granted(), 1u);
            Parsed alone = parse(buffer, 4, 0, &budget);  // none left: runs on its own thread
            expect_same(serial, alone);
            EXPECT_EQ(alone.result.slices, 1u);
        }
    }
    EXPECT_EQ(budget.available(), 3u);
    Parsed full = parse(buffer, 4, 0, &budget);
    expect_same(serial, full);
    EXPECT_EQ(full.result.slices, 4u);
}

TEST(KinetoSplitTest, CutInsideNestedArgsFallsBackOrStaysExact) {
    // The middle of the array lies inside the first event's args, whose nested list holds the
    // only "}, {" before the end: the cut lands there, the first slice is left open, and the whole
    // document is parsed on one thread.
    std::string pad(400, 'p');
    std::string text =
        R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 1, )"
        R"("ts": 10, "dur": 2, "args": {"pad": ")" +
        pad +
        R"(", "list": [{"a": 1},
{"b": 2}]}},)"
        R"({"ph": "X", "cat": "kernel", "name": "k2", "pid": 0, "tid": 1, "ts": 12, "dur": 1}]})";
    TraceBuffer buffer = buffer_of(text);
    TraceSplit split;
    ASSERT_TRUE(find_trace_split(text, 2, split));
    ASSERT_LT(split.slices[0].end, text.rfind("{\"ph\""));  // the cut really is inside args
    Parsed serial = parse(buffer, 1);
    Parsed parallel = parse(buffer, 2);
    expect_same(serial, parallel);
    EXPECT_EQ(parallel.result.slices, 1u);
    EXPECT_EQ(parallel.result.events.size(), 2u);
}

TEST(KinetoSplitTest, CutInsideStringFallsBack) {
    std::string pad(400, 'p');
    std::string text =
        R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": ")" + pad +
        R"(},
{x", "pid": 0, "tid": 1, "ts": 10, "dur": 2},)"
        R"({"ph": "X", "cat": "kernel", "name": "k2", "pid": 0, "tid": 1, "ts": 12, "dur": 1}]})";
    TraceBuffer buffer = buffer_of(text);
    Parsed serial = parse(buffer, 1);
    Parsed parallel = parse(buffer, 2);
    expect_same(serial, parallel);
    EXPECT_EQ(parallel.result.slices, 1u);
}

TEST(KinetoSplitTest, MalformedSliceFallsBackToSerialRecovery) {
    std::string text = synthetic_trace(300);
    // Damage an event in the second half: the serial parse keeps what precedes the damage.
    std::size_t at = text.find("\"cat\": \"gpu_memcpy\"", text.size() * 3 / 4);
    ASSERT_NE(at, std::string::npos);
    text.replace(at, 5, "\"cat\" ,, ");
    TraceBuffer buffer = buffer_of(text);
    Parsed serial = parse(buffer, 1);
    ASSERT_TRUE(serial.status.is_ok());
    EXPECT_TRUE(serial.result.summary.truncated);
    for (unsigned threads : {2u, 4u}) {
        Parsed parallel = parse(buffer, threads);
        expect_same(serial, parallel);
        EXPECT_EQ(parallel.result.slices, 1u);
    }
}

TEST(KinetoSplitTest, OddDocumentsMatchSerial) {
    const std::string events =
        R"({"ph": "X", "cat": "kernel", "name": "a", "pid": 0, "tid": 1, "ts": 1, "dur": 1},
 {"ph": "X", "cat": "kernel", "name": "b", "pid": 0, "tid": 1, "ts": 2, "dur": 1},
 {"ph": "X", "cat": "kernel", "name": "c", "pid": 0, "tid": 1, "ts": 3, "dur": 1})";
    const std::vector<std::string> docs = {
        "[" + events + "]",                                                          // bare array
        R"({"traceEvents": [)" + events + R"(], "traceEvents": [)" + events + "]}",  // key twice
        R"({"x": {"traceEvents": [)" + events + R"(]}, "traceEvents": [)" + events +
            "]}",                                                    // nested first
        R"({"traceEvents": [)" + events + R"(], "extra": [1, 2]})",  // array after
        R"({"traceEvents": [)" + events + R"(] )",                   // cut off
        R"({"traceEvents": [)" + events + R"(]} trailing)",
        R"({"traceEvents": [)" + events + R"(, ]})",  // trailing comma
        R"({"traceEvents": [)" + events + R"(, [1]]})",
        R"({"traceEvents": [)" + events + R"(}, {"ph": "X"}]})",  // extra closer
    };
    for (const std::string& doc : docs) {
        SCOPED_TRACE(doc);
        TraceBuffer buffer = buffer_of(doc);
        Parsed serial = parse(buffer, 1);
        for (unsigned threads : {2u, 3u}) expect_same(serial, parse(buffer, threads));
    }
}

TEST(KinetoSplitTest, CorpusTracesSplitExactly) {
    const fs::path dir = fs::path(GPUDIAG_CORPUS_DIR) / "kineto_traces";
    if (!fs::is_directory(dir)) GTEST_SKIP() << "corpus not found at " << dir;
    int files = 0;
    for (const auto& entry : fs::directory_iterator(dir)) {
        const std::string path = entry.path().string();
        if (path.find(".json") == std::string::npos) continue;
        SCOPED_TRACE(path);
        bool truncated = false;
        auto buffer = load_trace_file(path, &truncated, {});
        ASSERT_TRUE(buffer.is_ok()) << buffer.status().message();
        Parsed serial = parse(*buffer, 1);
        for (unsigned threads : {2u, 4u}) {
            Parsed parallel = parse(*buffer, threads);
            expect_same(serial, parallel);
            if (serial.status.is_ok() && !serial.result.summary.truncated &&
                buffer->size() > (1u << 20)) {
                EXPECT_GT(parallel.result.slices, 1u);  // large, well-formed traces do split
            }
        }
        expect_same(serial, parse(*buffer, 2, 64 << 10));  // many cuts, all checked
        ++files;
    }
    EXPECT_GT(files, 10);
}

}  // namespace
}  // namespace gpudiag::detail
