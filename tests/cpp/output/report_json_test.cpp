// SPDX-License-Identifier: Apache-2.0
// render_json and parse_report_json on reports the analyses produce: a report survives the round
// trip exactly, in both layouts; text that is not a report is refused with where and why.
#include <gpudiag/report.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "output/corpus_reports.hpp"

namespace gpudiag {
namespace {

using testing::corpus_report;

void expect_round_trip(const Report& report) {
    for (bool compact : {false, true}) {
        std::string json = render_json(report, compact);
        auto back = parse_report_json(json);
        ASSERT_TRUE(back.is_ok()) << back.status().to_string();
        EXPECT_EQ(render_json(*back, compact), json);
        EXPECT_EQ(render_text(*back), render_text(report));
    }
}

TEST(ReportJson, CorpusReportsRoundTrip) {
    GPUDIAG_REQUIRE_CORPUS(testing::kStarvedTrace, testing::kSnapshot, testing::kRank0Trace,
                           testing::kRank1Trace);
    const Report& starved = corpus_report({testing::kStarvedTrace});
    ASSERT_FALSE(starved.findings.empty());
    ASSERT_NE(starved.section("timeline"), nullptr);
    expect_round_trip(starved);
    expect_round_trip(corpus_report({testing::kSnapshot}));
    const Report& job = corpus_report({testing::kRank0Trace, testing::kRank1Trace});
    ASSERT_EQ(job.ranks.size(), 2u);
    expect_round_trip(job);
}

TEST(ReportJson, CompactIsOneLine) {
    GPUDIAG_REQUIRE_CORPUS(testing::kStarvedTrace);
    const Report& r = corpus_report({testing::kStarvedTrace});
    std::string compact = render_json(r, true);
    EXPECT_EQ(std::count(compact.begin(), compact.end(), '\n'), 1);
    EXPECT_EQ(compact.back(), '\n');
    EXPECT_EQ(compact.rfind("{\"schema_version\":1,", 0), 0u) << compact.substr(0, 40);
    EXPECT_LT(compact.size(), render_json(r).size());
}

TEST(ReportJson, DeclaredUnitsAndKindsAreWritten) {
    GPUDIAG_REQUIRE_CORPUS(testing::kStarvedTrace);
    const Section* timeline = corpus_report({testing::kStarvedTrace}).section("timeline");
    ASSERT_NE(timeline, nullptr);
    const Table* breakdown = nullptr;
    for (const auto& t : timeline->tables) {
        EXPECT_TRUE(t.units.empty() || t.units.size() == t.columns.size()) << t.id;
        if (t.kind == TableKind::kPartition) breakdown = &t;
    }
    ASSERT_NE(breakdown, nullptr) << "the per-step breakdown of GPU time";
    EXPECT_FALSE(breakdown->rows.empty());
    std::string json = render_json(corpus_report({testing::kStarvedTrace}));
    EXPECT_NE(json.find("\"kind\": \"partition\""), std::string::npos);
    EXPECT_NE(json.find("\"x_unit\": \"s\""), std::string::npos);
    EXPECT_NE(json.find("\"kind\": \"gauge\""), std::string::npos);
}

TEST(ReportJson, OlderDocumentsKeepDefaults) {
    auto r = parse_report_json(R"({"schema_version": 1, "sections": [{"id": "memory",
        "figures": {"peak": {"value": 5, "unit": "bytes", "label": "peak"}},
        "series": [{"id": "s", "unit": "bytes", "points": [[0, 1], [1, null]]}]}]})");
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    const Section& s = r->sections.at(0);
    EXPECT_EQ(s.figures.at(0).kind, FigureKind::kGauge);
    EXPECT_EQ(s.series.at(0).x_unit, Unit::kSeconds);
    EXPECT_TRUE(std::isnan(s.series.at(0).points.at(1).second));  // null is how NaN is written
    EXPECT_EQ(r->source.rank, -1);
}

