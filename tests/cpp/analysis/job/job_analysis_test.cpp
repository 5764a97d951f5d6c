// SPDX-License-Identifier: Apache-2.0
// Cross-rank findings from synthetic ranks: a straggler, and a balanced job without one.
#include "analysis/job/job_analysis.hpp"
#include "analysis/timeline/synthetic_timeline.hpp"

#include <gtest/gtest.h>

namespace gpudiag::testing {
namespace {

const char* kNccl = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)";

// One rank: compute, then an all-reduce that ends at the same time on every rank (it waits for
// the last rank to arrive).
Report rank_report(std::int32_t rank, std::uint64_t compute) {
    SyntheticTimeline t;
    for (int i = 0; i < 10; ++i) {
        std::uint64_t s = i * 10 * kMs;
        t.step(i, s, 10 * kMs);
        t.kernel(s + 100 * kUs, compute, s);
        std::uint64_t comm_start = s + 100 * kUs + compute;
        t.kernel(comm_start, s + 9 * kMs - comm_start, s + 10 * kUs, kNccl, 20);
    }
    auto r = t.analyze(AnalysisWindow::kSteps, rank);
    EXPECT_TRUE(r.is_ok());
    return *r;
}

TEST(JobAnalysis, NamesTheStragglerRank) {
    Report job;
    for (int rank = 0; rank < 4; ++rank) {
        job.ranks.push_back(rank_report(rank, rank == 2 ? 7 * kMs : 4 * kMs));
    }
    detail::analyze_job(job, AnalysisOptions{});
    const Finding* f = job.finding("rank_straggler");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->rank, 2);
    const Section* s = job.section("job");
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->figure("slowest_rank")->value, 2);
    EXPECT_GT(s->figure("communication_share")->value, 0.2);
    ASSERT_NE(s->figure("comm_overlap_share"), nullptr);
    EXPECT_NE(job.finding("comm_imbalance"), nullptr);
}

TEST(JobAnalysis, BalancedJobHasNoStraggler) {
    Report job;
    for (int rank = 0; rank < 4; ++rank) job.ranks.push_back(rank_report(rank, 4 * kMs));
    detail::analyze_job(job, AnalysisOptions{});
    EXPECT_EQ(job.finding("rank_straggler"), nullptr);
    EXPECT_EQ(job.finding("comm_imbalance"), nullptr);
    ASSERT_NE(job.section("job"), nullptr);
}

}  // namespace
}  // namespace gpudiag::testing
