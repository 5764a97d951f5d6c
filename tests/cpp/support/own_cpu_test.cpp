// SPDX-License-Identifier: Apache-2.0
// gpudiag's own CPU time: its threads counted whole, alive or ended, and its work on threads not
// its own counted where it is timed.
#include "support/own_cpu.hpp"
#include "support/quiet_thread.hpp"

#include <gtest/gtest.h>

#include <time.h>

#include <chrono>
#include <cstdint>

namespace gpudiag {
namespace {

// Burns `ms` of the calling thread's CPU time (however loaded the machine).
std::uint64_t thread_cpu_ns() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ull +
           static_cast<std::uint64_t>(ts.tv_nsec);
}

void spin(int ms) {
    const std::uint64_t until = thread_cpu_ns() + static_cast<std::uint64_t>(ms) * 1'000'000u;
    volatile std::uint64_t x = 0;
    while (thread_cpu_ns() < until) x = x + 1;
}

TEST(OwnCpu, ItsThreadsAreCountedAliveAndEnded) {
    const auto before = detail::own_cpu();
    std::thread t = detail::quiet_thread("gpudiag-test", [] {
        EXPECT_TRUE(detail::on_own_thread());
        spin(60);
    });
    t.join();
    const auto after = detail::own_cpu();
    EXPECT_GE(after.threads_ns - before.threads_ns, 60'000'000u);
    EXPECT_EQ(after.threads_running, before.threads_running);
    EXPECT_FALSE(detail::on_own_thread());
}

TEST(OwnCpu, WorkOnOtherThreadsIsCountedOnceAndNotOnItsOwn) {
    const auto before = detail::own_cpu();
    {
        const detail::ElsewhereCpu outer;
        const detail::ElsewhereCpu inner;  // nested: counted once
        spin(40);
    }
    const auto after = detail::own_cpu();
    const std::uint64_t counted = after.elsewhere_ns - before.elsewhere_ns;
    EXPECT_GE(counted, 40'000'000u);
    EXPECT_LE(counted, 80'000'000u);
    // On one of gpudiag's threads the work is the thread's own CPU time, not counted twice.
    const auto mid = detail::own_cpu();
    std::thread t = detail::quiet_thread("gpudiag-test", [] {
        const detail::ElsewhereCpu scope;
        spin(20);
    });
    t.join();
    EXPECT_EQ(detail::own_cpu().elsewhere_ns, mid.elsewhere_ns);
}

TEST(OwnCpu, SampledCallsCountOneInEveryFew) {
    const auto before = detail::own_cpu();
    for (std::uint32_t i = 0; i < 64 * detail::SampledCpu::kSampleEvery; ++i) {
        const detail::SampledCpu sample;
        spin(0);
    }
    EXPECT_GT(detail::own_cpu().elsewhere_ns, before.elsewhere_ns);
}

}  // namespace
}  // namespace gpudiag
