// SPDX-License-Identifier: Apache-2.0
// The Flight Recorder importer and the collectives' verdict on real dumps: gloo jobs with planted
// faults that tests/python/fr_dump_generator.py runs here, with the torch of the environment
// (GPUDIAG_TEST_PYTHON, else the checkout's .venv, else python3); skipped where torch is absent.
// No dump is committed: each run makes its own.
#include "analysis/findings/finding_catalog.hpp"
#include "importers/flight_recorder/flight_recorder_dump.hpp"
#include "importers/flight_recorder/flight_recorder_source.hpp"
#include "temp_dir.hpp"

#include <gpudiag/analyze.hpp>
#include <gpudiag/report.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <variant>

namespace gpudiag {
namespace {

namespace fs = std::filesystem;

std::string python() {
    if (const char* p = std::getenv("GPUDIAG_TEST_PYTHON"); p != nullptr && *p != '\0') return p;
    const fs::path venv = fs::path(GPUDIAG_SOURCE_DIR) / ".venv" / "bin" / "python";
    return fs::exists(venv) ? venv.string() : "python3";
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The dumps of two planted faults in a job of two ranks, made once for the suite.
class FlightRecorderDumps : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        const std::string py = python();
        if (std::system((py + " -c 'import torch.distributed' >/dev/null 2>&1").c_str()) != 0) {
            skip_reason_ = new std::string("no torch.distributed for " + py);
            return;
        }
        dir_ = new testing::TempDir("flight_recorder");
        const std::string generator =
            (fs::path(GPUDIAG_SOURCE_DIR) / "tests" / "python" / "fr_dump_generator.py").string();
        const std::string command = py + " -W ignore " + generator + " " + dir_->file("") +
                                    " --world 2 --faults sleep die >/dev/null 2>&1";
        if (std::system(command.c_str()) != 0)
            failure_ = new std::string("the generator failed: " + command);
    }
    static void TearDownTestSuite() {
        delete dir_;
        delete skip_reason_;
        delete failure_;
        dir_ = nullptr;
        skip_reason_ = failure_ = nullptr;
    }
    void SetUp() override {
        if (skip_reason_ != nullptr) GTEST_SKIP() << *skip_reason_;
        ASSERT_EQ(failure_, nullptr) << *failure_;
    }
    static std::string dump(const std::string& c, int rank) {
        return dir_->file(c + "/nccl_trace_rank_" + std::to_string(rank));
    }

