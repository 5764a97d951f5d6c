// SPDX-License-Identifier: Apache-2.0
// The session never takes its host process down: every API call from inside its own callbacks
// works or returns an error (stop() included, even while another thread stops it), a forked child
// starts with capture off and leaves its parent's session and recording alone, and host memory
// running out in the worker costs events, counted and said in the report, not the process.
#include <gpudiag/gpudiag.hpp>

#include "sanitized.hpp"
#include "session_test_support.hpp"

#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

// LeakSanitizer's hook (looked up by name): no leak check at the exit of a forked child.
extern "C" int __lsan_is_turned_off() {
    return gpudiag::testing::in_forked_child.load() ? 1 : 0;
}

namespace gpudiag {
namespace {

using testing::cpu_options;
using testing::make;
using testing::wait_for;

using std::chrono::milliseconds;

std::string temp_recording(const char* name) {
    return ::testing::TempDir() + "gpudiag_" + name + "_" + std::to_string(::getpid()) + ".gpudiag";
}

Event device_alloc(std::uint64_t address, std::uint64_t bytes) {
    Event e;
    e.kind = EventKind::kDeviceAlloc;
    e.device = 0;
    e.flags = static_cast<std::uint8_t>(MemoryKind::kDevice);
    e.memory.address = address;
    e.memory.bytes = bytes;
    return e;
}

void expect_closed_cleanly(const std::string& path, std::uint64_t events) {
    auto info = read_recording_info(path);
    ASSERT_TRUE(info.is_ok()) << info.status().to_string();
    EXPECT_TRUE(info->closed_cleanly);
    EXPECT_FALSE(info->truncated);
    EXPECT_EQ(info->events, events);
}

TEST(SessionHostSafety, StopFromAWatchCallbackStopsTheSession) {
    SessionOptions o = cpu_options();
    o.record_path = temp_recording("stop_watch");
    auto s = make(o);
    ASSERT_NE(s, nullptr);
    Session* session = s.get();
    std::atomic<int> stop_code{-1};
    ASSERT_TRUE(s->watch_memory(std::uint64_t{1} << 30, [&](std::uint64_t) {
                     stop_code = static_cast<int>(session->stop().code());
                 }).is_ok());
    ASSERT_TRUE(s->start().is_ok());
    ASSERT_TRUE(s->record(device_alloc(0x7000'0000, std::uint64_t{2} << 30)));
    ASSERT_TRUE(wait_for([&] { return stop_code.load() >= 0; }));
    EXPECT_EQ(stop_code.load(), static_cast<int>(StatusCode::kOk));
    EXPECT_FALSE(s->running());
    EXPECT_EQ(s->stop().code(), StatusCode::kFailedPrecondition);  // stopped once, and said so
    auto r = s->report();  // the final report stays available
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_EQ(r->capture.events, 1u);
    s.reset();  // joins the worker; before, this aborted the process
    expect_closed_cleanly(o.record_path, 1);
    std::remove(o.record_path.c_str());
}

TEST(SessionHostSafety, StopFromAReportCallbackStopsTheSession) {
    SessionOptions o = cpu_options();
    o.record_path = temp_recording("stop_report");
    Session* session = nullptr;
    std::atomic<int> stop_code{-1};
    std::atomic<int> reports{0};
    o.report_period_ms = 10;
    o.on_report = [&](const Report&) {
        ++reports;
        if (stop_code.load() < 0) stop_code = static_cast<int>(session->stop().code());
    };
    auto s = make(o);
    ASSERT_NE(s, nullptr);
    session = s.get();
    ASSERT_TRUE(s->start().is_ok());
    s->step_begin(1);
    s->step_end(1);
    ASSERT_TRUE(wait_for([&] { return stop_code.load() >= 0; }));
    EXPECT_EQ(stop_code.load(), static_cast<int>(StatusCode::kOk));
    EXPECT_FALSE(s->running());
    std::this_thread::sleep_for(milliseconds(50));
    EXPECT_EQ(reports.load(), 1);  // no periodic report after the stop
    s.reset();
    expect_closed_cleanly(o.record_path, 2);
    std::remove(o.record_path.c_str());
}

// The main thread stops while a callback is running and also calls stop(): the callback's call
// must not wait for the main thread, which waits for the callback.
TEST(SessionHostSafety, StopFromACallbackWhileAnotherThreadStopsIsAnErrorNotADeadlock) {
    SessionOptions o = cpu_options();
    Session* session = nullptr;
    std::atomic<bool> in_callback{false};
    std::atomic<int> stop_code{-1};
    o.report_period_ms = 10;
    o.on_report = [&](const Report&) {
        if (stop_code.load() >= 0) return;
        in_callback = true;
        std::this_thread::sleep_for(milliseconds(100));  // the main thread enters stop() now
        stop_code = static_cast<int>(session->stop().code());
    };
    auto s = make(o);
    ASSERT_NE(s, nullptr);
    session = s.get();
    ASSERT_TRUE(s->start().is_ok());
    ASSERT_TRUE(wait_for([&] { return in_callback.load(); }));
    const auto begun = std::chrono::steady_clock::now();
    EXPECT_TRUE(s->stop().is_ok());
    EXPECT_LT(std::chrono::steady_clock::now() - begun, std::chrono::seconds(5));
    EXPECT_EQ(stop_code.load(), static_cast<int>(StatusCode::kFailedPrecondition));
}

TEST(SessionHostSafety, EveryCallFromACallbackWorksOrSaysWhy) {
    auto s = make();
    ASSERT_NE(s, nullptr);
    Session* session = s.get();
    std::atomic<bool> done{false};
    std::string failures;  // written by the callback, read after `done`
    WatchId id = 0;
    auto added = s->watch_memory(std::uint64_t{1} << 30, [&](std::uint64_t) {
        auto expect = [&](const char* call, bool ok) {
            if (!ok) failures += std::string(call) + "; ";
        };
        expect("start", session->start().code() == StatusCode::kFailedPrecondition);
        expect("report", session->report().is_ok());
        expect("status", session->status().capturing);
        session->step_begin(7);
        session->phase_begin("in a callback");
        session->phase_end();
        session->step_end(7);
        expect("intern", session->intern("from a callback") != kNoString);
        auto other = session->watch_memory(std::uint64_t{4} << 30, [](std::uint64_t) {});
        expect("watch_memory", other.is_ok());
        if (other) expect("unwatch_memory", session->unwatch_memory(*other).is_ok());
        expect("record_watch_action",
               session->record_watch_action(id, "empty_cache", true, 0, "").is_ok());
        // Without a capture backend pause and resume have nothing to pause: an error, not a hang.
        (void)session->pause_capture("in a callback");
        (void)session->resume_capture();
        expect("stop", session->stop().is_ok());
        done = true;
    });
    ASSERT_TRUE(added.is_ok());
    id = *added;
    ASSERT_TRUE(s->start().is_ok());
    ASSERT_TRUE(s->record(device_alloc(0x7000'0000, std::uint64_t{2} << 30)));
    ASSERT_TRUE(wait_for([&] { return done.load(); }));
    EXPECT_EQ(failures, "");
    EXPECT_FALSE(s->running());
}

// A report callback that takes 300 ms (it ships the report somewhere slow) must not stall
// capture: callbacks run on a thread of their own, so the worker keeps draining the hand-off,
// and stop() waits only for the callback that is running.
TEST(SessionHostSafety, ASlowCallbackDoesNotStallCapture) {
    SessionOptions o = cpu_options();
    o.queue_capacity = 1u << 14;
    o.report_period_ms = 10;
    std::atomic<int> reports{0};
    o.on_report = [&](const Report&) {
        ++reports;
        std::this_thread::sleep_for(milliseconds(300));
    };
    auto s = make(o);
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(s->start().is_ok());
    ASSERT_TRUE(wait_for([&] { return reports.load() >= 1; }));
    // 1000 events every 5 ms for 0.6 s: the worker drains every 5 ms; a stalled one would let
    // the 16 Ki-event hand-off overflow within 80 ms.
    std::uint64_t offered = 0;
    for (int burst = 0; burst < 120; ++burst) {
        for (int i = 0; i < 1000; ++i, ++offered) (void)s->record(Event{});
        std::this_thread::sleep_for(milliseconds(5));
    }
    EXPECT_EQ(s->status().dropped, 0u) << "of " << offered;
    const auto begun = std::chrono::steady_clock::now();
    ASSERT_TRUE(s->stop().is_ok());
    EXPECT_LT(std::chrono::steady_clock::now() - begun, milliseconds(2000));
    auto r = s->report();
    ASSERT_TRUE(r.is_ok());
    EXPECT_GE(reports.load(), 2);
    bool said = false;
    for (const auto& n : r->notes)
        said = said || n.find("periodic reports were skipped") != std::string::npos;
    EXPECT_TRUE(said);
}

// A DataLoader worker or a service's helper process forks with capture on. The child's copy of
// the session is off: its calls return errors or do nothing, its exit and the session's
// destruction do not wait for threads it does not have, and the parent's recording gets nothing
// from it.
TEST(SessionHostSafety, AForkedChildStartsWithCaptureOffAndLeavesTheParentsFilesAlone) {
    SessionOptions o = cpu_options();
    o.record_path = temp_recording("fork_capture_on");
    auto s = make(o);
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(s->start().is_ok());
    for (std::uint64_t i = 0; i < 5; ++i) {
        s->step_begin(i);
        s->step_end(i);
    }
    std::fflush(nullptr);
    const auto begun = std::chrono::steady_clock::now();
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        testing::in_forked_child = true;
        // Exit codes say which expectation failed (gtest cannot report from here).
        if (s->running()) ::_exit(10);
        if (s->status().capturing || s->status().reasons.empty()) ::_exit(11);
        s->step_begin(100);
        s->phase_begin("child");
        if (s->record(device_alloc(0x9000'0000, 1 << 20))) ::_exit(12);
        if (s->report().is_ok()) ::_exit(13);
        if (s->stop().code() != StatusCode::kFailedPrecondition) ::_exit(14);
        if (s->start().code() != StatusCode::kFailedPrecondition) ::_exit(15);
        s.reset();     // must neither join the parent's worker nor close its recording
        std::exit(0);  // runs the exit handlers the child inherited
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
    EXPECT_LT(std::chrono::steady_clock::now() - begun, std::chrono::seconds(3));
    EXPECT_TRUE(s->running());
    s->step_begin(5);
    ASSERT_TRUE(s->stop().is_ok());
    expect_closed_cleanly(o.record_path, 11);
    std::remove(o.record_path.c_str());
}

// Host memory runs out while the worker takes events in (an address-space limit lowered under a
// running session): the process lives on, the lost events are counted, and once memory is back
// the report says it is partial and why. The limit needs a fresh process (earlier tests leave
// freed heap that big tables would reuse), so the test runs itself again with
// GPUDIAG_TEST_HOST_OOM set, and that run's exit code says which expectation failed.
#ifndef GPUDIAG_TEST_SANITIZED
int run_out_of_host_memory() {
    ::alarm(120);
    SessionOptions o = cpu_options();
    o.queue_capacity = 1u << 12;
    auto created = Session::create(o);
    if (!created) return 20;
    std::unique_ptr<Session> s = std::move(*created);
    if (!s->start().is_ok()) return 21;
    rlimit original{};
    ::getrlimit(RLIMIT_AS, &original);
    // Tracking the leak's live allocations needs tables of 12 and then 24 MiB: allow 16 MiB
    // more than now, so the second cannot be had.
    long pages = 0;
    if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
        if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
        std::fclose(f);
    }
    const auto now = static_cast<rlim_t>(pages) * static_cast<rlim_t>(::sysconf(_SC_PAGESIZE));
    const rlimit limited{now + (rlim_t{16} << 20), original.rlim_max};
    if (pages == 0 || ::setrlimit(RLIMIT_AS, &limited) != 0) return 22;
    std::uint64_t accepted = 0;
    for (std::uint64_t i = 0; i < (std::uint64_t{1} << 20); ++i) {
        const Event e = device_alloc(0x1'0000'0000 + i * 4096, 4096);
        while (!s->record(e)) std::this_thread::sleep_for(std::chrono::microseconds(200));
        ++accepted;
    }
    std::this_thread::sleep_for(milliseconds(100));  // the worker takes in the rest
    if (::setrlimit(RLIMIT_AS, &original) != 0) return 23;
    if (!s->stop().is_ok()) return 24;
    auto r = s->report();
    if (!r) return 25;
    if (r->input.complete) return 26;
    bool said = false;
    for (const auto& m : r->input.missing) {
        said = said || m.find("host memory ran out") != std::string::npos;
    }
    if (!said) return 27;
    if (r->capture.events != accepted) return 28;
    return 0;
}
#endif

TEST(SessionHostSafety, HostMemoryRunningOutInTheWorkerCostsEventsNotTheProcess) {
#ifdef GPUDIAG_TEST_SANITIZED
    GTEST_SKIP() << "sanitizers reserve terabytes of address space: RLIMIT_AS cannot be used";
#else
    if (std::getenv("GPUDIAG_TEST_HOST_OOM") != nullptr) std::_Exit(run_out_of_host_memory());
    std::fflush(nullptr);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        ::setenv("GPUDIAG_TEST_HOST_OOM", "1", 1);
        const char* filter =
            "--gtest_filter=SessionHostSafety."
            "HostMemoryRunningOutInTheWorkerCostsEventsNotTheProcess";
        ::execl("/proc/self/exe", "session_test", filter, static_cast<char*>(nullptr));
        ::_exit(19);  // exec failed
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status))
        << "the child died of signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    EXPECT_EQ(WEXITSTATUS(status), 0) << "see the exit codes in run_out_of_host_memory()";
#endif
}

}  // namespace
}  // namespace gpudiag
