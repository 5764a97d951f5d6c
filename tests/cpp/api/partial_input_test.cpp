// SPDX-License-Identifier: Apache-2.0
// Partial input said plainly: real corpus files cut short (copies in a temporary folder, never in
// the repository) give a report that opens with what was read and what is missing, that never
// clears the input without "in the part that could be read", and whose JSON says it at the top.
#include <gpudiag/analyze.hpp>
#include <gpudiag/job.hpp>
#include <gpudiag/recording.hpp>

#include "importers/open_source.hpp"
#include "temp_dir.hpp"

#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace gpudiag {
namespace {

using testing::TempDir;

namespace fs = std::filesystem;

const fs::path kCorpus = GPUDIAG_CORPUS_DIR;

std::string read_bytes(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, std::string_view bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string corpus_file(const std::string& relative) {
    const fs::path p = kCorpus / relative;
    return fs::exists(p) ? p.string() : std::string();
}

#define REQUIRE_CORPUS(path)                                            \
    do {                                                                \
        if ((path).empty()) {                                           \
            GTEST_SKIP() << "corpus not found at " << kCorpus.string(); \
        }                                                               \
    } while (false)

// What every report over partial input must do, whatever the format.
void expect_says_partial(const Report& r, const std::string& context) {
    SCOPED_TRACE(context);
    EXPECT_FALSE(r.input.complete);
    ASSERT_FALSE(r.input.missing.empty());
    const std::string text = render_text(r);
    const auto partial = text.find("PARTIAL INPUT");
    ASSERT_NE(partial, std::string::npos) << text;
    // It opens the report: before the findings and before any verdict.
    for (const char* later : {"Findings (", "No problems found"}) {
        const auto at = text.find(later);
        if (at != std::string::npos) {
            EXPECT_LT(partial, at) << later;
        }
    }
    EXPECT_EQ(text.find("No problems found.\n"), std::string::npos) << text;
    if (r.findings.empty()) {
        EXPECT_NE(text.find("in the part that could be read"), std::string::npos);
    }
    EXPECT_NE(text.find("Missing: " + r.input.missing.front()), std::string::npos);
    // JSON says so at the top level, and reads back the same.
    const std::string json = render_json(r, true);
    EXPECT_NE(json.find("\"input\":{\"complete\":false"), std::string::npos) << json.substr(0, 400);
    auto back = parse_report_json(json);
    ASSERT_TRUE(back.is_ok()) << back.status().to_string();
    EXPECT_FALSE(back->input.complete);
    EXPECT_EQ(back->input.missing, r.input.missing);
    EXPECT_EQ(back->input.events, r.input.events);
}

std::uint64_t gpu_activities(const Report& r) {
    const Section* s = r.section("timeline");
    const Figure* f = s != nullptr ? s->figure("gpu_activities") : nullptr;
    return f != nullptr ? static_cast<std::uint64_t>(f->value) : 0;
}

TEST(PartialInput, KinetoGzipCutAnywhereLeadsWithWhatIsMissing) {
    const std::string path = corpus_file(
        "kineto_traces/kineto_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz");
    REQUIRE_CORPUS(path);
    auto whole = analyze_files({path});
    ASSERT_TRUE(whole.is_ok()) << whole.status().to_string();
    EXPECT_TRUE(whole->input.complete);
    EXPECT_TRUE(whole->input.missing.empty());
    EXPECT_EQ(render_text(*whole).find("PARTIAL INPUT"), std::string::npos);
    EXPECT_NE(render_json(*whole, true).find("\"input\":{\"complete\":true"), std::string::npos);
    ASSERT_GT(whole->input.events, 0u);
    ASSERT_GT(gpu_activities(*whole), 0u);

    TempDir dir("partial");
    const std::string bytes = read_bytes(path);
    std::uint64_t previous = 0;
    for (const double fraction : {0.1, 0.25, 0.5, 0.75, 0.95, 0.999}) {
        const std::string cut = dir.file("cut.json.gz");
        write_bytes(cut, std::string_view(bytes).substr(
                             0, static_cast<std::size_t>(bytes.size() * fraction)));
        auto r = analyze_files({cut});
        ASSERT_TRUE(r.is_ok()) << fraction << ": " << r.status().to_string();
        expect_says_partial(*r, "cut at " + std::to_string(fraction));
        EXPECT_TRUE(r->capture.truncated);
        EXPECT_GT(r->input.events, previous);  // more of the file, more events
        EXPECT_LT(r->input.events, whole->input.events);
        EXPECT_GT(r->input.span_ns(), 0u);
        previous = r->input.events;
        bool names_gzip = false;
        bool names_gpu = false;
        for (const auto& m : r->input.missing) {
            names_gzip = names_gzip || m.find("gzip stream ends early") != std::string::npos;
            names_gpu = names_gpu || m.find("no GPU kernels") != std::string::npos;
        }
        EXPECT_TRUE(names_gzip) << r->input.missing.front();
        // Kineto writes GPU activity after the CPU operators: a cut before it loses all of it,
        // and the report says so rather than reporting an idle GPU.
        EXPECT_EQ(names_gpu, gpu_activities(*r) == 0) << fraction;
    }
}

TEST(PartialInput, KinetoPlainJsonCutShort) {
    const std::string path = corpus_file("kineto_traces/kineto_pr1318_before_fix_trace.json");
    REQUIRE_CORPUS(path);
    const std::string bytes = read_bytes(path);
    TempDir dir("partial");
    for (const double fraction : {0.3, 0.6, 0.9}) {
        const std::string cut = dir.file("cut.json");
        write_bytes(cut, std::string_view(bytes).substr(
                             0, static_cast<std::size_t>(bytes.size() * fraction)));
        auto r = analyze_files({cut});
        ASSERT_TRUE(r.is_ok()) << fraction << ": " << r.status().to_string();
        expect_says_partial(*r, "plain cut at " + std::to_string(fraction));
    }
    // Cut before its first event: nothing to report on, an input error naming the problem.
    const std::string head = dir.file("head.json");
    write_bytes(head, std::string_view(bytes).substr(0, bytes.find("traceEvents") + 16));
    auto none = analyze_files({head});
    ASSERT_FALSE(none.is_ok());
    EXPECT_EQ(none.status().code(), StatusCode::kCorruptData) << none.status().to_string();
}

// A recording of real events (a corpus trace replayed into a writer), cut at every 4 KiB.
TEST(PartialInput, RecordingCutAtEvery4KiBIsDamageNeverDrops) {
    const std::string trace = corpus_file("kineto_traces/hta_sampled_rank-0.json.gz");
    REQUIRE_CORPUS(trace);
    TempDir dir("partial");
    const std::string recording = dir.file("whole.gpudiag");
    {
        auto source = detail::open_event_source(trace, {});
        ASSERT_TRUE(source.is_ok()) << source.status().to_string();
        RecordingWriterOptions options;
        options.chunk_bytes = 64 << 10;  // many chunks: cuts land everywhere
        RecordingWriter writer(options);
        ASSERT_TRUE(writer.open(recording).is_ok());
        StringTable strings;
        ASSERT_TRUE((*source)->run(writer, strings).is_ok());
        ASSERT_TRUE(writer.close().is_ok());
    }
    auto whole = analyze_files({recording});
    ASSERT_TRUE(whole.is_ok()) << whole.status().to_string();
    EXPECT_TRUE(whole->input.complete);
    const std::string bytes = read_bytes(recording);
    ASSERT_GT(bytes.size(), std::size_t{64} << 10);
    std::uint64_t previous = 0;
    int cuts = 0;
    for (std::size_t len = 4096; len < bytes.size(); len += 4096, ++cuts) {
        const std::string cut = dir.file("cut.gpudiag");
        write_bytes(cut, std::string_view(bytes).substr(0, len));
        auto r = analyze_files({cut});
        ASSERT_TRUE(r.is_ok()) << len << ": " << r.status().to_string();
        expect_says_partial(*r, "recording cut at " + std::to_string(len));
        // Damage is damage: the capture dropped nothing, and the report never says it did.
        EXPECT_EQ(r->capture.dropped, 0u) << len;
        EXPECT_EQ(render_text(*r).find("capture buffers"), std::string::npos) << len;
        EXPECT_GE(r->input.events, previous) << len;
        previous = r->input.events;
    }
    EXPECT_GT(cuts, 10);
    EXPECT_LE(previous, whole->input.events);  // the last cut may take only the index
}

TEST(PartialInput, SnapshotCutShortKeepsWhatWasRead) {
    const std::string path =
        corpus_file("memory_snapshots/bcrafton_cs336a2_memory_snapshot.pickle");
    REQUIRE_CORPUS(path);
    auto whole = analyze_files({path});
    ASSERT_TRUE(whole.is_ok()) << whole.status().to_string();
    EXPECT_TRUE(whole->input.complete);
    const std::string bytes = read_bytes(path);
    TempDir dir("partial");
    int partial = 0;
    for (const double fraction : {0.05, 0.3, 0.6, 0.9, 0.999}) {
        const std::string cut = dir.file("cut.pickle");
        write_bytes(cut, std::string_view(bytes).substr(
                             0, static_cast<std::size_t>(bytes.size() * fraction)));
        auto r = analyze_files({cut});
        if (!r.is_ok()) {
            // Only a cut before the first whole segment leaves nothing: an input error.
            EXPECT_EQ(r.status().code(), StatusCode::kCorruptData) << r.status().to_string();
            EXPECT_NE(r.status().message().find("cut short"), std::string::npos)
                << r.status().message();
            continue;
        }
        ++partial;
        expect_says_partial(*r, "snapshot cut at " + std::to_string(fraction));
        EXPECT_NE(r->input.missing.front().find("is missing"), std::string::npos);
    }
    EXPECT_GE(partial, 3);
}

TEST(PartialInput, JobWithAMissingRankSaysWhichOne) {
    const std::string archive = corpus_file("kineto_traces/param_dlrm_kineto_8ranks.tar.gz");
    REQUIRE_CORPUS(archive);
    auto inputs = expand_job_inputs({archive});
    ASSERT_TRUE(inputs.is_ok()) << inputs.status().to_string();
    ASSERT_EQ(inputs->size(), 8u);
    std::vector<Report> reports;
    std::vector<JobInput> kept;
    for (const auto& input : *inputs) {
        if (input.member.find("worker3_") != std::string::npos) continue;  // rank 3 is lost
        auto r = analyze_input(input);
        ASSERT_TRUE(r.is_ok()) << r.status().to_string();
        reports.push_back(std::move(*r));
        kept.push_back(input);
    }
    auto job = combine_input_reports(std::move(reports), kept);
    ASSERT_TRUE(job.is_ok()) << job.status().to_string();
    expect_says_partial(*job, "job without rank 3");
    EXPECT_NE(job->input.missing.front().find("1 of the job's 8 ranks has no input (rank 3)"),
              std::string::npos)
        << job->input.missing.front();
    // All eight: complete.
    auto all = analyze_files({archive});
    ASSERT_TRUE(all.is_ok());
    EXPECT_TRUE(all->input.complete);
    // One rank chosen on purpose is no missing rank.
    AnalysisOptions one;
    one.rank = 2;
    auto chosen = analyze_files({archive}, one);
    ASSERT_TRUE(chosen.is_ok());
    EXPECT_TRUE(chosen->input.complete);
}

TEST(PartialInput, OldReportsWithoutCoverageReadBackFromTheirSummary) {
    auto r =
        parse_report_json(R"({"schema_version": 1, "capture": {"events": 5, "truncated": true}})");
    ASSERT_TRUE(r.is_ok());
    EXPECT_FALSE(r->input.complete);
    EXPECT_EQ(r->input.events, 5u);
    ASSERT_EQ(r->input.missing.size(), 1u);
    auto fine = parse_report_json(R"({"schema_version": 1, "capture": {"events": 5}})");
    ASSERT_TRUE(fine.is_ok());
    EXPECT_TRUE(fine->input.complete);
}

}  // namespace
}  // namespace gpudiag
