// SPDX-License-Identifier: Apache-2.0
// The C API: misuse is answered with status codes and messages, never a crash.
#include <gpudiag/gpudiag.h>
#include <gpudiag/version.hpp>

#include "corpus.hpp"

#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdio>
#include <cstring>
#include <string>

namespace {

gpudiag_session_t* make_session() {
    gpudiag_session_options_t o;
    gpudiag_session_options_init(&o);
    o.capture_gpu = 0;
    o.nvml_hz = 0;
    o.flush_period_ms = 5;
    gpudiag_session_t* s = nullptr;
    EXPECT_EQ(gpudiag_session_create(&o, &s), GPUDIAG_OK) << gpudiag_last_error();
    return s;
}

TEST(CApi, Version) {
    EXPECT_STREQ(gpudiag_version(), GPUDIAG_VERSION_STRING);
}

TEST(CApi, NullHandlesAreInvalidArguments) {
    EXPECT_EQ(gpudiag_session_start(nullptr), GPUDIAG_INVALID_ARGUMENT);
    EXPECT_NE(std::string(gpudiag_last_error()).find("NULL"), std::string::npos);
    EXPECT_EQ(gpudiag_session_stop(nullptr), GPUDIAG_INVALID_ARGUMENT);
    EXPECT_EQ(gpudiag_session_step_begin(nullptr, 1), GPUDIAG_INVALID_ARGUMENT);
    EXPECT_EQ(gpudiag_session_phase_begin(nullptr, "x"), GPUDIAG_INVALID_ARGUMENT);
    EXPECT_EQ(gpudiag_session_phase_end(nullptr), GPUDIAG_INVALID_ARGUMENT);
    EXPECT_EQ(gpudiag_session_input_wait_begin(nullptr), GPUDIAG_INVALID_ARGUMENT);
    EXPECT_EQ(gpudiag_session_input_wait_end(nullptr), GPUDIAG_INVALID_ARGUMENT);
    char* out = reinterpret_cast<char*>(1);
    EXPECT_EQ(gpudiag_session_report(nullptr, GPUDIAG_FORMAT_TEXT, &out), GPUDIAG_INVALID_ARGUMENT);
    EXPECT_EQ(gpudiag_session_create(nullptr, nullptr), GPUDIAG_INVALID_ARGUMENT);
    EXPECT_EQ(gpudiag_session_status(nullptr, nullptr, nullptr, nullptr), GPUDIAG_INVALID_ARGUMENT);
    EXPECT_EQ(gpudiag_session_dump(nullptr, "x.gpudiag"), GPUDIAG_INVALID_ARGUMENT);
    gpudiag_session_request_dump(nullptr);  // fine: safe from a signal handler, does nothing
    gpudiag_session_destroy(nullptr);       // fine
    gpudiag_free(nullptr);                  // fine
    gpudiag_session_options_init(nullptr);  // fine
}

TEST(CApi, LifecycleMisuse) {
    gpudiag_session_t* s = make_session();
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(gpudiag_session_stop(s), GPUDIAG_FAILED_PRECONDITION);  // stop without start
    EXPECT_NE(std::string(gpudiag_last_error()), "");
    // A marker before start() is not recorded, and the caller is told so (with its own message).
    EXPECT_EQ(gpudiag_session_step_begin(s, 0), GPUDIAG_FAILED_PRECONDITION);
    EXPECT_NE(std::string(gpudiag_last_error()).find("not running"), std::string::npos);
    ASSERT_EQ(gpudiag_session_start(s), GPUDIAG_OK);
    EXPECT_EQ(gpudiag_session_start(s), GPUDIAG_FAILED_PRECONDITION);
    EXPECT_EQ(gpudiag_session_phase_begin(s, nullptr), GPUDIAG_INVALID_ARGUMENT);
    EXPECT_EQ(gpudiag_session_watch_memory(s, 1, nullptr, nullptr, nullptr),
              GPUDIAG_INVALID_ARGUMENT);
    EXPECT_EQ(gpudiag_session_unwatch_memory(s, 12345), GPUDIAG_NOT_FOUND);
    ASSERT_EQ(gpudiag_session_step_begin(s, 0), GPUDIAG_OK);
    ASSERT_EQ(gpudiag_session_phase_begin(s, "forward"), GPUDIAG_OK);
    ASSERT_EQ(gpudiag_session_phase_end(s), GPUDIAG_OK);
    ASSERT_EQ(gpudiag_session_step_end(s, 0), GPUDIAG_OK);
    ASSERT_EQ(gpudiag_session_stop(s), GPUDIAG_OK);
    EXPECT_EQ(gpudiag_session_stop(s), GPUDIAG_FAILED_PRECONDITION);           // double stop
    EXPECT_EQ(gpudiag_session_step_begin(s, 1), GPUDIAG_FAILED_PRECONDITION);  // after stop
    EXPECT_EQ(gpudiag_session_record_allocation(s, 0, 0x1000, 1, nullptr),
              GPUDIAG_FAILED_PRECONDITION);
    EXPECT_NE(std::string(gpudiag_last_error()).find("stopped"), std::string::npos);
    const char* level = nullptr;
    uint64_t events = 0;
    uint64_t dropped = 99;
    ASSERT_EQ(gpudiag_session_status(s, &level, &events, &dropped), GPUDIAG_OK);
    ASSERT_NE(level, nullptr);
    EXPECT_GE(events, 4u);
    EXPECT_EQ(dropped, 0u);
    char* json = nullptr;
    ASSERT_EQ(gpudiag_session_report(s, GPUDIAG_FORMAT_JSON, &json), GPUDIAG_OK);
    ASSERT_NE(json, nullptr);
    EXPECT_NE(std::strstr(json, "\"schema_version\""), nullptr);
    gpudiag_free(json);
    char* text = nullptr;
    EXPECT_EQ(gpudiag_session_report(s, static_cast<gpudiag_format_t>(7), &text),
              GPUDIAG_INVALID_ARGUMENT);
    EXPECT_EQ(text, nullptr);
    gpudiag_session_destroy(s);
}

// A service written in C keeps the last minute and writes it when asked.
// The options carry their size: a struct not filled by init is refused, not misread.
TEST(CApi, OptionsCarryTheirSize) {
    gpudiag_session_options_t o;
    gpudiag_session_options_init(&o);
    EXPECT_EQ(o.size, sizeof o);
    o.size = 8;  // as an older, smaller struct that was never initialised would say
    gpudiag_session_t* s = nullptr;
    EXPECT_EQ(gpudiag_session_create(&o, &s), GPUDIAG_INVALID_ARGUMENT);
    EXPECT_NE(std::string(gpudiag_last_error()).find("gpudiag_session_options_init"),
              std::string::npos);
    EXPECT_EQ(s, nullptr);
}

// The report as a log line and as Prometheus text, from C too.
TEST(CApi, ReportsInEveryFormat) {
    gpudiag_session_t* s = make_session();
    ASSERT_NE(s, nullptr);
    ASSERT_EQ(gpudiag_session_start(s), GPUDIAG_OK);
    ASSERT_EQ(gpudiag_session_step_begin(s, 0), GPUDIAG_OK);
    ASSERT_EQ(gpudiag_session_step_end(s, 0), GPUDIAG_OK);
    char* compact = nullptr;
    ASSERT_EQ(gpudiag_session_report(s, GPUDIAG_FORMAT_JSON_COMPACT, &compact), GPUDIAG_OK);
    const std::string line(compact);
    gpudiag_free(compact);
    EXPECT_EQ(line.find('\n'), line.size() - 1) << "one line, ending in a newline";
    EXPECT_LE(line.size(), 16384u) << "a log line: at most 16 KiB";
    char* metrics = nullptr;
    ASSERT_EQ(gpudiag_session_report(s, GPUDIAG_FORMAT_PROMETHEUS, &metrics), GPUDIAG_OK);
    EXPECT_NE(std::string(metrics).find("# TYPE gpudiag_"), std::string::npos);
    gpudiag_free(metrics);
    gpudiag_session_destroy(s);
}

TEST(CApi, AWindowIsWrittenOnDemand) {
    const std::string base =
        ::testing::TempDir() + "gpudiag_c_window_" + std::to_string(::getpid());
    const std::string record = base + ".gpudiag";
    const std::string dump = base + "-now.gpudiag";
    gpudiag_session_options_t o;
    gpudiag_session_options_init(&o);
    EXPECT_EQ(o.record_window_s, 0.0);
    EXPECT_EQ(o.record_window_bytes, std::uint64_t{256} << 20);
    o.capture_gpu = 0;
    o.nvml_hz = 0;
    o.record_path = record.c_str();
    o.record_window_s = 60;
    gpudiag_session_t* s = nullptr;
    ASSERT_EQ(gpudiag_session_create(&o, &s), GPUDIAG_OK) << gpudiag_last_error();
    EXPECT_EQ(gpudiag_session_dump(s, dump.c_str()), GPUDIAG_FAILED_PRECONDITION);  // not started
    ASSERT_EQ(gpudiag_session_start(s), GPUDIAG_OK);
    ASSERT_EQ(gpudiag_session_step_begin(s, 0), GPUDIAG_OK);
    ASSERT_EQ(gpudiag_session_step_end(s, 0), GPUDIAG_OK);
    ASSERT_EQ(gpudiag_session_dump(s, dump.c_str()), GPUDIAG_OK) << gpudiag_last_error();
    ASSERT_EQ(gpudiag_session_stop(s), GPUDIAG_OK);
    gpudiag_session_destroy(s);
    char* text = nullptr;
    const char* paths[] = {dump.c_str()};
    ASSERT_EQ(gpudiag_analyze_files(paths, 1, GPUDIAG_FORMAT_JSON, &text), GPUDIAG_OK)
        << gpudiag_last_error();
    EXPECT_NE(std::strstr(text, "\"events\": 2"), nullptr) << text;
    gpudiag_free(text);
    std::remove(dump.c_str());
    std::remove(record.c_str());
}

// A C service books the device memory it allocates itself; the report shows it by site.
TEST(CApi, AServiceRecordsItsOwnDeviceMemory) {
    EXPECT_EQ(gpudiag_session_record_allocation(nullptr, 0, 1, 1, nullptr),
              GPUDIAG_INVALID_ARGUMENT);
    gpudiag_session_t* s = make_session();
    ASSERT_NE(s, nullptr);
    ASSERT_EQ(gpudiag_session_start(s), GPUDIAG_OK);
    EXPECT_EQ(gpudiag_session_record_allocation(s, -1, 0x1000, 1, nullptr),
              GPUDIAG_INVALID_ARGUMENT);
    EXPECT_EQ(gpudiag_session_record_allocation(s, 0, 0, 1, nullptr), GPUDIAG_INVALID_ARGUMENT);
    constexpr uint64_t kMiB = uint64_t{1} << 20;
    for (uint64_t i = 0; i < 100; ++i) {
        ASSERT_EQ(gpudiag_session_record_allocation(s, 0, 0x70000000 + i * kMiB, kMiB,
                                                    "svc.c:42 cache_put"),
                  GPUDIAG_OK);
    }
    ASSERT_EQ(gpudiag_session_record_free(s, 0, 0x70000000, kMiB), GPUDIAG_OK);
    EXPECT_EQ(gpudiag_session_pause_capture(s, "profiler"), GPUDIAG_FAILED_PRECONDITION)
        << "no CUPTI capture to pause in this session";
    ASSERT_EQ(gpudiag_session_stop(s), GPUDIAG_OK);
    char* json = nullptr;
    ASSERT_EQ(gpudiag_session_report(s, GPUDIAG_FORMAT_JSON, &json), GPUDIAG_OK);
    const std::string text(json);
    gpudiag_free(json);
    EXPECT_NE(text.find("svc.c:42 cache_put"), std::string::npos);
    const std::size_t outside = text.find("\"outside_framework_bytes\"");
    ASSERT_NE(outside, std::string::npos);
    EXPECT_EQ(text.find("103809024", outside), text.find("\"value\"", outside) + 9)
        << "99 MiB outside the framework: " << text.substr(outside, 80);
    gpudiag_session_destroy(s);
}

// A C loop that waits for its input most of each step is found input-bound, as a PyTorch loop
// waiting for its DataLoader is: the waits are what the C calls marked.
TEST(CApi, InputWaitsMakeALoopInputBound) {
    gpudiag_session_t* s = make_session();
    ASSERT_NE(s, nullptr);
    ASSERT_EQ(gpudiag_session_start(s), GPUDIAG_OK);
    for (uint64_t step = 0; step < 6; ++step) {
        ASSERT_EQ(gpudiag_session_step_begin(s, step), GPUDIAG_OK);
        ASSERT_EQ(gpudiag_session_input_wait_begin(s), GPUDIAG_OK);
        ::usleep(20000);  // the next batch takes 20 ms to arrive; the step computes nothing
        ASSERT_EQ(gpudiag_session_input_wait_end(s), GPUDIAG_OK);
        ASSERT_EQ(gpudiag_session_step_end(s, step), GPUDIAG_OK);
    }
    ASSERT_EQ(gpudiag_session_stop(s), GPUDIAG_OK);
    char* json = nullptr;
    ASSERT_EQ(gpudiag_session_report(s, GPUDIAG_FORMAT_JSON, &json), GPUDIAG_OK);
    const std::string text(json);
    gpudiag_free(json);
    const std::size_t finding = text.find("\"id\": \"input_bound\"");
    ASSERT_NE(finding, std::string::npos) << text;
    EXPECT_NE(text.find("\"severity\": \"critical\"", finding), std::string::npos);
    gpudiag_session_destroy(s);
}

TEST(CApi, DestroyWhileRunningStopsCleanly) {
    gpudiag_session_t* s = make_session();
    ASSERT_NE(s, nullptr);
    ASSERT_EQ(gpudiag_session_start(s), GPUDIAG_OK);
    gpudiag_session_destroy(s);
}

TEST(CApi, AnalyzeFilesErrors) {
    char* out = nullptr;
    EXPECT_EQ(gpudiag_analyze_files(nullptr, 0, GPUDIAG_FORMAT_TEXT, &out),
              GPUDIAG_INVALID_ARGUMENT);
    const char* missing[] = {"/nonexistent/trace.json"};
    EXPECT_EQ(gpudiag_analyze_files(missing, 1, GPUDIAG_FORMAT_JSON, &out), GPUDIAG_NOT_FOUND);
    EXPECT_NE(std::string(gpudiag_last_error()).find("/nonexistent/trace.json"), std::string::npos);
    const char* with_null[] = {nullptr};
    EXPECT_EQ(gpudiag_analyze_files(with_null, 1, GPUDIAG_FORMAT_JSON, &out),
              GPUDIAG_INVALID_ARGUMENT);
    EXPECT_EQ(gpudiag_analyze_files(missing, 1, GPUDIAG_FORMAT_JSON, nullptr),
              GPUDIAG_INVALID_ARGUMENT);
}

TEST(CApi, WhatIfOverASnapshotFile) {
    const std::string snapshot = gpudiag::testing::corpus_snapshot("decomfl_memory.pickle");
    GPUDIAG_REQUIRE_FILES(snapshot);
    char* json = nullptr;
    ASSERT_EQ(gpudiag_whatif_file(snapshot.c_str(), "expandable_segments:True", GPUDIAG_FORMAT_JSON,
                                  &json),
              GPUDIAG_OK)
        << gpudiag_last_error();
    const std::string body(json);
    gpudiag_free(json);
    // The replay reproduced the recorded allocator, and the setting asked for was tried.
    EXPECT_NE(body.find("\"exact\": true"), std::string::npos) << body.substr(0, 2000);
    EXPECT_NE(body.find("expandable_segments"), std::string::npos);
    char* text = nullptr;
    ASSERT_EQ(gpudiag_whatif_file(snapshot.c_str(), nullptr, GPUDIAG_FORMAT_TEXT, &text),
              GPUDIAG_OK);
    EXPECT_NE(std::string(text).find("Allocator modelled: torch"), std::string::npos) << text;
    gpudiag_free(text);
}

TEST(CApi, WhatIfErrors) {
    char* out = reinterpret_cast<char*>(1);
    EXPECT_EQ(gpudiag_whatif_file(nullptr, nullptr, GPUDIAG_FORMAT_TEXT, &out),
              GPUDIAG_INVALID_ARGUMENT);
    EXPECT_EQ(out, nullptr);
    EXPECT_EQ(
        gpudiag_whatif_file("/nonexistent/snapshot.pickle", nullptr, GPUDIAG_FORMAT_TEXT, &out),
        GPUDIAG_NOT_FOUND);
    EXPECT_EQ(gpudiag_whatif_file("x", nullptr, GPUDIAG_FORMAT_PROMETHEUS, &out),
              GPUDIAG_INVALID_ARGUMENT);
    EXPECT_EQ(gpudiag_whatif_file("x", nullptr, GPUDIAG_FORMAT_TEXT, nullptr),
              GPUDIAG_INVALID_ARGUMENT);
    EXPECT_EQ(gpudiag_session_whatif(nullptr, nullptr, GPUDIAG_FORMAT_TEXT, &out),
              GPUDIAG_INVALID_ARGUMENT);

    // A session that records only its own cudaMalloc-level memory has no allocator history.
    char dir[] = "/tmp/gpudiag-c-whatif-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    const std::string path = std::string(dir) + "/run.gpudiag";
    gpudiag_session_options_t o;
    gpudiag_session_options_init(&o);
    o.capture_gpu = 0;
    o.nvml_hz = 0;
    o.record_path = path.c_str();
    gpudiag_session_t* s = nullptr;
    ASSERT_EQ(gpudiag_session_create(&o, &s), GPUDIAG_OK) << gpudiag_last_error();
    ASSERT_EQ(gpudiag_session_start(s), GPUDIAG_OK);
    ASSERT_EQ(gpudiag_session_record_allocation(s, 0, 0x7000000, 1 << 20, "engine.cpp:88"),
              GPUDIAG_OK);
    EXPECT_EQ(gpudiag_session_whatif(s, nullptr, GPUDIAG_FORMAT_TEXT, &out),
              GPUDIAG_FAILED_PRECONDITION);
    EXPECT_NE(std::string(gpudiag_last_error()).find("no caching-allocator operations"),
              std::string::npos)
        << gpudiag_last_error();
    EXPECT_EQ(gpudiag_session_stop(s), GPUDIAG_OK);
    gpudiag_session_destroy(s);
    std::remove(path.c_str());
    ::rmdir(dir);
}

TEST(CApi, FlightRecorderDumpsAreCheckedBeforeTheyAreWatched) {
    EXPECT_EQ(gpudiag_session_record_flight_recorder(nullptr, "x", 1, -1),
              GPUDIAG_INVALID_ARGUMENT);
    gpudiag_session_t* s = make_session();
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(gpudiag_session_record_flight_recorder(s, "{}", 2, -1), GPUDIAG_FAILED_PRECONDITION);
    ASSERT_EQ(gpudiag_session_start(s), GPUDIAG_OK);
    EXPECT_EQ(gpudiag_session_record_flight_recorder(s, nullptr, 4, 0), GPUDIAG_INVALID_ARGUMENT);
    const char junk[] = "not a dump";
    EXPECT_EQ(gpudiag_session_record_flight_recorder(s, junk, sizeof junk - 1, 0),
              GPUDIAG_CORRUPT_DATA);
    EXPECT_NE(std::string(gpudiag_last_error()), "");
    EXPECT_EQ(gpudiag_session_stop(s), GPUDIAG_OK);
    gpudiag_session_destroy(s);
}

}  // namespace
