// SPDX-License-Identifier: Apache-2.0
// The platform room: clock calibration, the process' PIDs, and the one loader of dlopen'ed
// functions (on libraries this process really maps).
#include "capture/platform/platform.hpp"
#include "capture/platform/clock_calibration.hpp"
#include "capture/platform/dynamic_library.hpp"
#include "core/clock.hpp"

#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace gpudiag {
namespace {

using detail::ClockCalibration;

// ---------------------------------------------------------------- clock
TEST(ClockCalibrationTest, InterpolatesBetweenThePairsAroundARecord) {
    ClockCalibration c;
    c.add_pair(1'000'000'000, 5'000'000'000);
    c.add_pair(2'000'000'000, 6'000'000'000);
    EXPECT_EQ(c.to_monotonic(1'500'000'000), 5'500'000'000u);
    EXPECT_EQ(c.to_monotonic(2'500'000'000), 6'500'000'000u);  // after the last: the fitted slope
    EXPECT_EQ(c.to_monotonic(500'000'000), 4'500'000'000u);    // before the first: likewise
    EXPECT_EQ(c.to_monotonic(0), 0u);                          // unknown stays unknown
}

// Kineto's timestamp callback makes CUPTI stamp raw CPU cycles. Durations and times must come
// out in nanoseconds all the same, and the status must say CUPTI's clock is foreign.
TEST(ClockCalibrationTest, CpuCycleTimestampsMapWithTheirSlope) {
    ClockCalibration c;
    const double ghz = 2.9;  // cycles per ns
    for (std::uint64_t i = 0; i < 8; ++i) {
        std::uint64_t mono = 1'000'000'000 + i * 250'000'000;
        c.add_pair(static_cast<std::uint64_t>(static_cast<double>(mono) * ghz) + 77, mono);
    }
    auto cycles = [&](std::uint64_t mono) {
        return static_cast<std::uint64_t>(static_cast<double>(mono) * ghz) + 77;
    };
    // A 1 ms kernel between pairs, and one after the last pair.
    EXPECT_NEAR(static_cast<double>(c.to_monotonic(cycles(1'301'000'000)) -
                                    c.to_monotonic(cycles(1'300'000'000))),
                1e6, 2.0);
    EXPECT_NEAR(static_cast<double>(c.to_monotonic(cycles(2'900'000'000))), 2.9e9, 2.0);
    EXPECT_NEAR(c.rate(), 1.0 / ghz, 1e-9);
    EXPECT_TRUE(c.foreign_clock());
}

TEST(ClockCalibrationTest, CuptisOwnClockIsNotForeign) {
    ClockCalibration c;
    for (std::uint64_t i = 0; i < 8; ++i) {
        // CLOCK_REALTIME vs MONOTONIC: same rate, each pair off by up to half a bracket.
        std::uint64_t jitter = (i % 3) * 5'000;
        c.add_pair(1'700'000'000'000'000'000ULL + i * 250'000'000 + jitter,
                   1'000 + i * 250'000'000);
    }
    EXPECT_NEAR(c.rate(), 1.0, ClockCalibration::kForeignRateTolerance / 10);
    EXPECT_FALSE(c.foreign_clock());
}

TEST(ClockCalibrationTest, NoRateBeforeThePairsSpanEnoughTime) {
    ClockCalibration c;
    c.add_pair(1'000, 1'000);
    c.add_pair(101'000'000, 101'000'000);  // 100 ms apart: too little to judge a clock's rate
    EXPECT_EQ(c.rate(), 0.0);
    EXPECT_FALSE(c.foreign_clock());
}

// A timestamp callback installed mid-session: records stamped before it still arrive, carrying
// the old clock, and map through the regime they were stamped in.
TEST(ClockCalibrationTest, RecordsOfThePreviousClockStillMapAfterAChange) {
    ClockCalibration c;
    const std::uint64_t epoch = 1'700'000'000'000'000'000ULL;
    c.add_pair(epoch + 0, 10'000'000'000);
    c.add_pair(epoch + 1'000'000'000, 11'000'000'000);
    // From 11 s on, CUPTI returns cycles at 3 per ns (far below CLOCK_REALTIME's values).
    c.add_pair(33'000'000'000, 11'000'000'000 + 1);
    c.add_pair(36'000'000'000, 12'000'000'000);
    EXPECT_EQ(c.regime_changes(), 1u);
    EXPECT_EQ(c.pairs(), 2u);
    EXPECT_NEAR(static_cast<double>(c.to_monotonic(epoch + 900'000'000)), 10.9e9,
                2.0);                                                               // old clock
    EXPECT_NEAR(static_cast<double>(c.to_monotonic(34'500'000'000)), 11.5e9, 2.0);  // new clock
}

TEST(ClockCalibrationTest, ARealtimeStepStartsANewRegime) {
    ClockCalibration c;
    c.add_pair(5'000'000'000, 100'000'000);
    c.add_pair(6'000'000'000, 1'100'000'000);
    c.add_pair(1'000'000'000, 2'100'000'000);  // NTP stepped CLOCK_REALTIME back 6 s
    EXPECT_EQ(c.pairs(), 1u);
    EXPECT_EQ(c.regime_changes(), 1u);
    EXPECT_EQ(c.to_monotonic(1'500'000'000), 2'600'000'000u);
    // Once the regime has a rate, a forward step of a second is a segment at another rate.
    c.add_pair(1'200'000'000, 2'300'000'000);
    c.add_pair(2'400'000'000, 2'500'000'000);  // 200 ms of session time, 1.2 s of CUPTI time
    EXPECT_EQ(c.regime_changes(), 2u);
}

TEST(ClockCalibrationTest, KeepsABoundedHistory) {
    ClockCalibration c;
    for (std::uint64_t i = 1; i <= 1000; ++i) c.add_pair(i * 1'000'000, i * 1'000'000 + 7);
    EXPECT_EQ(c.pairs(), 64u);
    EXPECT_EQ(c.to_monotonic(999'500'000), 999'500'007u);
}

TEST(ClockCalibrationTest, SampleAgainstRealtimeMatchesTheSessionClock) {
    ClockCalibration c;
    bool sampled = false;
    for (int i = 0; i < 50 && !sampled; ++i) sampled = c.sample(&detail::read_realtime_clock);
    ASSERT_TRUE(sampled);
    std::uint64_t mono = c.to_monotonic(detail::realtime_now_ns());
    std::uint64_t now = detail::monotonic_now_ns();
    EXPECT_LT(mono > now ? mono - now : now - mono, 50'000'000u);  // within 50 ms
}

TEST(ClockCalibrationTest, WithoutPairsUsesTheLiveOffset) {
    ClockCalibration c;
    std::uint64_t mono = c.to_monotonic(detail::realtime_now_ns());
    std::uint64_t now = detail::monotonic_now_ns();
    EXPECT_LT(mono > now ? mono - now : now - mono, 50'000'000u);
}

// ---------------------------------------------------------------- process
// /proc/self/status names this process in each PID namespace, outermost first.
TEST(NamespacePidsTest, ReadsTheNSpidLine) {
    EXPECT_EQ(detail::platform::parse_nspid("\nName:\tpython\nNSpid:\t48213\t17\nNSpgid:\t1\n"),
              (std::vector<std::uint32_t>{48213, 17}));
    EXPECT_EQ(detail::platform::parse_nspid("\nNSpid:\t9\n"), (std::vector<std::uint32_t>{9}));
    EXPECT_TRUE(
        detail::platform::parse_nspid("\nName:\tpython\nPid:\t9\n").empty());  // older kernels
}

// ---------------------------------------------------------------- the loader of library functions
// libc stands in for an NVIDIA library: the table is filled from a library this process maps.
TEST(LibraryFunctionsTest, EachSlotTakesTheFirstNameTheLibraryHasAndTheMissingAreNamed) {
    void* libc = detail::platform::open_library("libc.so.6", detail::platform::Open::kIfMapped);
    ASSERT_NE(libc, nullptr) << detail::platform::library_error();
    using Fn = int (*)();
    Fn own = nullptr;
    Fn parent = nullptr;
    Fn gone = reinterpret_cast<Fn>(&getpid);  // a stale value is cleared, not kept
    Fn newer = nullptr;
    using detail::FunctionSlot;
    using detail::Need;
    const detail::LibraryFunction table[] = {
        {{"getpid"}, FunctionSlot(own), Need::kRequired},
        {{"gpudiag_getppid_v2", "getppid"}, FunctionSlot(parent), Need::kRequired},
        {{"gpudiag_no_such_call_v2", "gpudiag_no_such_call"}, FunctionSlot(gone), Need::kRequired},
        {{"gpudiag_newer_call"}, FunctionSlot(newer), Need::kOptional, "glibc 9.0"},
    };
    detail::MissingFunctions missing = detail::load_functions(libc, table);
    ASSERT_NE(own, nullptr);
    EXPECT_EQ(static_cast<std::uint32_t>(own()), detail::platform::process_id());
    ASSERT_NE(parent, nullptr);
    EXPECT_EQ(parent(), getppid());
    EXPECT_EQ(gone, nullptr);
    EXPECT_EQ(newer, nullptr);
    EXPECT_EQ(missing.required,
              std::vector<std::string>{"gpudiag_no_such_call_v2 or gpudiag_no_such_call"});
    EXPECT_EQ(missing.optional, std::vector<std::string>{"gpudiag_newer_call (glibc 9.0 on)"});
    EXPECT_EQ(missing.required_list(), "gpudiag_no_such_call_v2 or gpudiag_no_such_call");
    // Without a library every function is missing.
    EXPECT_EQ(detail::load_functions(nullptr, table).required.size(), 3u);
    EXPECT_EQ(own, nullptr);
}

}  // namespace
}  // namespace gpudiag
