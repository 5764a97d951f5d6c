// SPDX-License-Identifier: Apache-2.0
// Cross-rank findings from synthetic ranks: a straggler, and a balanced job without one.
#include "analysis/job/job_analysis.hpp"
#include "analysis/timeline/synthetic_timeline.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace gpudiag::testing {
namespace {

const char* kNccl =
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)";

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

// One rank of a data-parallel step (20 ms): forward (3 ms), then backward in three buckets of
// `bucket` each, every bucket's gradients all-reduced on the NCCL stream as soon as they are
// ready; an all-reduce ends 0.3 ms after the last rank joined it, at the same moment on every rank.
// The optimizer waits for the last one, and the host's step ends with loss.item() after it: the
// step takes 10 ms on every rank, whichever is slow.
Report ddp_rank(std::int32_t rank, const std::vector<std::uint64_t>& bucket_of_rank) {
    const std::uint64_t bucket = bucket_of_rank[static_cast<std::size_t>(rank)];
    const std::uint64_t slowest = *std::max_element(bucket_of_rank.begin(), bucket_of_rank.end());
    SyntheticTimeline t;
    for (int i = 0; i < 10; ++i) {
        const std::uint64_t s = static_cast<std::uint64_t>(i) * 10 * kMs;
        t.step(i, s, 10 * kMs);
        t.kernel(s + 100 * kUs, 3 * kMs, s);  // forward
        std::uint64_t previous_end = 0;
        for (std::uint64_t b = 0; b < 3; ++b) {
            const std::uint64_t ready = s + 3'100 * kUs + (b + 1) * bucket;
            t.kernel(ready - bucket, bucket, s + (10 + b) * kUs);  // backward of bucket b
            const std::uint64_t start = std::max(ready, previous_end);
            const std::uint64_t end =
                std::max(s + 3'100 * kUs + (b + 1) * slowest, previous_end) + 300 * kUs;
            t.kernel(start, end - start, s + (20 + b) * kUs, kNccl, 20);  // its all-reduce
            previous_end = end;
        }
        t.kernel(previous_end, 500 * kUs, s + 30 * kUs);  // the optimizer, after the last one
        t.api(s + 40 * kUs, previous_end + 505 * kUs - (s + 40 * kUs), "cudaStreamSynchronize");
    }
    AnalysisOptions options;
    options.for_job = true;
    auto r = t.analyze_with(options, rank);
    EXPECT_TRUE(r.is_ok());
    return *r;
}

TEST(JobAnalysis, ABackwardStragglerIsFoundByTheGpuThoughEveryStepTakesAsLong) {
    // Rank 2's backward takes 2 ms per bucket, the others' 1.2 ms.
    const std::vector<std::uint64_t> bucket{1'200 * kUs, 1'200 * kUs, 2 * kMs, 1'200 * kUs};
    Report job;
    for (int rank = 0; rank < 4; ++rank) job.ranks.push_back(ddp_rank(rank, bucket));
    for (const auto& r : job.ranks) {
        EXPECT_EQ(timeline_figure(r, "step_time_ns"), 10.0 * kMs);  // the wall clock sees nothing
    }
    detail::analyze_job(job, AnalysisOptions{});
    const Section* s = job.section("job");
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->figure("collectives_matched")->value, 30);
    EXPECT_EQ(s->figure("gpu_late_rank")->value, 2);
    const Finding* f = job.finding("rank_straggler");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->rank, 2);
    double last = 0, own = 0, typical = 0;
    for (const auto& fig : f->figures) {
        if (fig.key == "collectives_last") last = fig.value;
        if (fig.key == "compute_before_ns") own = fig.value;
        if (fig.key == "median_compute_before_ns") typical = fig.value;
    }
    EXPECT_EQ(last, 30);  // last at every all-reduce
    EXPECT_GT(own, typical);
    EXPECT_NE(f->summary.find("slow in the compute before them"), std::string::npos) << f->summary;
    // The others wait for it at each all-reduce: 0.8 + 1.6 + 1.7 ms per step ...
    double wait = 0;
    for (const auto& fig : f->figures) {
        if (fig.key == "wait_ns") wait = fig.value;
    }
    EXPECT_NEAR(wait, 4.1 * kMs, 1e3);
    // ... but the waits overlap their own backward: their GPUs finish 2.4 ms earlier without
    // them, and their replayed critical paths with all collective time hidden (2.7 ms: the last
    // all-reduce's own 0.3 ms as well) bound what bringing rank 2 on time saves.
    EXPECT_NEAR(f->saving_ns(), 2.7 * kMs, 1e3);
    EXPECT_NE(f->summary.find("off the other ranks' critical path"), std::string::npos)
        << f->summary;
    EXPECT_EQ(f->severity, Severity::kCritical);  // 27 % of the step
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
