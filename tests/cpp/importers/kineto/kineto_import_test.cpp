// SPDX-License-Identifier: Apache-2.0
// The Kineto importer on small hand-written traces: both category vocabularies, exact ns
// timestamps, gzip (one and several members), cut-off and garbage input.
#include "importers/kineto/json_number.hpp"
#include "importers/kineto/kineto_parser.hpp"
#include "importers/kineto/trace_buffer.hpp"

#include <gpudiag/analyze.hpp>

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace gpudiag {
namespace {

namespace fs = std::filesystem;

class TempDir {
public:
    TempDir() {
        char tmpl[] = "/tmp/gpudiag_kineto_XXXXXX";
        const char* made = mkdtemp(tmpl);
        path_ = made != nullptr ? made : "/tmp";
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path_, ec);
    }
    std::string file(const std::string& name, const std::string& content) const {
        std::string p = path_ + "/" + name;
        std::ofstream(p, std::ios::binary) << content;
        return p;
    }
    std::string gzip(const std::string& name, const std::vector<std::string>& members) const {
        std::string p = path_ + "/" + name;
        std::FILE* out = std::fopen(p.c_str(), "wb");
        for (const auto& m : members) {  // each gzopen/gzclose pair writes one gzip member
            std::string tmp = p + ".part";
            gzFile g = gzopen(tmp.c_str(), "wb");
            gzwrite(g, m.data(), static_cast<unsigned>(m.size()));
            gzclose(g);
            std::ifstream in(tmp, std::ios::binary);
            std::string bytes((std::istreambuf_iterator<char>(in)), {});
            std::fwrite(bytes.data(), 1, bytes.size(), out);
        }
        std::fclose(out);
        return p;
    }

private:
    std::string path_;
};

// A 2021-style trace (capitalised categories, string tids, integer µs).
const char* kOldTrace = R"JSON({
  "schemaVersion": 1,
  "deviceProperties": [{"id": 0, "name": "Tesla V100-DGXS-32GB", "totalGlobalMem": 34089730048}],
  "traceEvents": [
    {"ph": "X", "cat": "Operator", "name": "ProfilerStep#3", "pid": 7, "tid": "7", "ts": 1000, "dur": 5000},
    {"ph": "X", "cat": "Operator", "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "pid": 7, "tid": "7", "ts": 1000, "dur": 2000},
    {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 7, "tid": "7", "ts": 3000, "dur": 10, "args": {"cbid": 211, "correlation": 42}},
    {"ph": "X", "cat": "Kernel", "name": "volta_sgemm_128x64_nn", "pid": 0, "tid": "stream 7", "ts": 3020, "dur": 500,
     "args": {"device": 0, "stream": 7, "correlation": 42, "registers per thread": 128, "shared memory": 16384, "grid": [3136, 1, 1], "block": [128, 1, 1]}},
    {"ph": "X", "cat": "Memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": "stream 7", "ts": 2500, "dur": 400,
     "args": {"device": 0, "stream": 7, "correlation": 41, "bytes": 1048576}},
    {"ph": "i", "s": "t", "name": "[memory]", "pid": 7, "tid": 7, "ts": 3100, "args": {"Device Type": 1, "Device Id": 0, "Bytes": 4096}},
    {"ph": "s", "id": 42, "pid": 7, "tid": 7, "ts": 3000, "cat": "async", "name": "launch"},
    {"name": "process_name", "ph": "M", "ts": 1000, "pid": 7, "tid": 0, "args": {"name": "python"}}
  ]
})JSON";

// Today's trace: lower-case categories, numeric tids, fractional µs, distributedInfo after events.
const char* kNewTrace = R"JSON({
  "schemaVersion": 1,
  "traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#7", "pid": 9, "tid": 9, "ts": 1712195495519689.0, "dur": 63.813},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 9, "ts": 1712195495519695.8, "dur": 4.25, "args": {"correlation": 5, "cbid": 211}},
    {"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float", "pid": 1, "tid": 20, "ts": 1712195495519700.123, "dur": 20.5,
     "args": {"device": 1, "stream": 20, "correlation": 5}},
    {"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": 1, "tid": 20, "ts": 1712195495519721, "dur": 1, "args": {"cuda_sync_kind": "Stream Sync", "stream": 20, "device": 1}},
    {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 9, "tid": 9, "ts": 1712195495519690,
     "args": {"Device Type": 1, "Device Id": 1, "Addr": 139926520725504, "Bytes": -512, "Total Allocated": 4096, "Total Reserved": 2097152}},
    {"ph": "X", "cat": "python_function", "name": "train.py(10): step", "pid": 9, "tid": 9, "ts": 1712195495519689, "dur": 1}
  ],
  "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 8},
  "baseTimeNanoseconds": 1700000000000000000
})JSON";

