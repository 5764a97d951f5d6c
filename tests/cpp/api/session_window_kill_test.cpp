// SPDX-License-Identifier: Apache-2.0
// kill -9 of a service in window mode: the window file a session keeps on disk opens after
// SIGKILL at any moment and holds the events up to within the stated bound of the kill (one
// worker tick, flush_period_ms, plus the tick's own work), beginning with what was held before
// it.
//
// The child is a service: a session with a quarter-second window (so that windows rotate during the
// runs), one allocation at start that it never frees, then events stamped with the monotonic clock
// at about 20 k a second. The parent kills it after a random delay and reads the window file. Runs:
// GPUDIAG_KILL_RUNS (default 50), five children at a time.
#include <gpudiag/gpudiag.hpp>

#include "session_test_support.hpp"
#include "temp_dir.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <random>
#include <thread>
#include <vector>

namespace gpudiag {
namespace {

constexpr std::uint64_t kPlantedAddress = 0x7f00'0000'0000;
constexpr std::uint64_t kMs = 1'000'000;
// What a kill may lose: a tick (250 ms by default) and the tick's own work, on a loaded machine.
constexpr std::uint64_t kBoundNs = 1000 * kMs;

std::uint64_t monotonic_ns() {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ull +
           static_cast<std::uint64_t>(ts.tv_nsec);
}

std::uintmax_t file_size(const std::string& path) {
    std::error_code ec;
    const std::uintmax_t size = std::filesystem::file_size(path, ec);
    return ec ? 0 : size;
}

Event at(EventKind kind, std::uint64_t t) {
    Event e;
    e.kind = kind;
    e.device = 0;
    e.start_ns = e.end_ns = t;
    return e;
}

[[noreturn]] void serve_until_killed(const std::string& record_path, int ready_fd) {
    ::alarm(30);  // never outlive a parent that failed to kill us
    SessionOptions o = testing::cpu_options(record_path);
    o.record_window_s = 0.25;
    o.record_window_bytes = 4u << 20;
    auto created = Session::create(o);
    if (!created.is_ok() || !(*created)->start().is_ok()) ::_exit(2);
    Session& s = **created;
    const std::string window = record_path.substr(0, record_path.size() - 8) + "-window.gpudiag";
    const auto empty_size = file_size(window);
    Event planted = at(EventKind::kDeviceAlloc, monotonic_ns());
    planted.flags = static_cast<std::uint8_t>(MemoryKind::kDevice);
    planted.memory.address = kPlantedAddress;
    planted.memory.bytes = 1u << 30;
    testing::put(s, planted);
    // Ready once a tick has written the planted allocation: the window may lose the last tick,
    // and a kill before the first one (a loaded machine delays it) would test nothing else.
    for (int i = 0; i < 1000 && file_size(window) <= empty_size; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    const char ready = 1;
    if (::write(ready_fd, &ready, 1) != 1) ::_exit(3);
    for (;;) {
        Event e = at(EventKind::kCounter, monotonic_ns());
        e.counter.counter = CounterKind::kGpuUtilizationPercent;
        e.counter.value = 50;
        for (int i = 0; i < 20; ++i) testing::put(s, e);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

struct Child {
    pid_t pid = -1;
    int ready_fd = -1;
    std::string record_path;
};

struct Tail final : EventSink {
    void consume(std::span<const Event> events) override {
        for (const Event& e : events) {
            last_ns = std::max(last_ns, e.start_ns);
            if (e.kind == EventKind::kDeviceAlloc && e.memory.address == kPlantedAddress) {
                planted = true;
            }
        }
    }
    std::uint64_t last_ns = 0;
    bool planted = false;
};

TEST(SessionWindowKill, AWindowFileOpensAfterSigkillAndHoldsAllButTheLastTick) {
    const char* env = std::getenv("GPUDIAG_KILL_RUNS");
    const int runs = env != nullptr ? std::max(1, std::atoi(env)) : 50;
    testing::TempDir dir("window_kill");
    std::mt19937 rng(static_cast<std::uint32_t>(std::time(nullptr)));
    int checked = 0;
    int rotated = 0;
    std::uint64_t largest_loss_ns = 0;
    for (int first = 0; first < runs; first += 5) {
        std::vector<Child> children;
        for (int i = first; i < std::min(runs, first + 5); ++i) {
            Child c;
            c.record_path = dir.file("svc" + std::to_string(i) + ".gpudiag");
            int fds[2];
            ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
            c.pid = ::fork();
            ASSERT_GE(c.pid, 0);
            if (c.pid == 0) {
                ::close(fds[0]);
                serve_until_killed(c.record_path, fds[1]);
            }
            ::close(fds[1]);
            c.ready_fd = fds[0];
            children.push_back(c);
        }
        for (Child& c : children) {
            char ready = 0;
            ASSERT_EQ(::read(c.ready_fd, &ready, 1), 1) << "the service did not start";
            ::close(c.ready_fd);
        }
        for (Child& c : children) {
            std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 400));
            const std::uint64_t killed_ns = monotonic_ns();
            ASSERT_EQ(::kill(c.pid, SIGKILL), 0);
            int status = 0;
            ASSERT_EQ(::waitpid(c.pid, &status, 0), c.pid);
            ASSERT_TRUE(WIFSIGNALED(status)) << "the service exited on its own: " << status;

            const std::string window =
                dir.file("svc" + std::to_string(&c - children.data() + first) + "-window.gpudiag");
            Tail tail;
            StringTable strings;
            ASSERT_TRUE(read_recording(window, tail, strings).is_ok()) << window;
            EXPECT_TRUE(tail.planted) << "the window lost what was held before it";
            EXPECT_GE(tail.last_ns + kBoundNs, killed_ns)
                << "the window file misses " << (killed_ns - tail.last_ns) / kMs
                << " ms before the kill";
            if (killed_ns > tail.last_ns) {
                largest_loss_ns = std::max(largest_loss_ns, killed_ns - tail.last_ns);
            }
            auto info = read_recording_info(window);
            ASSERT_TRUE(info.is_ok());
            if (info->source.property("gpudiag.window.state_events") != "0") ++rotated;
            ++checked;
        }
    }
    std::printf("%d kills, %d after the window moved on; the most a kill lost: %.0f ms\n", checked,
                rotated, static_cast<double>(largest_loss_ns) / 1e6);
    EXPECT_EQ(checked, runs);
    EXPECT_GT(rotated, 0) << "no run lived long enough for its window to move on";
}

}  // namespace
}  // namespace gpudiag
