// SPDX-License-Identifier: Apache-2.0
// Capture with a CUPTI 13.4 (the stub built as one: API version 130400, with the per-subscriber
// activity API): gpudiag takes its own subscriber where the driver allows it, its records reach
// the session through the same decoder, another per-subscriber client traces beside it, and each
// refusal (a driver without support, a tool holding the process-wide API) falls back to the
// process-wide path with its own reason. One process: cupti_api() loads the library once.
#include "capture/capture_backend.hpp"
#include "capture/capture_levels.hpp"
#include "capture/cupti/cupti_activity_source.hpp"
#include "capture/cupti/cupti_api.hpp"
#include "capture_test_support.hpp"
#include "cupti_records.hpp"
#include "test_event_queue.hpp"

#include <gpudiag/capture.hpp>
#include <gpudiag/string_table.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

extern "C" {
void gpudiag_stub_cupti_reset();
void gpudiag_stub_cupti_set_subscriber_holder(const char* name);
void gpudiag_stub_cupti_queue_buffer(const void* records, size_t bytes);
uint64_t gpudiag_stub_cupti_now();
int gpudiag_stub_cupti_kind_enabled(int kind);
int gpudiag_stub_cupti_v1_setting_calls();
int gpudiag_stub_cupti_has_subscriber();
int gpudiag_stub_cupti_callback_enabled(int domain, unsigned cbid);
int gpudiag_stub_cupti_invoke_callback(int domain, unsigned cbid, const void* data);
void gpudiag_stub_cupti_set_per_subscriber_support(int on);
int gpudiag_stub_cupti_v2_subscribed();
int gpudiag_stub_cupti_v2_kind_enabled(int kind);
int gpudiag_stub_cupti_v2_api_enabled(int runtime, unsigned cbid);
int gpudiag_stub_cupti_v2_next_record_calls();
void gpudiag_stub_cupti_add_v2_dropped(size_t n);
int gpudiag_stub_cupti_foreign_v2_start();
void gpudiag_stub_cupti_foreign_v2_stop();
size_t gpudiag_stub_cupti_foreign_v2_records();
}

namespace {
// Before main: every loader in the library reads these on first use.
const bool kStubsSelected = gpudiag::test::select_stub_libraries(
    GPUDIAG_STUB_CUPTI_V2, GPUDIAG_STUB_NVML, GPUDIAG_STUB_CUDA);
}  // namespace

namespace gpudiag {
namespace {

using test::contains;
using test::joined;

detail::CaptureOptions backend_options(bool deep = false) {
    detail::CaptureOptions o;
    o.deep = deep;
    o.nvml_hz = 0;
    o.flush_period_ms = 50;
    return o;
}

// A step's records: an allocation, a kernel, its launch.
void queue_step() {
    static const char kName[] = "_Z4stepv";
    std::uint64_t now = gpudiag_stub_cupti_now();
    test::RecordBuffer buf;
    buf.add(test::memory_record(true, 0xA000, 1 << 20, 5, now));
    buf.add(test::kernel_record(kName, now + 1000, now + 5000, 6));
    buf.add(test::api_record(CUPTI_ACTIVITY_KIND_RUNTIME, 211, now, now + 800, 6));
    gpudiag_stub_cupti_queue_buffer(buf.data(), buf.size());
}

class CaptureCuptiV2StubTest : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_TRUE(kStubsSelected);
        gpudiag_stub_cupti_reset();
    }
    test::TestEventQueue queue_;
    StringTable strings_;
};

TEST_F(CaptureCuptiV2StubTest, ACupti134WithDriverSupportTracesOnItsOwnSubscriber) {
    std::string why;
    const detail::CuptiApi* api = detail::cupti_api(&why);
    ASSERT_NE(api, nullptr) << why;
    EXPECT_EQ(api->version, 130400u);
    EXPECT_EQ(api->missing_per_subscriber_functions(), "");

    auto backend = detail::make_capture_backend(backend_options());
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());
    CaptureStatus st = backend->status();
    EXPECT_EQ(st.level, CaptureLevel::kCuptiActivity) << joined(st.reasons);
    EXPECT_TRUE(contains(st.reasons, "cupti_activity: per-subscriber activity API"))
        << joined(st.reasons);
    EXPECT_TRUE(detail::CuptiActivitySource::instance().status().per_subscriber);
    EXPECT_EQ(gpudiag_stub_cupti_v2_subscribed(), 1);
    EXPECT_EQ(gpudiag_stub_cupti_v2_kind_enabled(CUPTI_ACTIVITY_KIND_MEMORY2), 1);
    EXPECT_EQ(gpudiag_stub_cupti_v2_kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), 1);
    EXPECT_EQ(gpudiag_stub_cupti_v2_api_enabled(1, 211), 1);  // cudaLaunchKernel
    EXPECT_EQ(gpudiag_stub_cupti_v2_api_enabled(1, 3), 0);    // cudaGetDevice: not whitelisted
    // Nothing through the process-wide API, which CUPTI would refuse beside it.
    EXPECT_EQ(gpudiag_stub_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_MEMORY2), 0);
    EXPECT_EQ(gpudiag_stub_cupti_has_subscriber(), 0);

    queue_step();
    gpudiag_stub_cupti_add_v2_dropped(3);
    backend->flush();
    auto kernels = queue_.of_kind(EventKind::kKernel);
    ASSERT_EQ(kernels.size(), 1u);
    EXPECT_EQ(strings_.lookup(kernels[0].kernel.name), "step()");
    EXPECT_EQ(kernels[0].duration_ns(), 4000u);
    EXPECT_EQ(queue_.of_kind(EventKind::kDeviceAlloc).size(), 1u);
    EXPECT_EQ(queue_.of_kind(EventKind::kApiCall).size(), 1u);
    EXPECT_GT(gpudiag_stub_cupti_v2_next_record_calls(), 0);  // the subscriber's parser

    backend->stop();
    EXPECT_EQ(backend->status().dropped, 3u);  // the subscriber's own drop count
    EXPECT_EQ(gpudiag_stub_cupti_v2_subscribed(), 0);
    EXPECT_EQ(gpudiag_stub_cupti_v2_kind_enabled(CUPTI_ACTIVITY_KIND_MEMORY2), 0);
}

