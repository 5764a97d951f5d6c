// SPDX-License-Identifier: Apache-2.0
// The compact event runs: exact round trips of every field, and a replay in stable start order.
#include "core/event_runs.hpp"

#include <gpudiag/string_table.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

namespace gpudiag::detail {
namespace {

// Events with every field drawn at random, of the kinds importers produce, in file-like disorder.
std::vector<Event> random_events(std::size_t n, std::uint32_t seed) {
    std::mt19937_64 rng(seed);
    const EventKind kinds[] = {EventKind::kKernel, EventKind::kMemcpy,     EventKind::kApiCall,
                               EventKind::kRange,  EventKind::kBlockAlloc, EventKind::kCounter,
                               EventKind::kSync,   EventKind::kAnnotation};
    std::vector<Event> out(n);
    for (auto& e : out) {
        e.kind = kinds[rng() % std::size(kinds)];
        e.flags = static_cast<std::uint8_t>(rng() % 3 == 0 ? rng() : 0);
        e.device = static_cast<std::uint16_t>(rng() % 4 == 0 ? kNoDevice : rng() % 8);
        e.stream = static_cast<std::uint32_t>(rng() % 16);
        e.process = static_cast<std::uint32_t>(rng() % 3 == 0 ? rng() : 4242);
        e.thread = static_cast<std::uint32_t>(rng() % 5);
        e.start_ns = 1'700'000'000'000'000'000ull + rng() % 5'000'000'000ull;
        const std::uint64_t r = rng() % 10;
        e.end_ns = r == 0   ? e.start_ns
                   : r == 1 ? e.start_ns - rng() % 1000
                            : e.start_ns + rng() % 100'000;
        for (auto& b : e.raw) b = static_cast<std::uint8_t>(rng() % 4 == 0 ? rng() : 0);
    }
    return out;
}

bool same(const Event& a, const Event& b) {
    return std::memcmp(&a, &b, sizeof(Event)) == 0;
}

TEST(EventRuns, EncodeDecodeIsExactForEveryField) {
    const auto events = random_events(20000, 7);
    EventRun run;
    encode_run(events, {}, run);
    EXPECT_EQ(run.events, events.size());
    const auto back = decode_run(run);
    ASSERT_EQ(back.size(), events.size());
    for (std::size_t i = 0; i < events.size(); ++i) ASSERT_TRUE(same(back[i], events[i])) << i;
}

TEST(EventRuns, SortedImporterLikeEventsTakeFewBytes) {
    // A kernel stream as a trace holds it: same names, counting correlations, close starts.
    std::vector<Event> events(10000);
    for (std::size_t i = 0; i < events.size(); ++i) {
        Event& e = events[i];
        e.kind = EventKind::kKernel;
        e.device = 0;
        e.stream = 7;
        e.start_ns = 1'000'000'000 + i * 2'500;
        e.end_ns = e.start_ns + 1'800 + i % 50;
        e.kernel.name = static_cast<StringId>(2 + i % 40);
        e.kernel.correlation = static_cast<std::uint32_t>(1000 + i * 2);
        e.kernel.grid_size = 80;
        e.kernel.block_size = 256;
    }
    EventRun run;
    encode_run(events, {}, run);
    EXPECT_LT(run.bytes.size(), events.size() * 12);  // vs 64 bytes per Event
}

class CountingSink final : public EventSink {
public:
    void consume(std::span<const Event> events) override {
        seen.insert(seen.end(), events.begin(), events.end());
        ++batches;
    }
    std::vector<Event> seen;
    int batches = 0;
};

TEST(EventRuns, ReplayIsTheStableStartOrderOfAllRuns) {
    // Four runs cut out of one input, each sorted on its own: the merge must equal a stable sort
    // of the whole, ties resolved by input position.
    auto events = random_events(8000, 11);
    for (auto& e : events) e.start_ns = 1000 + e.start_ns % 700;  // many equal starts
    EventRunSet set;
    const std::size_t pieces = 4;
    for (std::size_t p = 0; p < pieces; ++p) {
        std::vector<Event> piece(events.begin() + static_cast<std::ptrdiff_t>(p * 2000),
                                 events.begin() + static_cast<std::ptrdiff_t>((p + 1) * 2000));
        std::vector<std::uint64_t> order(piece.size());
        for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
        std::stable_sort(order.begin(), order.end(), [&](std::uint64_t a, std::uint64_t b) {
            return piece[a].start_ns < piece[b].start_ns;
        });
        EventRun run;
        encode_run(piece, order, run);
        set.add(std::move(run));
    }
    std::vector<Event> expected = events;
    std::stable_sort(expected.begin(), expected.end(),
                     [](const Event& a, const Event& b) { return a.start_ns < b.start_ns; });
    CountingSink sink;
    set.replay(sink, 1000);
    ASSERT_EQ(sink.seen.size(), expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i)
        ASSERT_TRUE(same(sink.seen[i], expected[i])) << i;
    EXPECT_EQ(sink.batches, 8);
    EXPECT_EQ(set.events(), 8000u);
}

TEST(EventRuns, StringIdsAreMappedOnReplay) {
    Event k;
    k.kind = EventKind::kKernel;
    k.kernel.name = 2;
    Event a;
    a.kind = EventKind::kApiCall;
    a.api.name = 3;
    a.start_ns = 5;
    Event stray;
    stray.kind = EventKind::kRange;
    stray.range.name = 99;  // past the map: stands for dropped strings
    stray.start_ns = 6;
    EventRun run;
    const std::vector<Event> events{k, a, stray};
    encode_run(events, {}, run);
    run.remap = {kNoString, StringTable::kOverflowString, 40, 41};
    EventRunSet set;
    set.add(std::move(run));
    set.map_strings({0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,   0,
                     0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 140, 141});
    CountingSink sink;
    set.replay(sink);
    ASSERT_EQ(sink.seen.size(), 3u);
    EXPECT_EQ(sink.seen[0].kernel.name, 140u);
    EXPECT_EQ(sink.seen[1].api.name, 141u);
    EXPECT_EQ(sink.seen[2].range.name, StringTable::kOverflowString);
}

}  // namespace
}  // namespace gpudiag::detail
