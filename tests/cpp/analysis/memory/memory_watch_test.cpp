// SPDX-License-Identifier: Apache-2.0
// MemoryLedger watches as the live session uses them: registered before any event, on every
// device, on the "device used" level fed by driver allocations or NVML's per-process figure.
#include "analysis/memory/memory_ledger.hpp"
#include "memory_test_events.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace gpudiag::detail {
namespace {

using namespace gpudiag::testing;

Event process_used(std::uint64_t t, std::uint16_t device, std::uint64_t bytes) {
    Event e;
    e.kind = EventKind::kCounter;
    e.device = device;
    e.start_ns = e.end_ns = t;
    e.counter.counter = CounterKind::kProcessMemoryUsedBytes;
    e.counter.value = static_cast<double>(bytes);
    return e;
}

MemoryWatch used_above(std::uint64_t bytes) {
    MemoryWatch w;
    w.metric = MemoryMetric::kDeviceUsed;
    w.level_bytes = bytes;
    return w;
}

TEST(MemoryWatch, RegisteredBeforeTheDeviceAppearsStillFires) {
    MemoryLedger l;
    std::vector<MemoryWatchCrossing> calls;
    ASSERT_GT(l.add_watch(used_above(kGiB), [&](const auto& c) { calls.push_back(c); }), 0);
    l.apply(mem(EventKind::kDeviceAlloc, 1, 0x5000'0000, kGiB / 2, kNoString, 5));
    EXPECT_TRUE(calls.empty());
    l.apply(mem(EventKind::kDeviceAlloc, 2, 0x9000'0000, kGiB, kNoString, 5));
    ASSERT_EQ(calls.size(), 1u);
    EXPECT_EQ(calls[0].device, 5);
    EXPECT_EQ(calls[0].value_bytes, 3 * kGiB / 2);
}

TEST(MemoryWatch, EachDeviceCrossesOnItsOwn) {
    MemoryLedger l;
    std::vector<int> devices;
    l.add_watch(used_above(kGiB), [&](const auto& c) { devices.push_back(c.device); });
    l.apply(mem(EventKind::kDeviceAlloc, 1, 0x5000'0000, 600 * kMiB, kNoString, 0));
    l.apply(mem(EventKind::kDeviceAlloc, 2, 0x5000'0000, 600 * kMiB, kNoString, 1));
    EXPECT_TRUE(devices.empty()) << "1.2 GiB in total, but no device holds 1 GiB";
    l.apply(mem(EventKind::kDeviceAlloc, 3, 0x9000'0000, 600 * kMiB, kNoString, 1));
    EXPECT_EQ(devices, std::vector<int>{1});
}

TEST(MemoryWatch, NvmlProcessFigureCountsWhenNothingElseIsSeen) {
    // A service captured at the NVML level only: no allocation events, only the process' usage.
    MemoryLedger l;
    std::vector<std::uint64_t> values;
    l.add_watch(used_above(2 * kGiB), [&](const auto& c) { values.push_back(c.value_bytes); });
    l.apply(process_used(1, 0, kGiB));
    l.apply(process_used(2, 0, 3 * kGiB));
    ASSERT_EQ(values.size(), 1u);
    EXPECT_EQ(values[0], 3 * kGiB);
    l.apply(process_used(3, 0, 2 * kGiB - 10 * kMiB));  // within the 5 % band: stays disarmed
    l.apply(process_used(4, 0, 3 * kGiB));
    EXPECT_EQ(values.size(), 1u);
    l.apply(process_used(5, 0, kGiB));  // well below: re-arms
    l.apply(process_used(6, 0, 3 * kGiB));
    EXPECT_EQ(values.size(), 2u);
}

}  // namespace
}  // namespace gpudiag::detail
