// SPDX-License-Identifier: Apache-2.0
// WindowState: the allocations still live and the latest levels, bounded whatever the run.
#include "recording/window_state.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace gpudiag {
namespace {

Event memory(EventKind kind, std::uint64_t t, std::uint64_t address, std::uint64_t bytes,
             StringId site = 0) {
    Event e;
    e.kind = kind;
    e.device = 0;
    e.start_ns = e.end_ns = t;
    e.memory.address = address;
    e.memory.bytes = bytes;
    e.memory.site = site;
    return e;
}

Event counter(std::uint64_t t, CounterKind kind, double value, std::uint32_t pid = 0) {
    Event e;
    e.kind = EventKind::kCounter;
    e.device = 0;
    e.process = pid;
    e.start_ns = e.end_ns = t;
    e.counter.counter = kind;
    e.counter.value = value;
    return e;
}

TEST(WindowState, KeepsWhatIsStillLiveInTimeOrder) {
    detail::WindowState s;
    std::vector<Event> events = {
        memory(EventKind::kDeviceAlloc, 10, 0xA, 100),
        memory(EventKind::kDeviceAlloc, 20, 0xB, 200),
        memory(EventKind::kDeviceFree, 30, 0xA, 100),
        memory(EventKind::kBlockAlloc, 40, 0xC, 50),
        memory(EventKind::kBlockFree, 50, 0xC, 50),  // pending below: still the allocator's
        memory(EventKind::kHostAlloc, 60, 0xA, 70),  // the same address, another family
    };
    events[4].flags = kEventFlagPendingFree;
    s.observe(events);
    const auto state = s.events();
    ASSERT_EQ(state.size(), 3u);
    EXPECT_EQ(state[0].start_ns, 20u);
    EXPECT_EQ(state[1].kind, EventKind::kBlockAlloc);
    EXPECT_EQ(state[2].kind, EventKind::kHostAlloc);
    EXPECT_EQ(s.totals().bytes, 200u);  // device memory the process holds itself

    const Event freed = memory(EventKind::kBlockFree, 70, 0xC, 50);
    s.observe({&freed, 1});
    EXPECT_EQ(s.events().size(), 2u);
}

TEST(WindowState, KeepsTheLatestLevelOfEachCounterDeviceAndProcess) {
    detail::WindowState s;
    s.observe(std::vector<Event>{
        counter(1, CounterKind::kDeviceMemoryUsedBytes, 1e9),
        counter(2, CounterKind::kDeviceMemoryUsedBytes, 2e9),
        counter(3, CounterKind::kOtherProcessMemoryBytes, 5, 100),
        counter(4, CounterKind::kOtherProcessMemoryBytes, 6, 101),
        counter(5, CounterKind::kDeviceMemoryTotalBytes, 24e9),
    });
    const auto state = s.events();
    ASSERT_EQ(state.size(), 4u);
    EXPECT_EQ(state[0].counter.value, 2e9);
    EXPECT_EQ(s.totals().levels, 4u);
}

// Past the bound, allocations are summed per site, and frees take from the sum: memory held is
// still right, and the state stays bounded.
TEST(WindowState, PastTheBoundAllocationsAreSummedPerSite) {
    detail::WindowState s;
    constexpr std::size_t kExtra = 1000;
    std::vector<Event> events;
    for (std::size_t i = 0; i < detail::WindowState::kMaxLiveAllocations + kExtra; ++i) {
        events.push_back(memory(EventKind::kDeviceAlloc, i + 1, 0x1000 + i, 10, 7));
    }
    s.observe(events);
    const Event free_one = memory(EventKind::kDeviceFree, 1'000'000'000, 0x1000 + events.size() - 1,
                                  10, 7);  // one of the summed
    s.observe({&free_one, 1});
    const auto totals = s.totals();
    EXPECT_EQ(totals.allocations, detail::WindowState::kMaxLiveAllocations);
    EXPECT_EQ(totals.summed, kExtra);
    EXPECT_EQ(totals.bytes, 10 * (events.size() - 1));
    const auto state = s.events();
    EXPECT_EQ(state.size(), detail::WindowState::kMaxLiveAllocations + 1);
    EXPECT_NE(state.back().flags & kEventFlagSynthetic, 0);
}

TEST(WindowState, KeepsTheRecentXidsAndCountsWhatItCannotTrack) {
    detail::WindowState s;
    std::vector<Event> events;
    for (int i = 0; i < 100; ++i) events.push_back(counter(i + 1, CounterKind::kXidError, 79));
    events.push_back(memory(EventKind::kBlockAlloc, 200, 0, 64));
    s.observe(events);
    EXPECT_EQ(s.events().size(), detail::WindowState::kMaxXids);
    EXPECT_EQ(s.totals().unaddressed, 1u);
}

}  // namespace
}  // namespace gpudiag