    static testing::TempDir* dir_;
    static std::string* skip_reason_;
    static std::string* failure_;
};
testing::TempDir* FlightRecorderDumps::dir_ = nullptr;
std::string* FlightRecorderDumps::skip_reason_ = nullptr;
std::string* FlightRecorderDumps::failure_ = nullptr;

const Finding* finding(const Report& r, detail::FindingId id) {
    return r.finding(std::string(detail::finding_name(id)));
}

double figure(const Finding& f, const std::string& key) {
    for (const auto& x : f.figures) {
        if (x.key == key) return x.value;
    }
    return -1;
}

// The row of the job's verdict table, as column -> cell.
std::optional<std::vector<Cell>> verdict_row(const Report& r, std::vector<std::string>& columns) {
    const Section* job = r.section("job");
    if (job == nullptr) return std::nullopt;
    for (const auto& t : job->tables) {
        if (t.id != "collective_verdicts" || t.rows.size() != 1) continue;
        columns = t.columns;
        return t.rows.front();
    }
    return std::nullopt;
}

// The checks are steps of one test: ctest runs each test in a process of its own, and making the
// dumps (a torch import and two jobs) is what takes the time.
void the_pickle_is_told_by_its_content_and_read_whole(const std::string& rank0) {
    auto format = detect_format(rank0);
    ASSERT_TRUE(format.is_ok()) << format.status().to_string();
    EXPECT_EQ(*format, InputFormat::kFlightRecorder);
    auto d = detail::parse_flight_recorder(read_file(rank0), "rank 0");
    ASSERT_TRUE(d.is_ok()) << d.status().to_string();
    EXPECT_FALSE(d->version.empty());
    ASSERT_EQ(d->entries.size(), 5u);  // two steps of all_reduce + broadcast, then all_reduce #5
    const auto& last = d->entries.back();
    EXPECT_EQ(last.collective_seq_id, 5);
    EXPECT_EQ(detail::collective_op(last.profiling_name), "all_reduce");
    EXPECT_FALSE(last.retired);  // rank 0 waits in it for rank 1
    EXPECT_EQ(last.input_sizes, "[[4]]");
    ASSERT_FALSE(last.frames.empty());
    bool generator_frame = false;
    for (const auto& f : last.frames)
        generator_frame |= f.file.find("fr_dump_generator.py") != std::string::npos;
    EXPECT_TRUE(generator_frame);
    // gloo keys pg_config by "" while its entries name the group "0": the members still resolve.
    StringTable strings;
    auto events = detail::flight_recorder_events(*d, "rank 0", strings);
    EXPECT_EQ(events.info.world_size, 2);
    EXPECT_EQ(events.info.property("flight_recorder.ranks.0"), "0,1");
    EXPECT_EQ(events.events.back().collective.state, collective_state::kScheduled);
    EXPECT_EQ(events.events.front().collective.state, collective_state::kCompleted);
}

void the_hang_names_the_rank_stuck_in_python(const std::string& dir) {
    auto report = analyze_files({dir});
    ASSERT_TRUE(report.is_ok()) << report.status().to_string();
    const Finding* hang = finding(*report, detail::FindingId::kCollectiveHang);
    ASSERT_NE(hang, nullptr) << render_text(*report);
    EXPECT_EQ(hang->rank, 1);
    EXPECT_EQ(figure(*hang, "seq_id"), 5);
    EXPECT_EQ(figure(*hang, "last_completed_by_all"), 4);
    EXPECT_NE(hang->title.find("Process group 0 (default_pg) hangs in all_reduce #5"),
              std::string::npos)
        << hang->title;
    EXPECT_NE(hang->summary.find("rank 1 never called it (it was last seen in broadcast #4 at"),
              std::string::npos)
        << hang->summary;
    EXPECT_EQ(finding(*report, detail::FindingId::kCollectiveDesync), nullptr);
    std::vector<std::string> columns;
    auto row = verdict_row(*report, columns);
    ASSERT_TRUE(row.has_value());
    EXPECT_EQ(std::get<std::string>((*row)[2]), "hang");
    EXPECT_EQ(std::get<std::string>((*row)[6]), "1");
    EXPECT_TRUE(report->input.complete);
}

void a_missing_rank_is_said_and_named_as_the_likely_culprit(const std::string& dir) {
    auto report = analyze_files({dir});
    ASSERT_TRUE(report.is_ok()) << report.status().to_string();
    EXPECT_FALSE(report->input.complete);
    ASSERT_FALSE(report->input.missing.empty());
    EXPECT_NE(report->input.missing.front().find("(rank 1)"), std::string::npos)
        << report->input.missing.front();
    const Finding* hang = finding(*report, detail::FindingId::kCollectiveHang);
    ASSERT_NE(hang, nullptr) << render_text(*report);
    EXPECT_EQ(hang->rank, 1);
    EXPECT_EQ(figure(*hang, "missing_ranks"), 1);
    EXPECT_NE(hang->summary.find("rank 1 left no Flight Recorder dump"), std::string::npos)
        << hang->summary;
}

TEST_F(FlightRecorderDumps, ReadAndJudged) {
    {
        SCOPED_TRACE("the pickle is told by its content and read whole");
        the_pickle_is_told_by_its_content_and_read_whole(dump("sleep-w2", 0));
    }
    {
        SCOPED_TRACE("the hang names the rank stuck in Python");
        the_hang_names_the_rank_stuck_in_python(dir_->file("sleep-w2"));
    }
    {
        SCOPED_TRACE("a missing rank is said and named as the likely culprit");
        a_missing_rank_is_said_and_named_as_the_likely_culprit(dir_->file("die-w2"));
    }
}

}  // namespace
}  // namespace gpudiag
