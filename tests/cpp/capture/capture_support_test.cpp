// SPDX-License-Identifier: Apache-2.0
// Clock calibration, the activity buffer pool, the deep-mode recorder, level selection, device
// numbering and subscriber naming.
#include "capture/activity_buffer_pool.hpp"
#include "capture/api_whitelist.hpp"
#include "capture/call_site_symbolizer.hpp"
#include "capture/capture_levels.hpp"
#include "capture/clock_calibration.hpp"
#include "capture/cupti_activity_source.hpp"
#include "capture/deep_call_recorder.hpp"
#include "capture/nvml_sampler.hpp"
#include "core/clock.hpp"
#include "test_event_queue.hpp"

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
using detail::CaptureFacts;
using detail::ClockCalibration;

bool contains(const std::vector<std::string>& v, const std::string& needle) {
    return std::any_of(v.begin(), v.end(),
                       [&](const std::string& s) { return s.find(needle) != std::string::npos; });
}

// ---------------------------------------------------------------- clock
TEST(ClockCalibrationTest, UsesTheLatestPairAtOrBeforeTheRecord) {
    ClockCalibration c;
    c.add_pair(1'000, 1'001'010);  // offset +1'000'010
    c.add_pair(2'000, 1'001'500);  // offset +999'500: the realtime clock stepped forward
    EXPECT_EQ(c.to_monotonic(1'500), 1'001'510u);
    EXPECT_EQ(c.to_monotonic(2'500), 1'002'000u);
    EXPECT_EQ(c.to_monotonic(500), 1'000'510u);  // older than every pair: the oldest applies
    EXPECT_EQ(c.to_monotonic(0), 0u);            // unknown stays unknown
}

TEST(ClockCalibrationTest, ASourceClockSteppingBackRestartsTheTable) {
    ClockCalibration c;
    c.add_pair(5'000, 100);
    c.add_pair(6'000, 1'100);
    c.add_pair(1'000, 2'000);  // NTP stepped CLOCK_REALTIME back
    EXPECT_EQ(c.pairs(), 1u);
    EXPECT_EQ(c.to_monotonic(1'500), 2'500u);
}

TEST(ClockCalibrationTest, KeepsABoundedHistory) {
    ClockCalibration c;
    for (std::uint64_t i = 1; i <= 1000; ++i) c.add_pair(i * 1000, i * 1000 + 7);
    EXPECT_EQ(c.pairs(), 64u);
    EXPECT_EQ(c.to_monotonic(999'500), 999'507u);
}

TEST(ClockCalibrationTest, SampleAgainstRealtimeMatchesTheSessionClock) {
    ClockCalibration c;
    ASSERT_TRUE(c.sample(&detail::read_realtime_clock));
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
    std::memset(a, 0xAB, 100);
    EXPECT_TRUE(pool.release(a, 100));
    EXPECT_TRUE(std::all_of(a, a + 4096, [](std::uint8_t x) { return x == 0; }));
    std::uint8_t foreign[16];
    EXPECT_FALSE(pool.release(foreign, 16));
    EXPECT_TRUE(pool.release(b, 0));
    pool.trim();
    EXPECT_EQ(pool.allocated(), 0u);
}

// CUPTI may write past the bytes it reports valid (a reserved tail, a record it abandoned):
// a recycled buffer comes back zeroed whole, whatever `used` said.
TEST(ActivityBufferPoolTest, ARecycledBufferIsZeroedWhole) {
    ActivityBufferPool pool(4096, 1, 1);
    pool.top_up(1);
    std::uint8_t* a = pool.acquire();
    ASSERT_NE(a, nullptr);
    std::memset(a, 0xCD, 4096);
    EXPECT_TRUE(pool.release(a, 128));
    std::uint8_t* again = pool.acquire();
    ASSERT_EQ(again, a);
    EXPECT_TRUE(std::all_of(again, again + 4096, [](std::uint8_t x) { return x == 0; }));
    EXPECT_TRUE(pool.release(again, 0));
}

TEST(ActivityBufferPoolTest, TrimKeepsBuffersCuptiStillHolds) {
    ActivityBufferPool pool(1024, 3, 3);
    pool.top_up(0);
    std::uint8_t* held = pool.acquire();
    pool.trim();
    EXPECT_EQ(pool.allocated(), 1u);
    EXPECT_TRUE(pool.owns(held));
    EXPECT_TRUE(pool.release(held, 10));
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
                b[0] = 1;
                pool.release(b, 1);
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
    rec.drain(q, strings,
              [&](std::uint32_t c, StringId, std::uint64_t b, std::uint32_t) { sites.emplace_back(c, b); },
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

// ---------------------------------------------------------------- levels
TEST(CaptureLevelsTest, NamesAreStable) {
    EXPECT_STREQ(capture_level_name(CaptureLevel::kNoGpu), "no_gpu");
    EXPECT_STREQ(capture_level_name(CaptureLevel::kNvml), "nvml");
    EXPECT_STREQ(capture_level_name(CaptureLevel::kFramework), "framework");
    EXPECT_STREQ(capture_level_name(CaptureLevel::kCuptiActivity), "cupti_activity");
    EXPECT_STREQ(capture_level_name(CaptureLevel::kCuptiDeep), "cupti_deep");
}

TEST(CaptureLevelsTest, NoDriverIsNoGpuWithAReasonPerLevel) {
    CaptureFacts f;
    f.nvml_why_not = "NVML: libnvidia-ml.so.1 not found";
    f.cuda_why_not = "no CUDA driver: libcuda.so.1 not found";
    f.cupti_loaded = true;
    f.cupti_path = "/usr/local/cuda/lib64/libcupti.so.13";
    f.cupti_version = 130001;
    CaptureStatus st = detail::compute_capture_status(f);
    EXPECT_EQ(st.level, CaptureLevel::kNoGpu);
    EXPECT_TRUE(contains(st.reasons, "nvml: NVML: libnvidia-ml.so.1 not found"));
    EXPECT_TRUE(contains(st.reasons, "framework: no GPU"));
    EXPECT_TRUE(contains(st.reasons, "cupti_activity: libcupti 130001 at /usr/local/cuda/lib64/"
                                     "libcupti.so.13 loaded, but no CUDA driver"));
    EXPECT_TRUE(contains(st.reasons, "cupti_deep: opt-in"));
    EXPECT_EQ(st.cupti_library, f.cupti_path);
}

TEST(CaptureLevelsTest, EachLevelNeedsItsOwnFacts) {
    CaptureFacts f;
    f.nvml_loaded = true;
    f.nvml_devices = 8;
    f.nvml_driver_version = "580.65.06";
    f.cupti_why_not = "libcupti: libcupti.so.13 not found";
    f.cuda_driver_loaded = true;
    CaptureStatus st = detail::compute_capture_status(f);
    EXPECT_EQ(st.level, CaptureLevel::kNvml);
    EXPECT_EQ(st.device_count, 8);
    EXPECT_EQ(st.driver_version, "580.65.06");
    EXPECT_TRUE(contains(st.reasons, "framework: NVTX ranges not received"));
    EXPECT_TRUE(contains(st.reasons, "cupti_activity: libcupti: libcupti.so.13 not found"));

    f.nvtx_injected = true;
    EXPECT_EQ(detail::compute_capture_status(f).level, CaptureLevel::kFramework);

    f.running = true;
    f.activity_running = true;
    f.deep_requested = true;
    f.activity_reasons = {"cupti_deep: CUPTI's single subscriber slot is held by Nsight Systems"};
    st = detail::compute_capture_status(f);
    EXPECT_EQ(st.level, CaptureLevel::kCuptiActivity);
    EXPECT_TRUE(contains(st.reasons, "held by Nsight Systems"));
    EXPECT_FALSE(contains(st.reasons, "could not be taken"));

    f.deep_running = true;
    EXPECT_EQ(detail::compute_capture_status(f).level, CaptureLevel::kCuptiDeep);

    f.capture_gpu = false;
    f.running = false;
    f.deep_running = false;
    st = detail::compute_capture_status(f);
    EXPECT_EQ(st.level, CaptureLevel::kFramework);
    EXPECT_TRUE(contains(st.reasons, "capture_gpu is false"));
}

TEST(VisibleDevicesTest, FollowsCudaRules) {
    std::vector<int> idx;
    std::vector<std::string> uuids;
    detail::parse_visible_devices("2, 0", idx, uuids);
    EXPECT_EQ(idx, (std::vector<int>{2, 0}));
    detail::parse_visible_devices("1,-1,3", idx, uuids);
    EXPECT_EQ(idx, (std::vector<int>{1}));  // CUDA stops at the first invalid entry
    detail::parse_visible_devices("GPU-aaaa-bbbb,MIG-1/2/3,0", idx, uuids);
    ASSERT_EQ(idx.size(), 2u);
    EXPECT_EQ(uuids[0], "GPU-aaaa-bbbb");
    EXPECT_EQ(idx[1], 0);
    detail::parse_visible_devices("", idx, uuids);
    EXPECT_TRUE(idx.empty());
}

TEST(CuptiOwnerTest, NamesKnownTools) {
    EXPECT_EQ(detail::describe_cupti_owner("CUPTI for kineto"), "PyTorch profiler (Kineto) ('CUPTI for kineto')");
    EXPECT_NE(detail::describe_cupti_owner("Nsight Systems").find("Nsight Systems"), std::string::npos);
    EXPECT_NE(detail::describe_cupti_owner("compute-sanitizer").find("compute-sanitizer ("),
              std::string::npos);
    EXPECT_EQ(detail::describe_cupti_owner("my tool"), "'my tool'");
    EXPECT_EQ(detail::describe_cupti_owner(""), "an unnamed CUPTI client");
}

}  // namespace
}  // namespace gpudiag
