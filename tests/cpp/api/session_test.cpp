// SPDX-License-Identifier: Apache-2.0
// Session end to end on a machine without a GPU: framework events go through the channel, the
// worker, the analyzers and the recording exactly as live CUPTI events would.
#include <gpudiag/gpudiag.hpp>

#include "api/record_path.hpp"
#include "session_test_support.hpp"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <stdexcept>
#include <thread>

namespace gpudiag {
namespace {

using testing::cpu_options;
using testing::make;

Event block(EventKind kind, std::uint64_t address, std::uint64_t bytes, StringId site,
            std::uint64_t t) {
    Event e;
    e.kind = kind;
    e.device = 0;
    e.start_ns = e.end_ns = t;
    e.memory.address = address;
    e.memory.bytes = bytes;
    e.memory.aux = bytes;
    e.memory.site = site;
    return e;
}

// Every live report says what gpudiag cost: CPU time against the process' and a step's, the
// memory it holds and the events it handled, in text, JSON and Prometheus alike.
TEST(Session, EveryLiveReportSaysWhatItCost) {
    auto s = make();
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(s->start().is_ok());
    for (std::uint64_t step = 0; step < 20; ++step) {
        s->step_begin(step);
        const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(3);
        while (std::chrono::steady_clock::now() < until) {
        }
        s->step_end(step);
    }
    ASSERT_TRUE(s->stop().is_ok());
    auto report = s->report();
    ASSERT_TRUE(report.is_ok());
    const Section* cost = report->section("cost");
    ASSERT_NE(cost, nullptr) << render_text(*report);
    ASSERT_NE(cost->figure("cpu_ns"), nullptr);
    EXPECT_GT(cost->figure("cpu_ns")->value, 0);
    ASSERT_NE(cost->figure("cpu_share_of_process"), nullptr);
    EXPECT_GT(cost->figure("cpu_share_of_process")->value, 0);
    EXPECT_LE(cost->figure("cpu_share_of_process")->value, 1);
    ASSERT_NE(cost->figure("share_of_step"), nullptr) << render_text(*report);
    EXPECT_LT(cost->figure("share_of_step")->value, 1);
    EXPECT_GT(cost->figure("memory_bytes")->value, 0);
    EXPECT_EQ(cost->figure("events")->value, static_cast<double>(report->capture.events));
    EXPECT_NE(render_text(*report).find("gpudiag's own cost:"), std::string::npos);
    EXPECT_NE(render_json(*report).find("\"cost\""), std::string::npos);
    EXPECT_NE(render_prometheus(*report).find("gpudiag_cost_cpu"), std::string::npos)
        << render_prometheus(*report);
    // Stopped, the figures are those measured at stop: a later report reads the same.
    auto again = s->report();
    ASSERT_TRUE(again.is_ok());
    EXPECT_EQ(again->section("cost")->figure("cpu_ns")->value, cost->figure("cpu_ns")->value);
}

TEST(Session, RejectsBadOptions) {
    SessionOptions o = cpu_options();
    o.queue_capacity = 1000;  // not a power of two
    EXPECT_EQ(Session::create(o).status().code(), StatusCode::kInvalidArgument);
    o = cpu_options();
    o.report_period_ms = 10;  // without a callback
    EXPECT_EQ(Session::create(o).status().code(), StatusCode::kInvalidArgument);
    o = cpu_options();
    o.record_path = "/nonexistent-dir/x.gpudiag";
    auto s = make(o);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->start().code(), StatusCode::kNotFound);
}

TEST(Session, LifecycleMisuseIsAnErrorNotACrash) {
    auto s = make();
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->stop().code(), StatusCode::kFailedPrecondition);  // stop before start
    EXPECT_EQ(s->report().status().code(), StatusCode::kFailedPrecondition);
    ASSERT_TRUE(s->start().is_ok());
    EXPECT_EQ(s->start().code(), StatusCode::kFailedPrecondition);  // double start
    EXPECT_TRUE(s->running());
    ASSERT_TRUE(s->stop().is_ok());
    EXPECT_EQ(s->stop().code(), StatusCode::kFailedPrecondition);   // double stop
    EXPECT_EQ(s->start().code(), StatusCode::kFailedPrecondition);  // no restart
    EXPECT_TRUE(s->report().is_ok());  // the final report stays available
}

