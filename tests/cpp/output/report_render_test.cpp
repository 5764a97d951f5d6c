// SPDX-License-Identifier: Apache-2.0
#include <gpudiag/report.hpp>

#include "output/corpus_reports.hpp"

#include <gtest/gtest.h>
#include <simdjson.h>

namespace gpudiag {
namespace {

Report sample_report() {
    Report r;
    r.source.producer = "test";
    r.source.description = "unit \"test\"\n";
    r.source.devices.push_back({0, "NVIDIA H200", 150ull << 30, "GPU-1"});
    Finding f;
    f.id = "input_bound";
    f.severity = Severity::kCritical;
    f.title = "Input-bound: 39.4 % of step time waiting for the next batch";
    f.summary = "The GPU waited for input.";
    f.figures.push_back({"input_wait_share", 0.394, Unit::kFraction, "time waiting for input"});
    f.figures.push_back({"longest_wait_ns", 62.3e6, Unit::kNanoseconds, "longest wait"});
    f.site_unit = Unit::kBytes;
    f.sites.push_back({"train.py:42", 3.0 * (1 << 20), 0.75, "grows every step"});
    f.evidence.push_back("1,243 gaps");
    f.advice.push_back("Raise DataLoader num_workers.");
    r.findings.push_back(f);
    Section s;
    s.id = "timeline";
    s.title = "Timeline";
    s.figures.push_back({"idle_share", 0.5, Unit::kFraction, "idle"});
    s.tables.push_back({"t", "Table", {"name", "value"}, {{std::string("a\tb"), 1.5}}});
    s.series.push_back({"mem", "Memory", Unit::kBytes, {{0.0, 1.0}, {1.0, 2.0}}});
    r.sections.push_back(s);
    r.notes.push_back("a note");
    return r;
}

TEST(RenderJson, IsValidJsonWithEveryField) {
    std::string json = render_json(sample_report());
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    ASSERT_EQ(parser.parse(json).get(doc), simdjson::SUCCESS) << json;
    EXPECT_EQ(int64_t(doc["schema_version"]), 1);
    EXPECT_EQ(std::string_view(doc["source"]["description"]), "unit \"test\"\n");
    auto finding = doc["findings"].at(0);
    EXPECT_EQ(std::string_view(finding["id"]), "input_bound");
    EXPECT_EQ(std::string_view(finding["severity"]), "critical");
    EXPECT_DOUBLE_EQ(double(finding["figures"]["input_wait_share"]["value"]), 0.394);
    EXPECT_EQ(std::string_view(finding["sites"].at(0)["location"]), "train.py:42");
    auto table = doc["sections"].at(0)["tables"].at(0);
    EXPECT_EQ(std::string_view(table["rows"].at(0).at(0)), "a\tb");
    EXPECT_DOUBLE_EQ(double(table["rows"].at(0).at(1)), 1.5);
}

TEST(RenderJson, NonFiniteBecomesNull) {
    Report r;
    Section s;
    s.id = "x";
    s.figures.push_back({"nan", std::numeric_limits<double>::quiet_NaN(), Unit::kCount, ""});
    r.sections.push_back(s);
    std::string json = render_json(r);
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    ASSERT_EQ(parser.parse(json).get(doc), simdjson::SUCCESS);
    EXPECT_TRUE(doc["sections"].at(0)["figures"]["nan"]["value"].is_null());
}

TEST(RenderText, ShowsFindingsWithUnits) {
    std::string text = render_text(sample_report());
    EXPECT_NE(text.find("[CRITICAL] input_bound"), std::string::npos) << text;
    EXPECT_NE(text.find("time waiting for input: 39.4 %"), std::string::npos) << text;
    EXPECT_NE(text.find("longest wait: 62.3 ms"), std::string::npos) << text;
    EXPECT_NE(text.find("3.0 MiB (75 %)  train.py:42"), std::string::npos) << text;
    EXPECT_NE(text.find("> Raise DataLoader num_workers."), std::string::npos) << text;
    EXPECT_NE(text.find("NVIDIA H200, 150.0 GiB"), std::string::npos) << text;
}

TEST(RenderText, SimulatedIsLabelled) {
    Report r;
    r.source.simulated = true;
    EXPECT_NE(render_text(r).find("SIMULATED"), std::string::npos);
    EXPECT_NE(render_text(r).find(headline(r)), std::string::npos);
}

// On the corpus' two-rank job: the job view's clock tables (kind data) stay in JSON and out of the
// text report, where their absolute timestamps would print as bare numbers; the other tables'
// columns are headed in words, the unit left to the cells.
TEST(RenderText, LeavesDataTablesToJsonAndHeadsColumnsInWords) {
    GPUDIAG_REQUIRE_CORPUS(testing::kRank0Trace, testing::kRank1Trace);
    const Report& job = testing::corpus_report({testing::kRank0Trace, testing::kRank1Trace});
    ASSERT_FALSE(job.ranks.empty());
    const Section* timeline = job.ranks[0].section("timeline");
    ASSERT_NE(timeline, nullptr);
    const std::string text = render_text(job);
    const std::string json = render_json(job);
    std::size_t data = 0;
    for (const auto& t : timeline->tables) {
        if (t.kind != TableKind::kData) continue;
        ++data;
        EXPECT_EQ(text.find(t.title), std::string::npos) << t.title;
        EXPECT_NE(json.find("\"" + t.id + "\""), std::string::npos) << t.id;
    }
    EXPECT_EQ(data, 3u);  // job_steps, collectives, collective_arrivals
    EXPECT_EQ(text.find("step_time_ns"), std::string::npos);
    EXPECT_NE(text.find("rank  step time  idle share"), std::string::npos);
}

// A torch snapshot does not record the device's model: every report says so rather than print a
// blank name (the text header and the HTML, through describe_device).
TEST(RenderText, NamesADeviceTheInputDidNotDescribe) {
    GPUDIAG_REQUIRE_CORPUS(testing::kSnapshot, testing::kStarvedTrace);
    const Report& snapshot = testing::corpus_report({testing::kSnapshot});
    ASSERT_FALSE(snapshot.source.devices.empty());
    const DeviceInfo& unnamed = snapshot.source.devices.front();
    ASSERT_TRUE(unnamed.name.empty());
    EXPECT_EQ(describe_device(unnamed), "model not recorded in the input");
    EXPECT_NE(render_text(snapshot).find("device 0: model not recorded in the input"),
              std::string::npos);
    const Report& trace = testing::corpus_report({testing::kStarvedTrace});
    ASSERT_FALSE(trace.source.devices.empty());
    EXPECT_EQ(describe_device(trace.source.devices.front()), "Tesla V100-DGXS-32GB, 31.7 GiB");
}

// An enum figure lists as its name and the word its value stands for, in every report.
TEST(RenderText, ListsAnEnumFigureByItsWord) {
    GPUDIAG_REQUIRE_CORPUS(testing::kStarvedTrace);
    const Report& trace = testing::corpus_report({testing::kStarvedTrace});
    const Section* timeline = trace.section("timeline");
    ASSERT_NE(timeline, nullptr);
    const Figure* window = timeline->figure("window");
    ASSERT_NE(window, nullptr);
    EXPECT_EQ(figure_row(*window), (std::pair<std::string, std::string>{"window", "steps"}));
    const Figure* busy = timeline->figure("busy_ns");
    ASSERT_NE(busy, nullptr);
    EXPECT_EQ(figure_row(*busy).first, busy->label);
    EXPECT_EQ(figure_row(*busy).second, format_figure(busy->value, "ns"));
}

}  // namespace
}  // namespace gpudiag
