// SPDX-License-Identifier: Apache-2.0
#include <gpudiag/analyze.hpp>

#include <gtest/gtest.h>
#include <zlib.h>

#include <unistd.h>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace gpudiag {
namespace {

namespace fs = std::filesystem;

class TempDir {
public:
    TempDir() : path_(fs::temp_directory_path() / ("gpudiag_test_" + std::to_string(::getpid()))) {
        fs::create_directories(path_);
    }
    ~TempDir() { fs::remove_all(path_); }
    std::string write(const std::string& name, const std::string& bytes) const {
        auto p = path_ / name;
        std::ofstream(p, std::ios::binary) << bytes;
        return p.string();
    }
    std::string write_gz(const std::string& name, const std::string& bytes) const {
        auto p = (path_ / name).string();
        gzFile f = gzopen(p.c_str(), "wb");
        gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
        gzclose(f);
        return p;
    }

private:
    fs::path path_;
};

TEST(DetectFormat, ByContentNotExtension) {
    TempDir dir;
    EXPECT_EQ(*detect_format(dir.write("a.txt", "  \n{\"traceEvents\": []}")),
              InputFormat::kKinetoJson);
    EXPECT_EQ(*detect_format(dir.write_gz("b.bin", "{\"traceEvents\": []}")),
              InputFormat::kKinetoJson);
    EXPECT_EQ(*detect_format(dir.write("c.json", std::string("\x80\x04\x95", 3))),
              InputFormat::kTorchSnapshot);
    EXPECT_EQ(*detect_format(dir.write("d", std::string("GPUDIAG\0rest", 12))),
              InputFormat::kRecording);
}

TEST(DetectFormat, ClearErrors) {
    TempDir dir;
    auto missing = detect_format("/nonexistent/trace.json");
    EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
    auto empty = detect_format(dir.write("e", ""));
    EXPECT_EQ(empty.status().code(), StatusCode::kCorruptData);
    auto garbage = detect_format(dir.write("g", "hello world"));
    EXPECT_EQ(garbage.status().code(), StatusCode::kUnsupported);
    EXPECT_NE(garbage.status().message().find("Kineto"), std::string::npos);
    auto gz_garbage = detect_format(dir.write_gz("h.gz", "hello"));
    EXPECT_EQ(gz_garbage.status().code(), StatusCode::kUnsupported);
}

TEST(AnalyzeFiles, NoInputIsInvalid) {
    auto r = analyze_files({});
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST(AnalyzeEvents, OverviewCountsWhatWasFed) {
    StringTable strings;
    std::vector<Event> events(3);
    events[0].kind = EventKind::kKernel;
    events[0].device = 0;
    events[0].stream = 7;
    events[0].start_ns = 1000;
    events[0].end_ns = 2000;
    events[0].kernel.name = strings.intern("k");
    events[1] = events[0];
    events[1].start_ns = 3000;
    events[1].end_ns = 5000;
    events[2].kind = EventKind::kStepBegin;
    events[2].start_ns = events[2].end_ns = 500;
    events[2].thread = 11;
    SourceInfo info;
    info.producer = "test";
    auto report = analyze_events(events, info, strings);
    ASSERT_TRUE(report.is_ok()) << report.status().to_string();
    const Section* overview = report->section("overview");
    ASSERT_NE(overview, nullptr);
    EXPECT_EQ(overview->figure("events")->value, 3);
    EXPECT_EQ(overview->figure("span_ns")->value, 4500);
    EXPECT_EQ(overview->figure("gpu_streams")->value, 1);
    EXPECT_EQ(overview->figure("host_threads")->value, 1);
}

}  // namespace
}  // namespace gpudiag
