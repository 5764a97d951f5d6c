// SPDX-License-Identifier: Apache-2.0
// RecordingWindow: a window on disk, bounded whatever the run length, that holds at least the
// window, begins with the state from before it, and says what it covers.
#include "recording/recording_window.hpp"

#include <gpudiag/recording.hpp>

#include "temp_dir.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace gpudiag {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr std::uint64_t kSecond = 1'000'000'000ull;

Event counter_at(std::uint64_t t) {
    Event e;
    e.kind = EventKind::kCounter;
    e.device = 0;
    e.start_ns = e.end_ns = t;
    e.counter.counter = CounterKind::kGpuUtilizationPercent;
    e.counter.value = 50;
    return e;
}

Event memory(EventKind kind, std::uint64_t t, std::uint64_t address, std::uint64_t bytes) {
    Event e;
    e.kind = kind;
    e.device = 0;
    e.flags = static_cast<std::uint8_t>(MemoryKind::kDevice);
    e.start_ns = e.end_ns = t;
    e.memory.address = address;
    e.memory.bytes = bytes;
    return e;
}

bool contains(const std::vector<std::string>& lines, const std::string& part) {
    return std::any_of(lines.begin(), lines.end(),
                       [&](const std::string& l) { return l.find(part) != std::string::npos; });
}

// Every event counted while it streams.
struct Tally final : EventSink {
    void consume(std::span<const Event> events) override {
        for (const Event& e : events) {
            if (e.kind == EventKind::kDeviceAlloc) held += e.memory.bytes;
            if (e.kind == EventKind::kDeviceFree) held -= e.memory.bytes;
            ++count;
        }
    }
    std::uint64_t held = 0;
    std::uint64_t count = 0;
};

// An hour's window in 4 MiB: 1 M events (64 MB) never take more than two files of about the cap
// on disk, and the window file always opens and holds the latest events.
TEST(RecordingWindow, DiskStaysBoundedWhateverTheRunLength) {
    TempDir dir("window");
    StringTable strings;  // outlives the window, whose writers read it
    detail::RecordingWindow w(dir.file("svc.gpudiag"), 3600, 4 * kMiB,
                              std::chrono::milliseconds(250));
    ASSERT_TRUE(w.open().is_ok());
    w.begin(SourceInfo{}, strings);
    std::vector<Event> batch(1000);
    std::uint64_t most = 0;
    for (std::uint64_t round = 0; round < 1000; ++round) {
        for (std::size_t i = 0; i < batch.size(); ++i) {
            batch[i] = counter_at((round * batch.size() + i + 1) * 1000);
        }
        w.consume(batch);
        ASSERT_TRUE(w.flush().is_ok());
        most = std::max(most, w.bytes_on_disk());
    }
    EXPECT_LE(most, 2 * 4 * kMiB + kMiB);
    EXPECT_GE(w.events_held(), 2 * kMiB / sizeof(Event));  // half the cap at least
    auto info = read_recording_info(w.path());
    ASSERT_TRUE(info.is_ok()) << info.status().to_string();
    EXPECT_EQ(info->last_ns, 1'000'000u * 1000);
    EXPECT_FALSE(info->closed_cleanly);  // still being written: it opens all the same
}

