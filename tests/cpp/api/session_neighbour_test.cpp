// SPDX-License-Identifier: Apache-2.0
// A good neighbour inside a service: gpudiag's threads take none of the process' signals and say
// who they are, the session can be destroyed from its own callback, a start() that could not
// make its threads can be tried again, a window that could never be written fails at start(),
// calls after stop() say they were refused, and a callback's exception is counted in a note.
#include <gpudiag/gpudiag.hpp>

#include "sanitized.hpp"
#include "session_test_support.hpp"

#include <gtest/gtest.h>

#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

namespace gpudiag {
namespace {

using testing::cpu_options;
using testing::make;
using testing::wait_for;

constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

// This process' threads: name -> the mask of signals each blocks (SigBlk of /proc's status).
std::multimap<std::string, std::uint64_t> threads_and_blocked_signals() {
    std::multimap<std::string, std::uint64_t> out;
    DIR* dir = ::opendir("/proc/self/task");
    if (dir == nullptr) return out;
    while (dirent* e = ::readdir(dir)) {
        if (e->d_name[0] == '.') continue;
        const std::string base = std::string("/proc/self/task/") + e->d_name;
        std::string name;
        std::getline(std::ifstream(base + "/comm"), name);
        std::ifstream status(base + "/status");
        std::uint64_t blocked = 0;
        for (std::string line; std::getline(status, line);) {
            if (line.rfind("SigBlk:", 0) == 0) blocked = std::stoull(line.substr(7), nullptr, 16);
        }
        out.emplace(name, blocked);
    }
    ::closedir(dir);
    return out;
}

bool blocks(std::uint64_t mask, int signal) {
    return ((mask >> (signal - 1)) & 1) != 0;
}

TEST(SessionNeighbour, ItsThreadsHaveNamesAndTakeNoAsynchronousSignal) {
    auto s = make();
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(s->start().is_ok());
    // A thread names itself as it starts running.
    EXPECT_TRUE(wait_for([] {
        const auto t = threads_and_blocked_signals();
        return t.count("gpudiag-worker") == 1 && t.count("gpudiag-watch") == 1 &&
               t.count("gpudiag-report") == 1;
    }));
    const auto threads = threads_and_blocked_signals();
    int ours = 0;
    for (const auto& [name, mask] : threads) {
        if (name.rfind("gpudiag-", 0) != 0) continue;
        ++ours;
        for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGCHLD, SIGALRM, SIGPIPE}) {
            EXPECT_TRUE(blocks(mask, sig)) << name << " takes signal " << sig;
        }
        EXPECT_FALSE(blocks(mask, SIGSEGV)) << name << ": its own faults stay unblocked";
    }
    EXPECT_EQ(threads.count("gpudiag-worker"), 1u);
    EXPECT_EQ(threads.count("gpudiag-watch"), 1u);
    EXPECT_EQ(threads.count("gpudiag-report"), 1u);
    EXPECT_GE(ours, 3);
    EXPECT_TRUE(s->stop().is_ok());
}

