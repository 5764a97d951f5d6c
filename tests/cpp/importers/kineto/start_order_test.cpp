// SPDX-License-Identifier: Apache-2.0
// sort_by_start against std::stable_sort: interleaved per-thread runs (the shape of a Kineto
// trace), equal starts, and a stray timestamp too far away to pack into the radix keys.
#include "importers/kineto/start_order.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace gpudiag {
namespace {

std::vector<Event> events_with_starts(const std::vector<std::uint64_t>& starts) {
    std::vector<Event> events(starts.size());
    for (std::size_t i = 0; i < starts.size(); ++i) {
        events[i].start_ns = starts[i];
        events[i].end_ns = starts[i] + 1;
        events[i].thread = static_cast<std::uint32_t>(i);  // identifies the input position
    }
    return events;
}

void expect_stable_sorted(std::vector<Event> events) {
    std::vector<Event> expected = events;
    std::stable_sort(expected.begin(), expected.end(),
                     [](const Event& a, const Event& b) { return a.start_ns < b.start_ns; });
    detail::sort_by_start(events);
    ASSERT_EQ(events.size(), expected.size());
    for (std::size_t i = 0; i < events.size(); ++i) {
        ASSERT_EQ(events[i].start_ns, expected[i].start_ns) << "at " << i;
        ASSERT_EQ(events[i].thread, expected[i].thread) << "at " << i;
        ASSERT_EQ(events[i].end_ns, expected[i].end_ns) << "at " << i;
    }
}

TEST(StartOrder, InterleavedRunsAsInAKinetoTrace) {
    // Three "threads" written one after the other, each in time order, with coarse timestamps so
    // that many starts coincide.
    std::mt19937_64 rng(7);
    std::vector<std::uint64_t> starts;
    const std::uint64_t epoch = 1'669'783'687'464'181'000ull;  // epoch ns, as Kineto gives them
    for (int run = 0; run < 3; ++run) {
        std::uint64_t t = epoch;
        for (int i = 0; i < 20000; ++i) {
            t += (rng() % 4) * 1000;
            starts.push_back(t);
        }
    }
    expect_stable_sorted(events_with_starts(starts));
}

TEST(StartOrder, RandomStartsOverSeveralDigits) {
    std::mt19937_64 rng(11);
    std::vector<std::uint64_t> starts(50000);
    for (auto& s : starts) s = 5'000'000'000ull + rng() % (std::uint64_t{1} << 38);
    expect_stable_sorted(events_with_starts(starts));
}

TEST(StartOrder, StrayTimestampFallsBackToComparisonSort) {
    std::mt19937_64 rng(3);
    std::vector<std::uint64_t> starts(10000);
    for (auto& s : starts) s = 1'700'000'000'000'000'000ull + rng() % 1'000'000;
    starts[17] = 0;  // a zero timestamp: the span no longer fits beside the index bits
    starts[4000] = starts[4001];
    expect_stable_sorted(events_with_starts(starts));
}

TEST(StartOrder, SortedEmptyAndTinyInputsAreLeftAlone) {
    expect_stable_sorted(events_with_starts({}));
    expect_stable_sorted(events_with_starts({42}));
    expect_stable_sorted(events_with_starts({1, 2, 2, 3}));
    expect_stable_sorted(events_with_starts({3, 2, 2, 1}));
    expect_stable_sorted(events_with_starts({UINT64_MAX, 0}));
}

}  // namespace
}  // namespace gpudiag