Status parse(const std::string& text, detail::KinetoParseResult& out, StringTable& strings) {
    detail::TraceBuffer buffer(text.size());
    std::memcpy(buffer.data(), text.data(), text.size());
    buffer.resize(text.size());
    return detail::parse_kineto_trace(buffer, "test", strings, out);
}

const Event* find_kind(const detail::KinetoParseResult& r, EventKind kind) {
    for (const auto& e : r.events) {
        if (e.kind == kind) return &e;
    }
    return nullptr;
}

TEST(JsonNumber, MicrosecondsConvertExactlyToNanoseconds) {
    std::int64_t ns = 0;
    ASSERT_TRUE(detail::parse_microseconds_as_ns("1712195495519695.8", ns));
    EXPECT_EQ(ns, 1712195495519695800);  // 17 digits: beyond a double's precision
    ASSERT_TRUE(detail::parse_microseconds_as_ns("63.813", ns));
    EXPECT_EQ(ns, 63813);
    ASSERT_TRUE(detail::parse_microseconds_as_ns("1.00051", ns));
    EXPECT_EQ(ns, 1001);  // rounded to the nearest ns
    ASSERT_TRUE(detail::parse_microseconds_as_ns("1623142623460111", ns));
    EXPECT_EQ(ns, 1623142623460111000);
    ASSERT_TRUE(detail::parse_microseconds_as_ns("1.5e3", ns));
    EXPECT_EQ(ns, 1500000);
    EXPECT_FALSE(detail::parse_microseconds_as_ns("abc", ns));
    EXPECT_FALSE(detail::parse_microseconds_as_ns("1.", ns));
    EXPECT_FALSE(detail::parse_microseconds_as_ns("99999999999999999999", ns));
}

TEST(JsonNumber, EightDigitChunksMatchDigitByDigitReading) {
    // Runs of 8 digits are read in one step: every split of a digit run, and a non-digit inside
    // a chunk, must give what reading one digit at a time gives.
    std::int64_t ns = 0;
    ASSERT_TRUE(detail::parse_microseconds_as_ns("12345678", ns));
    EXPECT_EQ(ns, 12345678000);
    ASSERT_TRUE(detail::parse_microseconds_as_ns("900000000000000.0009", ns));  // 15 + fraction
    EXPECT_EQ(ns, 900000000000000001);
    EXPECT_FALSE(detail::parse_microseconds_as_ns("1234567x90123456", ns));
    EXPECT_FALSE(detail::parse_microseconds_as_ns("123456789012345678", ns));  // 18 digits
    std::int64_t v = 0;
    ASSERT_TRUE(detail::parse_integer_token("-1234567890123456789", v));
    EXPECT_EQ(v, -1234567890123456789);
    ASSERT_TRUE(detail::parse_integer_token("9223372036854775799", v));
    EXPECT_EQ(v, 9223372036854775799);
    EXPECT_FALSE(detail::parse_integer_token("9223372036854775807", v));  // the old digit test
    EXPECT_FALSE(detail::parse_integer_token("12345678901234567890", v));
    EXPECT_FALSE(detail::parse_integer_token("1234:678", v));
}