// A report callback that takes seconds (a slow exporter) does not hold up a watch: the watch's
// callback runs while the report's still runs.
TEST(SessionNeighbour, ASlowReportCallbackDoesNotDelayAWatch) {
    std::atomic<bool> reporting{false};
    std::atomic<bool> release{false};
    std::atomic<bool> watched{false};
    SessionOptions o = cpu_options();
    o.report_period_ms = 10;
    o.on_report = [&](const Report&) {
        reporting = true;
        for (int i = 0; i < 500 && !release.load(); ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    };
    auto s = make(o);
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(s->watch_memory(kGiB, [&](std::uint64_t) { watched = true; }).is_ok());
    ASSERT_TRUE(s->start().is_ok());
    ASSERT_TRUE(wait_for([&] { return reporting.load(); }));
    ASSERT_TRUE(s->record_allocation(0, 0x7f0000000000, 2 * kGiB, "svc.cpp:1").is_ok());
    EXPECT_TRUE(wait_for([&] { return watched.load(); }))
        << "the watch waited for the report callback";
    EXPECT_FALSE(release.load());
    release = true;
    EXPECT_TRUE(s->stop().is_ok());
}

// stop() waits a bounded time for a callback that does not return, returns, and says so; the
// session is destroyed once the callback ends.
TEST(SessionNeighbour, StopWaitsABoundedTimeForACallbackAndSaysSo) {
    std::atomic<bool> inside{false};
    std::atomic<bool> release{false};
    SessionOptions o = cpu_options();
    o.stop_callback_wait_ms = 200;
    auto s = make(o);
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(s->watch_memory(kGiB, [&](std::uint64_t) {
                     inside = true;
                     while (!release.load())
                         std::this_thread::sleep_for(std::chrono::milliseconds(5));
                 }).is_ok());
    ASSERT_TRUE(s->start().is_ok());
    ASSERT_TRUE(s->record_allocation(0, 0x7f0000000000, 2 * kGiB, "svc.cpp:1").is_ok());
    ASSERT_TRUE(wait_for([&] { return inside.load(); }));
    const auto before = std::chrono::steady_clock::now();
    EXPECT_TRUE(s->stop().is_ok());
    EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::seconds(5));
    auto report = s->report();
    ASSERT_TRUE(report.is_ok());
    EXPECT_TRUE(std::any_of(report->notes.begin(), report->notes.end(), [](const std::string& n) {
        return n.find("stop() waited 200 ms for the program's watch callback") != std::string::npos;
    })) << render_text(*report);
    std::thread releaser([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        release = true;
    });
    s.reset();  // waits for the callback
    releaser.join();
}

// Sites with a request id in them (one distinct name per request) no longer exhaust the name
// table: past the cap on distinct sites their numbers fold, and the leak keeps its site.
TEST(SessionNeighbour, ALeaksSiteSurvivesTheCapOnNames) {
    auto s = make();
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(s->start().is_ok());
    constexpr std::uint64_t kRequests = 20000;
    for (std::uint64_t i = 0; i < kRequests; ++i) {
        const std::string site = "svc.cpp:88 bind_output request " + std::to_string(i);
        Status st = s->record_allocation(0, 0x7000'0000'0000 + i * 4096, 4096, site);
        while (st.code() == StatusCode::kResourceExhausted) {  // the hand-off is full: wait
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
            st = s->record_allocation(0, 0x7000'0000'0000 + i * 4096, 4096, site);
        }
        ASSERT_TRUE(st.is_ok()) << st.to_string();
    }
    ASSERT_TRUE(s->stop().is_ok());
    auto report = s->report();
    ASSERT_TRUE(report.is_ok());
    EXPECT_TRUE(std::any_of(report->notes.begin(), report->notes.end(), [](const std::string& n) {
        return n.find("allocation sites came past the first 16384") != std::string::npos;
    })) << render_text(*report);
    const Section* memory = report->section("memory");
    ASSERT_NE(memory, nullptr);
    bool folded = false;
    for (const auto& t : memory->tables) {
        for (const auto& row : t.rows) {
            for (const auto& cell : row) {
                if (const auto* text = std::get_if<std::string>(&cell)) {
                    folded = folded || *text == "svc.cpp:88 bind_output request #";
                }
            }
        }
    }
    EXPECT_TRUE(folded) << render_text(*report);
}

// A service that blocks SIGTERM after starting its session and waits for it with sigwait() gets
// it and shuts down on its own; were one of gpudiag's threads to take it, its default action
// would kill the process. Run in a child: the exit code says which way it went.
TEST(SessionNeighbour, AServiceThatWaitsForSigtermGetsIt) {
    std::fflush(nullptr);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        testing::in_forked_child = true;
        auto created = Session::create(cpu_options());
        if (!created || !(*created)->start().is_ok()) ::_exit(10);
        sigset_t term;
        sigemptyset(&term);
        sigaddset(&term, SIGTERM);
        pthread_sigmask(SIG_BLOCK, &term, nullptr);
        ::kill(::getpid(), SIGTERM);
        timespec limit{5, 0};
        const int got = sigtimedwait(&term, nullptr, &limit);
        if (got != SIGTERM) ::_exit(11);
        if (!(*created)->stop().is_ok()) ::_exit(12);
        ::_exit(0);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
    EXPECT_EQ(WEXITSTATUS(status), 0);
}

