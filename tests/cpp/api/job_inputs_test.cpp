// SPDX-License-Identifier: Apache-2.0
// A job as the user has it: an archive of rank traces, a folder, a glob, a trace with a memory
// snapshot of the same process; and the job's headline over every rank's findings.
#include "importers/job_inputs.hpp"
#include "importers/archive.hpp"

#include <gpudiag/analyze.hpp>
#include <gpudiag/job.hpp>

#include "corpus.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

namespace gpudiag {
namespace {

namespace fs = std::filesystem;

using testing::corpus_kineto_trace;
using testing::corpus_snapshot;

// The figures of every section of a report, for comparing reports made from the same data
// through different paths.
std::vector<std::string> figures_of(const Report& r) {
    std::vector<std::string> out;
    for (const auto& s : r.sections) {
        for (const auto& f : s.figures)
            out.push_back(s.id + "." + f.key + "=" + std::to_string(f.value));
    }
    for (const auto& f : r.findings) out.push_back("finding " + f.id);
    return out;
}

class TempDir {
public:
    TempDir() : path_(fs::temp_directory_path() / ("gpudiag_job_" + std::to_string(::getpid()))) {
        fs::remove_all(path_);
        fs::create_directories(path_);
    }
    ~TempDir() { fs::remove_all(path_); }
    [[nodiscard]] const fs::path& path() const { return path_; }

private:
    fs::path path_;
};

// The members of an archive written out under `dir` (with the library's own tar reader).
void unpack(const std::string& archive, const fs::path& dir) {
    auto in = detail::open_content_stream(archive);
    ASSERT_TRUE(in.is_ok());
    detail::TarReader tar(std::move(*in));
    for (;;) {
        auto more = tar.next();
        ASSERT_TRUE(more.is_ok()) << more.status().to_string();
        if (!*more) break;
        fs::path out = dir / tar.name();
        fs::create_directories(out.parent_path());
        std::ofstream f(out, std::ios::binary);
        std::vector<char> buffer(1 << 16);
        for (;;) {
            auto got = tar.member().read(buffer.data(), buffer.size());
            ASSERT_TRUE(got.is_ok());
            if (*got == 0) break;
            f.write(buffer.data(), static_cast<std::streamsize>(*got));
        }
    }
}

TEST(JobInputs, TheEightRankArchiveIsOneJobOfEightRanks) {
    const std::string archive = corpus_kineto_trace("param_dlrm_kineto_8ranks.tar.gz");
    GPUDIAG_REQUIRE_FILES(archive);
    auto inputs = expand_job_inputs({archive});
    ASSERT_TRUE(inputs.is_ok()) << inputs.status().to_string();
    ASSERT_EQ(inputs->size(), 8u);
    EXPECT_EQ((*inputs)[0].path, archive);
    EXPECT_NE((*inputs)[0].member.find("worker0"), std::string::npos);

    auto job = analyze_files({archive});
    ASSERT_TRUE(job.is_ok()) << job.status().to_string();
    ASSERT_EQ(job->ranks.size(), 8u);
    std::set<int> ranks;
    for (const auto& r : job->ranks) {
        ranks.insert(r.source.rank);
        EXPECT_EQ(r.source.description.rfind(archive + ":", 0), 0u) << r.source.description;
        EXPECT_NE(r.section("timeline"), nullptr);
    }
    EXPECT_EQ(ranks, (std::set<int>{0, 1, 2, 3, 4, 5, 6, 7}));
    EXPECT_EQ(job->section("job")->figure("ranks")->value, 8);

    // The same files unpacked, as a folder and as a glob: the same ranks, the same figures.
    TempDir dir;
    unpack(archive, dir.path());
    auto folder = analyze_files({dir.path().string()});
    ASSERT_TRUE(folder.is_ok()) << folder.status().to_string();
    auto glob = analyze_files({(dir.path() / "*" / "worker*.json").string()});
    ASSERT_TRUE(glob.is_ok()) << glob.status().to_string();
    for (const Report* other : {&*folder, &*glob}) {
        ASSERT_EQ(other->ranks.size(), 8u);
        for (std::size_t i = 0; i < 8; ++i)
            EXPECT_EQ(figures_of(other->ranks[i]), figures_of(job->ranks[i]));
        EXPECT_EQ(figures_of(*other), figures_of(*job));
    }
}

TEST(JobInputs, ATraceAndASnapshotOfOneProcessAreOneReport) {
    const std::string trace =
        corpus_kineto_trace("kineto_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz");
    const std::string snap = corpus_snapshot("silmont2000_cs336a2_mem_snapshot.pickle");
    GPUDIAG_REQUIRE_FILES(trace);
    GPUDIAG_REQUIRE_FILES(snap);
    auto both = analyze_files({trace, snap});
    ASSERT_TRUE(both.is_ok()) << both.status().to_string();
    EXPECT_TRUE(both->ranks.empty());
    EXPECT_NE(both->source.description.find(" + "), std::string::npos);
    auto alone_trace = analyze_files({trace});
    auto alone_snap = analyze_files({snap});
    ASSERT_TRUE(alone_trace.is_ok() && alone_snap.is_ok());
    // The timeline is the trace's, the memory picture the snapshot's (exact where a trace samples).
    ASSERT_NE(both->section("timeline"), nullptr);
    EXPECT_EQ(both->section("timeline")->figures.size(),
              alone_trace->section("timeline")->figures.size());
    for (const auto& f : alone_trace->section("timeline")->figures) {
        EXPECT_EQ(both->section("timeline")->figure(f.key)->value, f.value) << f.key;
    }
    ASSERT_NE(both->section("memory"), nullptr);
    for (const auto& f : alone_snap->section("memory")->figures) {
        EXPECT_EQ(both->section("memory")->figure(f.key)->value, f.value) << f.key;
    }
    for (const auto& f : alone_snap->findings) EXPECT_NE(both->finding(f.id), nullptr) << f.id;
    for (const auto& f : alone_trace->findings) EXPECT_NE(both->finding(f.id), nullptr) << f.id;
    EXPECT_EQ(both->capture.events, alone_trace->capture.events + alone_snap->capture.events);
}

TEST(JobInputs, AJobHeadlineNamesEveryRanksFindings) {
    const std::string a = corpus_kineto_trace("hta_sampled_rank-0.json.gz");
    const std::string b = corpus_kineto_trace("hta_sampled_rank-1.json.gz");
    GPUDIAG_REQUIRE_FILES(a);
    GPUDIAG_REQUIRE_FILES(b);
    auto job = analyze_files({a, b});
    ASSERT_TRUE(job.is_ok()) << job.status().to_string();
    ASSERT_EQ(job->ranks.size(), 2u);
    EXPECT_EQ(job->ranks[0].source.rank, 0);  // from the names
    EXPECT_EQ(job->ranks[1].source.rank, 1);
    std::size_t rank_findings = 0;
    for (const auto& r : job->ranks) {
        rank_findings += r.findings.size();
        for (const auto& f : r.findings) {
            const Finding* summary = job->finding(f.id);
            ASSERT_NE(summary, nullptr) << f.id;
            EXPECT_EQ(summary->rank, -1);
            EXPECT_GE(summary->severity, f.severity);
            EXPECT_NE(summary->title.find(" of 2 ranks"), std::string::npos) << summary->title;
        }
    }
    ASSERT_GT(rank_findings, 0u);
    EXPECT_EQ(render_text(*job).find("No problems found.\n\nJob"), std::string::npos);
    EXPECT_NE(render_text(*job).find("Findings ("), std::string::npos);
}

TEST(JobInputs, CombiningReportsMadeApartEqualsAnalysingTogether) {
    const std::string archive = corpus_kineto_trace("param_dlrm_kineto_8ranks.tar.gz");
    GPUDIAG_REQUIRE_FILES(archive);
    auto inputs = expand_job_inputs({archive});
    ASSERT_TRUE(inputs.is_ok());
    std::vector<Report> reports;
    AnalysisOptions for_job;
    for_job.for_job = true;  // what each worker of a job is asked to keep
    for (const auto& i : *inputs) {
        auto r = analyze_input(i, for_job);
        ASSERT_TRUE(r.is_ok()) << r.status().to_string();
        reports.push_back(std::move(*r));
    }
    auto apart = combine_input_reports(std::move(reports), *inputs);
    auto together = analyze_files({archive});
    ASSERT_TRUE(apart.is_ok() && together.is_ok());
    EXPECT_EQ(render_json(*apart), render_json(*together));
    AnalysisOptions only3;
    only3.rank = 3;
    auto one = analyze_files({archive}, only3);
    ASSERT_TRUE(one.is_ok());
    EXPECT_EQ(one->source.rank, 3);
}

// The front door tells each input's format once, as it finds it (a file, an archive's members),
// and what opens the input afterwards goes by that word: told the wrong format, the reader of
// that format refuses the file, rather than the input being sniffed again.
TEST(JobInputs, TheFrontDoorTellsEachInputsFormatOnce) {
    const std::string archive = corpus_kineto_trace("param_dlrm_kineto_8ranks.tar.gz");
    const std::string snap = corpus_snapshot("silmont2000_cs336a2_mem_snapshot.pickle");
    GPUDIAG_REQUIRE_FILES(archive);
    GPUDIAG_REQUIRE_FILES(snap);
    auto found = detail::find_inputs({archive, snap});
    ASSERT_TRUE(found.is_ok()) << found.status().to_string();
    ASSERT_EQ(found->size(), 9u);
    for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ((*found)[i].format, InputFormat::kKinetoJson);
    EXPECT_EQ(found->back().format, InputFormat::kTorchSnapshot);
    EXPECT_TRUE(found->back().input.member.empty());

    detail::FoundInput mistold = found->back();
    mistold.format = InputFormat::kRecording;
    struct Count final : EventSink {
        void consume(std::span<const Event> events) override { n += events.size(); }
        std::size_t n = 0;
    } count;
    auto source = detail::open_found_input(mistold, AnalysisOptions{});
    if (source.is_ok()) {
        StringTable strings;
        const Status read = (*source)->run(count, strings);
        EXPECT_FALSE(read.is_ok() && count.n > 0)
            << "a snapshot read as a recording: the told format was not the one used";
    }

    auto one = detail::find_input(JobInput{archive, (*found)[3].input.member});
    ASSERT_TRUE(one.is_ok()) << one.status().to_string();
    EXPECT_EQ(one->format, InputFormat::kKinetoJson);
}

TEST(JobInputs, RanksFromNames) {
    using detail::rank_from_name;
    EXPECT_EQ(rank_from_name({"/x/hta_sampled_rank-1.json.gz", ""}), 1);
    EXPECT_EQ(rank_from_name({"job.tar.gz", "dlrm/worker7_step_12.17.pt.trace.json"}), 7);
    EXPECT_EQ(rank_from_name({"/t/rank12/trace.json", ""}), 12);
    EXPECT_EQ(rank_from_name({"/t/trace_rank_3.json", ""}), 3);
    EXPECT_EQ(rank_from_name({"/t/cranky4.json", ""}), -1);  // a word that merely contains it
    EXPECT_EQ(rank_from_name({"/t/trace.json", ""}), -1);
}

TEST(JobInputs, NothingToReadIsAClearError) {
    TempDir dir;
    std::ofstream(dir.path() / "notes.txt") << "hello";
    auto r = analyze_files({dir.path().string()});
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    auto g = analyze_files({(dir.path() / "nothing*.json").string()});
    ASSERT_FALSE(g.is_ok());
    EXPECT_EQ(g.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace gpudiag