TEST(KinetoParser, ReadsThe2021Vocabulary) {
    StringTable strings;
    detail::KinetoParseResult r;
    ASSERT_TRUE(parse(kOldTrace, r, strings).is_ok());
    const Event* k = find_kind(r, EventKind::kKernel);
    ASSERT_NE(k, nullptr);
    EXPECT_EQ(strings.lookup(k->kernel.name), "volta_sgemm_128x64_nn");
    EXPECT_EQ(k->start_ns, 3020000u);
    EXPECT_EQ(k->end_ns, 3520000u);
    EXPECT_EQ(k->stream, 7u);
    EXPECT_EQ(k->kernel.correlation, 42u);
    EXPECT_EQ(k->kernel.grid_size, 3136u);
    EXPECT_EQ(k->kernel.block_size, 128u);
    const Event* c = find_kind(r, EventKind::kMemcpy);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->copy.direction, CopyDirection::kHostToDevice);
    EXPECT_EQ(c->copy.src_kind, MemoryKind::kPageable);
    EXPECT_EQ(c->copy.dst_kind, MemoryKind::kDevice);
    EXPECT_EQ(c->copy.bytes, 1048576u);
    const Event* a = find_kind(r, EventKind::kApiCall);
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->api.correlation, 42u);
    EXPECT_EQ(a->thread, 7u);
    int steps = 0, inputs = 0;
    for (const auto& e : r.events) {
        if (e.kind == EventKind::kRange && e.range.category == RangeCategory::kStep) {
            ++steps;
            EXPECT_EQ(e.range.id, 3u);
        }
        if (e.kind == EventKind::kRange && e.range.category == RangeCategory::kInputWait) ++inputs;
    }
    EXPECT_EQ(steps, 1);
    EXPECT_EQ(inputs, 1);
    ASSERT_NE(find_kind(r, EventKind::kBlockAlloc), nullptr);
    ASSERT_EQ(r.info.devices.size(), 1u);
    EXPECT_EQ(r.info.devices[0].name, "Tesla V100-DGXS-32GB");
    // Sorted by start time for the sinks.
    for (std::size_t i = 1; i < r.events.size(); ++i) {
        EXPECT_LE(r.events[i - 1].start_ns, r.events[i].start_ns);
    }
}

TEST(KinetoParser, ReadsTodaysVocabularyAndNanosecondTimestamps) {
    StringTable strings;
    detail::KinetoParseResult r;
    ASSERT_TRUE(parse(kNewTrace, r, strings).is_ok());
    const Event* k = find_kind(r, EventKind::kKernel);
    ASSERT_NE(k, nullptr);
    EXPECT_EQ(k->start_ns, 1712195495519700123u);
    EXPECT_EQ(k->end_ns, 1712195495519720623u);
    EXPECT_EQ(k->device, 1);
    EXPECT_EQ(k->stream, 20u);
    const Event* s = find_kind(r, EventKind::kSync);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->sync.sync_kind, SyncKind::kStream);
    EXPECT_EQ(r.info.rank, 3);
    EXPECT_EQ(r.info.world_size, 8);
    EXPECT_EQ(r.info.wall_clock_offset_ns, 1700000000000000000);
    bool allocated = false, reserved = false;
    for (const auto& e : r.events) {
        if (e.kind != EventKind::kCounter) continue;
        if (e.counter.counter == CounterKind::kFrameworkAllocatedBytes)
            allocated = e.counter.value == 4096;
        if (e.counter.counter == CounterKind::kFrameworkReservedBytes)
            reserved = e.counter.value == 2097152;
    }
    EXPECT_TRUE(allocated);
    EXPECT_TRUE(reserved);
    const Event* free_event = find_kind(r, EventKind::kBlockFree);
    ASSERT_NE(free_event, nullptr);
    EXPECT_EQ(free_event->memory.bytes, 512u);
    EXPECT_EQ(free_event->memory.address, 139926520725504u);
    EXPECT_EQ(r.ignored, 1u);  // the python_function event
}

TEST(KinetoImport, ReadsGzipWithSeveralMembers) {
    TempDir dir;
    std::string text = kOldTrace;
    std::string path = dir.gzip("multi.json.gz", {text.substr(0, 100), text.substr(100)});
    auto report = analyze_files({path});
    ASSERT_TRUE(report.is_ok()) << report.status().to_string();
    EXPECT_FALSE(report->capture.truncated);
    const Section* s = report->section("timeline");
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->figure("gpu_activities")->value, 2);
}