// Destroying the session from its own report or watch callback: the callback returns, then the
// session goes (on its callback thread). Under ASan any use after free fails the test.
TEST(SessionNeighbour, ASessionDestroyedFromItsOwnReportCallbackGoesAfterTheCallback) {
    std::unique_ptr<Session> held;
    std::atomic<bool> entered{false};
    std::atomic<bool> destroyed{false};  // set after reset(): the test may then let `held` go
    SessionOptions o = cpu_options();
    o.report_period_ms = 10;
    o.on_report = [&](const Report&) {
        if (entered.exchange(true)) return;
        held.reset();
        destroyed = true;
    };
    auto created = Session::create(o);
    ASSERT_TRUE(created.is_ok());
    held = std::move(*created);
    ASSERT_TRUE(held->start().is_ok());
    EXPECT_TRUE(wait_for([&] { return destroyed.load(); }));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the deferred delete runs
}

TEST(SessionNeighbour, ASessionDestroyedFromItsOwnWatchCallbackGoesAfterTheCallback) {
    std::unique_ptr<Session> held = make();
    ASSERT_NE(held, nullptr);
    std::atomic<bool> destroyed{false};
    auto id = held->watch_memory(1 << 20, [&](std::uint64_t) {
        held.reset();
        destroyed = true;
    });
    ASSERT_TRUE(id.is_ok());
    ASSERT_TRUE(held->start().is_ok());
    Event e;
    e.kind = EventKind::kDeviceAlloc;
    e.device = 0;
    e.memory.address = 0x7000'0000;
    e.memory.bytes = 2 << 20;
    testing::put(*held, e);
    EXPECT_TRUE(wait_for([&] { return destroyed.load(); }));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

// Threads cannot be had (the address space is too small for their stacks): start() says so, the
// session is not running, and once memory is back a second start() works. The limit needs a fresh
// process (a forked one reuses the stacks its parent's finished threads left cached), so the test
// runs itself again with GPUDIAG_TEST_THREADLESS_START set; that run's exit code says which
// expectation failed.
#ifndef GPUDIAG_TEST_SANITIZED
int start_without_threads() {
    auto created = Session::create(cpu_options());
    if (!created) return 10;
    rlimit original{};
    ::getrlimit(RLIMIT_AS, &original);
    long pages = 0;
    if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
        if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
        std::fclose(f);
    }
    const auto now = static_cast<rlim_t>(pages) * static_cast<rlim_t>(::sysconf(_SC_PAGESIZE));
    const rlimit limited{now + (rlim_t{1} << 20), original.rlim_max};  // no room for a stack
    if (pages == 0 || ::setrlimit(RLIMIT_AS, &limited) != 0) return 11;
    const Status failed = (*created)->start();
    ::setrlimit(RLIMIT_AS, &original);
    if (failed.is_ok()) return 30;  // the threads fit after all: the limit proved nothing
    if ((*created)->running()) return 12;
    if (failed.message().find("may be called again") == std::string::npos) return 13;
    if (!(*created)->start().is_ok()) return 14;
    if (!(*created)->running()) return 15;
    if (!(*created)->stop().is_ok()) return 16;
    return 0;
}
#endif

TEST(SessionNeighbour, AStartWhoseThreadsCouldNotBeMadeCanBeTriedAgain) {
#ifdef GPUDIAG_TEST_SANITIZED
    GTEST_SKIP() << "sanitizers reserve terabytes of address space: RLIMIT_AS cannot be used";
#else
    if (std::getenv("GPUDIAG_TEST_THREADLESS_START") != nullptr) {
        std::_Exit(start_without_threads());
    }
    std::fflush(nullptr);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        ::setenv("GPUDIAG_TEST_THREADLESS_START", "1", 1);
        const char* filter =
            "--gtest_filter=SessionNeighbour.AStartWhoseThreadsCouldNotBeMadeCanBeTriedAgain";
        ::execl("/proc/self/exe", "session_test", filter, static_cast<char*>(nullptr));
        ::_exit(19);  // exec failed
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
    EXPECT_EQ(WEXITSTATUS(status), 0) << "see the exit codes in start_without_threads()";
#endif
}

