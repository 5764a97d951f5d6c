// SPDX-License-Identifier: Apache-2.0
// Capture with a CUPTI 12.4 (the stub built as one: API version 22, libcupti.so.12 symbols, no
// per-call API enable, no EnableAllSyncRecords, no cuptiSubscribe_v2), as PyTorch's cu124 wheels
// bring: the level is reached, the whole runtime API kind replaces the per-call whitelist and
// only whitelisted calls reach the session, and no CUDA 13 cbid is assumed.
#include "capture/capture_backend.hpp"
#include "capture/cupti/cupti_api.hpp"
#include "capture/cupti/cupti_record_layouts.hpp"
#include "capture_test_support.hpp"
#include "cupti_records.hpp"
#include "test_event_queue.hpp"

#include <gpudiag/capture.hpp>
#include <gpudiag/session.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>

extern "C" {
void gpudiag_stub_cupti_reset();
void gpudiag_stub_cupti_queue_buffer(const void* records, size_t bytes);
uint64_t gpudiag_stub_cupti_now();
int gpudiag_stub_cupti_kind_enabled(int kind);
int gpudiag_stub_cupti_kind_ever_enabled(int kind);
}

namespace {
// Before main: every loader in the library reads these on first use.
const bool kStubsSelected = gpudiag::test::select_stub_libraries(
    GPUDIAG_STUB_CUPTI12, GPUDIAG_STUB_NVML, GPUDIAG_STUB_CUDA);
}  // namespace

namespace gpudiag {
namespace {

using test::contains;

TEST(CaptureCupti12StubTest, ACupti124CapturesWithTheWholeRuntimeKindFilteredToTheWhitelist) {
    ASSERT_TRUE(kStubsSelected);
    gpudiag_stub_cupti_reset();
    std::string why;
    const detail::CuptiApi* api = detail::cupti_api(&why);
    ASSERT_NE(api, nullptr) << why;
    EXPECT_EQ(api->version, 22u);
    EXPECT_TRUE(api->cupti12_abi);
    EXPECT_EQ(api->description, "CUPTI 12.4 (API version 22)");

    detail::CaptureOptions o;
    o.nvml_hz = 0;
    o.flush_period_ms = 50;
    auto backend = detail::make_capture_backend(o);
    test::TestEventQueue queue;
    StringTable strings;
    ASSERT_TRUE(backend->start(queue, strings).is_ok());
    CaptureStatus st = backend->status();
    EXPECT_EQ(st.level, CaptureLevel::kCuptiActivity);
    EXPECT_EQ(st.cupti_version, 22u);
    EXPECT_EQ(gpudiag_stub_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_RUNTIME), 1);
    EXPECT_EQ(gpudiag_stub_cupti_kind_ever_enabled(CUPTI_ACTIVITY_KIND_DRIVER), 0);
    EXPECT_TRUE(contains(st.reasons, "cannot record single API calls")) << st.reasons.size();
    EXPECT_TRUE(contains(st.reasons, "cuptiActivityEnableAllSyncRecords missing"));
    EXPECT_FALSE(contains(st.reasons, "could not be enabled"));

    std::uint64_t now = gpudiag_stub_cupti_now();
    test::RecordBuffer buf;  // API records: 40 bytes in every CUPTI
    buf.add(test::api_record(CUPTI_ACTIVITY_KIND_RUNTIME, 211, now, now + 800, 6));  // launch
    buf.add(test::api_record(CUPTI_ACTIVITY_KIND_RUNTIME, 3, now, now + 10, 7));  // cudaGetDevice
    buf.add(
        test::api_record(CUPTI_ACTIVITY_KIND_RUNTIME, 20, now, now + 90, 8, 2));  // failed malloc
    gpudiag_stub_cupti_queue_buffer(buf.data(), buf.size());
    backend->flush();
    auto apis = queue.of_kind(EventKind::kApiCall);
    ASSERT_EQ(apis.size(), 2u);
    EXPECT_EQ(strings.lookup(apis[0].api.name), "cudaLaunchKernel");
    EXPECT_EQ(strings.lookup(apis[1].api.name), "cudaMalloc");
    EXPECT_EQ(queue.of_kind(EventKind::kOutOfMemory).size(), 1u);

    backend->stop();
    EXPECT_EQ(gpudiag_stub_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_RUNTIME), 0);
}

}  // namespace
}  // namespace gpudiag
