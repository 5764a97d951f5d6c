// SPDX-License-Identifier: Apache-2.0
// analyze_job: per-rank reports made apart, combined into one job report.
#include <gpudiag/job.hpp>

#include <gtest/gtest.h>

namespace gpudiag {
namespace {

Report rank_report(int rank, double busy) {
    Report r;
    r.source.rank = rank;
    r.source.world_size = 2;
    r.capture.events = 100;
    Section s;
    s.id = "timeline";
    s.figures.push_back({"busy_share", busy, Unit::kFraction, "busy"});
    r.sections.push_back(s);
    return r;
}

TEST(AnalyzeJob, EmptyIsInvalidArgument) {
    auto r = analyze_job({});
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST(AnalyzeJob, OneReportIsReturnedUnchanged) {
    auto r = analyze_job({rank_report(3, 0.5)});
    ASSERT_TRUE(r.is_ok());
    EXPECT_EQ(r->source.rank, 3);
    EXPECT_TRUE(r->ranks.empty());
}

TEST(AnalyzeJob, RanksAreSortedSummedAndTabulated) {
    auto r = analyze_job({rank_report(1, 0.4), rank_report(0, 0.9)});
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    ASSERT_EQ(r->ranks.size(), 2u);
    EXPECT_EQ(r->ranks[0].source.rank, 0);
    EXPECT_EQ(r->ranks[1].source.rank, 1);
    EXPECT_EQ(r->source.rank, -1);
    EXPECT_EQ(r->source.world_size, 2);
    EXPECT_EQ(r->capture.events, 200u);
    const Section* job = r->section("job");
    ASSERT_NE(job, nullptr);
    ASSERT_FALSE(job->tables.empty());
    EXPECT_EQ(job->tables[0].rows.size(), 2u);
}

}  // namespace
}  // namespace gpudiag
