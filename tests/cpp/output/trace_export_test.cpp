// SPDX-License-Identifier: Apache-2.0
// Chrome/Perfetto export: the output parses back as a Chrome trace with GPU tracks, idle gaps
// coloured by cause, host ranges and memory counter tracks.
#include <gpudiag/trace_export.hpp>

#include <gtest/gtest.h>
#include <simdjson.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

namespace gpudiag {
namespace {

namespace fs = std::filesystem;

const char* kTrace = R"JSON({"traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "pid": 7, "tid": 7, "ts": 1000, "dur": 3000},
  {"ph": "X", "cat": "cpu_op", "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "pid": 7, "tid": 7, "ts": 1100, "dur": 1500},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 7, "tid": 7, "ts": 1050, "dur": 5, "args": {"correlation": 1}},
  {"ph": "X", "cat": "kernel", "name": "k0", "pid": 0, "tid": 7, "ts": 1060, "dur": 40, "args": {"device": 0, "stream": 7, "correlation": 1}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 7, "tid": 7, "ts": 2700, "dur": 5, "args": {"correlation": 2}},
  {"ph": "X", "cat": "kernel", "name": "k1", "pid": 0, "tid": 7, "ts": 2710, "dur": 1000, "args": {"device": 0, "stream": 7, "correlation": 2}},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 7, "tid": 7, "ts": 2705,
   "args": {"Device Type": 1, "Device Id": 0, "Addr": 4096, "Bytes": 1024, "Total Allocated": 1024, "Total Reserved": 2097152}}
]})JSON";

TEST(TraceExport, WritesAChromeTraceThatParsesBack) {
    fs::path dir = fs::temp_directory_path() / ("gpudiag_export_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    std::string in = (dir / "in.json").string();
    std::string out = (dir / "out.json").string();
    std::ofstream(in) << kTrace;
    ASSERT_TRUE(export_chrome_trace({in}, out).is_ok());

    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    ASSERT_EQ(parser.load(out).get(doc), simdjson::SUCCESS);
    simdjson::dom::array events;
    ASSERT_EQ(doc["traceEvents"].get_array().get(events), simdjson::SUCCESS);
    std::set<std::string> phases, cats, names;
    for (simdjson::dom::element e : events) {
        std::string_view ph, cat, name;
        ASSERT_EQ(e["ph"].get_string().get(ph), simdjson::SUCCESS);
        phases.emplace(ph);
        if (e["cat"].get_string().get(cat) == simdjson::SUCCESS) cats.emplace(cat);
        if (e["name"].get_string().get(name) == simdjson::SUCCESS) names.emplace(name);
        double ts = 0;
        if (ph == "X" || ph == "C") {
            EXPECT_EQ(e["ts"].get_double().get(ts), simdjson::SUCCESS);
        }
        int64_t pid = 0;
        EXPECT_EQ(e["pid"].get_int64().get(pid), simdjson::SUCCESS);
    }
    for (const char* p : {"X", "C", "M"}) EXPECT_TRUE(phases.count(p)) << p;
    for (const char* c : {"kernel", "idle", "step", "input_wait", "cuda_api"})
        EXPECT_TRUE(cats.count(c)) << c;
    EXPECT_TRUE(names.count("idle: host wait (input)"));
    EXPECT_TRUE(names.count("torch reserved bytes"));
    EXPECT_TRUE(names.count("allocated bytes (blocks)"));
    EXPECT_TRUE(names.count("k1"));

    auto missing = export_chrome_trace({(dir / "absent.json").string()}, out);
    EXPECT_EQ(missing.code(), StatusCode::kNotFound);
    auto unwritable = export_chrome_trace({in}, (dir / "no/such/dir/out.json").string());
    EXPECT_EQ(unwritable.code(), StatusCode::kIoError);
    std::error_code ec;
    fs::remove_all(dir, ec);
}

TEST(TraceExport, CorpusTraceExports) {
    std::string in =
        std::string(GPUDIAG_CORPUS_DIR) +
        "/kineto_traces/kineto_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz";
    if (!fs::exists(in)) GTEST_SKIP() << "corpus trace absent: " << in;
    std::string out = (fs::temp_directory_path() /
                       ("gpudiag_export_corpus_" + std::to_string(::getpid()) + ".json"))
                          .string();
    ASSERT_TRUE(export_chrome_trace({in}, out).is_ok());
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    ASSERT_EQ(parser.load(out).get(doc), simdjson::SUCCESS);
    simdjson::dom::array events;
    ASSERT_EQ(doc["traceEvents"].get_array().get(events), simdjson::SUCCESS);
    EXPECT_GT(events.size(), 20000u);
    std::remove(out.c_str());
}

}  // namespace
}  // namespace gpudiag