TEST(Session, PlantedLeakIsFoundLiveAndInTheRecording) {
    auto path = (std::filesystem::temp_directory_path() /
                 ("gpudiag_session_" + std::to_string(::getpid()) + ".gpudiag"))
                    .string();
    SessionOptions o = cpu_options();
    o.record_path = path;
    auto s = make(o);
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(s->start().is_ok());
    StringId leak_site = s->intern("train.py:42 keep_activations");
    StringId temp_site = s->intern("model.py:10 forward");
    Event segment = block(EventKind::kSegmentAlloc, 0x1000'0000, std::uint64_t{1} << 30, 0, 0);
    ASSERT_TRUE(s->record(segment));
    std::uint64_t leak_address = 0x1000'0000;
    for (std::uint64_t step = 0; step < 60; ++step) {
        s->step_begin(step);
        s->phase_begin("forward");
        // Healthy traffic: 64 MiB allocated and freed every step.
        std::uint64_t temp = 0x3000'0000 + (step % 2) * (std::uint64_t{64} << 20);
        // Timestamps of 0 are stamped by record(), on the same clock as the step markers.
        ASSERT_TRUE(
            s->record(block(EventKind::kBlockAlloc, temp, std::uint64_t{64} << 20, temp_site, 0)));
        // The leak: 4 MiB kept every step.
        ASSERT_TRUE(s->record(
            block(EventKind::kBlockAlloc, leak_address, std::uint64_t{4} << 20, leak_site, 0)));
        leak_address += std::uint64_t{4} << 20;
        ASSERT_TRUE(
            s->record(block(EventKind::kBlockFree, temp, std::uint64_t{64} << 20, temp_site, 0)));
        s->phase_end();
        s->step_end(step);
        if (step % 16 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ASSERT_TRUE(s->stop().is_ok());
    auto live = s->report();
    ASSERT_TRUE(live.is_ok()) << live.status().to_string();
    const Finding* leak = live->finding("memory_leak");
    ASSERT_NE(leak, nullptr) << render_text(*live);
    ASSERT_FALSE(leak->sites.empty()) << render_text(*live);
    EXPECT_NE(leak->sites.front().location.find("train.py:42"), std::string::npos);
    EXPECT_EQ(live->capture.dropped, 0u);

    auto replayed = analyze_files({path});
    ASSERT_TRUE(replayed.is_ok()) << replayed.status().to_string();
    EXPECT_NE(replayed->finding("memory_leak"), nullptr) << render_text(*replayed);
    EXPECT_EQ(replayed->source.producer, "gpudiag-capture");
    std::filesystem::remove(path);
}

TEST(Session, WatchFiresOncePerUpwardCrossing) {
    auto s = make();
    ASSERT_NE(s, nullptr);
    std::atomic<int> calls{0};
    std::atomic<std::uint64_t> seen{0};
    auto id = s->watch_memory(std::uint64_t{1} << 30, [&](std::uint64_t bytes) {
        seen = bytes;
        ++calls;
    });
    ASSERT_TRUE(id.is_ok());
    EXPECT_EQ(s->watch_memory(1, nullptr).status().code(), StatusCode::kInvalidArgument);
    ASSERT_TRUE(s->start().is_ok());
    Event e = block(EventKind::kDeviceAlloc, 0x5000'0000, std::uint64_t{3} << 29, 0, 0);
    e.flags = static_cast<std::uint8_t>(MemoryKind::kDevice);
    ASSERT_TRUE(s->record(e));  // 1.5 GiB: crosses 1 GiB
    for (int i = 0; i < 200 && calls.load() == 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_TRUE(s->report().is_ok());  // drains synchronously as well
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    EXPECT_EQ(calls.load(), 1);
    EXPECT_EQ(seen.load(), std::uint64_t{3} << 29);
    EXPECT_TRUE(s->unwatch_memory(*id).is_ok());
    EXPECT_EQ(s->unwatch_memory(*id).code(), StatusCode::kNotFound);
    ASSERT_TRUE(s->stop().is_ok());
}

TEST(Session, WatchCallbackMayCallBackIntoTheSession) {
    // Callbacks run with no session lock held: a service may take a report or drop the watch
    // from inside one without deadlocking the worker.
    auto s = make();
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(s->start().is_ok());
    std::atomic<int> reports{0};
    std::atomic<bool> unwatched{false};
    Session* session = s.get();
    WatchId id = 0;
    auto added = s->watch_memory(std::uint64_t{1} << 30, [&](std::uint64_t) {
        if (session->report().is_ok()) ++reports;
        unwatched = session->unwatch_memory(id).is_ok();
    });
    ASSERT_TRUE(added.is_ok());
    id = *added;
    Event e = block(EventKind::kDeviceAlloc, 0x5000'0000, std::uint64_t{3} << 29, 0, 0);
    e.flags = static_cast<std::uint8_t>(MemoryKind::kDevice);
    ASSERT_TRUE(s->record(e));
    for (int i = 0; i < 400 && !unwatched.load(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(reports.load(), 1);
    EXPECT_TRUE(unwatched.load());
    ASSERT_TRUE(s->stop().is_ok());
}

TEST(Session, FullHandOffDropsAndSaysSo) {
    SessionOptions o = cpu_options();
    o.queue_capacity = 64;
    o.flush_period_ms = 10000;  // the worker does not drain during the burst
    auto s = make(o);
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(s->start().is_ok());
    int accepted = 0;
    for (int i = 0; i < 1000; ++i) accepted += s->record(Event{}) ? 1 : 0;
    EXPECT_LE(accepted, 64);
    EXPECT_GE(s->status().dropped, 1000u - 64u);
    ASSERT_TRUE(s->stop().is_ok());
    auto r = s->report();
    ASSERT_TRUE(r.is_ok());
    EXPECT_GE(r->capture.dropped, 1000u - 64u);
    EXPECT_NE(render_text(*r).find("dropped"), std::string::npos);
}

TEST(Session, PeriodicReportsReachTheCallback) {
    SessionOptions o = cpu_options();
    std::atomic<int> reports{0};
    o.report_period_ms = 20;
    o.on_report = [&](const Report& r) {
        if (r.section("overview") != nullptr) ++reports;
    };
    auto s = make(o);
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(s->start().is_ok());
    for (int i = 0; i < 100 && reports.load() < 2; ++i) {
        s->step_begin(static_cast<std::uint64_t>(i));
        s->step_end(static_cast<std::uint64_t>(i));
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_TRUE(s->stop().is_ok());
    EXPECT_GE(reports.load(), 2);
}

TEST(Session, ConcurrentProducersAndReports) {
    auto s = make();
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(s->start().is_ok());
    std::vector<std::thread> threads;
    for (int k = 0; k < 4; ++k) {
        threads.emplace_back([&, k] {
            for (int i = 0; i < 2000; ++i) {
                s->phase_begin(k % 2 ? "forward" : "backward");
                s->phase_end();
            }
        });
    }
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(s->report().is_ok());
    for (auto& t : threads) t.join();
    ASSERT_TRUE(s->stop().is_ok());
    auto r = s->report();
    ASSERT_TRUE(r.is_ok());
    EXPECT_EQ(r->capture.events + r->capture.dropped, 16000u);
}

TEST(Session, StatusNamesALevelAndReasons) {
    CaptureStatus probe = probe_capture();
    EXPECT_STRNE(capture_level_name(probe.level), "");
    if (probe.level == CaptureLevel::kNoGpu) {
        EXPECT_FALSE(probe.reasons.empty());
    }
    auto s = make();
    ASSERT_NE(s, nullptr);
    EXPECT_FALSE(s->status().capturing);
    ASSERT_TRUE(s->start().is_ok());
    EXPECT_TRUE(s->status().capturing);
    ASSERT_TRUE(s->stop().is_ok());
}

// Request handlers mark their scope; the markers close on every way out, an exception included.
TEST(Session, ScopedMarkersCloseThemselves) {
    auto s = make();
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(s->start().is_ok());
    {
        ScopedStep step(*s, 1);
        ScopedPhase phase(*s, "handle_request");
    }
    try {
        ScopedPhase phase(*s, "failing_request");
        throw std::runtime_error("the request failed");
    } catch (const std::runtime_error&) {
    }
    ASSERT_TRUE(s->stop().is_ok());
    auto r = s->report();
    ASSERT_TRUE(r.is_ok());
    EXPECT_EQ(r->capture.events, 6u);  // every begin has its end
}

// A forked child (a worker process) that exits runs the exit handlers it inherited, but the
// session is its parent's: the child must neither stop it nor write into its recording.
TEST(Session, AForkedChildLeavesItsParentsSessionAlone) {
    std::string path =
        ::testing::TempDir() + "gpudiag_fork_" + std::to_string(getpid()) + ".gpudiag";
    SessionOptions o = cpu_options();
    o.record_path = path;
    auto s = make(o);
    ASSERT_TRUE(s->start().is_ok());
    for (std::uint64_t i = 0; i < 10; ++i) {
        s->step_begin(i);
        s->step_end(i);
    }
    auto begun = std::chrono::steady_clock::now();
    std::fflush(nullptr);  // the child must not print what the parent buffered
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        testing::in_forked_child = true;
        std::exit(0);  // runs the inherited exit handlers
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    EXPECT_LT(std::chrono::steady_clock::now() - begun, std::chrono::seconds(2));  // no stuck waits
    EXPECT_TRUE(s->running());
    s->step_begin(10);
    ASSERT_TRUE(s->stop().is_ok());
    auto info = read_recording_info(path);
    ASSERT_TRUE(info.is_ok()) << info.status().to_string();
    EXPECT_TRUE(info->closed_cleanly);
    EXPECT_FALSE(info->truncated);
    EXPECT_TRUE(info->notes.empty()) << info->notes.front();
    EXPECT_EQ(info->events, 21u);
    std::remove(path.c_str());
}

// Under `gpudiag run --` every rank and child reads one GPUDIAG_RECORD: each process writes
// its own file, named with its pid.
TEST(InjectionRecordPath, EachProcessGetsItsOwnFile) {
    using detail::per_process_record_path;
    EXPECT_EQ(per_process_record_path("/tmp/run.gpudiag", 4242), "/tmp/run-4242.gpudiag");
    EXPECT_EQ(per_process_record_path("gpudiag.gpudiag", 7), "gpudiag-7.gpudiag");
    EXPECT_EQ(per_process_record_path("/tmp/rank%p/out.gpudiag", 9), "/tmp/rank9/out.gpudiag");
    EXPECT_EQ(per_process_record_path("/tmp/a.b/run", 5), "/tmp/a.b/run-5");  // no extension
}

}  // namespace
}  // namespace gpudiag
