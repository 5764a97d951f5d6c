// SPDX-License-Identifier: Apache-2.0
// RecordingWindow: bounded memory whatever the run length, and a dump that holds the window.
#include "recording/recording_window.hpp"

#include <gpudiag/recording.hpp>

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace gpudiag {
namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

Event counter_at(std::uint64_t t) {
    Event e;
    e.kind = EventKind::kCounter;
    e.device = 0;
    e.start_ns = e.end_ns = t;
    e.counter.counter = CounterKind::kGpuUtilizationPercent;
    e.counter.value = 50;
    return e;
}

TEST(RecordingWindow, HoldsAtMostItsCapPlusAChunkWhateverTheRunLength) {
    detail::RecordingWindow w(3600, 4 * kMiB);  // an hour, but only 4 MiB
    StringTable strings;
    w.begin(SourceInfo{}, strings);
    std::vector<Event> batch(1000);
    std::uint64_t most = 0;
    for (std::uint64_t round = 0; round < 1000; ++round) {  // 1 M events, 64 MB
        for (std::size_t i = 0; i < batch.size(); ++i) {
            batch[i] = counter_at((round * batch.size() + i + 1) * 1000);
        }
        w.consume(batch);
        most = std::max(most, w.bytes_held());
    }
    EXPECT_LE(most, 4 * kMiB + detail::RecordingWindow::kChunkEvents * sizeof(Event));
    EXPECT_GE(w.events_held(), 4 * kMiB / sizeof(Event) - detail::RecordingWindow::kChunkEvents);
    EXPECT_EQ(w.events_held() + w.events_evicted(), 1'000'000u);
}

// Chunks go whole, but a dump holds the window exactly and says what came before it.
TEST(RecordingWindow, ADumpHoldsTheWindowAndSaysWhatCameBefore) {
    detail::RecordingWindow w(10, 64 * kMiB);  // ten seconds
    StringTable strings;
    w.begin(SourceInfo{}, strings);
    std::vector<Event> events;
    for (std::uint64_t i = 1; i <= 100; ++i) events.push_back(counter_at(i * 1'000'000'000ull));
    w.consume(events);  // 100 s, one event a second: all in one chunk
    EXPECT_EQ(w.events_held(), 100u);
    const std::string path =
        ::testing::TempDir() + "gpudiag_window_" + std::to_string(::getpid()) + ".gpudiag";
    ASSERT_TRUE(w.write(path, SourceSummary{}).is_ok());
    auto info = read_recording_info(path);
    ASSERT_TRUE(info.is_ok()) << info.status().to_string();
    EXPECT_EQ(info->events, 11u);  // seconds 90..100
    EXPECT_EQ(info->first_ns, 90'000'000'000ull);
    ASSERT_EQ(info->summary.missing.size(), 1u);
    EXPECT_NE(info->summary.missing.front().find("the 89 events before the window"),
              std::string::npos)
        << info->summary.missing.front();
    std::remove(path.c_str());
}

}  // namespace
}  // namespace gpudiag
