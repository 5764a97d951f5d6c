// SPDX-License-Identifier: Apache-2.0
// Capture levels: the one level the facts give, with a reason for each level above it.
#include "capture/capture_levels.hpp"
#include "capture_test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace gpudiag {
namespace {

using test::contains;

using detail::CaptureFacts;

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
}  // namespace
}  // namespace gpudiag