TEST_F(CaptureCuptiV2StubTest, AnotherPerSubscriberClientTracesBesideGpudiag) {
    auto backend = detail::make_capture_backend(backend_options());
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());
    ASSERT_EQ(gpudiag_stub_cupti_v2_subscribed(), 1);
    // PyTorch's CUPTI monitor starts beside gpudiag: neither pauses the other.
    ASSERT_EQ(gpudiag_stub_cupti_foreign_v2_start(), 1);
    queue_step();
    backend->flush();
    EXPECT_GT(gpudiag_stub_cupti_foreign_v2_records(), 0u);
    EXPECT_EQ(queue_.of_kind(EventKind::kKernel).size(), 1u);
    gpudiag_stub_cupti_foreign_v2_stop();
    // Its stop leaves gpudiag's kinds alone (the process-wide API's Kineto turns them off).
    EXPECT_EQ(gpudiag_stub_cupti_v2_kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), 1);
    queue_step();
    backend->flush();
    EXPECT_EQ(queue_.of_kind(EventKind::kKernel).size(), 2u);
    CaptureStatus st = backend->status();
    EXPECT_FALSE(contains(st.reasons, "foreign")) << joined(st.reasons);
    EXPECT_FALSE(contains(st.reasons, "starved")) << joined(st.reasons);
    backend->stop();
}

TEST_F(CaptureCuptiV2StubTest, ADriverWithoutSupportFallsBackToTheProcessWidePath) {
    gpudiag_stub_cupti_set_per_subscriber_support(0);
    auto backend = detail::make_capture_backend(backend_options());
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());
    CaptureStatus st = backend->status();
    EXPECT_EQ(st.level, CaptureLevel::kCuptiActivity) << joined(st.reasons);
    EXPECT_TRUE(contains(st.reasons,
                         "cupti_activity: process-wide activity API: CUPTI refused "
                         "the per-subscriber activity API (cuptiSubscribe_v2: "
                         "CUPTI_ERROR_NOT_SUPPORTED): driver too old for "
                         "per-subscriber activity (needs R610+)"))
        << joined(st.reasons);
    EXPECT_FALSE(detail::CuptiActivitySource::instance().status().per_subscriber);
    EXPECT_EQ(gpudiag_stub_cupti_v2_subscribed(), 0);
    EXPECT_EQ(gpudiag_stub_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_MEMORY2), 1);
    queue_step();
    backend->flush();
    EXPECT_EQ(queue_.of_kind(EventKind::kKernel).size(), 1u);
    EXPECT_EQ(gpudiag_stub_cupti_v2_next_record_calls(), 0);  // the process-wide parser
    backend->stop();
    EXPECT_EQ(gpudiag_stub_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_MEMORY2), 0);
}

TEST_F(CaptureCuptiV2StubTest, CuptiRefusesToMixWithAToolHoldingTheProcessWideApi) {
    gpudiag_stub_cupti_set_subscriber_holder("CUPTI for kineto");
    auto backend = detail::make_capture_backend(backend_options());
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());
    CaptureStatus st = backend->status();
    EXPECT_EQ(st.level, CaptureLevel::kCuptiActivity) << joined(st.reasons);
    EXPECT_TRUE(contains(st.reasons,
                         "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED): another "
                         "tool holds the process-wide API (PyTorch profiler (Kineto)"))
        << joined(st.reasons);
    EXPECT_EQ(gpudiag_stub_cupti_v2_subscribed(), 0);
    EXPECT_EQ(gpudiag_stub_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_MEMORY2), 1);
    backend->stop();
}

