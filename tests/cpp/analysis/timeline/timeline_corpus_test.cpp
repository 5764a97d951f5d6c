// SPDX-License-Identifier: Apache-2.0
// The importer and the timeline analysis on the real traces of the shared corpus, checked against
// Holistic Trace Analysis' figures (../shared/corpus/REFERENCE.md) in HTA's window.

#include <gpudiag/analyze.hpp>

#include "corpus.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace gpudiag {
namespace {

namespace fs = std::filesystem;

using testing::corpus_kineto_trace;

double figure(const Report& r, const char* section, const char* key) {
    const Section* s = r.section(section);
    const Figure* f = s != nullptr ? s->figure(key) : nullptr;
    return f != nullptr ? f->value : -1.0;
}

// One analysis per (file, window) for the whole test program: parsing is the slow part.
const Report& analysed(const std::vector<std::string>& paths, AnalysisWindow window) {
    static std::map<std::pair<std::string, int>, Report> cache;
    std::string key;
    for (const auto& p : paths) key += p + ";";
    auto it = cache.find({key, static_cast<int>(window)});
    if (it == cache.end()) {
        AnalysisOptions options;
        options.window = window;
        auto r = analyze_files(paths, options);
        EXPECT_TRUE(r.is_ok()) << r.status().to_string();
        it = cache.emplace(std::make_pair(key, static_cast<int>(window)), r.is_ok() ? *r : Report{})
                 .first;
    }
    return it->second;
}

struct HtaFigures {
    friend void PrintTo(const HtaFigures& f, std::ostream* os) { *os << f.file; }
    const char* file;
    double idle_percent;     // get_temporal_breakdown idle_time_pctg
    double host_wait_ratio;  // get_idle_time_breakdown host_wait ratio (single stream), < 0: n/a
};

class HtaAgreement : public ::testing::TestWithParam<HtaFigures> {};

TEST_P(HtaAgreement, IdleShareAndSplitWithinOnePoint) {
    const HtaFigures& ref = GetParam();
    GPUDIAG_REQUIRE_FILES(corpus_kineto_trace(ref.file));
    const Report& r = analysed({corpus_kineto_trace(ref.file)}, AnalysisWindow::kHta);
    EXPECT_NEAR(100 * figure(r, "timeline", "idle_share"), ref.idle_percent, 1.0);
    if (ref.host_wait_ratio >= 0) {
        EXPECT_NEAR(figure(r, "timeline", "host_wait_share"), ref.host_wait_ratio, 0.01);
    }
}

INSTANTIATE_TEST_SUITE_P(
    Corpus, HtaAgreement,
    ::testing::Values(
        HtaFigures{"kineto_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz", 39.43,
                   0.97},
        HtaFigures{"kineto_resnet50_num_workers_4_worker0.1623212756351.pt.trace.json.gz", 24.32,
                   0.94},
        HtaFigures{"param_resnet_kineto.json.gz", 67.4, 1.00},
        HtaFigures{"hta_nccl_data.json.gz", 77.78, -1},
        HtaFigures{"hta_sampled_rank-0.json.gz", 53.56, -1},
        HtaFigures{"hta_sampled_rank-1.json.gz", 54.72, -1},
        HtaFigures{"hta_ns_resolution_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz", 2.63, -1},
        HtaFigures{"hta_negative_queue_length_rank0.json.gz", 69.44, -1},
        HtaFigures{"hta_trace_diff_control.json.gz", 16.2, -1},
        HtaFigures{"hta_df_index_resolver.json.gz", 46.08, -1}),
    [](const ::testing::TestParamInfo<HtaFigures>& param_info) {
        std::string name;
        for (const char* c = param_info.param.file; *c != '\0' && *c != '.'; ++c) {
            name += std::isalnum(static_cast<unsigned char>(*c)) ? *c : '_';
        }
        return name;
    });

TEST(CorpusFindings, SingleProcessLoadersAreInputBound) {
    for (const char* name : {"kineto_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz",
                             "param_resnet_kineto.json.gz"}) {
        GPUDIAG_REQUIRE_FILES(corpus_kineto_trace(name));
        const Report& r = analysed({corpus_kineto_trace(name)}, AnalysisWindow::kSteps);
        const Finding* f = r.finding("input_bound");
        ASSERT_NE(f, nullptr) << name;
        EXPECT_GE(figure(r, "timeline", "input_wait_share"), 0.20) << name;
        EXPECT_NE(f->summary.find("fetches"), std::string::npos);
    }
}

TEST(CorpusFindings, FourWorkersIsNotInputBoundAndNamesItsIdleCause) {
    const char* name = "kineto_resnet50_num_workers_4_worker0.1623212756351.pt.trace.json.gz";
    GPUDIAG_REQUIRE_FILES(corpus_kineto_trace(name));
    const Report& r = analysed({corpus_kineto_trace(name)}, AnalysisWindow::kSteps);
    EXPECT_EQ(r.finding("input_bound"), nullptr);
    const Finding* idle = r.finding("gpu_idle");
    ASSERT_NE(idle, nullptr);
    EXPECT_NE(idle->title.find("CPU work"), std::string::npos) << idle->title;
    EXPECT_GT(figure(r, "timeline", "idle_cpu_share"), 0.5);
}

TEST(CorpusFindings, BusyGpuHasNoIdleFinding) {
    const char* name = "hta_ns_resolution_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz";
    GPUDIAG_REQUIRE_FILES(corpus_kineto_trace(name));
    for (auto window : {AnalysisWindow::kSteps, AnalysisWindow::kHta}) {
        const Report& r = analysed({corpus_kineto_trace(name)}, window);
        for (const char* id : {"gpu_idle", "input_bound", "launch_bound", "host_sync_stall"}) {
            EXPECT_EQ(r.finding(id), nullptr) << id;
        }
        EXPECT_LT(figure(r, "timeline", "idle_share"), 0.05);
    }
}

TEST(CorpusFindings, EightRankDlrmJob) {
    std::string archive = corpus_kineto_trace("param_dlrm_kineto_8ranks.tar.gz");
    if (!fs::exists(archive)) GTEST_SKIP() << "corpus archive absent: " << archive;
    fs::path dir = fs::temp_directory_path() / ("gpudiag_dlrm_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    std::string cmd = "tar xzf '" + archive + "' -C '" + dir.string() + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::vector<std::string> files;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
        if (e.is_regular_file() && e.path().extension() == ".json")
            files.push_back(e.path().string());
    }
    ASSERT_EQ(files.size(), 8u);
    const Report& job = analysed(files, AnalysisWindow::kHta);
    ASSERT_EQ(job.ranks.size(), 8u);
    // HTA's per-rank idle shares, ranks 0..7, and its get_comm_comp_overlap percentages
    // (HTA 0.6.1, bench/hta_job_figures.py on the unpacked archive).
    const double hta_idle[] = {49.3, 34.3, 62.1, 43.2, 53.6, 55.6, 61.8, 75.8};
    const double hta_overlap[] = {4.50, 2.47, 7.88, 3.31, 0.56, 0.64, 7.56, 9.51};
    for (std::size_t i = 0; i < 8; ++i) {
        EXPECT_EQ(job.ranks[i].source.rank, static_cast<int>(i));
        EXPECT_NEAR(100 * figure(job.ranks[i], "timeline", "idle_share"), hta_idle[i], 1.0) << i;
        EXPECT_NEAR(100 * figure(job.ranks[i], "timeline", "comm_overlap_share"), hta_overlap[i],
                    0.01)
            << i;
    }
    // HTA's get_potential_stragglers: ranks 2 and 7 start the dominant collective last.
    EXPECT_EQ((std::set<double>{figure(job, "job", "late_start_rank"),
                                figure(job, "job", "late_start_rank_2")}),
              (std::set<double>{2, 7}));
    // Asked for one candidate (num_candidates=1), HTA names rank 7 (HolisticTraceAnalysis 0.5.0,
    // get_potential_stragglers on the unpacked archive, measured for this test). By the GPU's own
    // clock: all 8 collectives of the step matched across the ranks, and the rank the others wait
    // for most is HTA's rank 7.
    EXPECT_EQ(figure(job, "job", "late_start_rank"), 7);
    EXPECT_EQ(figure(job, "job", "collectives_matched"), 8);
    EXPECT_EQ(figure(job, "job", "gpu_late_rank"), 7);
    EXPECT_GT(figure(job, "job", "gpu_late_wait_ns"), 0);
    EXPECT_GT(figure(job, "job", "communication_share"), 0.2);
    EXPECT_GE(figure(job, "job", "comm_overlap_share"), 0.0);
    double slowest = figure(job, "job", "slowest_rank");
    EXPECT_GE(slowest, 0);
    EXPECT_LE(slowest, 7);
    // Analysing one rank of the job.
    AnalysisOptions one;
    one.rank = 5;
    auto r5 = analyze_files(files, one);
    ASSERT_TRUE(r5.is_ok());
    EXPECT_EQ(r5->source.rank, 5);
    EXPECT_TRUE(r5->ranks.empty());
    std::error_code ec;
    fs::remove_all(dir, ec);
}

TEST(CorpusFindings, SampledPairMatchesHtasOverlapAndStragglers) {
    const std::string a = corpus_kineto_trace("hta_sampled_rank-0.json.gz");
    const std::string b = corpus_kineto_trace("hta_sampled_rank-1.json.gz");
    GPUDIAG_REQUIRE_FILES(corpus_kineto_trace("hta_sampled_rank-0.json.gz"));
    GPUDIAG_REQUIRE_FILES(corpus_kineto_trace("hta_sampled_rank-1.json.gz"));
    const Report& job = analysed({a, b}, AnalysisWindow::kHta);
    ASSERT_EQ(job.ranks.size(), 2u);
    // HTA 0.6.1: get_comm_comp_overlap 11.81 % and 20.05 %; get_potential_stragglers [0, 1].
    EXPECT_NEAR(100 * figure(job.ranks[0], "timeline", "comm_overlap_share"), 11.81, 0.01);
    EXPECT_NEAR(100 * figure(job.ranks[1], "timeline", "comm_overlap_share"), 20.05, 0.01);
    EXPECT_EQ((std::set<double>{figure(job, "job", "late_start_rank"),
                                figure(job, "job", "late_start_rank_2")}),
              (std::set<double>{0, 1}));
    // With one candidate HTA names rank 1 (HolisticTraceAnalysis 0.5.0, measured for this test):
    // it starts the dominant SendRecv at 71 % of the step, rank 0 at 44 %. By the GPU, matching
    // the pair's collectives, rank 1 is the one the other waits for.
    EXPECT_EQ(figure(job, "job", "late_start_rank"), 1);
    EXPECT_EQ(figure(job, "job", "collectives_matched"), 10);
    EXPECT_EQ(figure(job, "job", "gpu_late_rank"), 1);
    GPUDIAG_REQUIRE_FILES(corpus_kineto_trace("hta_nccl_data.json.gz"));
    const Report& one =
        analysed({corpus_kineto_trace("hta_nccl_data.json.gz")}, AnalysisWindow::kHta);
    EXPECT_NEAR(100 * figure(one, "timeline", "comm_overlap_share"), 14.31, 0.01);  // REFERENCE.md
    // Analysed for a job, the rank carries every collective kernel of its steps, in order.
    AnalysisOptions for_job;
    for_job.for_job = true;
    auto rank0 = analyze_files({corpus_kineto_trace("hta_nccl_data.json.gz")}, for_job);
    ASSERT_TRUE(rank0.is_ok());
    const Section* tl = rank0->section("timeline");
    ASSERT_NE(tl, nullptr);
    const Table* arrivals = nullptr;
    for (const auto& t : tl->tables) arrivals = t.id == "collective_arrivals" ? &t : arrivals;
    ASSERT_NE(arrivals, nullptr);
    EXPECT_GT(arrivals->rows.size(), 10u);
    for (std::size_t i = 1; i < arrivals->rows.size(); ++i) {
        const auto& prev = arrivals->rows[i - 1];
        const auto& next = arrivals->rows[i];
        if (std::get<double>(prev[0]) == std::get<double>(next[0])) {  // same step: in GPU order
            EXPECT_LE(std::get<double>(prev[4]), std::get<double>(next[4]) + 1) << i;
        }
    }
}

TEST(CorpusRobustness, NonCudaTracesAreAnalysedOrRefusedClearly) {
    struct Case {
        const char* file;
        bool gpu;
    } cases[] = {
        {"hta_amd_mi250_minitoy_train_ROCm6_2_kineto.json.gz", true},
        {"hta_mtia_inference_rank_0.json.gz", false},
        {"hta_cpu_only_rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz", false},
    };
    for (const auto& c : cases) {
        GPUDIAG_REQUIRE_FILES(corpus_kineto_trace(c.file));
        auto r = analyze_files({corpus_kineto_trace(c.file)});
        ASSERT_TRUE(r.is_ok()) << c.file << ": " << r.status().to_string();
        EXPECT_EQ(figure(*r, "timeline", "gpu_activities") > 0, c.gpu) << c.file;
        if (!c.gpu) {
            bool explained = false;
            for (const auto& n : r->capture.notes)
                explained = explained || n.find("GPU timeline") != std::string::npos;
            EXPECT_TRUE(explained) << c.file;
        }
    }
    GPUDIAG_REQUIRE_FILES(corpus_kineto_trace("hta_memory_timeline.raw.gz"));
    auto timeline = analyze_files({corpus_kineto_trace("hta_memory_timeline.raw.gz")});
    ASSERT_FALSE(timeline.is_ok());
    EXPECT_EQ(timeline.status().code(), StatusCode::kUnsupported);
}

bool has_table(const Section& s, const std::string& id) {
    for (const auto& t : s.tables) {
        if (t.id == id) return true;
    }
    return false;
}

bool has_series(const Section& s, const std::string& id) {
    for (const auto& x : s.series) {
        if (x.id == id) return true;
    }
    return false;
}

// The timeline section holds only what the input measured: GPU figures with GPU work, step
// figures with steps, input figures with DataLoader fetches; an input that measured none of it
// has no section. Never a zero standing for what was not seen.
TEST(CorpusSections, CpuOnlyProfileHasStepsWithoutGpuZeros) {
    const std::string path =
        corpus_kineto_trace("hta_cpu_only_rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz");
    GPUDIAG_REQUIRE_FILES(path);
    const Report& r = analysed({path}, AnalysisWindow::kSteps);
    const Section* s = r.section("timeline");
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->title.find("GPU timeline"), std::string::npos) << s->title;
    EXPECT_EQ(figure(r, "timeline", "steps"), 1);
    EXPECT_GT(figure(r, "timeline", "step_time_ns"), 0);
    // No GPU work, no syncs, no DataLoader: none of their figures.
    for (const char* unseen :
         {"gpu_activities", "busy_ns", "idle_share", "device", "sync_calls", "input_wait_share"})
        EXPECT_EQ(s->figure(unseen), nullptr) << unseen;
    EXPECT_FALSE(has_table(*s, "step_breakdown"));  // no bars of zeros
    EXPECT_FALSE(has_series(*s, "step_idle_share"));
    ASSERT_TRUE(has_table(*s, "steps"));
    for (const auto& t : s->tables) {
        if (t.id != "steps") continue;
        for (const auto& c : t.columns) EXPECT_EQ(c.find("gpu"), std::string::npos) << c;
    }
}