// Units are read by their spelling; one this version does not know (a newer writer's) keeps its
// number, prints it plain and is exported nowhere.
TEST(ReportJson, UnitsReadBySpelling) {
    auto r = parse_report_json(R"({"schema_version": 1, "sections": [{"id": "memory",
        "figures": {"peak": {"value": 5, "unit": "bytes/step", "label": "peak"},
                    "odd": {"value": 3, "unit": "furlongs", "label": "odd"}},
        "tables": [{"id": "t", "columns": ["a", "b"], "rows": [], "units": ["ns", "furlongs"]}],
        "series": [{"id": "s", "unit": "fraction", "x_unit": "step", "points": []}]}]})");
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    const Section& s = r->sections.at(0);
    EXPECT_EQ(s.figure("peak")->unit, Unit::kBytesPerStep);
    EXPECT_EQ(s.figure("odd")->unit, Unit::kUnknown);
    EXPECT_EQ(s.tables.at(0).units, (std::vector<Unit>{Unit::kNanoseconds, Unit::kUnknown}));
    EXPECT_EQ(s.series.at(0).unit, Unit::kFraction);
    EXPECT_EQ(s.series.at(0).x_unit, Unit::kStep);
    EXPECT_NE(render_text(*r).find("    odd   3\n"), std::string::npos) << render_text(*r);
    EXPECT_NE(render_json(*r).find(R"("unit": "bytes/step")"), std::string::npos);
    EXPECT_EQ(render_prometheus(*r).find("odd"), std::string::npos);
}

TEST(ReportJson, RefusesWhatIsNotAReportSayingWhere) {
    auto not_json = parse_report_json("{\"schema_version\": 1,");
    EXPECT_EQ(not_json.status().code(), StatusCode::kCorruptData);
    EXPECT_NE(not_json.status().message().find("not JSON"), std::string::npos);

    auto trace = parse_report_json(R"({"traceEvents": []})");
    EXPECT_EQ(trace.status().code(), StatusCode::kCorruptData);
    EXPECT_NE(trace.status().message().find("not a gpudiag report"), std::string::npos);

    auto bad = parse_report_json(R"({"schema_version": 1, "findings": [{"id": "x"}, {"id": 3}]})");
    EXPECT_EQ(bad.status().code(), StatusCode::kCorruptData);
    EXPECT_EQ(bad.status().message(), "report.findings[1].id: expected a string");

    auto severity = parse_report_json(
        R"({"schema_version": 1, "findings": [{"id": "x", "severity": "dire"}]})");
    EXPECT_EQ(severity.status().message(), "report.findings[0].severity: unknown value \"dire\"");
}

}  // namespace
}  // namespace gpudiag

namespace gpudiag {
namespace {

// render_json_line: every line, however big the report, is one parseable JSON object within the
// bound (a log line of 16 KiB), its most important findings kept in order, and says what it left
// out; a report that fits is the compact JSON unchanged.
void expect_bounded_line(const Report& report, std::size_t max_bytes) {
    std::string full = render_json(report, true);
    std::string line = render_json_line(report, max_bytes);
    ASSERT_FALSE(line.empty());
    EXPECT_LE(line.size(), max_bytes);
    EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1);
    if (full.size() <= max_bytes) {
        EXPECT_EQ(line, full);
        return;
    }
    EXPECT_NE(line.find("\"truncated\":{\"full_bytes\":" + std::to_string(full.size())),
              std::string::npos);
    auto back = parse_report_json(line);
    ASSERT_TRUE(back.is_ok()) << back.status().to_string();
    // The line's findings may be fewer: the full report's headline travels with it.
    EXPECT_NE(line.find("\"headline\":\"" + headline(report) + "\""), std::string::npos);
    ASSERT_LE(back->findings.size(), report.findings.size());
    for (std::size_t i = 0; i < back->findings.size(); ++i) {
        EXPECT_EQ(back->findings[i].id, report.findings[i].id);
    }
}

TEST(ReportJson, CompactLinesStayWithinTheLogLineLimit) {
    GPUDIAG_REQUIRE_CORPUS(testing::kStarvedTrace, testing::kSnapshot, testing::kRank0Trace,
                           testing::kRank1Trace);
    const Report& job = corpus_report({testing::kRank0Trace, testing::kRank1Trace});
    ASSERT_GT(render_json(job, true).size(), 16384u);  // the case the bound exists for
    for (const Report* r :
         {&job, &corpus_report({testing::kStarvedTrace}), &corpus_report({testing::kSnapshot})}) {
        expect_bounded_line(*r, 16384);
        expect_bounded_line(*r, 4096);  // deeper down the ladder: findings go last
    }
}

}  // namespace
}  // namespace gpudiag