TEST_F(CaptureCuptiV2StubTest, PauseYieldsTheSubscriberAndResumeTakesItAgain) {
    auto backend = detail::make_capture_backend(backend_options());
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());
    detail::CuptiActivitySource& source = detail::CuptiActivitySource::instance();
    ASSERT_TRUE(source.pause("torch.profiler starts").is_ok());
    // A client of the process-wide API (classic torch.profiler) can now have it.
    EXPECT_EQ(gpudiag_stub_cupti_v2_subscribed(), 0);
    ASSERT_TRUE(source.resume().is_ok());
    EXPECT_EQ(gpudiag_stub_cupti_v2_subscribed(), 1);
    EXPECT_EQ(gpudiag_stub_cupti_v2_kind_enabled(CUPTI_ACTIVITY_KIND_MEMORY2), 1);
    queue_step();
    backend->flush();
    EXPECT_EQ(queue_.of_kind(EventKind::kKernel).size(), 1u);
    backend->stop();
}

TEST_F(CaptureCuptiV2StubTest, TheCostBudgetsRungsChangeOnlyGpudiagsOwnSubscriber) {
    const auto ladder = detail::capture_reductions();
    ASSERT_EQ(ladder.size(), 3u);
    ASSERT_EQ(std::string(ladder[1].name), "api_calls_off");
    ASSERT_EQ(std::string(ladder[2].name), "gpu_activity_off");
    auto backend = detail::make_capture_backend(backend_options());
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());
    ASSERT_TRUE(detail::CuptiActivitySource::instance().status().per_subscriber);
    const int v1_calls = gpudiag_stub_cupti_v1_setting_calls();
    // Another per-subscriber client traces beside gpudiag: its kinds are not gpudiag's to turn off.
    ASSERT_EQ(gpudiag_stub_cupti_foreign_v2_start(), 1);

    backend->reduce(ladder[1]);
    EXPECT_EQ(gpudiag_stub_cupti_v2_api_enabled(1, 211), 0);  // cudaLaunchKernel
    EXPECT_EQ(gpudiag_stub_cupti_v2_api_enabled(1, 20), 1);   // cudaMalloc: OOMs at every rung
    queue_step();
    backend->flush();
    EXPECT_EQ(queue_.of_kind(EventKind::kKernel).size(), 1u);
    EXPECT_EQ(queue_.of_kind(EventKind::kApiCall).size(), 0u);  // the launch was never made

    backend->reduce(ladder[2]);
    EXPECT_EQ(gpudiag_stub_cupti_v2_kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), 0);
    EXPECT_EQ(gpudiag_stub_cupti_v2_kind_enabled(CUPTI_ACTIVITY_KIND_MEMORY2), 1);
    const std::size_t foreign = gpudiag_stub_cupti_foreign_v2_records();
    queue_step();
    backend->flush();
    EXPECT_EQ(queue_.of_kind(EventKind::kKernel).size(), 1u);
    EXPECT_EQ(queue_.of_kind(EventKind::kDeviceAlloc).size(), 2u);
    EXPECT_GT(gpudiag_stub_cupti_foreign_v2_records(), foreign);  // the other client's go on

    backend->reduce(ladder[0]);
    EXPECT_EQ(gpudiag_stub_cupti_v2_kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), 1);
    EXPECT_EQ(gpudiag_stub_cupti_v2_api_enabled(1, 211), 1);
    queue_step();
    backend->flush();
    EXPECT_EQ(queue_.of_kind(EventKind::kKernel).size(), 2u);
    EXPECT_EQ(queue_.of_kind(EventKind::kApiCall).size(), 1u);
    // All through the subscriber: the process-wide API, which CUPTI refuses beside it, untouched.
    EXPECT_EQ(gpudiag_stub_cupti_v1_setting_calls(), v1_calls);
    EXPECT_EQ(gpudiag_stub_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), 0);
    EXPECT_FALSE(detail::CuptiActivitySource::instance().status().degraded);
    gpudiag_stub_cupti_foreign_v2_stop();
    backend->stop();
}

TEST_F(CaptureCuptiV2StubTest, DeepModeRidesOnTheActivitySubscriber) {
    auto backend = detail::make_capture_backend(backend_options(/*deep=*/true));
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());
    CaptureStatus st = backend->status();
    EXPECT_EQ(st.level, CaptureLevel::kCuptiDeep) << joined(st.reasons);
    EXPECT_EQ(gpudiag_stub_cupti_has_subscriber(), 0);  // no second, single-client subscriber
    EXPECT_EQ(gpudiag_stub_cupti_callback_enabled(CUPTI_CB_DOMAIN_RUNTIME_API, 20), 1);
    CUpti_CallbackData cd{};
    cd.callbackSite = CUPTI_API_EXIT;
    EXPECT_EQ(gpudiag_stub_cupti_invoke_callback(CUPTI_CB_DOMAIN_RUNTIME_API, 20, &cd), 1);
    backend->stop();
    EXPECT_EQ(gpudiag_stub_cupti_v2_subscribed(), 0);
    EXPECT_EQ(gpudiag_stub_cupti_callback_enabled(CUPTI_CB_DOMAIN_RUNTIME_API, 20), 0);
}

}  // namespace
}  // namespace gpudiag
