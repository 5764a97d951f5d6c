// SPDX-License-Identifier: Apache-2.0
// A session left on for days stays bounded whatever the program does: ten million leaked
// allocations and a hundred thousand unique phase names leave gpudiag's resident memory flat once
// its caps are reached, the figures stay right (the leak's bytes, site and rate), and the report
// says a cap was hit.
//
// Resident memory is read from /proc/self/statm; sanitizers keep freed memory in quarantine and
// shadow every byte, so these run in the plain builds only.
#include <gpudiag/gpudiag.hpp>

#include "sanitized.hpp"
#include "session_test_support.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include <unistd.h>

namespace gpudiag {
namespace {

using testing::put;

[[maybe_unused]] constexpr std::uint64_t kKiB = 1024;
[[maybe_unused]] constexpr std::uint64_t kMiB = kKiB * 1024;

[[maybe_unused]] std::uint64_t resident_bytes() {
    long total = 0;
    long resident = 0;
    std::FILE* f = std::fopen("/proc/self/statm", "r");
    if (f == nullptr) return 0;
    if (std::fscanf(f, "%ld %ld", &total, &resident) != 2) resident = 0;
    std::fclose(f);
    return static_cast<std::uint64_t>(resident) *
           static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

[[maybe_unused]] std::unique_ptr<Session> started() {
    auto s = testing::make();
    if (s == nullptr || !s->start().is_ok()) return nullptr;
    return s;
}

[[maybe_unused]] bool has_note(const Report& r, const char* text) {
    for (const auto& n : r.notes) {
        if (n.find(text) != std::string::npos) return true;
    }
    return false;
}

TEST(SessionBounds, TenMillionLeakedAllocationsKeepMemoryFlatAndTheLeakRight) {
#ifdef GPUDIAG_TEST_SANITIZED
    GTEST_SKIP() << "resident memory is not meaningful under sanitizers";
#else
    auto s = started();
    ASSERT_NE(s, nullptr);
    const StringId site = s->intern("svc.cpp:88 Cache::put (cudaMalloc)");
    constexpr std::uint64_t kAllocations = 10'000'000;
    constexpr std::uint64_t kBytes = 4 * kKiB;
    constexpr std::uint64_t kEveryNs = 10'000;  // 100 000 a second: 100 s of service
    const std::uint64_t t0 = 1'000'000'000'000ull;
    std::uint64_t after_cap = 0;
    for (std::uint64_t i = 0; i < kAllocations; ++i) {
        Event e;
        e.kind = EventKind::kDeviceAlloc;
        e.device = 0;
        e.flags = static_cast<std::uint8_t>(MemoryKind::kDevice);
        e.start_ns = e.end_ns = t0 + i * kEveryNs;
        e.memory.address = 0x100'0000'0000 + i * kBytes;
        e.memory.bytes = kBytes;
        e.memory.site = site;
        put(*s, e);
        if (i == 2'000'000) {  // past the tracking cap (786 432 live allocations)
            ASSERT_TRUE(s->report().is_ok());
            after_cap = resident_bytes();
        }
    }
    ASSERT_TRUE(s->stop().is_ok());
    auto r = s->report();
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    const std::uint64_t at_end = resident_bytes();
    // Eight million more allocations after the cap: bounded growth (report buffers, allocator
    // slack), not the 190-380 MB that tracking each would take.
    EXPECT_LT(at_end, after_cap + 8 * kMiB) << (at_end - after_cap) / kMiB << " MiB more";

    const Finding* leak = r->finding("memory_leak");
    ASSERT_NE(leak, nullptr) << render_text(*r);
    if (std::getenv("PRINT")) std::puts(render_text(*r).c_str());
    ASSERT_FALSE(leak->sites.empty());
    EXPECT_EQ(leak->sites.front().location, "svc.cpp:88 Cache::put (cudaMalloc)");
    EXPECT_GT(leak->sites.front().share, 0.99);
    // Every byte is still counted, tracked one by one or booked by size.
    const Section* memory = r->section("memory");
    ASSERT_NE(memory, nullptr);
    const Figure* outside = memory->figure("outside_framework_bytes");
    ASSERT_NE(outside, nullptr);
    EXPECT_EQ(outside->value, static_cast<double>(kAllocations * kBytes));
    EXPECT_TRUE(has_note(*r, "booked by size")) << "the cap must be said";
#endif
}

TEST(SessionBounds, AHundredThousandUniquePhaseNamesKeepMemoryFlat) {
#ifdef GPUDIAG_TEST_SANITIZED
    GTEST_SKIP() << "resident memory is not meaningful under sanitizers";
#else
    auto s = started();
    ASSERT_NE(s, nullptr);
    constexpr std::uint64_t kPhases = 100'000;
    std::uint64_t after_cap = 0;
    for (std::uint64_t i = 0; i < kPhases; ++i) {
        // One request each, named after it (a request id in the phase name).
        s->phase_begin("request " + std::to_string(i));
        s->phase_end();
        if (i % 1024 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        if (i == 10'000) {  // past the cap on distinct phase names (4096)
            ASSERT_TRUE(s->report().is_ok());
            after_cap = resident_bytes();
        }
    }
    ASSERT_TRUE(s->stop().is_ok());
    auto r = s->report();
    ASSERT_TRUE(r.is_ok());
    const std::uint64_t at_end = resident_bytes();
    EXPECT_LT(at_end, after_cap + 2 * kMiB) << (at_end - after_cap) / kMiB << " MiB more";
    EXPECT_EQ(r->capture.dropped, 0u);
    EXPECT_TRUE(has_note(*r, "past the first 4096 distinct ones")) << render_text(*r);
#endif
}

}  // namespace
}  // namespace gpudiag
