// SPDX-License-Identifier: Apache-2.0
// ChromeTraceWriter: synthetic events in, a Chrome trace out, parsed back with simdjson.
#include "api/chrome_trace_writer.hpp"

#include <gpudiag/chrome_trace.hpp>

#include <gtest/gtest.h>
#include <simdjson.h>

#include <cstdio>
#include <string>

namespace gpudiag::detail {
namespace {

std::string write_trace(const std::vector<Event>& events, StringTable& strings) {
    std::FILE* f = std::tmpfile();
    EXPECT_NE(f, nullptr);
    ChromeTraceWriter writer(f);
    writer.begin(SourceInfo{}, strings);
    writer.consume(events);
    writer.end(SourceSummary{});
    EXPECT_TRUE(writer.finish());
    std::string text;
    std::rewind(f);
    char buf[4096];
    std::size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
    std::fclose(f);
    return text;
}

Event kernel(StringId name, std::uint64_t start, std::uint64_t end, std::uint32_t stream) {
    Event e;
    e.kind = EventKind::kKernel;
    e.device = 0;
    e.stream = stream;
    e.start_ns = start;
    e.end_ns = end;
    e.kernel.name = name;
    return e;
}

Event block(EventKind kind, std::uint64_t t, std::uint64_t address, std::uint64_t bytes) {
    Event e;
    e.kind = kind;
    e.device = 0;
    e.start_ns = e.end_ns = t;
    e.memory.address = address;
    e.memory.bytes = bytes;
    return e;
}

TEST(ChromeTraceWriter, WritesKernelsStepsAndMemoryCounters) {
    StringTable strings;
    const StringId gemm = strings.intern("sm90_gemm");
    std::vector<Event> events;
    Event step;
    step.kind = EventKind::kStepBegin;
    step.start_ns = 1000;
    step.range.id = 7;
    events.push_back(step);
    events.push_back(kernel(gemm, 2000, 5000, 13));
    events.push_back(block(EventKind::kBlockAlloc, 2500, 0x1000, 1 << 20));
    events.push_back(block(EventKind::kBlockAlloc, 2600, 0x2000, 1 << 20));
    events.push_back(block(EventKind::kBlockFree, 2700, 0x1000, 0));
    step.kind = EventKind::kStepEnd;
    step.start_ns = 9000;
    events.push_back(step);

    std::string text = write_trace(events, strings);
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    ASSERT_EQ(parser.parse(text).get(doc), simdjson::SUCCESS) << text;
    simdjson::dom::array trace;
    ASSERT_EQ(doc["traceEvents"].get_array().get(trace), simdjson::SUCCESS);

    int kernels = 0, steps = 0, counters = 0, gpu_names = 0;
    double last_in_use = -1;
    for (auto ev : trace) {
        std::string_view ph = ev["ph"].get_string().value();
        if (ph == "X") {
            EXPECT_EQ(ev["name"].get_string().value(), "sm90_gemm");
            EXPECT_EQ(ev["tid"].get_uint64().value(), 13u);
            EXPECT_DOUBLE_EQ(ev["ts"].get_double().value(), 1.0);   // µs from the first event
            EXPECT_DOUBLE_EQ(ev["dur"].get_double().value(), 3.0);
            ++kernels;
        } else if (ph == "b" || ph == "e") {
            EXPECT_EQ(ev["name"].get_string().value(), "step 7");
            ++steps;
        } else if (ph == "C") {
            last_in_use = ev["args"]["value"].get_double().value();
            ++counters;
        } else if (ph == "M") {
            ++gpu_names;
        }
    }
    EXPECT_EQ(kernels, 1);
    EXPECT_EQ(steps, 2);
    EXPECT_EQ(counters, 3);
    EXPECT_EQ(gpu_names, 1);  // named once, however many GPU events
    EXPECT_DOUBLE_EQ(last_in_use, double(1 << 20));  // two allocations, one freed
}

TEST(ChromeTraceWriter, FreeOfUnknownAddressIsIgnored) {
    StringTable strings;
    std::string text =
        write_trace({block(EventKind::kBlockFree, 10, 0xdead, 64)}, strings);
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    ASSERT_EQ(parser.parse(text).get(doc), simdjson::SUCCESS);
    EXPECT_EQ(doc["traceEvents"].get_array().value().size(), 0u);
}

TEST(ExportChromeTrace, MissingInputIsNotFoundAndWritesNothing) {
    const std::string out = testing::TempDir() + "gpudiag_export_never_written.json";
    std::remove(out.c_str());
    auto r = export_chrome_trace({"/nonexistent/trace.json"}, out);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
    EXPECT_EQ(std::fopen(out.c_str(), "rb"), nullptr);
}

TEST(ExportChromeTrace, NoInputsIsInvalidArgument) {
    auto r = export_chrome_trace({}, testing::TempDir() + "x.json");
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpudiag::detail
