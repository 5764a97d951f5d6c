// SPDX-License-Identifier: Apache-2.0
// Recordings of a session left on for days stay bounded: a file with a size cap stops growing
// and says from when it misses events; a window keeps only the last N seconds in bounded memory,
// however long the run, and writes them when they matter (at stop, when asked, from a signal
// handler too, when a watch fires, when an allocation fails).
#include <gpudiag/gpudiag.hpp>

#include "api/dump_signal.hpp"
#include "session_test_support.hpp"
#include "temp_dir.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

namespace gpudiag {
namespace {

using testing::TempDir;

using testing::cpu_options;
using testing::make;
using testing::put;
using testing::wait_for;

namespace fs = std::filesystem;
using std::chrono::milliseconds;

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

Event device_alloc(std::uint64_t t, std::uint64_t address, std::uint64_t bytes) {
    Event e;
    e.kind = EventKind::kDeviceAlloc;
    e.device = 0;
    e.flags = static_cast<std::uint8_t>(MemoryKind::kDevice);
    e.start_ns = e.end_ns = t;
    e.memory.address = address;
    e.memory.bytes = bytes;
    return e;
}

bool contains(const std::vector<std::string>& lines, const char* text) {
    for (const auto& l : lines) {
        if (l.find(text) != std::string::npos) return true;
    }
    return false;
}

TEST(SessionRecording, AFileWithASizeCapStopsGrowingAndSaysFromWhen) {
    TempDir dir("recording");
    SessionOptions o = cpu_options(dir.file("capped.gpudiag"));
    o.record_max_bytes = 4 * kMiB;
    auto s = make(o);
    ASSERT_TRUE(s->start().is_ok());
    constexpr std::uint64_t kEvents = 200'000;  // 12.8 MB of events
    for (std::uint64_t i = 0; i < kEvents; ++i) put(*s, counter_at((i + 1) * 1000));
    ASSERT_TRUE(s->stop().is_ok());
    EXPECT_LE(fs::file_size(o.record_path), 4 * kMiB);
    auto info = read_recording_info(o.record_path);
    ASSERT_TRUE(info.is_ok()) << info.status().to_string();
    EXPECT_TRUE(info->closed_cleanly);
    EXPECT_GT(info->events, 0u);
    EXPECT_LT(info->events, kEvents);
    EXPECT_TRUE(contains(info->summary.missing, "size cap of 4 MiB"))
        << info->summary.missing.size();
    // Analysed, the recording says it is partial rather than giving an all-clear.
    auto r = analyze_files({o.record_path});
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_FALSE(r->input.complete);
}

// A 12-hour service, time-compressed: one sample every 100 ms of its clock. The window keeps the
// last minute on disk in files of at most 4 MiB, and at stop the recording holds one to two
// minutes and says what it does not hold.
TEST(SessionRecording, AWindowStaysUnderItsCapForALongRunAndKeepsTheLastMinute) {
    TempDir dir("recording");
    SessionOptions o = cpu_options(dir.file("window.gpudiag"));
    o.record_window_s = 60;
    o.record_window_bytes = 4 * kMiB;
    auto s = make(o);
    ASSERT_TRUE(s->start().is_ok());
    constexpr std::uint64_t kStep = kSecond / 10;
    constexpr std::uint64_t kEvents = 12 * 3600 * 10;  // 432 k
    const std::uint64_t t0 = 1000 * kSecond;
    for (std::uint64_t i = 0; i < kEvents; ++i) put(*s, counter_at(t0 + i * kStep));
    auto live = s->report();
    ASSERT_TRUE(live.is_ok());
    ASSERT_TRUE(contains(live->notes, "window-window.gpudiag holds the last"));
    ASSERT_TRUE(s->stop().is_ok());
    const std::uint64_t last = t0 + (kEvents - 1) * kStep;
    auto info = read_recording_info(o.record_path);
    ASSERT_TRUE(info.is_ok()) << info.status().to_string();
    EXPECT_TRUE(info->closed_cleanly);
    EXPECT_EQ(info->last_ns, last);
    // One to two minutes, after the state they begin with (the latest sample before them).
    EXPECT_LE(last - info->first_ns, 121 * kSecond);
    EXPECT_GE(last - info->first_ns, 60 * kSecond);
    EXPECT_GE(info->events, 602u);
    EXPECT_LE(info->events, 1203u);
    EXPECT_FALSE(fs::exists(dir.file("window-window.gpudiag")));  // moved to record_path
    EXPECT_LE(fs::file_size(o.record_path), 4 * kMiB + kMiB);
    EXPECT_TRUE(contains(info->summary.missing, "before the window"));
}

Session* g_signalled = nullptr;
extern "C" void ask_for_dump(int) {
    g_signalled->request_dump();
}

TEST(SessionRecording, ADumpCanBeAskedForFromASignalHandler) {
    TempDir dir("recording");
    SessionOptions o = cpu_options(dir.file("svc.gpudiag"));
    o.record_window_s = 600;
    auto s = make(o);
    ASSERT_TRUE(s->start().is_ok());
    for (std::uint64_t i = 0; i < 1000; ++i) put(*s, counter_at((i + 1) * 1000));
    g_signalled = s.get();
    struct sigaction action {};
    action.sa_handler = &ask_for_dump;
    struct sigaction previous {};
    ASSERT_EQ(::sigaction(SIGUSR1, &action, &previous), 0);
    ASSERT_EQ(::raise(SIGUSR1), 0);
    // Dumps are named <stem>-dump-<pid>-<UTC time>-<n>-<why>.
    EXPECT_TRUE(wait_for([&] { return dir.files("svc-dump-", "-requested.gpudiag").size() == 1; }));
    const std::string dump = dir.files("svc-dump-", "-requested.gpudiag").front();
    EXPECT_NE(dump.find("-dump-" + std::to_string(::getpid()) + "-"), std::string::npos) << dump;
    ::sigaction(SIGUSR1, &previous, nullptr);
    ASSERT_TRUE(s->stop().is_ok());
    auto info = read_recording_info(dump);
    ASSERT_TRUE(info.is_ok()) << info.status().to_string();
    EXPECT_TRUE(info->closed_cleanly);
    EXPECT_EQ(info->events, 1000u);
    EXPECT_TRUE(info->summary.missing.empty());  // nothing evicted yet: the whole run
    // dump() with a path writes at once; without a window it is an error, not a crash.
    auto plain = make(cpu_options(""));
    ASSERT_TRUE(plain->start().is_ok());
    EXPECT_EQ(plain->dump("x.gpudiag").code(), StatusCode::kFailedPrecondition);
    plain->request_dump();  // nothing to do
    EXPECT_EQ(Session::create([] {
                  SessionOptions bad;
                  bad.record_window_s = 60;  // no record_path
                  return bad;
              }())
                  .status()
                  .code(),
              StatusCode::kInvalidArgument);
}

TEST(SessionRecording, AWatchCrossingAndAFailedAllocationEachWriteADump) {
    TempDir dir("recording");
    SessionOptions o = cpu_options(dir.file("svc.gpudiag"));
    o.record_window_s = 600;
    auto s = make(o);
    std::atomic<int> fired{0};
    ASSERT_TRUE(s->watch_memory(std::uint64_t{1} << 30, [&](std::uint64_t) { ++fired; }).is_ok());
    ASSERT_TRUE(s->start().is_ok());
    put(*s, device_alloc(kSecond, 0x7000'0000, std::uint64_t{2} << 30));
    ASSERT_TRUE(wait_for([&] { return fired.load() == 1; }));
    EXPECT_TRUE(wait_for([&] { return dir.files("svc-dump-", "-1-watch.gpudiag").size() == 1; }));
    Event oom;
    oom.kind = EventKind::kOutOfMemory;
    oom.start_ns = oom.end_ns = 2 * kSecond;
    oom.oom.requested_bytes = kMiB;
    put(*s, oom);
    EXPECT_TRUE(wait_for([&] { return dir.files("svc-dump-", "-2-oom.gpudiag").size() == 1; }));
    auto r = s->report();
    ASSERT_TRUE(r.is_ok());
    EXPECT_TRUE(contains(r->notes, "2 dumps written"));
    ASSERT_TRUE(s->stop().is_ok());
    auto info = read_recording_info(dir.files("svc-dump-", "-2-oom.gpudiag").front());
    ASSERT_TRUE(info.is_ok());
    EXPECT_EQ(info->events, 2u);
    EXPECT_TRUE(fs::exists(o.record_path));  // the window, at stop
}

// The review's probe: a watch that fires twenty times, then an out-of-memory failure and an
// operator's request. The watch writes one dump (spaced), the other two are written all the same,
// and twenty requested dumps leave the first and the four latest.
TEST(SessionRecording, NoDumpIsRefusedAndOldOnesMakeRoom) {
    TempDir dir("dump_policy");
    SessionOptions o = cpu_options(dir.file("svc.gpudiag"));
    o.record_window_s = 600;
    auto s = make(o);
    std::atomic<int> fired{0};
    ASSERT_TRUE(s->watch_memory(std::uint64_t{1} << 30, [&](std::uint64_t) { ++fired; }).is_ok());
    ASSERT_TRUE(s->start().is_ok());
    for (std::uint64_t i = 0; i < 20; ++i) {  // up past the level and back below, twenty times
        put(*s, device_alloc((2 * i + 1) * kSecond, 0x7000'0000, std::uint64_t{2} << 30));
        Event free = device_alloc((2 * i + 2) * kSecond, 0x7000'0000, std::uint64_t{2} << 30);
        free.kind = EventKind::kDeviceFree;
        put(*s, free);
        ASSERT_TRUE(wait_for([&] { return fired.load() == static_cast<int>(i + 1); }));
    }
    Event oom;
    oom.kind = EventKind::kOutOfMemory;
    oom.start_ns = oom.end_ns = 50 * kSecond;
    oom.oom.requested_bytes = kMiB;
    put(*s, oom);
    EXPECT_TRUE(wait_for([&] { return dir.files("svc-dump-", "-oom.gpudiag").size() == 1; }));
    for (int i = 0; i < 20; ++i) ASSERT_TRUE(s->dump().is_ok());
    EXPECT_EQ(dir.files("svc-dump-", "-watch.gpudiag").size(), 1u);
    const auto requested = dir.files("svc-dump-", "-requested.gpudiag");
    EXPECT_EQ(requested.size(), 5u);  // the first and the four latest
    auto r = s->report();
    ASSERT_TRUE(r.is_ok());
    EXPECT_TRUE(contains(r->notes, "22 dumps written")) << render_text(*r);
    EXPECT_TRUE(contains(r->notes, "older ones were deleted"));
    EXPECT_TRUE(contains(r->notes, "wrote no dump (19 times)"));
    ASSERT_TRUE(s->stop().is_ok());
}

// A service restarted with the same record_path keeps the last run's recording aside and writes
// dumps under names the last run did not use: nothing of the crash's evidence is overwritten.
TEST(SessionRecording, ARestartTouchesNothingTheLastRunLeft) {
    TempDir dir("restart");
    SessionOptions o = cpu_options(dir.file("svc.gpudiag"));
    o.record_window_s = 600;
    std::vector<std::string> first_dumps;
    for (int run = 0; run < 2; ++run) {
        auto s = make(o);
        ASSERT_TRUE(s->start().is_ok());
        put(*s, counter_at(kSecond));
        ASSERT_TRUE(s->dump().is_ok());
        ASSERT_TRUE(s->stop().is_ok());
        if (run == 0) {
            first_dumps = dir.files("svc-dump-", ".gpudiag");
            continue;
        }
        auto r = s->report();
        ASSERT_TRUE(r.is_ok());
        EXPECT_TRUE(contains(r->notes, "was kept as"));
    }
    ASSERT_EQ(first_dumps.size(), 1u);
    EXPECT_EQ(dir.files("svc-dump-", ".gpudiag").size(), 2u);  // the first run's is still there
    EXPECT_EQ(dir.files("svc-previous-", ".gpudiag").size(), 1u);
    EXPECT_TRUE(fs::exists(o.record_path));
    for (const auto& f : dir.files("svc", ".gpudiag")) {
        auto info = read_recording_info(f);
        EXPECT_TRUE(info.is_ok() && info->closed_cleanly) << f;
    }
}

// A recording replayed through a live session (the example service without a GPU) is diagnosed
// as the offline analysis diagnoses it, and the report says it was a replay.
TEST(SessionRecording, AReplayedRecordingIsDiagnosedAsOfflineAndSaidToBeAReplay) {
    const std::string demo =
        std::string(GPUDIAG_TEST_DATA_DIR) + "/../../python/gpudiag/data/demo.gpudiag";
    if (!fs::exists(demo)) GTEST_SKIP() << "no bundled demo recording at " << demo;
    auto offline = analyze_files({demo});
    ASSERT_TRUE(offline.is_ok()) << offline.status().to_string();
    SessionOptions o = cpu_options("");
    auto s = make(o);
    EXPECT_EQ(s->replay(demo).code(), StatusCode::kFailedPrecondition);  // not running
    ASSERT_TRUE(s->start().is_ok());
    EXPECT_EQ(s->replay("/nonexistent.gpudiag").code(), StatusCode::kNotFound);
    ASSERT_TRUE(s->replay(demo).is_ok());
    ASSERT_TRUE(s->stop().is_ok());
    auto live = s->report();
    ASSERT_TRUE(live.is_ok());
    EXPECT_EQ(live->capture.events, offline->input.events);
    EXPECT_EQ(live->capture.dropped, 0u);
    std::vector<std::string> offline_ids;
    std::vector<std::string> live_ids;
    for (const auto& f : offline->findings) offline_ids.push_back(f.id);
    for (const auto& f : live->findings) live_ids.push_back(f.id);
    EXPECT_EQ(live_ids, offline_ids);
    EXPECT_TRUE(contains(live->notes, "Replayed into this session")) << render_text(*live);
    EXPECT_TRUE(contains(live->notes, "simulated"));
}

// Under the CUDA injection a signal asks for the dump (GPUDIAG_DUMP_SIGNAL, which
// `gpudiag run --window` sets); a program's own handler for it is left alone.
TEST(SessionRecording, ADumpSignalAsksTheSessionForADump) {
    EXPECT_EQ(detail::parse_dump_signal("USR2"), SIGUSR2);
    EXPECT_EQ(detail::parse_dump_signal("sigusr1"), SIGUSR1);
    EXPECT_EQ(detail::parse_dump_signal(std::to_string(SIGRTMIN + 1)), SIGRTMIN + 1);
    EXPECT_EQ(detail::parse_dump_signal("KILL"), 0);
    EXPECT_EQ(detail::parse_dump_signal("11"), 0);  // SIGSEGV is not for dumps
    EXPECT_EQ(detail::parse_dump_signal("whenever"), 0);
    TempDir dir("recording");
    SessionOptions o = cpu_options(dir.file("injected.gpudiag"));
    o.record_window_s = 600;
    auto s = make(o);
    ASSERT_TRUE(s->start().is_ok());
    put(*s, counter_at(kSecond));
    struct sigaction previous {};
    ASSERT_EQ(::sigaction(SIGUSR2, nullptr, &previous), 0);
    ASSERT_TRUE(detail::install_dump_signal(*s, SIGUSR2).is_ok());
    EXPECT_EQ(detail::install_dump_signal(*s, SIGKILL).code(), StatusCode::kInvalidArgument);
    ASSERT_EQ(::raise(SIGUSR2), 0);
    EXPECT_TRUE(
        wait_for([&] { return dir.files("injected-dump-", "-1-requested.gpudiag").size() == 1; }));
    ASSERT_EQ(::sigaction(SIGUSR2, &previous, nullptr), 0);
    // A program that handles the signal itself keeps its handler.
    struct sigaction own {};
    own.sa_handler = [](int) {};
    ASSERT_EQ(::sigaction(SIGUSR2, &own, nullptr), 0);
    EXPECT_EQ(detail::install_dump_signal(*s, SIGUSR2).code(), StatusCode::kFailedPrecondition);
    ASSERT_EQ(::sigaction(SIGUSR2, &previous, nullptr), 0);
    ASSERT_TRUE(s->stop().is_ok());
}

// A real trace (HTA's inference_rank_1, from the corpus) replays through a session as well, and
// is diagnosed as the offline analysis diagnoses it.
TEST(SessionRecording, ARealTraceReplaysThroughASession) {
    const std::string trace =
        std::string(GPUDIAG_CORPUS_DIR) + "/kineto_traces/hta_inference_rank_1.json.gz";
    if (!fs::exists(trace)) GTEST_SKIP() << "corpus not beside the checkout: " << trace;
    auto offline = analyze_files({trace});
    ASSERT_TRUE(offline.is_ok()) << offline.status().to_string();
    auto s = make(cpu_options(""));
    ASSERT_TRUE(s->start().is_ok());
    ASSERT_TRUE(s->replay(trace).is_ok());
    ASSERT_TRUE(s->stop().is_ok());
    auto live = s->report();
    ASSERT_TRUE(live.is_ok());
    EXPECT_EQ(live->capture.events, offline->input.events);
    std::vector<std::string> offline_ids;
    std::vector<std::string> live_ids;
    for (const auto& f : offline->findings) offline_ids.push_back(f.id);
    for (const auto& f : live->findings) live_ids.push_back(f.id);
    EXPECT_EQ(live_ids, offline_ids);
    EXPECT_TRUE(contains(live->notes, "Replayed into this session"));
}

}  // namespace
}  // namespace gpudiag