TEST(SessionNeighbour, AWindowThatCouldNeverBeWrittenFailsAtStart) {
    SessionOptions o = cpu_options("/nonexistent-gpudiag-folder/window.gpudiag");
    o.record_window_s = 60;
    auto s = make(o);
    ASSERT_NE(s, nullptr);
    const Status st = s->start();
    EXPECT_EQ(st.code(), StatusCode::kIoError) << st.to_string();
    EXPECT_FALSE(s->running());
}

TEST(SessionNeighbour, CallsAfterStopAreRefused) {
    auto s = make();
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(s->start().is_ok());
    ASSERT_TRUE(s->stop().is_ok());
    Event e;
    e.kind = EventKind::kAnnotation;
    EXPECT_FALSE(s->record(e));
    EXPECT_EQ(s->watch_memory(1 << 20, [](std::uint64_t) {}).status().code(),
              StatusCode::kFailedPrecondition);
    EXPECT_EQ(s->start().code(), StatusCode::kFailedPrecondition);
}

TEST(SessionNeighbour, ACallbacksExceptionIsCaughtAndSaid) {
    std::atomic<int> calls{0};
    SessionOptions o = cpu_options();
    o.report_period_ms = 10;
    o.on_report = [&](const Report&) {
        ++calls;
        throw std::runtime_error("the program's own bug");
    };
    auto s = make(o);
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(s->start().is_ok());
    EXPECT_TRUE(wait_for([&] { return calls.load() >= 2; }));
    ASSERT_TRUE(s->stop().is_ok());
    auto r = s->report();
    ASSERT_TRUE(r.is_ok());
    bool said = false;
    for (const auto& n : r->notes)
        said = said || n.find("ended in an exception") != std::string::npos;
    EXPECT_TRUE(said);
}

// A service's own allocations from C++ (as the C API has them): a leak through them is found with
// its site, a scoped one frees itself, and a device-memory event that names no device is refused
// and said, never dropped in silence.
TEST(SessionNeighbour, AServicesOwnAllocationsFromCpp) {
    auto s = make();
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(s->start().is_ok());
    EXPECT_EQ(s->record_allocation(-1, 0x1000, 1).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s->record_allocation(0, 0, 1).code(), StatusCode::kInvalidArgument);
    constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
    for (std::uint64_t i = 0; i < 40; ++i) {
        ASSERT_TRUE(
            s->record_allocation(0, 0x7000'0000 + i * kMiB, kMiB, "svc.cpp:42 cache_put").is_ok());
    }
    { ScopedAllocation scratch(*s, 0, 0x9000'0000, 512 * kMiB, "svc.cpp:77 scratch"); }
    Event unplaced;
    unplaced.kind = EventKind::kDeviceAlloc;  // device left at kNoDevice
    unplaced.memory.address = 0xA000'0000;
    unplaced.memory.bytes = kMiB;
    EXPECT_FALSE(s->record(unplaced));
    ASSERT_TRUE(s->stop().is_ok());
    EXPECT_EQ(s->record_allocation(0, 0x1000, 1).code(), StatusCode::kFailedPrecondition);
    auto r = s->report();
    ASSERT_TRUE(r.is_ok());
    const std::string json = render_json(*r, true);
    EXPECT_NE(json.find("svc.cpp:42 cache_put"), std::string::npos);
    bool unplaced_said = false;
    bool refused_said = false;
    for (const auto& n : r->notes) {
        unplaced_said = unplaced_said || n.find("named no device") != std::string::npos;
        refused_said = refused_said || n.find("calls were refused") != std::string::npos;
    }
    EXPECT_TRUE(unplaced_said);
    EXPECT_TRUE(refused_said);
    const Section* memory = r->section("memory");
    ASSERT_NE(memory, nullptr);
    const Figure* outside = memory->figure("outside_framework_bytes");
    ASSERT_NE(outside, nullptr);
    EXPECT_EQ(outside->value, 40.0 * kMiB);  // the scoped 512 MiB was freed at its scope's end
}

}  // namespace
}  // namespace gpudiag
