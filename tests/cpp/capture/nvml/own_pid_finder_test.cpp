// SPDX-License-Identifier: Apache-2.0
// OwnPidFinder: this process recognised in NVML's list by the steps of its own memory, and no
// guess when the steps do not single one process out.
#include "capture/nvml/own_pid_finder.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace gpudiag {
namespace {

using detail::OwnDeviceMemory;
using detail::OwnPidFinder;

constexpr std::uint64_t kMiB = 1ull << 20;
constexpr std::uint64_t kGiB = 1ull << 30;
constexpr std::uint64_t kTick = 100'000'000;  // the sampler at 10 Hz

// One GPU as NVML and CUPTI see it over time: NVML's list (host PIDs) and this process' own
// memory from its memory records, which may arrive later than NVML counts them.
class Gpu {
public:
    void own(std::int64_t bytes) {
        own_.bytes = bytes;
        ++own_.changes;
    }
    void forget_own() {
        own_.known = false;
        ++own_.changes;
    }
    void listed(unsigned pid, std::uint64_t bytes) {
        auto it = std::find_if(list_.begin(), list_.end(),
                               [pid](const detail::nvml::ProcessInfo& p) { return p.pid == pid; });
        if (it == list_.end()) {
            list_.push_back({pid, bytes, 0, 0});
        } else {
            it->used_gpu_memory = bytes;
        }
    }
    void grow(unsigned pid, std::int64_t by) {
        for (auto& p : list_) {
            if (p.pid == pid)
                p.used_gpu_memory = static_cast<std::uint64_t>(p.used_gpu_memory + by);
        }
    }
    // Readings every 100 ms for `seconds`.
    void watch(double seconds) {
        for (double t = 0; t < seconds; t += 0.1) {
            finder.observe(0, own_, now_, list_);
            now_ += kTick;
        }
    }