TEST(CorpusSections, TimelineWithoutStepsHasNoStepFigures) {
    const std::string path = corpus_kineto_trace("kineto_pr1318_before_fix_trace.json");
    GPUDIAG_REQUIRE_FILES(path);
    const Report& r = analysed({path}, AnalysisWindow::kSteps);
    const Section* s = r.section("timeline");
    ASSERT_NE(s, nullptr);
    EXPECT_NE(s->figure("busy_ns"), nullptr);
    for (const char* step_figure : {"steps", "step_time_ns", "step_time_max_ns",
                                    "input_wait_per_step_ns", "input_wait_share"})
        EXPECT_EQ(s->figure(step_figure), nullptr) << step_figure;
}

TEST(CorpusSections, UnreadableDeviceGetsNoSectionButANote) {
    const std::string path = corpus_kineto_trace("hta_mtia_inference_rank_0.json.gz");
    GPUDIAG_REQUIRE_FILES(path);
    const Report& r = analysed({path}, AnalysisWindow::kSteps);
    EXPECT_EQ(r.section("timeline"), nullptr);
    bool said = false;
    for (const auto& n : r.notes) said = said || n.find("No GPU activity") != std::string::npos;
    EXPECT_TRUE(said);
}

TEST(CorpusSections, SnapshotsCarryOnlyTheWaitsTheyAnnotate) {
    const std::string plain = testing::corpus_snapshot("silmont2000_cs336a2_mem_snapshot.pickle");
    const std::string annotated = testing::corpus_snapshot("decomfl_memory.pickle");
    GPUDIAG_REQUIRE_FILES(plain, annotated);
    EXPECT_EQ(analysed({plain}, AnalysisWindow::kSteps).section("timeline"), nullptr);
    // decomfl's snapshot annotates DataLoader fetches but has no steps and no GPU work.
    const Report& r = analysed({annotated}, AnalysisWindow::kSteps);
    const Section* s = r.section("timeline");
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->title.find("GPU timeline"), std::string::npos) << s->title;
    EXPECT_GT(figure(r, "timeline", "input_wait_max_ns"), 0);
    for (const char* absent : {"steps", "step_time_ns", "input_wait_per_step_ns", "busy_ns"})
        EXPECT_EQ(s->figure(absent), nullptr) << absent;
}

TEST(CorpusRobustness, EveryTraceParses) {
    if (!fs::exists(corpus_kineto_trace(""))) GTEST_SKIP() << "corpus absent";
    int parsed = 0;
    for (const auto& e : fs::directory_iterator(corpus_kineto_trace(""))) {
        std::string name = e.path().filename().string();
        if (name.find(".tar.") != std::string::npos ||
            name.find("memory_timeline") != std::string::npos)
            continue;
        const Report& r = analysed({e.path().string()}, AnalysisWindow::kHta);
        // A trace whose device gpudiag cannot read (MTIA) measures nothing and says so instead.
        bool explained = false;
        for (const auto& n : r.capture.notes)
            explained = explained || n.find("GPU timeline") != std::string::npos;
        EXPECT_TRUE(r.section("timeline") != nullptr || explained) << name;
        ++parsed;
    }
    EXPECT_GE(parsed, 20);
}

}  // namespace
}  // namespace gpudiag