TEST(KinetoImport, CutOffTraceKeepsTheEventsBeforeTheCut) {
    TempDir dir;
    std::string text = kOldTrace;
    std::string cut = text.substr(0, text.find("\"ph\": \"i\"") + 20);  // inside the [memory] event
    for (const auto& path : {dir.file("cut.json", cut), dir.gzip("cut.json.gz", {cut})}) {
        auto report = analyze_files({path});
        ASSERT_TRUE(report.is_ok()) << report.status().to_string();
        EXPECT_TRUE(report->capture.truncated);
        EXPECT_EQ(report->section("timeline")->figure("gpu_activities")->value, 2);
    }
    // A gzip file cut in its compressed stream.
    std::string whole = dir.gzip("whole.json.gz", {text});
    std::ifstream in(whole, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    std::string half = dir.file("half.json.gz", bytes.substr(0, bytes.size() * 3 / 4));
    auto report = analyze_files({half});
    if (report.is_ok()) {
        EXPECT_TRUE(report->capture.truncated);
    } else {
        EXPECT_EQ(report.status().code(), StatusCode::kCorruptData);
        EXPECT_NE(report.status().message().find("cut short"), std::string::npos);
    }
}

// A second "traceEvents" array before an unreadable byte: the stream cannot verify the layout,
// so the file is read whole, every event of both arrays kept and the trace called whole.
TEST(KinetoImport, ASecondEventArrayBeforeAnUnreadableByteIsReadWhole) {
    TempDir dir;
    const std::string op =
        R"({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2, "ts": )";
    const std::string text = "{\"traceEvents\": [\n" + op + "0, \"dur\": 5},\n" + op +
                             "8, \"dur\": 5}],\n \"traceEvents\": [\n  " + op +
                             "20, \"dur\": 5}],\n \"y\": 2}\x01";
    auto report = analyze_files({dir.file("two_arrays.json", text)});
    ASSERT_TRUE(report.is_ok()) << report.status().to_string();
    EXPECT_FALSE(report->capture.truncated);
    EXPECT_TRUE(report->capture.missing.empty());
    EXPECT_EQ(report->capture.events, 3u);
}

TEST(KinetoImport, GarbageAndNonTracesGetClearErrors) {
    TempDir dir;
    struct Case {
        std::string name;
        std::string content;
        StatusCode code;
        std::string words;
    } cases[] = {
        {"garbage.json", "{\"traceEvents\": [ \x01\x02 ###", StatusCode::kCorruptData,
         "0x01, which JSON text cannot hold"},
        {"bad.json", "{\"traceEvents\": [ {\"ph\": ### ]}", StatusCode::kCorruptData,
         "malformed JSON"},
        {"object.json", "{\"a\": 1}", StatusCode::kCorruptData, "no \"traceEvents\""},
        {"timeline.json", "[[1, 0, 5, 1], [2, 1, 5, 1]]", StatusCode::kUnsupported,
         "memory-timeline"},
        {"binary.bin", std::string("\x00\x01\x02\x03", 4), StatusCode::kUnsupported,
         "not a format"},
        {"empty.json", "", StatusCode::kCorruptData, "empty"},
    };
    for (const auto& c : cases) {
        auto r = analyze_files({dir.file(c.name, c.content)});
        ASSERT_FALSE(r.is_ok()) << c.name;
        EXPECT_EQ(r.status().code(), c.code) << c.name << ": " << r.status().to_string();
        EXPECT_NE(r.status().message().find(c.words), std::string::npos) << r.status().message();
    }
    std::string gz_garbage =
        dir.file("bad.json.gz", std::string("\x1f\x8b\x08\x00garbagegarbagegarbage", 25));
    auto r = analyze_files({gz_garbage});
    EXPECT_FALSE(r.is_ok());
}

TEST(KinetoImport, EmptyEventListIsAnEmptyReport) {
    TempDir dir;
    auto r = analyze_files({dir.file("empty_events.json", "{\"traceEvents\": []}")});
    // Nothing was delivered: the pipeline reports an empty but valid analysis (with no timeline
    // figures, which would be zeros never measured) or a clear error.
    if (r.is_ok()) {
        EXPECT_EQ(r->section("timeline"), nullptr);
    } else {
        EXPECT_FALSE(r.status().message().empty());
    }
}

}  // namespace
}  // namespace gpudiag