// One event a second for 100 s in a 10 s window: the window file covers 10 to 20 s, ends with
// the latest event, and at finish moves to record_path saying what it covers and what it lacks.
TEST(RecordingWindow, HoldsOneToTwoWindowsAndSaysSo) {
    TempDir dir("window");
    const std::string record = dir.file("svc.gpudiag");
    StringTable strings;  // outlives the window, whose writers read it
    detail::RecordingWindow w(record, 10, 64 * kMiB, std::chrono::milliseconds(250));
    ASSERT_TRUE(w.open().is_ok());
    w.begin(SourceInfo{}, strings);
    for (std::uint64_t i = 1; i <= 100; ++i) {
        const Event e = counter_at(i * kSecond);
        w.consume({&e, 1});
        ASSERT_GE(w.seconds_held(), std::min<double>(static_cast<double>(i - 1), 10.0));
        ASSERT_LE(w.seconds_held(), 21.0);  // two windows and the batch that found it full
    }
    EXPECT_TRUE(fs::exists(detail::RecordingWindow::next_path(record)));
    ASSERT_TRUE(w.finish(SourceSummary{}).is_ok());
    EXPECT_FALSE(fs::exists(detail::RecordingWindow::next_path(record)));
    EXPECT_FALSE(fs::exists(w.path()));
    auto info = read_recording_info(record);
    ASSERT_TRUE(info.is_ok()) << info.status().to_string();
    EXPECT_TRUE(info->closed_cleanly);
    EXPECT_EQ(info->last_ns, 100 * kSecond);
    // The state (the latest level before the window) and 10 to 20 s of the window.
    EXPECT_GE(info->events, 11u);
    EXPECT_LE(info->events, 22u);
    EXPECT_TRUE(contains(info->summary.notes, "it covers the last"));
    EXPECT_TRUE(contains(info->summary.missing, "before the window are not in this recording"));
}

// Memory allocated long before the window and never freed is in every window file and dump:
// the held level read from a dump equals the session's, however long ago it was allocated.
TEST(RecordingWindow, ADumpBeginsWithWhatWasHeldBeforeIt) {
    TempDir dir("window");
    StringTable strings;  // outlives the window, whose writers read it
    detail::RecordingWindow w(dir.file("svc.gpudiag"), 10, 64 * kMiB,
                              std::chrono::milliseconds(250));
    ASSERT_TRUE(w.open().is_ok());
    w.begin(SourceInfo{}, strings);
    std::uint64_t held = 0;
    for (std::uint64_t i = 1; i <= 1000; ++i) {
        std::vector<Event> batch;
        batch.push_back(memory(EventKind::kDeviceAlloc, i * kSecond, 0x1000 * i, kMiB));  // kept
        batch.push_back(memory(EventKind::kDeviceAlloc, i * kSecond + 1, 0x7000'0000, 8 * kMiB));
        batch.push_back(memory(EventKind::kDeviceFree, i * kSecond + 2, 0x7000'0000, 8 * kMiB));
        w.consume(batch);
        held += kMiB;
    }
    const std::string dump = dir.file("dump.gpudiag");
    ASSERT_TRUE(w.write(dump, SourceSummary{}).is_ok());
    Tally tally;
    StringTable read_strings;
    ASSERT_TRUE(read_recording(dump, tally, read_strings).is_ok());
    EXPECT_EQ(tally.held, held);
    EXPECT_LT(tally.count, 1000u + 3 * 20 + 1);  // the state is one event per live allocation
    auto info = read_recording_info(dump);
    ASSERT_TRUE(info.is_ok());
    EXPECT_TRUE(info->closed_cleanly);
    EXPECT_EQ(info->first_ns, 1 * kSecond);  // the oldest live allocation, at its own time
    EXPECT_TRUE(contains(info->summary.notes, "live allocations"));
    EXPECT_EQ(info->source.property("gpudiag.window.seconds"), "10");
}

// A window file a crashed run left next to a new one is replaced only through open(): the next
// file it left is removed (the window file held all of it).
TEST(RecordingWindow, OpenRemovesTheNextFileACrashedRunLeft) {
    TempDir dir("window");
    const std::string record = dir.file("svc.gpudiag");
    {
        std::FILE* f = std::fopen(detail::RecordingWindow::next_path(record).c_str(), "w");
        ASSERT_NE(f, nullptr);
        std::fclose(f);
    }
    detail::RecordingWindow w(record, 10, 64 * kMiB, std::chrono::milliseconds(250));
    ASSERT_TRUE(w.open().is_ok());
    EXPECT_FALSE(fs::exists(detail::RecordingWindow::next_path(record)));
    EXPECT_EQ(detail::RecordingWindow::window_path(record), dir.file("svc-window.gpudiag"));
    EXPECT_EQ(detail::RecordingWindow::window_path("/a.b/run"), "/a.b/run-window");
}

}  // namespace
}  // namespace gpudiag