    OwnPidFinder finder;

private:
    OwnDeviceMemory::Reading own_;
    std::vector<detail::nvml::ProcessInfo> list_;
    std::uint64_t now_ = 1'000'000'000;
};

// A training rank in a container: GPU 0 also holds the contexts other ranks opened there by
// mistake (500 MiB each, unchanging). Its host PID is the one whose memory follows its steps.
TEST(OwnPidFinderTest, RecognisesTheProcessWhoseMemoryFollowsItsOwnSteps) {
    Gpu gpu;
    gpu.listed(7001, 500 * kMiB);  // this process: its context
    for (unsigned other = 7002; other <= 7004; ++other) gpu.listed(other, 500 * kMiB);
    gpu.watch(2);
    gpu.own(8 * kGiB);                     // the model's weights
    gpu.grow(7001, 8 * kGiB + 20 * kMiB);  // and a few modules loaded lazily
    gpu.watch(2);
    EXPECT_EQ(gpu.finder.matches(), 1u);
    EXPECT_EQ(gpu.finder.pid(), 0u) << "one match may be a coincidence";
    gpu.own(8 * kGiB + 3 * kGiB);  // the first step's activations
    gpu.grow(7001, 3 * kGiB);
    gpu.watch(2);
    EXPECT_EQ(gpu.finder.pid(), 7001u);
    EXPECT_EQ(gpu.finder.matches(), 2u);
    EXPECT_EQ(gpu.finder.ambiguous(), 0u);
}

// Two replicas of one service started together grow alike: neither is singled out.
TEST(OwnPidFinderTest, ProcessesMovingAlikeAreNoMatch) {
    Gpu gpu;
    gpu.listed(7001, 400 * kMiB);
    gpu.listed(7002, 400 * kMiB);
    gpu.watch(2);
    for (int step = 1; step <= 3; ++step) {
        gpu.own(step * 2 * static_cast<std::int64_t>(kGiB));
        gpu.grow(7001, 2 * kGiB);
        gpu.grow(7002, 2 * kGiB);
        gpu.watch(2);
    }
    EXPECT_EQ(gpu.finder.pid(), 0u);
    EXPECT_EQ(gpu.finder.matches(), 0u);
    EXPECT_EQ(gpu.finder.ambiguous(), 3u);
}

// NVML counts an allocation as soon as it is made; CUPTI's record of it comes at the next flush.
// A reading taken in between is not judged, so the step is measured whole.
TEST(OwnPidFinderTest, AReadingTakenBeforeTheRecordsArrivedIsNotJudged) {
    Gpu gpu;
    gpu.listed(7001, 500 * kMiB);
    gpu.listed(7002, 2 * kGiB);
    gpu.watch(2);
    gpu.grow(7001, 4 * kGiB);  // allocated: NVML knows, the records are on their way
    gpu.watch(0.3);
    gpu.own(4 * kGiB);
    gpu.watch(2);
    EXPECT_EQ(gpu.finder.matches(), 1u) << "the step matched 7001 once";
}

// Steps under 256 MiB are within what the context and the driver's rounding move by themselves.
TEST(OwnPidFinderTest, ASmallStepIsNotJudged) {
    Gpu gpu;
    gpu.listed(7001, 500 * kMiB);
    gpu.listed(7002, 500 * kMiB);
    gpu.watch(2);
    gpu.own(100 * kMiB);
    gpu.grow(7001, 100 * kMiB);
    gpu.watch(2);
    EXPECT_EQ(gpu.finder.matches(), 0u);
    EXPECT_EQ(gpu.finder.ambiguous(), 0u);
}

// This process' context may come with its first allocation: a PID listed only since then is a
// candidate, unless it holds less than this process allocated.
TEST(OwnPidFinderTest, APidAppearingWithTheFirstAllocationsCountsIfItHoldsThem) {
    Gpu gpu;
    gpu.listed(7002, 500 * kMiB);
    gpu.watch(2);
    gpu.own(8 * kGiB);
    gpu.listed(7001, 8 * kGiB + 480 * kMiB);
    gpu.listed(7003, 600 * kMiB);  // another program starting meanwhile: too small to be us
    gpu.watch(2);
    gpu.own(9 * kGiB);
    gpu.grow(7001, 1 * kGiB);
    gpu.watch(2);
    EXPECT_EQ(gpu.finder.pid(), 7001u);
}

// Evidence that disagrees (another PID matched once) leaves the question open: no guess.
TEST(OwnPidFinderTest, AnotherPidThatMatchedOnceBlocksTheRecognition) {
    Gpu gpu;
    gpu.listed(7001, 500 * kMiB);
    gpu.listed(7002, 500 * kMiB);
    gpu.watch(2);
    gpu.own(1 * kGiB);
    gpu.grow(7001, 3 * kGiB);  // memory this process' records did not show
    gpu.grow(7002, 1 * kGiB);  // another program, by chance by as much
    gpu.watch(2);
    for (int step = 2; step <= 3; ++step) {
        gpu.own(step * static_cast<std::int64_t>(kGiB));
        gpu.grow(7001, 1 * kGiB);
        gpu.watch(2);
    }
    EXPECT_EQ(gpu.finder.matches(), 3u);
    EXPECT_EQ(gpu.finder.pid(), 0u);
}

// An own total that could not be kept (a pool's earlier size forgotten) judges nothing.
TEST(OwnPidFinderTest, UnknownOwnMemoryJudgesNothing) {
    Gpu gpu;
    gpu.listed(7001, 500 * kMiB);
    gpu.listed(7002, 500 * kMiB);
    gpu.watch(2);
    gpu.forget_own();
    for (int step = 1; step <= 3; ++step) {
        gpu.grow(7001, 1 * kGiB);
        gpu.watch(2);
    }
    EXPECT_EQ(gpu.finder.matches(), 0u);
    EXPECT_EQ(gpu.finder.pid(), 0u);
}

}  // namespace
}  // namespace gpudiag
