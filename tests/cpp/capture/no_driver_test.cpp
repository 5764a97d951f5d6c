// SPDX-License-Identifier: Apache-2.0
// The real libcupti on a machine with no CUDA driver: capture reports the no-GPU level with the
// reason, never an error, and enables nothing. Skips where a driver is installed (GPU boxes).
#include "capture/capture_backend.hpp"
#include "capture_test_support.hpp"
#include "test_event_queue.hpp"

#include <gpudiag/capture.hpp>

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

namespace {
const bool kRealLibraries = [] {
    unsetenv("GPUDIAG_CUPTI_PATH");
    unsetenv("GPUDIAG_NVML_PATH");
    unsetenv("GPUDIAG_CUDA_PATH");
    return true;
}();
}  // namespace

namespace gpudiag {
namespace {

using test::contains;
using test::joined;

bool has_driver() {
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    return h != nullptr;  // left loaded: capture would load it next anyway
}

TEST(NoDriverTest, ProbeGivesNoGpuWithTheReason) {
    ASSERT_TRUE(kRealLibraries);
    if (has_driver()) GTEST_SKIP() << "a CUDA driver is installed here";
    CaptureStatus st = probe_capture();
    EXPECT_EQ(st.level, CaptureLevel::kNoGpu) << joined(st.reasons);
    EXPECT_TRUE(contains(st.reasons, "no CUDA driver")) << joined(st.reasons);
    EXPECT_TRUE(contains(st.reasons, "nvml:")) << joined(st.reasons);
    if (!st.cupti_library.empty()) {
        EXPECT_GE(st.cupti_version, 130000u);
        EXPECT_TRUE(contains(st.reasons, "libcupti 13")) << joined(st.reasons);
    }
}

TEST(NoDriverTest, StartingCaptureReportsTheCuptiErrorAndStaysAtNoGpu) {
    if (has_driver()) GTEST_SKIP() << "a CUDA driver is installed here";
    test::TestEventQueue queue;
    StringTable strings;
    detail::CaptureOptions o;
    o.flush_period_ms = 50;
    auto backend = detail::make_capture_backend(o);
    ASSERT_TRUE(backend->start(queue, strings).is_ok());
    CaptureStatus st = backend->status();
    EXPECT_EQ(st.level, CaptureLevel::kNoGpu) << joined(st.reasons);
    if (!st.cupti_library.empty()) {
        // The real libcupti with no driver: cuptiActivityEnable fails (CUPTI_ERROR_UNKNOWN).
        EXPECT_TRUE(contains(st.reasons, "cuptiActivityEnable(MEMORY2) failed"))
            << joined(st.reasons);
    }
    EXPECT_FALSE(backend->pause("x").is_ok());
    backend->flush();
    backend->stop();
    EXPECT_TRUE(queue.of_kind(EventKind::kKernel).empty());
}

}  // namespace
}  // namespace gpudiag
