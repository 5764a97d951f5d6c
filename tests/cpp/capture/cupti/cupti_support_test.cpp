// SPDX-License-Identifier: Apache-2.0
// The CUPTI source's parts: the starvation watch, failure hints, the activity buffer pool, the
// deep-mode recorder and its symbolizer, and subscriber naming.
#include "capture/cupti/activity_buffer_pool.hpp"
#include "capture/cupti/api_whitelist.hpp"
#include "capture/cupti/call_site_symbolizer.hpp"
#include "capture/cupti/cupti_activity_source.hpp"
#include "capture/cupti/deep_call_recorder.hpp"
#include "capture/cupti/starvation_watch.hpp"
#include "capture/test_event_queue.hpp"

#include <cupti.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

// A function of this executable: its address stands for an application frame.
extern "C" __attribute__((noinline, used)) void gpudiag_test_application_frame() {}

namespace gpudiag {
namespace {

using detail::ActivityBufferPool;

constexpr std::uint64_t kSec = 1'000'000'000ULL;

TEST(StarvationWatchTest, QuietWithoutEvidenceOfGpuWorkIsNoStall) {
    detail::StarvationWatch w(10 * kSec);
    w.reset(0);
    for (std::uint64_t t = 1; t <= 60; ++t) {
        EXPECT_EQ(w.tick(t * kSec, 0, 0), detail::StarvationWatch::Change::kNone) << t;
    }
    EXPECT_FALSE(w.stalled());
}

TEST(StarvationWatchTest, SilenceWhileTheGpuIsBusyIsAStallUntilRecordsFlowAgain) {
    detail::StarvationWatch w(10 * kSec);
    w.reset(0);
    std::uint64_t last_delivery = 3 * kSec;
    detail::StarvationWatch::Change c = detail::StarvationWatch::Change::kNone;
    std::uint64_t t = 1;
    for (; t <= 30 && c == detail::StarvationWatch::Change::kNone; ++t) {
        std::uint64_t delivery = std::min(t, std::uint64_t{3}) * kSec;
        c = w.tick(t * kSec, delivery, t * kSec - kSec / 2);  // NVML saw kernels every second
    }
    EXPECT_EQ(c, detail::StarvationWatch::Change::kStalled);
    EXPECT_EQ(t - 1, 13u);  // 10 s after the last delivery
    EXPECT_EQ(w.stalled_since(), last_delivery);
    EXPECT_EQ(w.tick(14 * kSec, last_delivery, 14 * kSec), detail::StarvationWatch::Change::kNone);
    EXPECT_EQ(w.tick(15 * kSec, 15 * kSec, 15 * kSec), detail::StarvationWatch::Change::kRecovered);
    EXPECT_FALSE(w.stalled());
}

TEST(StarvationWatchTest, ARareBusySampleIsNotEnough) {
    detail::StarvationWatch w(10 * kSec);
    w.reset(0);
    for (std::uint64_t t = 1; t <= 30; ++t) {
        std::uint64_t busy = t == 5 ? 5 * kSec : 0;  // one busy sample in the whole silence
        EXPECT_EQ(w.tick(t * kSec, 0, busy), detail::StarvationWatch::Change::kNone) << t;
    }
}

TEST(CuptiFailureHintTest, ExplainsTheCodesCuptiActivityEnableReturns) {
    EXPECT_NE(detail::cupti_failure_hint(CUPTI_ERROR_NOT_INITIALIZED, false)
                  .find("older than this CUPTI"),
              std::string::npos);
    std::string v2 = detail::cupti_failure_hint(CUPTI_ERROR_NOT_COMPATIBLE, true);
    EXPECT_NE(v2.find("per-subscriber"), std::string::npos);
    EXPECT_EQ(detail::cupti_failure_hint(CUPTI_ERROR_NOT_COMPATIBLE, false).find("per-subscriber"),
              std::string::npos);
    EXPECT_EQ(detail::cupti_failure_hint(CUPTI_SUCCESS, false), "");
}

// ---------------------------------------------------------------- activity path
bool has(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

detail::PerSubscriberAttempt refused_attempt(CUptiResult rc, const char* name,
                                             const char* owner = "") {
    detail::PerSubscriberAttempt a;
    a.tried = true;
    a.result = rc;
    a.call = "cuptiSubscribe_v2";
    a.result_name = name;
    a.owner = owner;
    return a;
}

TEST(ActivityPathTest, OnlyCupti133OrLaterWithEveryFunctionIsWorthTrying) {
    EXPECT_TRUE(detail::should_try_per_subscriber(130300, ""));
    EXPECT_TRUE(detail::should_try_per_subscriber(130400, ""));
    EXPECT_FALSE(detail::should_try_per_subscriber(130299, ""));  // 13.2 has half of them
    EXPECT_FALSE(detail::should_try_per_subscriber(130001, ""));
    EXPECT_FALSE(detail::should_try_per_subscriber(28, ""));  // CUPTI 12.9 Update 1
    EXPECT_FALSE(detail::should_try_per_subscriber(130400, "cuptiActivityGetNextRecord_v2"));
}

TEST(ActivityPathTest, AnOlderCuptiOrAMissingFunctionKeepsTheProcessWidePathAndSaysWhy) {
    detail::ActivityPathChoice c = detail::choose_activity_path(130001, "", {});
    EXPECT_FALSE(c.per_subscriber);
    EXPECT_TRUE(has(c.note, "process-wide activity API")) << c.note;
    EXPECT_TRUE(has(c.note, "API version 130001 predates")) << c.note;
    c = detail::choose_activity_path(130400, "cuptiActivityEnable_v2", {});
    EXPECT_FALSE(c.per_subscriber);
    EXPECT_TRUE(has(c.note, "lacks cuptiActivityEnable_v2")) << c.note;
    // Eligible but never tried (nothing enabled): never claimed as per-subscriber.
    EXPECT_FALSE(detail::choose_activity_path(130400, "", {}).per_subscriber);
}

TEST(ActivityPathTest, AnEnabledSubscriberIsThePerSubscriberPath) {
    detail::PerSubscriberAttempt ok;
    ok.tried = true;
    detail::ActivityPathChoice c = detail::choose_activity_path(130400, "", ok);
    EXPECT_TRUE(c.per_subscriber);
    EXPECT_TRUE(has(c.note, "per-subscriber activity API (libcupti API version 130400)")) << c.note;
    EXPECT_TRUE(has(c.note, "side by side")) << c.note;
}

TEST(ActivityPathTest, EachRefusalFallsBackWithItsOwnMessage) {
    detail::ActivityPathChoice mixing = detail::choose_activity_path(
        130400, "",
        refused_attempt(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED,
                        "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED",
                        "PyTorch profiler (Kineto) ('CUPTI for kineto')"));
    EXPECT_FALSE(mixing.per_subscriber);
    EXPECT_TRUE(has(mixing.note,
                    "another tool holds the process-wide API (PyTorch profiler "
                    "(Kineto) ('CUPTI for kineto'))"))
        << mixing.note;
    EXPECT_TRUE(has(mixing.note, "cuptiSubscribe_v2: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS"))
        << mixing.note;
    detail::ActivityPathChoice incompatible = detail::choose_activity_path(
        130300, "", refused_attempt(CUPTI_ERROR_NOT_COMPATIBLE, "CUPTI_ERROR_NOT_COMPATIBLE"));
    EXPECT_TRUE(has(incompatible.note, "another tool holds the process-wide API"))
        << incompatible.note;
    detail::ActivityPathChoice driver = detail::choose_activity_path(
        130400, "", refused_attempt(CUPTI_ERROR_NOT_SUPPORTED, "CUPTI_ERROR_NOT_SUPPORTED"));
    EXPECT_FALSE(driver.per_subscriber);
    EXPECT_TRUE(has(driver.note, "driver too old for per-subscriber activity (needs R610+)"))
        << driver.note;
    EXPECT_FALSE(has(driver.note, "another tool")) << driver.note;
    detail::ActivityPathChoice other = detail::choose_activity_path(
        130400, "", refused_attempt(CUPTI_ERROR_NOT_INITIALIZED, "CUPTI_ERROR_NOT_INITIALIZED"));
    EXPECT_FALSE(other.per_subscriber);
    EXPECT_TRUE(has(other.note, "CUPTI_ERROR_NOT_INITIALIZED")) << other.note;
    EXPECT_FALSE(has(other.note, "driver too old")) << other.note;
    EXPECT_FALSE(has(other.note, "another tool")) << other.note;
}

// ---------------------------------------------------------------- buffer pool
TEST(ActivityBufferPoolTest, AcquireNeverAllocatesAndDeclinesWhenEmpty) {
    ActivityBufferPool pool(4096, 2, 3);
    EXPECT_EQ(pool.acquire(), nullptr);  // nothing allocated before top_up
    EXPECT_EQ(pool.declined(), 1u);
    pool.top_up(1);
    EXPECT_EQ(pool.allocated(), 2u);  // initial count
    std::uint8_t* a = pool.acquire();
    std::uint8_t* b = pool.acquire();
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % 8, 0u);
    EXPECT_EQ(pool.acquire(), nullptr);
    EXPECT_EQ(pool.outstanding(), 2u);
    pool.top_up(2);
    EXPECT_EQ(pool.allocated(), 3u);  // capped
    EXPECT_TRUE(pool.release(a));
    EXPECT_EQ(pool.free_count(), 2u);
    std::uint8_t foreign[16];
    EXPECT_FALSE(pool.release(foreign));
    EXPECT_TRUE(pool.release(b));
    pool.trim();
    EXPECT_EQ(pool.allocated(), 0u);
}

TEST(ActivityBufferPoolTest, TrimKeepsBuffersCuptiStillHolds) {
    ActivityBufferPool pool(1024, 3, 3);
    pool.top_up(0);
    std::uint8_t* held = pool.acquire();
    pool.trim();
    EXPECT_EQ(pool.allocated(), 1u);
    EXPECT_TRUE(pool.owns(held));
    EXPECT_TRUE(pool.release(held));
}

TEST(ActivityBufferPoolTest, ConcurrentAcquireReleaseKeepsEveryBufferExclusive) {
    ActivityBufferPool pool(256, 8, 8);
    pool.top_up(0);
    std::atomic<int> in_use_violations{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&] {
            for (int i = 0; i < 2000; ++i) {
                std::uint8_t* b = pool.acquire();
                if (b == nullptr) continue;
                if (b[0] != 0) in_use_violations.fetch_add(1);
                b[0] = 1;  // mine: no other thread may be handed this buffer now
                b[0] = 0;
                pool.release(b);
            }
        });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(in_use_violations.load(), 0);
    EXPECT_EQ(pool.outstanding(), 0u);
}

// ---------------------------------------------------------------- deep recorder
detail::DeepCall vmm_call(std::uint32_t cbid, std::uint64_t address, std::uint64_t size,
                          std::uint64_t handle, std::uint64_t offset = 0) {
    detail::DeepCall c;
    c.domain = ApiDomain::kDriver;
    c.cbid = cbid;
    c.address = address;
    c.size = size;
    c.handle = handle;
    c.offset = offset;
    c.time_ns = 1000 + cbid;
    c.context = 5;
    return c;
}

TEST(DeepCallRecorderTest, VirtualMemoryMappingsAreAccountedByPhysicalBytes) {
    // GIVEN an expandable segment: 64 MiB reserved, two 2 MiB physical chunks mapped into it,
    // the second chunk mapped only half
    detail::DeepCallRecorder rec;
    test::TestEventQueue q;
    StringTable strings;
    rec.record(vmm_call(detail::kCbidCuMemCreate, 0, 2 << 20, 0xA));
    rec.record(vmm_call(detail::kCbidCuMemCreate, 0, 2 << 20, 0xB));
    rec.record(vmm_call(detail::kCbidCuMemMap, 0x10000000, 2 << 20, 0xA));
    rec.record(vmm_call(detail::kCbidCuMemMap, 0x10200000, 2 << 20, 0xB, 1 << 20));
    rec.record(vmm_call(detail::kCbidCuMemUnmap, 0x10000000, 4 << 20, 0));  // both at once
    rec.record(vmm_call(detail::kCbidCuMemRelease, 0, 0, 0xA));
    std::vector<std::pair<std::uint32_t, std::uint64_t>> sites;
    rec.drain(
        q, strings,
        [&](std::uint32_t c, StringId, std::uint64_t b, std::uint32_t) {
            sites.emplace_back(c, b);
        },
        [](std::uint32_t context) { return context == 5 ? std::uint16_t{3} : kNoDevice; });
    auto maps = q.of_kind(EventKind::kVmMap);
    ASSERT_EQ(maps.size(), 2u);
    EXPECT_EQ(maps[0].memory.bytes, 2u << 20);
    EXPECT_EQ(maps[0].memory.aux, 2u << 20);
    EXPECT_EQ(maps[1].memory.aux, 1u << 20);  // 2 MiB mapped at offset 1 MiB of a 2 MiB chunk
    EXPECT_EQ(maps[0].device, 3);  // the device of the calls' context: the books can place them
    auto unmaps = q.of_kind(EventKind::kVmUnmap);
    ASSERT_EQ(unmaps.size(), 1u);
    EXPECT_EQ(unmaps[0].memory.bytes, 4u << 20);
    EXPECT_EQ(unmaps[0].memory.aux, 3u << 20);
    EXPECT_EQ(unmaps[0].device, 3);
    EXPECT_EQ(rec.mapped_physical_bytes(), 0u);
    EXPECT_EQ(sites.size(), 2u);  // each map reports its correlation and size
}

TEST(DeepCallRecorderTest, AFullRingDropsAndCounts) {
    detail::DeepCallRecorder rec(2);
    for (int i = 0; i < 5; ++i) rec.record(vmm_call(detail::kCbidCuMemCreate, 0, 1, i));
    EXPECT_EQ(rec.dropped(), 3u);
}

TEST(DeepCallRecorderTest, AllocationsReportSitesOutsideTheCudaStack) {
    detail::DeepCallRecorder rec;
    test::TestEventQueue q;
    StringTable strings;
    detail::DeepCall c;
    c.domain = ApiDomain::kRuntime;
    c.cbid = 20;  // cudaMalloc
    c.correlation = 77;
    c.size = 4096;
    c.frames[0] = reinterpret_cast<void*>(&gpudiag_test_application_frame);
    c.frame_count = 1;
    rec.record(c);
    StringId site = kNoString;
    std::uint64_t bytes = 0;
    rec.drain(q, strings, [&](std::uint32_t corr, StringId s, std::uint64_t b, std::uint32_t) {
        EXPECT_EQ(corr, 77u);
        site = s;
        bytes = b;
    });
    EXPECT_EQ(bytes, 4096u);
    EXPECT_NE(strings.lookup(site).find("capture_unit_test"), std::string_view::npos)
        << strings.lookup(site);
}

TEST(CallSiteSymbolizerTest, SkipsTheCudaStack) {
    using S = detail::CallSiteSymbolizer;
    EXPECT_TRUE(S::is_cuda_stack_module("libcudart.so.13"));
    EXPECT_TRUE(S::is_cuda_stack_module("libcuda.so.1"));
    EXPECT_TRUE(S::is_cuda_stack_module("libcupti.so.13"));
    EXPECT_TRUE(S::is_cuda_stack_module("libgpudiag.so.0"));
    EXPECT_FALSE(S::is_cuda_stack_module("libc10_cuda.so"));
    EXPECT_FALSE(S::is_cuda_stack_module("libtorch_cuda.so"));
}

TEST(CuptiOwnerTest, NamesKnownTools) {
    EXPECT_EQ(detail::describe_cupti_owner("CUPTI for kineto"),
              "PyTorch profiler (Kineto) ('CUPTI for kineto')");
    EXPECT_NE(detail::describe_cupti_owner("Nsight Systems").find("Nsight Systems"),
              std::string::npos);
    EXPECT_NE(detail::describe_cupti_owner("compute-sanitizer").find("compute-sanitizer ("),
              std::string::npos);
    EXPECT_EQ(detail::describe_cupti_owner("my tool"), "'my tool'");
    EXPECT_EQ(detail::describe_cupti_owner(""), "an unnamed CUPTI client");
}

}  // namespace
}  // namespace gpudiag
