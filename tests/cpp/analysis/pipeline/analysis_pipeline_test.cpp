// SPDX-License-Identifier: Apache-2.0
// The analysis pipeline: one report whoever feeds it (offline analysis and a live session give the
// same report for the same events), sinks that ride along get every batch, and a sink that throws
// either ends a file's analysis or, live, loses its batch alone and is said in the report.
#include <gpudiag/analyze.hpp>

#include "analysis/pipeline/analysis_pipeline.hpp"
#include "analysis/timeline/synthetic_timeline.hpp"

#include <gtest/gtest.h>

#include <new>
#include <stdexcept>
#include <string>
#include <vector>

namespace gpudiag::testing {
namespace {

// A starved loop into `t`: 10 steps of 10 ms, each waiting 4 ms for its batch before its kernels.
void starved_loop(SyntheticTimeline& t) {
    for (int i = 0; i < 10; ++i) {
        const std::uint64_t s = i * 10 * kMs;
        t.step(i, s, 10 * kMs);
        t.input_wait(s, 4 * kMs);
        for (int k = 0; k < 5; ++k) {
            const std::uint64_t start = s + 4 * kMs + 50 * kUs + k * kMs;
            t.kernel(start, kMs, start - 40 * kUs);
        }
    }
    std::stable_sort(t.events.begin(), t.events.end(),
                     [](const Event& a, const Event& b) { return a.start_ns < b.start_ns; });
}

struct CountingSink final : EventSink {
    std::size_t batches = 0;
    std::size_t events = 0;
    bool began = false;
    bool ended = false;
    void begin(const SourceInfo&, const StringTable&) override { began = true; }
    void consume(std::span<const Event> e) override {
        ++batches;
        events += e.size();
    }
    void end(const SourceSummary&) override { ended = true; }
};

struct ThrowingSink final : EventSink {
    bool out_of_memory = false;
    void consume(std::span<const Event>) override {
        if (out_of_memory) throw std::bad_alloc();
        throw std::runtime_error("disk full");
    }
};

Report run(detail::AnalysisPipeline& p, SyntheticTimeline& t) {
    SourceInfo info;
    info.producer = "simulated";
    p.begin(info, t.strings);
    const std::span<const Event> all(t.events);
    for (std::size_t i = 0; i < all.size(); i += 64) {
        p.consume(all.subspan(i, std::min<std::size_t>(64, all.size() - i)));
    }
    SourceSummary summary;
    summary.events = all.size();
    p.end(summary);
    return p.assemble(info, summary, p.delivered());
}

TEST(AnalysisPipeline, GivesTheReportOfflineAnalysisGives) {
    SyntheticTimeline t;
    starved_loop(t);
    detail::AnalysisPipeline p{AnalysisOptions{}};
    CountingSink along;
    p.add_sink(&along);
    const Report r = run(p, t);
    SourceInfo info;
    info.producer = "simulated";
    auto offline = analyze_events(t.events, info, t.strings);
    ASSERT_TRUE(offline.is_ok()) << offline.status().to_string();
    EXPECT_EQ(render_json(r), render_json(*offline));
    ASSERT_NE(r.finding("input_bound"), nullptr);
    EXPECT_TRUE(along.began && along.ended);
    EXPECT_EQ(along.events, t.events.size());
    EXPECT_EQ(p.memory_ledger() != nullptr, true);  // reached by type, without a cast
}

TEST(AnalysisPipeline, OfflineASinkThatThrowsEndsTheAnalysis) {
    SyntheticTimeline t;
    starved_loop(t);
    detail::AnalysisPipeline p{AnalysisOptions{}};
    ThrowingSink bad;
    p.add_sink(&bad);
    SourceInfo info;
    p.begin(info, t.strings);
    EXPECT_THROW(p.consume(std::span<const Event>(t.events)), std::runtime_error);
}

TEST(AnalysisPipeline, LiveASinkThatThrowsLosesItsBatchAloneAndIsSaid) {
    SyntheticTimeline t;
    starved_loop(t);
    detail::AnalysisPipeline p{AnalysisOptions{}, detail::AnalyzerBounds::live(),
                               detail::AnalysisPipeline::Failures::kIsolate};
    ThrowingSink bad;
    CountingSink after;
    p.add_sink(&bad);
    p.add_sink(&after);
    const Report r = run(p, t);
    EXPECT_EQ(after.events, t.events.size());      // the sink after the one that threw got them all
    ASSERT_NE(r.finding("input_bound"), nullptr);  // and so did the analyses
    std::vector<std::string> missing;
    p.add_failure_losses(missing);
    ASSERT_EQ(missing.size(), 1u);
    EXPECT_NE(missing[0].find(std::to_string(t.events.size()) + " events in"), std::string::npos)
        << missing[0];
    EXPECT_NE(missing[0].find("disk full"), std::string::npos) << missing[0];
    bad.out_of_memory = true;
    p.consume(std::span<const Event>(t.events).first(1));
    missing.clear();
    p.add_failure_losses(missing);
    EXPECT_NE(missing[0].find("host memory ran out"), std::string::npos) << missing[0];
}

}  // namespace
}  // namespace gpudiag::testing
