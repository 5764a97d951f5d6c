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
#include "capture/starvation_watch.hpp"
#include "core/clock.hpp"
#include "test_event_queue.hpp"

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
using detail::CaptureFacts;
using detail::ClockCalibration;

bool contains(const std::vector<std::string>& v, const std::string& needle) {
    return std::any_of(v.begin(), v.end(),
                       [&](const std::string& s) { return s.find(needle) != std::string::npos; });
}

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

// ---------------------------------------------------------------- starvation watch
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
    EXPECT_TRUE(contains(st.reasons,
                         "framework: NVTX ranges need a GPU; steps, phases and input "
                         "waits do not"));
    EXPECT_TRUE(contains(st.reasons,
                         "cupti_activity: libcupti 130001 at /usr/local/cuda/lib64/"
                         "libcupti.so.13 loaded, but no CUDA driver"));
    EXPECT_TRUE(contains(st.reasons, "cupti_deep: opt-in"));
    EXPECT_EQ(st.cupti_library, f.cupti_path);
}

// A session whose CUPTI start failed for the reason the loader gave says it once.
TEST(CaptureLevelsTest, AReasonRepeatedByAFailedStartIsSaidOnce) {
    CaptureFacts f;
    f.cupti_why_not = "libcupti not loaded: no CUDA driver: libcuda.so.1 not found";
    f.activity_reasons.push_back("cupti_activity: " + f.cupti_why_not);
    CaptureStatus st = detail::compute_capture_status(f);
    auto same =
        std::count(st.reasons.begin(), st.reasons.end(), "cupti_activity: " + f.cupti_why_not);
    EXPECT_EQ(same, 1);
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

// A machine without a GPU, as a Python session sees it: the framework integration times steps
// and input waits, so the framework level is available; what is missing follows, with why.
TEST(CaptureLevelsTest, WithoutAGpuTheFrameworkIntegrationStillGivesTheFrameworkLevel) {
    CaptureFacts f;
    f.nvml_why_not = "NVML: libnvidia-ml.so.1 not found";
    f.cuda_why_not = "no CUDA driver: libcuda.so.1 not found";
    f.cupti_why_not = "libcupti not loaded: no CUDA driver";
    f.framework_reported = true;
    f.stack.framework.name = "torch";
    CaptureStatus st = detail::compute_capture_status(f);
    EXPECT_EQ(st.level, CaptureLevel::kFramework);
    EXPECT_TRUE(contains(st.available, "framework: step times, phases, input waits"));
    EXPECT_TRUE(contains(st.available, "analysis: recordings"));
    EXPECT_FALSE(contains(st.available, "nvml:"));
    EXPECT_FALSE(contains(st.available, "cupti_activity:"));
    EXPECT_FALSE(contains(st.reasons, "framework: no GPU"));
    EXPECT_TRUE(contains(st.reasons, "nvml: NVML: libnvidia-ml.so.1 not found"));
    EXPECT_TRUE(contains(st.reasons, "cupti_activity: libcupti not loaded"));
    // What is lost without GPU activity, and what is not.
    EXPECT_TRUE(contains(st.available, "findings without GPU activity: input_bound, step times"));
    // Without the integration (a C++ program without NVTX) the level stays no_gpu.
    f.framework_reported = false;
    EXPECT_EQ(detail::compute_capture_status(f).level, CaptureLevel::kNoGpu);
}

TEST(CaptureLevelsTest, NvmlGapsOfAnOlderDriverAreReasonsUnderTheLevel) {
    CaptureFacts f;
    f.nvml_loaded = true;
    f.nvml_devices = 1;
    f.nvml_notes = {
        "nvml: power limit unavailable: this driver's NVML has no "
        "nvmlDeviceGetEnforcedPowerLimit"};
    CaptureStatus st = detail::compute_capture_status(f);
    EXPECT_EQ(st.level, CaptureLevel::kNvml);
    EXPECT_TRUE(contains(st.available, "nvml: GPU health on 1 device(s)"));
    EXPECT_TRUE(contains(st.reasons, "nvml: power limit unavailable"));
}

TEST(VisibleDevicesTest, FollowsCudaRules) {
    std::vector<int> idx;
    std::vector<std::string> uuids;
    detail::parse_visible_devices("2, 0", idx, uuids);
    EXPECT_EQ(idx, (std::vector<int>{2, 0}));
    detail::parse_visible_devices("1,-1,3", idx, uuids);
    EXPECT_EQ(idx, (std::vector<int>{1}));  // CUDA stops at the first invalid entry
    detail::parse_visible_devices("GPU-aaaa-bbbb,MIG-1111-2222,0", idx, uuids);
    ASSERT_EQ(idx.size(), 3u);
    EXPECT_EQ(uuids[0], "GPU-aaaa-bbbb");
    EXPECT_EQ(uuids[1], "MIG-1111-2222");  // an instance: found by its UUID, sampled as one
    EXPECT_EQ(idx[2], 0);
    detail::parse_visible_devices("", idx, uuids);
    EXPECT_TRUE(idx.empty());
}

// /proc/self/status names this process in each PID namespace, outermost first.
TEST(NamespacePidsTest, ReadsTheNSpidLine) {
    EXPECT_EQ(detail::parse_nspid("\nName:\tpython\nNSpid:\t48213\t17\nNSpgid:\t1\n"),
              (std::vector<std::uint32_t>{48213, 17}));
    EXPECT_EQ(detail::parse_nspid("\nNSpid:\t9\n"), (std::vector<std::uint32_t>{9}));
    EXPECT_TRUE(detail::parse_nspid("\nName:\tpython\nPid:\t9\n").empty());  // older kernels
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
