// SPDX-License-Identifier: Apache-2.0
// The whole capture path against stub libcupti / libnvidia-ml / libcuda (selected through
// GPUDIAG_CUPTI_PATH / GPUDIAG_NVML_PATH / GPUDIAG_CUDA_PATH before anything loads): loading,
// level selection, flush, drops, the foreign-subscriber fallback, deep mode, pause/resume
// around another CUPTI client, and the NVML sampler feeding the health analysis.
#include "api/session_cost.hpp"
#include "capture/capture_backend.hpp"
#include "capture/capture_levels.hpp"
#include "capture/cupti/cupti_activity_source.hpp"
#include "capture/cupti/cupti_api.hpp"
#include "capture/nvml/nvml_api.hpp"
#include "capture/nvml/nvml_sampler.hpp"
#include "capture/platform/cuda_driver_api.hpp"
#include "capture_test_support.hpp"
#include "cupti_records.hpp"
#include "test_event_queue.hpp"
#include "thread_cpu.hpp"

#include <gpudiag/gpudiag.h>
#include <gpudiag/analyze.hpp>
#include <gpudiag/capture.hpp>
#include <gpudiag/recording.hpp>
#include <gpudiag/session.hpp>
#include <gpudiag/sink.hpp>

#include <dlfcn.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <string_view>
#include <thread>

extern "C" {
void gpudiag_stub_cupti_reset();
void gpudiag_stub_cupti_set_global_result(int result);
void gpudiag_stub_cupti_set_kind_result(int kind, int result);
void gpudiag_stub_cupti_set_flush_result(int result);
void gpudiag_stub_cupti_set_forced_invalid_kind(int on);
void gpudiag_stub_cupti_set_subscriber_holder(const char* name);
int gpudiag_stub_cupti_record(const void* record, size_t bytes, int in_flight_ms);
void gpudiag_stub_cupti_queue_buffer(const void* records, size_t bytes);
uint64_t gpudiag_stub_cupti_now();
int gpudiag_stub_cupti_kind_enabled(int kind);
int gpudiag_stub_cupti_kind_ever_enabled(int kind);
int gpudiag_stub_cupti_api_enabled(int runtime, unsigned cbid);
int gpudiag_stub_cupti_all_sync_records();
int gpudiag_stub_cupti_zeroed_attribute();
int gpudiag_stub_cupti_has_subscriber();
int gpudiag_stub_cupti_callback_enabled(int domain, unsigned cbid);
int gpudiag_stub_cupti_register_calls();
int gpudiag_stub_cupti_forced_flushes();
int gpudiag_stub_cupti_worker_completions();
void gpudiag_stub_cupti_add_dropped(size_t n);
int gpudiag_stub_cupti_invoke_callback(int domain, unsigned cbid, const void* data);
int gpudiag_stub_cupti_hold_buffers(int n);
void gpudiag_stub_cupti_release_held();
void gpudiag_stub_cupti_install_cycle_clock();
void gpudiag_stub_cupti_foreign_start(int install_cycle_clock);
void gpudiag_stub_cupti_foreign_stop();
size_t gpudiag_stub_cupti_foreign_unknown_buffers();
void gpudiag_stub_nvml_set(int gpu, unsigned long long reasons, int temperature, unsigned power_mw,
                           unsigned limit_mw);
void gpudiag_stub_nvml_set_ecc(int gpu, unsigned long long corrected,
                               unsigned long long uncorrected);
void gpudiag_stub_nvml_set_processes(int gpu, unsigned long long own, unsigned long long foreign,
                                     int include_self);
void gpudiag_stub_nvml_set_pcie(int gpu, unsigned generation, unsigned generation_max,
                                unsigned width, unsigned width_max, unsigned replays);
void gpudiag_stub_nvml_set_memory_health(int gpu, unsigned pages_single, unsigned pages_double,
                                         unsigned pages_pending, unsigned rows_correctable,
                                         unsigned rows_uncorrectable, unsigned remap_pending,
                                         unsigned remap_failed);
void gpudiag_stub_nvml_push_xid(int gpu, unsigned long long xid);
int gpudiag_stub_nvml_xid_registered(int gpu);
void gpudiag_stub_nvml_set_gpm(int gpu, double sm_active, double occupancy, double tensor,
                               double dram);
void gpudiag_stub_nvml_set_utilization(int gpu, unsigned util);
int gpudiag_stub_nvml_gpm_samples_live();
int gpudiag_stub_nvml_card_calls_on_mig();
void gpudiag_stub_nvml_set_process_sm(int gpu, unsigned pid, unsigned sm);
void gpudiag_stub_nvml_set_nvlink(int gpu, unsigned links, unsigned long long replay,
                                  unsigned long long recovery, unsigned long long crc);
void gpudiag_stub_nvml_add_process(int gpu, unsigned pid, unsigned long long bytes);
void gpudiag_stub_nvml_reset();
void gpudiag_stub_cuda_set_context_active(int active);
void gpudiag_stub_cuda_set_initialised(int initialised);
}

namespace {
// Before main: every loader in the library reads these on first use.
const bool kStubsSelected =
    gpudiag::test::select_stub_libraries(GPUDIAG_STUB_CUPTI, GPUDIAG_STUB_NVML, GPUDIAG_STUB_CUDA);
}  // namespace

namespace gpudiag {
namespace {

using test::contains;
using test::joined;

using test::RecordBuffer;
using test::TestEventQueue;

SessionOptions options(bool deep = false) {
    SessionOptions o;
    o.deep = deep;
    o.nvml_hz = 0;  // NVML tested on its own below
    o.flush_period_ms = 50;
    return o;
}

// The same for the capture backend alone.
detail::CaptureOptions backend_options(bool deep = false) {
    detail::CaptureOptions o;
    o.deep = deep;
    o.nvml_hz = 0;
    o.flush_period_ms = 50;
    return o;
}

class CaptureStubTest : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_TRUE(kStubsSelected);
        gpudiag_stub_cupti_reset();
        gpudiag_stub_nvml_reset();
        gpudiag_stub_cuda_set_initialised(0);
        gpudiag_stub_cuda_set_context_active(0);
    }
    TestEventQueue queue_;
    StringTable strings_;
};

TEST_F(CaptureStubTest, LoadsTheLibrariesNamedByTheEnvironment) {
    std::string why;
    const detail::CuptiApi* cupti = detail::cupti_api(&why);
    ASSERT_NE(cupti, nullptr) << why;
    EXPECT_NE(cupti->path.find("stub_cupti"), std::string::npos) << cupti->path;
    EXPECT_EQ(cupti->version, 130001u);
    EXPECT_FALSE(cupti->reused);
    ASSERT_NE(detail::nvml_api(&why), nullptr) << why;
    const detail::CudaDriverApi* cuda = detail::cuda_driver_api(&why);
    ASSERT_NE(cuda, nullptr) << why;
    EXPECT_EQ(cuda->version_string(), "13.0");
}

TEST_F(CaptureStubTest, ProbeReportsCuptiActivityWithoutEnablingAnything) {
    CaptureStatus st = probe_capture();
    EXPECT_EQ(st.level, CaptureLevel::kCuptiActivity) << joined(st.reasons);
    EXPECT_EQ(st.device_count, 2);
    EXPECT_EQ(st.driver_version, "580.65.06");
    EXPECT_EQ(st.cupti_version, 130001u);
    EXPECT_TRUE(contains(st.reasons, "cupti_deep: opt-in"));
    EXPECT_FALSE(st.capturing);
    EXPECT_EQ(gpudiag_stub_cupti_kind_ever_enabled(CUPTI_ACTIVITY_KIND_MEMORY2), 0);
}

TEST_F(CaptureStubTest, StartEnablesTheDefaultKindsAndTheWhitelistOnly) {
    auto backend = detail::make_capture_backend(backend_options());
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());
    for (int kind : {CUPTI_ACTIVITY_KIND_MEMORY2, CUPTI_ACTIVITY_KIND_MEMORY_POOL,
                     CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                     CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
                     CUPTI_ACTIVITY_KIND_OVERHEAD}) {
        EXPECT_EQ(gpudiag_stub_cupti_kind_enabled(kind), 1) << kind;
    }
    // Never the serialising KERNEL kind, the legacy MEMORY kind, or whole API domains.
    EXPECT_EQ(gpudiag_stub_cupti_kind_ever_enabled(CUPTI_ACTIVITY_KIND_KERNEL), 0);
    EXPECT_EQ(gpudiag_stub_cupti_kind_ever_enabled(CUPTI_ACTIVITY_KIND_MEMORY), 0);
    EXPECT_EQ(gpudiag_stub_cupti_kind_ever_enabled(CUPTI_ACTIVITY_KIND_RUNTIME), 0);
    EXPECT_EQ(gpudiag_stub_cupti_kind_ever_enabled(CUPTI_ACTIVITY_KIND_DRIVER), 0);
    EXPECT_EQ(gpudiag_stub_cupti_api_enabled(1, 211), 1);  // cudaLaunchKernel
    EXPECT_EQ(gpudiag_stub_cupti_api_enabled(0, 551), 1);  // cuMemMap
    EXPECT_EQ(gpudiag_stub_cupti_api_enabled(1, 3), 0);    // cudaGetDevice... not whitelisted
    EXPECT_EQ(gpudiag_stub_cupti_all_sync_records(), 0);
    // Never "buffers come zeroed": the attribute is process-wide and other clients' are not.
    EXPECT_EQ(gpudiag_stub_cupti_zeroed_attribute(), -1);
    EXPECT_EQ(gpudiag_stub_cupti_has_subscriber(), 0);  // activity needs no subscriber

    CaptureStatus st = backend->status();
    EXPECT_EQ(st.level, CaptureLevel::kCuptiActivity) << joined(st.reasons);
    EXPECT_TRUE(st.capturing);
    EXPECT_NE(st.cupti_library.find("stub_cupti"), std::string::npos);

    backend->stop();
    EXPECT_EQ(gpudiag_stub_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_MEMORY2), 0);
    EXPECT_EQ(gpudiag_stub_cupti_api_enabled(1, 211), 0);
    EXPECT_EQ(gpudiag_stub_cupti_zeroed_attribute(), -1);
    EXPECT_FALSE(backend->status().capturing);
}

TEST_F(CaptureStubTest, ACupti130TakesTheProcessWidePathAndSaysWhy) {
    auto backend = detail::make_capture_backend(backend_options());
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());
    CaptureStatus st = backend->status();
    EXPECT_TRUE(contains(st.reasons,
                         "cupti_activity: process-wide activity API: libcupti API "
                         "version 130001 predates CUPTI's per-subscriber activity API"))
        << joined(st.reasons);
    EXPECT_FALSE(detail::CuptiActivitySource::instance().status().per_subscriber);
    backend->stop();
}

TEST_F(CaptureStubTest, FlushDeliversRecordsAsEventsOnTheSessionClock) {
    auto backend = detail::make_capture_backend(backend_options());
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());
    std::uint64_t now = gpudiag_stub_cupti_now();
    static const char kName[] = "_Z4stepv";
    RecordBuffer buf;
    buf.add(test::memory_record(true, 0xA000, 1 << 20, 5, now));
    buf.add(test::kernel_record(kName, now + 1000, now + 5000, 6));
    buf.add(test::api_record(CUPTI_ACTIVITY_KIND_RUNTIME, 211, now, now + 800, 6));
    gpudiag_stub_cupti_queue_buffer(buf.data(), buf.size());
    backend->flush();
    auto kernels = queue_.of_kind(EventKind::kKernel);
    ASSERT_EQ(kernels.size(), 1u);
    EXPECT_EQ(strings_.lookup(kernels[0].kernel.name), "step()");
    EXPECT_EQ(queue_.of_kind(EventKind::kDeviceAlloc).size(), 1u);
    EXPECT_EQ(queue_.of_kind(EventKind::kApiCall).size(), 1u);
    // CUPTI's CLOCK_REALTIME maps onto CLOCK_MONOTONIC.
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    std::uint64_t mono = static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ULL + ts.tv_nsec;
    std::uint64_t start = kernels[0].start_ns;
    EXPECT_LT(mono > start ? mono - start : start - mono, 2'000'000'000ULL);
    EXPECT_EQ(kernels[0].duration_ns(), 4000u);
    EXPECT_GE(backend->status().events, 3u);
    backend->stop();
}

TEST_F(CaptureStubTest, RecordsStillBufferedAtStopArriveThroughTheForcedFlush) {
    auto backend = detail::make_capture_backend(backend_options());
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());
    RecordBuffer buf;
    buf.add(test::memory_record(false, 0xB000, 4096, 9, gpudiag_stub_cupti_now()));
    gpudiag_stub_cupti_queue_buffer(buf.data(), buf.size());
    int forced = gpudiag_stub_cupti_forced_flushes();
    backend->stop();
    EXPECT_EQ(queue_.of_kind(EventKind::kDeviceFree).size(), 1u);
    // Its records were complete: FlushAll(0) brought it back, no forced flush was needed.
    EXPECT_EQ(gpudiag_stub_cupti_forced_flushes(), forced);
}

TEST_F(CaptureStubTest, DropsAreCountedAndReported) {
    auto backend = detail::make_capture_backend(backend_options());
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());
    // GIVEN CUPTI threads holding every buffer of the pool (per-thread buffers), which grows
    // with the demand up to its cap
    int held = 0;
    for (int got = 1; got > 0;) {
        got = gpudiag_stub_cupti_hold_buffers(100);
        held += got;
        std::this_thread::sleep_for(std::chrono::milliseconds(60));  // a top-up or two
    }
    EXPECT_GT(held, 0);
    EXPECT_LE(held, 64);  // the pool's cap
    // WHEN more records arrive: the request callback declines, CUPTI drops and counts
    RecordBuffer buf;
    buf.add(test::memory_record(true, 0xC000, 64, 1, gpudiag_stub_cupti_now()));
    buf.add(test::memory_record(true, 0xC100, 64, 2, gpudiag_stub_cupti_now()));
    gpudiag_stub_cupti_queue_buffer(buf.data(), buf.size());
    gpudiag_stub_cupti_add_dropped(5);
    backend->flush();
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // drop counts: read each second
    backend->flush();
    // THEN
    CaptureStatus st = backend->status();
    EXPECT_GE(st.dropped, 7u);
    EXPECT_FALSE(queue_.counters(CounterKind::kDroppedRecords).empty());
    gpudiag_stub_cupti_release_held();
    backend->stop();
}

// Every loss is counted once: the session's hand-off counts what it refused, CUPTI what it
// lost, and nothing is counted by both.
TEST_F(CaptureStubTest, QueueRefusalsAreCountedOnce) {
    SessionOptions o = options();
    o.queue_capacity = 64;
    auto session = Session::create(o);
    ASSERT_TRUE(session.is_ok());
    ASSERT_TRUE((*session)->start().is_ok());
    // GIVEN one CUPTI buffer of 200 records arriving at once into a hand-off of 64
    RecordBuffer buf;
    for (std::uint64_t i = 0; i < 200; ++i) {
        buf.add(test::memory_record(true, 0x10000 + i * 0x1000, 4096, static_cast<std::uint32_t>(i),
                                    gpudiag_stub_cupti_now()));
    }
    gpudiag_stub_cupti_queue_buffer(buf.data(), buf.size());
    ASSERT_TRUE((*session)->report().is_ok());
    ASSERT_TRUE((*session)->stop().is_ok());
    // THEN delivered plus dropped is what CUPTI handed over
    CaptureStatus st = (*session)->status();
    EXPECT_GT(st.dropped, 0u);
    EXPECT_EQ(st.events + st.dropped, 200u)
        << st.events << " delivered, " << st.dropped << " dropped";
    auto report = (*session)->report();
    ASSERT_TRUE(report.is_ok());
    EXPECT_EQ(report->capture.events + report->capture.dropped, 200u);
}

TEST_F(CaptureStubTest, KernelsWithoutTimingAreReportedApartFromDrops) {
    auto session = Session::create(options());
    ASSERT_TRUE(session.is_ok());
    ASSERT_TRUE((*session)->start().is_ok());
    static const char kName[] = "_Z4stepv";
    RecordBuffer buf;
    std::uint64_t now = gpudiag_stub_cupti_now();
    buf.add(test::kernel_record(kName, now, now + 1000, 1));
    for (std::uint32_t i = 0; i < 3; ++i) buf.add(test::kernel_record(kName, 0, 0, 2 + i));
    gpudiag_stub_cupti_queue_buffer(buf.data(), buf.size());
    ASSERT_TRUE((*session)->stop().is_ok());
    CaptureStatus st = (*session)->status();
    EXPECT_EQ(st.dropped, 0u);
    EXPECT_EQ(st.kernels_without_timing, 3u);
    auto report = (*session)->report();
    ASSERT_TRUE(report.is_ok());
    EXPECT_EQ(report->capture.dropped, 0u);
    EXPECT_TRUE(contains(report->capture.notes, "3 kernels were seen without timing"))
        << joined(report->capture.notes);
}

// A program that returns from main without stop(): on the way out the session is stopped,
// capture first, and the recording finished; the process neither crashes nor hangs.
TEST_F(CaptureStubTest, ExitingWithoutStopFinishesTheRecording) {
    std::string path =
        ::testing::TempDir() + "gpudiag_exit_" + std::to_string(getpid()) + ".gpudiag";
    std::remove(path.c_str());
    pid_t child = 0;
    char* argv[] = {const_cast<char*>(GPUDIAG_SESSION_EXIT_APP), path.data(), nullptr};
    ASSERT_EQ(posix_spawn(&child, GPUDIAG_SESSION_EXIT_APP, nullptr, nullptr, argv, environ), 0);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status))
        << "killed by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    ASSERT_EQ(WEXITSTATUS(status), 0);
    auto info = read_recording_info(path);
    ASSERT_TRUE(info.is_ok()) << info.status().to_string();
    EXPECT_TRUE(info->closed_cleanly);
    EXPECT_FALSE(info->truncated);
    // Every record CUPTI still held when main returned reached the recording.
    RecordingReader reader;
    ASSERT_TRUE(reader.open(path).is_ok());
    struct Count final : EventSink {
        std::uint64_t allocs = 0, steps = 0;
        void consume(std::span<const Event> events) override {
            for (const Event& e : events) {
                allocs += e.kind == EventKind::kDeviceAlloc ? 1 : 0;
                steps += e.kind == EventKind::kStepEnd ? 1 : 0;
            }
        }
    } count;
    StringTable strings;
    ASSERT_TRUE(reader.read(count, strings).is_ok());
    EXPECT_EQ(count.allocs, 100u);
    EXPECT_EQ(count.steps, 1u);
    std::remove(path.c_str());
}

TEST_F(CaptureStubTest, NoDriverMeansNvmlLevelWithCuptisReason) {
    // CUPTI documents NOT_INITIALIZED for a driver it cannot attach to: missing, or too old.
    gpudiag_stub_cupti_set_global_result(CUPTI_ERROR_NOT_INITIALIZED);
    auto backend = detail::make_capture_backend(backend_options());
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());  // a missing GPU is not an error
    CaptureStatus st = backend->status();
    EXPECT_EQ(st.level, CaptureLevel::kNvml) << joined(st.reasons);
    EXPECT_TRUE(
        contains(st.reasons, "cuptiActivityRegisterCallbacks failed: CUPTI_ERROR_NOT_INITIALIZED"))
        << joined(st.reasons);
    EXPECT_TRUE(contains(st.reasons, "older than this CUPTI")) << joined(st.reasons);
    EXPECT_EQ(backend->pause("torch.profiler").code(), StatusCode::kFailedPrecondition);
    backend->stop();
    EXPECT_EQ(gpudiag_stub_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_MEMORY2), 0);
}

TEST_F(CaptureStubTest, AKindCuptiRefusesNamesTheSubscribersHolder) {
    // cuptiActivityEnable's documented refusal is NOT_COMPATIBLE; whoever holds the subscriber
    // (here a tool the program was launched under) is the likely reason and is named.
    gpudiag_stub_cupti_set_kind_result(CUPTI_ACTIVITY_KIND_MEMORY2, CUPTI_ERROR_NOT_COMPATIBLE);
    gpudiag_stub_cupti_set_subscriber_holder("Nsight Systems");
    auto backend = detail::make_capture_backend(backend_options());
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());
    CaptureStatus st = backend->status();
    EXPECT_EQ(st.level, CaptureLevel::kNvml);
    EXPECT_TRUE(
        contains(st.reasons, "cuptiActivityEnable(MEMORY2) failed: CUPTI_ERROR_NOT_COMPATIBLE"))
        << joined(st.reasons);
    EXPECT_TRUE(contains(st.reasons, "subscriber is held by Nsight Systems")) << joined(st.reasons);
    backend->stop();
}

TEST_F(CaptureStubTest, ARefusedSecondaryKindIsANoteNotALostLevel) {
    gpudiag_stub_cupti_set_kind_result(CUPTI_ACTIVITY_KIND_OVERHEAD, CUPTI_ERROR_INVALID_KIND);
    auto backend = detail::make_capture_backend(backend_options());
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());
    CaptureStatus st = backend->status();
    EXPECT_EQ(st.level, CaptureLevel::kCuptiActivity);
    EXPECT_TRUE(contains(st.reasons, "OVERHEAD records unavailable (CUPTI_ERROR_INVALID_KIND)"))
        << joined(st.reasons);
    backend->stop();
}

TEST_F(CaptureStubTest, DeepModeFallsBackWhenKinetoHoldsTheSubscriber) {
    gpudiag_stub_cupti_set_subscriber_holder("CUPTI for kineto");
    auto backend = detail::make_capture_backend(backend_options(/*deep=*/true));
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());
    CaptureStatus st = backend->status();
    EXPECT_EQ(st.level, CaptureLevel::kCuptiActivity) << joined(st.reasons);
    EXPECT_TRUE(contains(st.reasons, "held by PyTorch profiler (Kineto)")) << joined(st.reasons);
    EXPECT_EQ(gpudiag_stub_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_MEMORY2), 1);
    backend->stop();
}

struct AllocParams {
    void** out;
    std::size_t size;
};
struct MapParams {
    unsigned long long ptr;
    std::size_t size;
    std::size_t offset;
    unsigned long long handle;
    unsigned long long flags;
};
struct CreateParams {
    unsigned long long* handle;
    std::size_t size;
    const void* prop;
    unsigned long long flags;
};

TEST_F(CaptureStubTest, DeepModeAttachesCallSitesAndAccountsMappings) {
    auto backend = detail::make_capture_backend(backend_options(/*deep=*/true));
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());
    CaptureStatus st = backend->status();
    ASSERT_EQ(st.level, CaptureLevel::kCuptiDeep) << joined(st.reasons);
    EXPECT_EQ(gpudiag_stub_cupti_callback_enabled(CUPTI_CB_DOMAIN_RUNTIME_API, 20), 1);
    EXPECT_EQ(gpudiag_stub_cupti_callback_enabled(CUPTI_CB_DOMAIN_DRIVER_API, 549), 1);
    EXPECT_EQ(gpudiag_stub_cupti_callback_enabled(CUPTI_CB_DOMAIN_RUNTIME_API, 211),
              0);  // launches: no

    // GIVEN a cudaMalloc seen by the callback (exit site) ...
    void* out = nullptr;
    AllocParams alloc{&out, 1 << 20};
    std::int32_t ok = 0;
    CUpti_CallbackData cd{};
    cd.callbackSite = CUPTI_API_EXIT;
    cd.functionName = "cudaMalloc";
    cd.functionParams = &alloc;
    cd.functionReturnValue = &ok;
    cd.correlationId = 300;
    ASSERT_EQ(gpudiag_stub_cupti_invoke_callback(CUPTI_CB_DOMAIN_RUNTIME_API, 20, &cd), 1);
    // ... and an expandable-segment chunk: cuMemCreate 2 MiB, cuMemMap it
    unsigned long long handle = 0x77;
    const std::int32_t prop[8] = {1 /*pinned*/, 0, 1 /*on a device*/, 0 /*device 0*/};
    CreateParams create{&handle, 2 << 20, prop, 0};
    cd.functionParams = &create;
    cd.correlationId = 301;
    ASSERT_EQ(gpudiag_stub_cupti_invoke_callback(CUPTI_CB_DOMAIN_DRIVER_API, 549, &cd), 1);
    MapParams map{0x20000000, 2 << 20, 0, 0x77, 0};
    cd.functionParams = &map;
    cd.correlationId = 302;
    ASSERT_EQ(gpudiag_stub_cupti_invoke_callback(CUPTI_CB_DOMAIN_DRIVER_API, 551, &cd), 1);
    // WHEN the allocation's activity record arrives
    const detail::OwnDeviceMemory::Reading own_before = detail::own_device_memory().read(0);
    RecordBuffer buf;
    buf.add(test::memory_record(true, 0xD000, 1 << 20, 300, gpudiag_stub_cupti_now()));
    gpudiag_stub_cupti_queue_buffer(buf.data(), buf.size());
    backend->flush();
    // THEN this process' own memory counts both: the cudaMalloc and the chunk cuMemCreate made
    EXPECT_EQ(detail::own_device_memory().read(0).bytes - own_before.bytes, 3 << 20);
    // AND the allocation carries the call site, and the mapping its physical bytes
    auto allocs = queue_.of_kind(EventKind::kDeviceAlloc);
    ASSERT_EQ(allocs.size(), 1u);
    EXPECT_NE(allocs[0].memory.site, kNoString);
    EXPECT_NE(strings_.lookup(allocs[0].memory.site).find("capture_stub_test"),
              std::string_view::npos)
        << strings_.lookup(allocs[0].memory.site);
    auto maps = queue_.of_kind(EventKind::kVmMap);
    ASSERT_EQ(maps.size(), 1u);
    EXPECT_EQ(maps[0].memory.address, 0x20000000u);
    EXPECT_EQ(maps[0].memory.aux, 2u << 20);
    backend->stop();
    EXPECT_EQ(gpudiag_stub_cupti_has_subscriber(), 0);  // released at stop
}

TEST_F(CaptureStubTest, PauseYieldsToAnotherClientAndResumeTakesCuptiBack) {
    auto backend = detail::make_capture_backend(backend_options(/*deep=*/true));
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());
    RecordBuffer before;
    before.add(test::memory_record(true, 0xE000, 64, 1, gpudiag_stub_cupti_now()));
    gpudiag_stub_cupti_queue_buffer(before.data(), before.size());
    int registrations = gpudiag_stub_cupti_register_calls();

    // WHEN torch.profiler is about to start
    ASSERT_TRUE(backend->pause("torch.profiler").is_ok());
    // THEN our records were flushed out, every kind is off and the subscriber is free for it
    EXPECT_EQ(queue_.of_kind(EventKind::kDeviceAlloc).size(), 1u);
    EXPECT_EQ(gpudiag_stub_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), 0);
    EXPECT_EQ(gpudiag_stub_cupti_api_enabled(1, 211), 0);
    EXPECT_EQ(gpudiag_stub_cupti_has_subscriber(), 0);
    CaptureStatus st = backend->status();
    EXPECT_TRUE(st.paused);
    EXPECT_EQ(st.paused_reason, "torch.profiler");
    EXPECT_EQ(backend->pause("again").code(), StatusCode::kFailedPrecondition);

    // The profiler registers its own buffer callbacks while it runs, and turns its kinds off
    // when it stops.
    gpudiag_stub_cupti_foreign_start(0);
    gpudiag_stub_cupti_foreign_stop();
    registrations = gpudiag_stub_cupti_register_calls();

    // WHEN it has stopped
    ASSERT_TRUE(backend->resume().is_ok());
    EXPECT_EQ(gpudiag_stub_cupti_register_calls(), registrations + 1);
    EXPECT_EQ(gpudiag_stub_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), 1);
    EXPECT_EQ(gpudiag_stub_cupti_has_subscriber(), 1);
    EXPECT_FALSE(backend->status().paused);
    RecordBuffer after;
    after.add(test::memory_record(true, 0xE100, 64, 2, gpudiag_stub_cupti_now()));
    gpudiag_stub_cupti_queue_buffer(after.data(), after.size());
    backend->flush();
    EXPECT_EQ(queue_.of_kind(EventKind::kDeviceAlloc).size(), 2u);
    EXPECT_EQ(backend->resume().code(), StatusCode::kFailedPrecondition);
    backend->stop();
}

TEST_F(CaptureStubTest, ResumeWhileTheOtherClientKeepsTheSubscriberFallsBackToActivity) {
    auto backend = detail::make_capture_backend(backend_options(/*deep=*/true));
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());
    ASSERT_TRUE(backend->pause("torch.profiler").is_ok());
    gpudiag_stub_cupti_set_subscriber_holder("CUPTI for kineto");  // pre-#1250 Kineto keeps it
    ASSERT_TRUE(backend->resume().is_ok());
    CaptureStatus st = backend->status();
    EXPECT_EQ(st.level, CaptureLevel::kCuptiActivity);
    EXPECT_TRUE(contains(st.reasons, "Kineto")) << joined(st.reasons);
    backend->stop();
}

TEST_F(CaptureStubTest, OneCuptiSessionPerProcess) {
    auto first = detail::make_capture_backend(backend_options());
    auto second = detail::make_capture_backend(backend_options());
    ASSERT_TRUE(first->start(queue_, strings_).is_ok());
    TestEventQueue other;
    ASSERT_TRUE(second->start(other, strings_).is_ok());
    CaptureStatus st = second->status();
    EXPECT_NE(st.level, CaptureLevel::kCuptiActivity);
    EXPECT_TRUE(contains(st.reasons, "another gpudiag session")) << joined(st.reasons);
    second->stop();
    first->stop();
}

// ---------------------------------------------------------------- CUPTI's threads and flushes

std::uint64_t monotonic_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ULL +
           static_cast<std::uint64_t>(ts.tv_nsec);
}

// Per-thread buffers asked for on application threads, full ones completed on CUPTI's worker
// while the control thread drains: nothing is lost or decoded twice.
TEST_F(CaptureStubTest, BuffersFromManyThreadsArriveThroughCuptisWorkerAndFlushes) {
    detail::CaptureOptions o = backend_options();
    o.flush_period_ms = 60'000;  // buffers come back full, through CUPTI's worker, then at stop
    auto backend = detail::make_capture_backend(o);
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());
    constexpr int kThreads = 4;
    constexpr int kPerThread = 12'000;  // more than one 1 MiB buffer's worth each
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([t] {
            for (int i = 0; i < kPerThread; ++i) {
                auto r = test::memory_record(true, 0x100000ULL * (t + 1) + i, 256,
                                             static_cast<std::uint32_t>(t * kPerThread + i),
                                             gpudiag_stub_cupti_now());
                while (gpudiag_stub_cupti_record(&r, sizeof r, 0) == 0) {
                    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // pool caught up
                }
            }
        });
    }
    for (auto& th : threads) th.join();
    // Full buffers come back asynchronously, on CUPTI's worker. Give it time to run before
    // stop() flushes whatever is left: on a loaded machine it may not have been scheduled yet.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (gpudiag_stub_cupti_worker_completions() == 0 &&
           std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_GT(gpudiag_stub_cupti_worker_completions(), 0);
    backend->stop();
    EXPECT_EQ(queue_.of_kind(EventKind::kDeviceAlloc).size(), std::size_t{kThreads * kPerThread});
}

// A kernel still running when the session stops: FlushAll(0) holds its buffer back, gpudiag waits
// for it instead of forcing it out at once, and the kernel arrives with its timing.
TEST_F(CaptureStubTest, StopWaitsForKernelsStillRunningAndLosesNoBuffer) {
    auto backend = detail::make_capture_backend(backend_options());
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());
    static const char kName[] = "_Z4stepv";
    std::uint64_t now = gpudiag_stub_cupti_now();
    auto alloc = test::memory_record(true, 0xF000, 64, 1, now);
    auto kernel = test::kernel_record(kName, now + 1000, now + 41'000'000, 2);
    ASSERT_EQ(gpudiag_stub_cupti_record(&alloc, sizeof alloc, 0), 1);
    ASSERT_EQ(gpudiag_stub_cupti_record(&kernel, sizeof kernel, 40), 1);  // done in 40 ms
    backend->stop();
    auto kernels = queue_.of_kind(EventKind::kKernel);
    ASSERT_EQ(kernels.size(), 1u);
    EXPECT_EQ(kernels[0].duration_ns(), 41'000'000u - 1000u);
    EXPECT_EQ(queue_.of_kind(EventKind::kDeviceAlloc).size(), 1u);
    auto st = detail::CuptiActivitySource::instance().status();
    EXPECT_EQ(st.incomplete_at_flush, 0u);
    EXPECT_EQ(st.kernels_without_timing, 0u);
}

// A kernel that outlasts the settling time is forced out incomplete: counted as such (not as a
// damaged buffer), and the complete records before it are decoded.
TEST_F(CaptureStubTest, KernelsOutlastingTheSettleTimeAreCountedIncompleteAtPause) {
    gpudiag_stub_cupti_set_forced_invalid_kind(1);
    auto backend = detail::make_capture_backend(backend_options());
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());
    static const char kName[] = "_Z4longv";
    std::uint64_t now = gpudiag_stub_cupti_now();
    auto before = test::memory_record(true, 0xF100, 64, 1, now);
    auto kernel = test::kernel_record(kName, now + 1000, now + 9'000'000'000ULL, 2);
    ASSERT_EQ(gpudiag_stub_cupti_record(&before, sizeof before, 0), 1);
    ASSERT_EQ(gpudiag_stub_cupti_record(&kernel, sizeof kernel, 60'000), 1);  // a minute
    auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(backend->pause("torch.profiler").is_ok());
    auto waited = std::chrono::steady_clock::now() - t0;
    EXPECT_LT(waited, std::chrono::seconds(2));  // bounded: settle time, then forced
    EXPECT_EQ(queue_.of_kind(EventKind::kDeviceAlloc).size(), 1u);
    auto st = detail::CuptiActivitySource::instance().status();
    EXPECT_EQ(st.incomplete_at_flush, 1u);
    EXPECT_EQ(st.corrupt_buffers, 0u);
    EXPECT_TRUE(contains(st.notes, "still in flight")) << joined(st.notes);
    ASSERT_TRUE(backend->resume().is_ok());
    backend->stop();
}

TEST_F(CaptureStubTest, PauseAndResumeMarkTheUnobservedWindow) {
    auto backend = detail::make_capture_backend(backend_options());
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());
    std::uint64_t t0 = monotonic_ns();
    ASSERT_TRUE(backend->pause("torch.profiler is tracing CUDA").is_ok());
    ASSERT_TRUE(backend->resume().is_ok());
    std::uint64_t t1 = monotonic_ns();
    backend->stop();
    auto paused = queue_.of_kind(EventKind::kCapturePaused);
    auto resumed = queue_.of_kind(EventKind::kCaptureResumed);
    ASSERT_EQ(paused.size(), 1u);
    ASSERT_EQ(resumed.size(), 1u);
    EXPECT_EQ(strings_.lookup(paused[0].annotation.text), "torch.profiler is tracing CUDA");
    EXPECT_GE(paused[0].start_ns, t0);
    EXPECT_LE(paused[0].start_ns, resumed[0].start_ns);
    EXPECT_LE(resumed[0].start_ns, t1);
}

// ---------------------------------------------------------------- the cost budget's rungs
const detail::CaptureReduction* rung(std::string_view name) {
    for (const detail::CaptureReduction& r : detail::capture_reductions()) {
        if (name == r.name) return &r;
    }
    return nullptr;
}

// A step as CUPTI records it: an allocation (its record and its cudaMalloc), a kernel and its
// launch. Only the kinds and calls enabled are made.
void record_step(std::uint32_t correlation) {
    static const char kName[] = "_Z4stepv";
    std::uint64_t now = gpudiag_stub_cupti_now();
    RecordBuffer buf;
    buf.add(test::memory_record(true, 0xA000 + correlation, 1 << 20, correlation, now));
    buf.add(test::api_record(CUPTI_ACTIVITY_KIND_RUNTIME, 20, now, now + 100, correlation));
    buf.add(test::kernel_record(kName, now + 1000, now + 5000, correlation + 1));
    buf.add(test::api_record(CUPTI_ACTIVITY_KIND_RUNTIME, 211, now, now + 800, correlation + 1));
    gpudiag_stub_cupti_queue_buffer(buf.data(), buf.size());
}

TEST_F(CaptureStubTest, TheCostBudgetsRungsStopCuptiMakingTheirRecordsAndStartItAgain) {
    const detail::CaptureReduction* api_off = rung("api_calls_off");
    const detail::CaptureReduction* gpu_off = rung("gpu_activity_off");
    const detail::CaptureReduction* full = rung("full");
    ASSERT_TRUE(api_off != nullptr && gpu_off != nullptr && full != nullptr);
    auto backend = detail::make_capture_backend(backend_options());
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());

    backend->reduce(*api_off);
    EXPECT_EQ(gpudiag_stub_cupti_api_enabled(1, 211), 0);  // cudaLaunchKernel
    EXPECT_EQ(gpudiag_stub_cupti_api_enabled(1, 165), 0);  // cudaDeviceSynchronize
    // Allocation calls carry out-of-memory failures, which every rung keeps.
    EXPECT_EQ(gpudiag_stub_cupti_api_enabled(1, 20), 1);   // cudaMalloc
    EXPECT_EQ(gpudiag_stub_cupti_api_enabled(0, 551), 1);  // cuMemMap
    EXPECT_EQ(gpudiag_stub_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), 1);
    record_step(10);
    backend->flush();
    EXPECT_EQ(queue_.of_kind(EventKind::kKernel).size(), 1u);
    auto calls = queue_.of_kind(EventKind::kApiCall);
    ASSERT_EQ(calls.size(), 1u);  // the launch was never made
    EXPECT_EQ(calls[0].api.callback_id, 20u);

    backend->reduce(*gpu_off);
    for (int kind : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                     CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION}) {
        EXPECT_EQ(gpudiag_stub_cupti_kind_enabled(kind), 0) << kind;
    }
    for (int kind : {CUPTI_ACTIVITY_KIND_MEMORY2, CUPTI_ACTIVITY_KIND_MEMORY_POOL,
                     CUPTI_ACTIVITY_KIND_OVERHEAD}) {
        EXPECT_EQ(gpudiag_stub_cupti_kind_enabled(kind), 1) << kind;
    }
    EXPECT_EQ(gpudiag_stub_cupti_api_enabled(1, 211), 0);
    record_step(20);
    backend->flush();
    EXPECT_EQ(queue_.of_kind(EventKind::kKernel).size(), 1u);
    EXPECT_EQ(queue_.of_kind(EventKind::kDeviceAlloc).size(), 2u);  // memory at every rung

    backend->reduce(*full);
    for (int kind : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                     CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION}) {
        EXPECT_EQ(gpudiag_stub_cupti_kind_enabled(kind), 1) << kind;
    }
    EXPECT_EQ(gpudiag_stub_cupti_api_enabled(1, 211), 1);
    EXPECT_EQ(gpudiag_stub_cupti_api_enabled(1, 165), 1);
    record_step(30);
    backend->flush();
    EXPECT_EQ(queue_.of_kind(EventKind::kKernel).size(), 2u);
    EXPECT_EQ(queue_.of_kind(EventKind::kApiCall).size(), 4u);  // 1 + 1 at gpu_activity_off + 2
    EXPECT_FALSE(detail::CuptiActivitySource::instance().status().degraded);

    // Held off at stop or not, nothing stays enabled.
    backend->reduce(*api_off);
    backend->stop();
    EXPECT_EQ(gpudiag_stub_cupti_api_enabled(1, 20), 0);
    EXPECT_EQ(gpudiag_stub_cupti_api_enabled(1, 211), 0);
    EXPECT_EQ(gpudiag_stub_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), 0);
}

TEST_F(CaptureStubTest, ARungOutlastsAPauseAndAppliesFromTheStartOfCapture) {
    const detail::CaptureReduction* api_off = rung("api_calls_off");
    const detail::CaptureReduction* full = rung("full");
    ASSERT_TRUE(api_off != nullptr && full != nullptr);
    auto backend = detail::make_capture_backend(backend_options());
    backend->reduce(*api_off);  // before start: capture begins at that rung
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());
    EXPECT_EQ(gpudiag_stub_cupti_api_enabled(1, 211), 0);
    EXPECT_EQ(gpudiag_stub_cupti_api_enabled(1, 20), 1);
    ASSERT_TRUE(backend->pause("torch.profiler is tracing CUDA").is_ok());
    ASSERT_TRUE(backend->resume().is_ok());
    EXPECT_EQ(gpudiag_stub_cupti_api_enabled(1, 211), 0);  // resume re-enables only the rung's
    EXPECT_EQ(gpudiag_stub_cupti_api_enabled(1, 20), 1);
    ASSERT_TRUE(backend->pause("torch.profiler is tracing CUDA").is_ok());
    backend->reduce(*full);  // while paused: CUPTI belongs to the other client; at resume
    EXPECT_EQ(gpudiag_stub_cupti_api_enabled(1, 211), 0);
    ASSERT_TRUE(backend->resume().is_ok());
    EXPECT_EQ(gpudiag_stub_cupti_api_enabled(1, 211), 1);
    backend->stop();
}

TEST_F(CaptureStubTest, KernelsCuptiWillNotRecordAgainAfterARungDegradeCapture) {
    const detail::CaptureReduction* gpu_off = rung("gpu_activity_off");
    const detail::CaptureReduction* full = rung("full");
    ASSERT_TRUE(gpu_off != nullptr && full != nullptr);
    auto backend = detail::make_capture_backend(backend_options());
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());
    backend->reduce(*gpu_off);
    gpudiag_stub_cupti_set_kind_result(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                       CUPTI_ERROR_NOT_COMPATIBLE);
    backend->reduce(*full);
    EXPECT_EQ(gpudiag_stub_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_MEMCPY), 1);
    EXPECT_EQ(gpudiag_stub_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), 0);
    // No timeline that calls the missing kernels' time idle: the level says activity is lost.
    CaptureStatus st = backend->status();
    EXPECT_NE(st.level, CaptureLevel::kCuptiActivity);
    EXPECT_TRUE(contains(st.reasons,
                         "cupti_activity: CUPTI refused to record CONCURRENT_KERNEL "
                         "(CUPTI_ERROR_NOT_COMPATIBLE) again after the cost budget left them out"))
        << joined(st.reasons);
    backend->stop();
}

using testing::burn_cpu;
using testing::thread_cpu_ns;

// Run by the session's worker: 200 us of CPU per API call while `expensive` holds.
struct ExpensiveApiSink final : EventSink {
    void consume(std::span<const Event> events) override {
        for (const Event& e : events) {
            if (e.kind == EventKind::kApiCall && expensive.load()) burn_cpu(200'000);
        }
    }
    std::atomic<bool> expensive{true};
};

bool waited_for(const std::function<bool()>& done) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done()) {
        if (std::chrono::steady_clock::now() > until) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
}

// The session's governor reaches CUPTI: past the budget the launches are no longer recorded at
// all, and once the cost is back under it they are again (the same workload as the session's
// budget test; both ways are waited for, never timed).
TEST_F(CaptureStubTest, ASessionOverItsCostBudgetStopsCuptiRecordingApiCallsAndStartsAgain) {
    ExpensiveApiSink sink;
    detail::set_extra_session_sink_for_tests(&sink);
    SessionOptions o = options();
    o.flush_period_ms = 10;
    o.cost_budget.cpu_share = 0.1;
    o.cost_budget.step_share = 0;
    o.cost_budget.period_ms = 50;
    auto session = Session::create(o);
    ASSERT_TRUE(session.is_ok());
    ASSERT_TRUE((*session)->start().is_ok());
    ASSERT_EQ(gpudiag_stub_cupti_api_enabled(1, 211), 1);
    std::atomic<bool> done{false};
    std::thread program([&] {
        Event call;
        call.kind = EventKind::kApiCall;
        while (!done.load()) {
            burn_cpu(500'000);
            call.start_ns = call.end_ns = Session::now_ns();
            (void)(*session)->record(call);
        }
    });
    const bool off = waited_for([] { return gpudiag_stub_cupti_api_enabled(1, 211) == 0; });
    const bool malloc_kept = gpudiag_stub_cupti_api_enabled(1, 20) == 1;
    sink.expensive.store(false);
    const bool on_again =
        off && waited_for([] { return gpudiag_stub_cupti_api_enabled(1, 211) == 1; });
    done.store(true);
    program.join();
    EXPECT_TRUE((*session)->stop().is_ok());
    detail::set_extra_session_sink_for_tests(nullptr);
    EXPECT_TRUE(off);
    EXPECT_TRUE(malloc_kept);
    EXPECT_TRUE(on_again);
    EXPECT_EQ(gpudiag_stub_cupti_kind_enabled(CUPTI_ACTIVITY_KIND_MEMORY2), 0);  // stopped
}

// ---------------------------------------------------------------- CUPTI's clock
// Kineto registers a timestamp callback returning CPU cycles: from then on CUPTI stamps every
// client's records in cycles. Times and durations must still come out in nanoseconds.
TEST_F(CaptureStubTest, ACycleCounterClockStillGivesNanoseconds) {
    auto backend = detail::make_capture_backend(backend_options());
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());
    gpudiag_stub_cupti_install_cycle_clock();
    std::this_thread::sleep_for(std::chrono::milliseconds(450));  // clock pairs at drains
    static const char kName[] = "_Z4stepv";
    std::uint64_t mono_at = monotonic_ns();
    std::uint64_t now = gpudiag_stub_cupti_now();
    auto kernel = test::kernel_record(kName, now, now + 2'900'000, 1);  // 1 ms at 2.9 GHz
    ASSERT_EQ(gpudiag_stub_cupti_record(&kernel, sizeof kernel, 0), 1);
    backend->flush();
    auto kernels = queue_.of_kind(EventKind::kKernel);
    ASSERT_EQ(kernels.size(), 1u);
    EXPECT_NEAR(static_cast<double>(kernels[0].duration_ns()), 1e6, 2e4);
    EXPECT_NEAR(static_cast<double>(kernels[0].start_ns), static_cast<double>(mono_at), 2e6);
    CaptureStatus st = backend->status();
    EXPECT_TRUE(contains(st.reasons, "ns per tick")) << joined(st.reasons);
    EXPECT_TRUE(detail::CuptiActivitySource::instance().status().foreign_clock);
    backend->stop();
}

// The profiler (paused around by gpudiag) installed its clock while gpudiag was paused: the
// first records after resume are mapped right, because resume takes a clock pair.
TEST_F(CaptureStubTest, ResumeRecalibratesTheClockAfterAProfilerRun) {
    auto backend = detail::make_capture_backend(backend_options());
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());
    ASSERT_TRUE(backend->pause("torch.profiler").is_ok());
    gpudiag_stub_cupti_foreign_start(/*install_cycle_clock=*/1);
    gpudiag_stub_cupti_foreign_stop();
    ASSERT_TRUE(backend->resume().is_ok());
    static const char kName[] = "_Z4stepv";
    std::uint64_t mono_at = monotonic_ns();
    std::uint64_t now = gpudiag_stub_cupti_now();
    auto kernel = test::kernel_record(kName, now, now + 2'900'000, 1);
    ASSERT_EQ(gpudiag_stub_cupti_record(&kernel, sizeof kernel, 0), 1);
    backend->flush();
    auto kernels = queue_.of_kind(EventKind::kKernel);
    ASSERT_EQ(kernels.size(), 1u);
    EXPECT_NEAR(static_cast<double>(kernels[0].duration_ns()), 1e6, 2e4);
    EXPECT_NEAR(static_cast<double>(kernels[0].start_ns), static_cast<double>(mono_at), 2e6);
    backend->stop();
}

// ---------------------------------------------------------------- other CUPTI clients
// A client that was tracing when the session started: its outstanding buffer completes into
// gpudiag's callback. Its owner may free it at once, so it is counted and never read.
TEST_F(CaptureStubTest, AnotherClientsBuffersAreCountedAndDroppedUnread) {
    gpudiag_stub_cupti_foreign_start(0);
    static const char kName[] = "_Z7foreignv";
    std::uint64_t now = gpudiag_stub_cupti_now();
    auto kernel = test::kernel_record(kName, now, now + 1000, 1);
    ASSERT_EQ(gpudiag_stub_cupti_record(&kernel, sizeof kernel, 0), 1);  // into its buffer
    auto backend = detail::make_capture_backend(backend_options());
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());
    backend->flush();
    EXPECT_TRUE(queue_.of_kind(EventKind::kKernel).empty());
    EXPECT_EQ(detail::CuptiActivitySource::instance().status().foreign_buffers, 1u);
    EXPECT_TRUE(contains(backend->status().reasons, "dropped unread"))
        << joined(backend->status().reasons);
    backend->stop();
}

// libkineto in a C++ service, or on-demand tracing, takes CUPTI without telling gpudiag: its
// callbacks replace gpudiag's, then it turns its kinds off. gpudiag must notice that its buffers
// stopped while the GPU is busy, say capture is degraded and why, mark the window unobserved,
// and leave CUPTI's settings to the client that holds it.
TEST_F(CaptureStubTest, AClientTakingCuptiWithoutWarningIsReportedAsStarvation) {
    detail::CuptiSourceOptions o;
    o.flush_period_ms = 50;
    o.stall_seconds = 2;
    auto& source = detail::CuptiActivitySource::instance();
    ASSERT_TRUE(source.start(o, queue_, strings_).is_ok());
    std::atomic<bool> running{true};
    std::thread app([&] {  // a training loop: kernels, and NVML seeing the GPU busy
        static const char kName[] = "_Z4stepv";
        while (running.load()) {
            std::uint64_t now = gpudiag_stub_cupti_now();
            auto k = test::kernel_record(kName, now, now + 1000, 1);
            (void)gpudiag_stub_cupti_record(&k, sizeof k, 0);
            source.note_gpu_busy();
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_FALSE(source.status().stalled);
    gpudiag_stub_cupti_foreign_start(0);
    bool stalled = false;
    for (int i = 0; i < 80 && !stalled; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        stalled = source.status().stalled;
    }
    running.store(false);
    app.join();
    ASSERT_TRUE(stalled);
    detail::CuptiSourceStatus st = source.status();
    EXPECT_TRUE(st.degraded);
    EXPECT_TRUE(contains(st.reasons, "starved")) << joined(st.reasons);
    EXPECT_EQ(queue_.of_kind(EventKind::kCapturePaused).size(), 1u);
    source.stop();
    // The other client still traces the API calls it enabled (RUNTIME): gpudiag's per-cbid
    // switches must not cut cudaLaunchKernel out of its trace.
    EXPECT_EQ(gpudiag_stub_cupti_api_enabled(1, 211), 1);
}

// The buffer a thread holds when another client registers its callbacks completes into that
// client's callback, which drops it as unknown: gpudiag counts it lost instead of waiting for it.
TEST_F(CaptureStubTest, BuffersHandedToAnotherClientAreCountedLost) {
    detail::CaptureOptions o = backend_options();
    o.flush_period_ms = 60'000;  // nothing returns the buffer before the other client arrives
    auto backend = detail::make_capture_backend(o);
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());
    auto r = test::memory_record(true, 0xA100, 64, 1, gpudiag_stub_cupti_now());
    ASSERT_EQ(gpudiag_stub_cupti_record(&r, sizeof r, 0), 1);  // this thread holds a buffer
    gpudiag_stub_cupti_foreign_start(0);
    backend->flush();
    EXPECT_EQ(gpudiag_stub_cupti_foreign_unknown_buffers(), 1u);  // gpudiag's, dropped by it
    backend->stop();
    EXPECT_TRUE(queue_.of_kind(EventKind::kDeviceAlloc).empty());
    EXPECT_TRUE(contains(backend->status().reasons, "never came back"))
        << joined(backend->status().reasons);
}

// One kernel longer than stall_seconds looks like starvation (its buffer is held back while
// NVML sees the GPU busy); when its record arrives, capture recovers and the window closes.
TEST_F(CaptureStubTest, AStallEndsWhenRecordsArriveAgain) {
    detail::CuptiSourceOptions o;
    o.flush_period_ms = 50;
    o.stall_seconds = 2;
    auto& source = detail::CuptiActivitySource::instance();
    ASSERT_TRUE(source.start(o, queue_, strings_).is_ok());
    static const char kName[] = "_Z4longv";
    std::uint64_t now = gpudiag_stub_cupti_now();
    auto kernel = test::kernel_record(kName, now, now + 3'500'000'000ULL, 1);
    ASSERT_EQ(gpudiag_stub_cupti_record(&kernel, sizeof kernel, 3'500), 1);
    bool stalled = false;
    bool recovered = false;
    for (int i = 0; i < 70 && !recovered; ++i) {
        source.note_gpu_busy();
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        bool now_stalled = source.status().stalled;
        stalled = stalled || now_stalled;
        recovered = stalled && !now_stalled;
    }
    EXPECT_TRUE(stalled);
    EXPECT_TRUE(recovered);
    detail::CuptiSourceStatus st = source.status();
    EXPECT_FALSE(st.degraded);
    EXPECT_TRUE(contains(st.notes, "delivered nothing while the GPU was busy 1 time"))
        << joined(st.notes);
    source.stop();
    EXPECT_EQ(queue_.of_kind(EventKind::kCapturePaused).size(), 1u);
    EXPECT_EQ(queue_.of_kind(EventKind::kCaptureResumed).size(), 1u);
    EXPECT_EQ(queue_.of_kind(EventKind::kKernel).size(), 1u);
}

// NVML's utilization is the whole device's: it is evidence of this program's kernels only while
// no other process holds memory there.
TEST_F(CaptureStubTest, GpuUtilizationIsEvidenceOnlyOnAnUnsharedDevice) {
    auto busy_after = [&](bool shared) {
        gpudiag_stub_nvml_reset();
        for (int gpu : {0, 1})
            gpudiag_stub_nvml_set_processes(gpu, 1ULL << 30, shared ? 8ULL << 30 : 0, 1);
        TestEventQueue queue;
        detail::CaptureOptions o = backend_options();
        o.nvml_hz = 50;
        auto backend = detail::make_capture_backend(o);
        EXPECT_TRUE(backend->start(queue, strings_).is_ok());
        std::this_thread::sleep_for(std::chrono::milliseconds(150));  // the device's state known
        std::uint64_t first = detail::CuptiActivitySource::instance().status().last_gpu_busy_ns;
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        std::uint64_t later = detail::CuptiActivitySource::instance().status().last_gpu_busy_ns;
        backend->stop();
        return later > first;
    };
    EXPECT_TRUE(busy_after(false));  // 90 % utilization, this process alone on the GPUs
    EXPECT_FALSE(busy_after(true));  // the same, with another process on both
}

TEST_F(CaptureStubTest, QuietWithoutGpuWorkIsNotStarvation) {
    detail::CuptiSourceOptions o;
    o.flush_period_ms = 50;
    o.stall_seconds = 2;
    auto& source = detail::CuptiActivitySource::instance();
    ASSERT_TRUE(source.start(o, queue_, strings_).is_ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(3300));  // an idle program
    EXPECT_FALSE(source.status().stalled);
    EXPECT_FALSE(source.status().degraded);
    source.stop();
}

// A CUPTI that shut itself down (no subscriber means no FATAL_ERROR callback by default) shows
// as FlushAll failing: capture is reported degraded instead of silently empty.
TEST_F(CaptureStubTest, FlushAllFailingRepeatedlyDegradesCapture) {
    auto backend = detail::make_capture_backend(backend_options());
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());
    gpudiag_stub_cupti_set_flush_result(CUPTI_ERROR_UNKNOWN);
    CaptureStatus st;
    for (int i = 0; i < 40; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        st = backend->status();
        if (st.level != CaptureLevel::kCuptiActivity) break;
    }
    EXPECT_NE(st.level, CaptureLevel::kCuptiActivity);
    EXPECT_TRUE(contains(st.reasons, "cuptiActivityFlushAll failed")) << joined(st.reasons);
    gpudiag_stub_cupti_set_flush_result(CUPTI_SUCCESS);
    backend->stop();
}

// ---------------------------------------------------------------- drops and the pool
TEST_F(CaptureStubTest, TheLastDropsAreReadAtStop) {
    auto backend = detail::make_capture_backend(backend_options());
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());
    gpudiag_stub_cupti_add_dropped(3);  // well before the next once-a-second read
    backend->stop();
    EXPECT_GE(backend->status().dropped, 3u);
}

// Per-thread buffers: each CUDA-calling thread needs one per flush period. The pool grows to
// that demand at the next drain, not a second later.
TEST_F(CaptureStubTest, ThePoolGrowsToTheThreadsDemandWithinAPeriod) {
    detail::CaptureOptions o = backend_options();
    o.flush_period_ms = 60'000;  // only the explicit flushes below: each round is one interval
    auto backend = detail::make_capture_backend(o);
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());
    auto round = [] {
        std::vector<std::thread> threads;
        for (int t = 0; t < 24; ++t) {
            threads.emplace_back([t] {
                auto r = test::memory_record(true, 0x9000 + t, 64, 1, gpudiag_stub_cupti_now());
                (void)gpudiag_stub_cupti_record(&r, sizeof r, 0);
            });
        }
        for (auto& th : threads) th.join();
    };
    round();
    backend->flush();
    std::uint64_t declined_first =
        detail::CuptiActivitySource::instance().status().declined_buffers;
    round();
    backend->flush();
    EXPECT_EQ(detail::CuptiActivitySource::instance().status().declined_buffers, declined_first);
    backend->stop();
}

// The shared libgpudiag (as `gpudiag run --` injects it), beside this program's static copy,
// driven through its C API.
struct OtherGpudiagCopy {
    void* lib = dlopen(GPUDIAG_SHARED_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    template <typename Fn>
    Fn fn(const char* name) const {
        return reinterpret_cast<Fn>(lib != nullptr ? dlsym(lib, name) : nullptr);
    }
    decltype(&gpudiag_session_options_init) options_init =
        fn<decltype(options_init)>("gpudiag_session_options_init");
    decltype(&gpudiag_session_create) create = fn<decltype(create)>("gpudiag_session_create");
    decltype(&gpudiag_session_start) start = fn<decltype(start)>("gpudiag_session_start");
    decltype(&gpudiag_session_status) status = fn<decltype(status)>("gpudiag_session_status");
    decltype(&gpudiag_session_report) report = fn<decltype(report)>("gpudiag_session_report");
    decltype(&gpudiag_session_destroy) destroy = fn<decltype(destroy)>("gpudiag_session_destroy");
    decltype(&gpudiag_free) free_text = fn<decltype(free_text)>("gpudiag_free");

    gpudiag_session_t* start_session() const {
        gpudiag_session_options_t o;
        options_init(&o);
        o.nvml_hz = 0;
        gpudiag_session_t* s = nullptr;
        if (create(&o, &s) != GPUDIAG_OK || start(s) != GPUDIAG_OK) return nullptr;
        return s;
    }
    std::string level(gpudiag_session_t* s) const {
        const char* l = nullptr;
        return status(s, &l, nullptr, nullptr) == GPUDIAG_OK && l != nullptr ? l : "";
    }
    std::string report_text(gpudiag_session_t* s) const {
        char* text = nullptr;
        if (report(s, GPUDIAG_FORMAT_TEXT, &text) != GPUDIAG_OK || text == nullptr) return "";
        std::string out(text);
        free_text(text);
        return out;
    }
};

TEST_F(CaptureStubTest, ASecondGpudiagCopyLeavesCuptiToTheFirst) {
    OtherGpudiagCopy other;
    ASSERT_NE(other.lib, nullptr) << dlerror();
    ASSERT_NE(other.destroy, nullptr);
    // GIVEN this copy capturing
    auto backend = detail::make_capture_backend(backend_options());
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());
    ASSERT_EQ(backend->status().level, CaptureLevel::kCuptiActivity);
    int registrations = gpudiag_stub_cupti_register_calls();
    // WHEN the other copy starts a session that asks for GPU capture
    gpudiag_session_t* session = other.start_session();
    ASSERT_NE(session, nullptr);
    // THEN it says why it does not capture, and leaves CUPTI alone
    EXPECT_NE(other.level(session), "cupti_activity");
    std::string text = other.report_text(session);
    EXPECT_NE(text.find("another gpudiag copy in this process owns CUPTI capture"),
              std::string::npos)
        << text;
    EXPECT_EQ(gpudiag_stub_cupti_register_calls(), registrations);
    RecordBuffer buf;
    buf.add(test::memory_record(true, 0xF000, 64, 1, gpudiag_stub_cupti_now()));
    gpudiag_stub_cupti_queue_buffer(buf.data(), buf.size());
    backend->flush();
    EXPECT_EQ(queue_.of_kind(EventKind::kDeviceAlloc).size(), 1u);
    other.destroy(session);
    backend->stop();

    // AND the other way round: the other copy first, this one refused
    session = other.start_session();
    ASSERT_NE(session, nullptr);
    EXPECT_EQ(other.level(session), "cupti_activity");
    auto second = detail::make_capture_backend(backend_options());
    ASSERT_TRUE(second->start(queue_, strings_).is_ok());
    CaptureStatus st = second->status();
    EXPECT_NE(st.level, CaptureLevel::kCuptiActivity);
    EXPECT_TRUE(contains(st.reasons, "another gpudiag copy in this process owns CUPTI capture"))
        << joined(st.reasons);
    EXPECT_TRUE(contains(st.reasons, "libgpudiag.so")) << joined(st.reasons);
    second->stop();
    other.destroy(session);
    // Once it is gone, this copy captures again.
    auto third = detail::make_capture_backend(backend_options());
    ASSERT_TRUE(third->start(queue_, strings_).is_ok());
    EXPECT_EQ(third->status().level, CaptureLevel::kCuptiActivity);
    third->stop();
}

TEST_F(CaptureStubTest, NvmlSamplerFeedsTheHealthFindings) {
    const detail::NvmlApi* nvml = detail::nvml_api();
    ASSERT_NE(nvml, nullptr);
    gpudiag_stub_nvml_set(0, 0x20 /*SW thermal*/, 88, 650000, 700000);
    gpudiag_stub_nvml_set_ecc(1, 0, 2);
    gpudiag_stub_nvml_set_processes(0, 10ULL << 30, 20ULL << 30, 1);
    gpudiag_stub_nvml_set_processes(1, 0, 30ULL << 30, 0);  // our PID not listed: unattributable
    detail::NvmlSampler sampler(*nvml);
    for (int i = 0; i < 5; ++i) sampler.sample_once(queue_);
    ASSERT_EQ(sampler.devices().size(), 2u);
    EXPECT_EQ(sampler.devices()[0].name, "NVIDIA H200 (stub)");
    EXPECT_EQ(sampler.devices()[0].pci_bus_id, "00000000:18:00.0");  // dcgm-exporter's label
    EXPECT_EQ(sampler.devices()[1].pci_bus_id, "00000000:2A:00.0");
    auto temps = queue_.counters(CounterKind::kTemperatureC);
    ASSERT_EQ(temps.size(), 10u);
    EXPECT_EQ(temps[0].counter.value, 88);
    auto foreign = queue_.counters(CounterKind::kForeignProcessMemoryBytes);
    ASSERT_EQ(foreign.size(), 5u);  // GPU 0 only
    EXPECT_EQ(foreign[0].device, 0);
    EXPECT_EQ(foreign[0].counter.value, static_cast<double>(20ULL << 30));
    auto power = queue_.counters(CounterKind::kPowerWatts);
    ASSERT_FALSE(power.empty());
    EXPECT_DOUBLE_EQ(power[0].counter.value, 650.0);
    EXPECT_FALSE(queue_.counters(CounterKind::kDeviceMemoryUsedBytes).empty());
    EXPECT_FALSE(queue_.counters(CounterKind::kSmClockMaxMhz).empty());

    auto report = analyze_events(queue_.events(), SourceInfo{}, strings_);
    ASSERT_TRUE(report.is_ok());
    EXPECT_NE(report->finding("thermal_throttle"), nullptr);
    EXPECT_NE(report->finding("ecc_errors"), nullptr);
    EXPECT_NE(report->finding("foreign_process_memory"), nullptr);
    EXPECT_EQ(report->finding("power_throttle"), nullptr);
}

// The card's own health: Xid events (registered for, then drained every round), a PCIe link
// that trained to x8 of x16, and memory rows waiting for a reset to be remapped.
TEST_F(CaptureStubTest, NvmlCardHealthFeedsItsFindings) {
    const detail::NvmlApi* nvml = detail::nvml_api();
    ASSERT_NE(nvml, nullptr);
    gpudiag_stub_nvml_set_pcie(0, 5, 5, 8, 16, 3);
    gpudiag_stub_nvml_set_memory_health(1, 0, 0, 0, 2, 1, 1, 0);
    gpudiag_stub_nvml_set_nvlink(0, 4, 7, 1, 5);
    detail::NvmlSampler sampler(*nvml);
    sampler.sample_once(queue_);
    EXPECT_EQ(gpudiag_stub_nvml_xid_registered(0), 1);
    EXPECT_EQ(gpudiag_stub_nvml_xid_registered(1), 1);
    gpudiag_stub_nvml_push_xid(0, 79);
    gpudiag_stub_nvml_push_xid(1, 13);
    gpudiag_stub_nvml_push_xid(1, 13);
    for (int i = 0; i < 4; ++i) sampler.sample_once(queue_);
    auto xids = queue_.counters(CounterKind::kXidError);
    ASSERT_EQ(xids.size(), 3u);
    EXPECT_EQ(xids[0].device, 0);
    EXPECT_EQ(xids[0].counter.value, 79);
    // The link and the memory are read every 10 s, not every round: once in these five.
    auto width = queue_.counters(CounterKind::kPcieLinkWidth);
    ASSERT_EQ(width.size(), 2u);
    EXPECT_EQ(width[0].counter.value, 8);
    EXPECT_EQ(queue_.counters(CounterKind::kRowRemapPending).size(), 2u);
    auto links = queue_.counters(CounterKind::kNvlinkLinksActive);
    ASSERT_EQ(links.size(), 1u) << "GPU 1 has no NVLink: refused at link 0, nothing emitted";
    EXPECT_EQ(links[0].counter.value, 4);
    EXPECT_EQ(queue_.counters(CounterKind::kNvlinkRecoveryErrors)[0].counter.value, 1);
    EXPECT_EQ(queue_.counters(CounterKind::kNvlinkCrcErrors)[0].counter.value, 5);
    EXPECT_EQ(queue_.counters(CounterKind::kPowerLimitDefaultWatts)[0].counter.value, 700);
    EXPECT_EQ(queue_.counters(CounterKind::kPersistenceMode)[0].counter.value, 1);
    EXPECT_EQ(queue_.counters(CounterKind::kMigMode)[0].counter.value, 0);

    auto report = analyze_events(queue_.events(), SourceInfo{}, strings_);
    ASSERT_TRUE(report.is_ok());
    std::vector<const Finding*> xid;
    for (const auto& f : report->findings) {
        if (f.id == "xid_error") xid.push_back(&f);
    }
    ASSERT_EQ(xid.size(), 2u);
    for (const Finding* f : xid) {
        if (f->device == 0) {
            EXPECT_EQ(f->severity, Severity::kCritical);  // fallen off the bus
            EXPECT_NE(f->title.find("Xid 79"), std::string::npos) << f->title;
        } else {
            EXPECT_EQ(f->severity, Severity::kWarning);  // most often the program's own fault
            EXPECT_NE(f->evidence[0].find("2 events"), std::string::npos) << f->evidence[0];
        }
    }
    const Finding* rows = report->finding("ecc_pages_retired");
    ASSERT_NE(rows, nullptr);
    EXPECT_EQ(rows->device, 1);
    EXPECT_EQ(rows->severity, Severity::kWarning);
    EXPECT_NE(rows->title.find("3 memory rows remapped, one waiting for a reset"),
              std::string::npos)
        << rows->title;
    const Finding* link = report->finding("pcie_link_degraded");
    ASSERT_NE(link, nullptr);
    EXPECT_EQ(link->device, 0);
    EXPECT_NE(link->title.find("Gen 5 x8 of Gen 5 x16"), std::string::npos) << link->title;
}

// GPM (GPU 0 is a Hopper, GPU 1 is not): SM, tensor and DRAM activity over windows of at
// least 100 ms between two readings, nothing from a GPU without GPM, the buffers freed on stop.
// Utilization near 100 % with few SMs active is "busy but not computing".
TEST_F(CaptureStubTest, GpmActivityFeedsBusyNotComputing) {
    const detail::NvmlApi* nvml = detail::nvml_api();
    ASSERT_NE(nvml, nullptr);
    ASSERT_TRUE(nvml->has_gpm());
    gpudiag_stub_nvml_set_utilization(0, 97);
    gpudiag_stub_nvml_set_gpm(0, 12, 7, 1, 4);
    {
        detail::NvmlSampler sampler(*nvml);
        sampler.sample_once(queue_);  // opens the first window
        sampler.sample_once(queue_);  // too soon: the window is not closed
        EXPECT_TRUE(queue_.counters(CounterKind::kSmActivePercent).empty());
        for (int i = 0; i < 6; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(110));
            sampler.sample_once(queue_);
        }
        EXPECT_EQ(gpudiag_stub_nvml_gpm_samples_live(), 2) << "two buffers for GPU 0 alone";
        sampler.stop();
        EXPECT_EQ(gpudiag_stub_nvml_gpm_samples_live(), 0);
    }
    auto sm = queue_.counters(CounterKind::kSmActivePercent);
    ASSERT_EQ(sm.size(), 6u);
    for (const Event& e : sm) EXPECT_EQ(e.device, 0) << "GPU 1 has no GPM";
    EXPECT_EQ(sm[0].counter.value, 12);
    EXPECT_EQ(queue_.counters(CounterKind::kSmOccupancyPercent)[0].counter.value, 7);
    EXPECT_EQ(queue_.counters(CounterKind::kTensorActivePercent)[0].counter.value, 1);
    EXPECT_EQ(queue_.counters(CounterKind::kDramActivePercent)[0].counter.value, 4);
    auto fan = queue_.counters(CounterKind::kFanSpeedPercent);
    ASSERT_EQ(fan.size(), 8u) << "GPU 1's fan every round; GPU 0 has none (not asked again)";
    EXPECT_EQ(fan[0].device, 1);
    EXPECT_EQ(fan[0].counter.value, 55);

    auto report = analyze_events(queue_.events(), SourceInfo{}, strings_);
    ASSERT_TRUE(report.is_ok());
    const Finding* f = report->finding("gpu_busy_not_computing");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->device, 0);
    EXPECT_NE(f->title.find("97 % utilization"), std::string::npos) << f->title;
    EXPECT_NE(f->title.find("only 12 % of its SMs"), std::string::npos) << f->title;
    const Section* health = report->section("health");
    ASSERT_NE(health, nullptr);
    const Figure* mean_sm = health->figure("mean_sm_active_percent");
    ASSERT_NE(mean_sm, nullptr);
    EXPECT_EQ(mean_sm->value, 12);
}

// CUDA_VISIBLE_DEVICES names a MIG instance of GPU 0: the instance is sampled (its memory, its
// processes, its own GPM), the card's readings come through its GPU's handle, and the device is
// named as an instance of that GPU.
TEST_F(CaptureStubTest, AMigInstanceIsSampledAsOne) {
    const detail::NvmlApi* nvml = detail::nvml_api();
    ASSERT_NE(nvml, nullptr);
    setenv("CUDA_VISIBLE_DEVICES", "MIG-11111111-2222-4333-8444-555555555555", 1);
    struct Unset {
        ~Unset() { unsetenv("CUDA_VISIBLE_DEVICES"); }
    } unset;
    gpudiag_stub_nvml_set(0, 0, 77, 650000, 700000);
    gpudiag_stub_nvml_set_gpm(0, 30, 20, 10, 5);
    detail::NvmlSampler sampler(*nvml);
    sampler.sample_once(queue_);
    std::this_thread::sleep_for(std::chrono::milliseconds(110));
    sampler.sample_once(queue_);
    auto devices = sampler.devices();
    ASSERT_EQ(devices.size(), 1u);
    EXPECT_EQ(devices[0].uuid, "MIG-11111111-2222-4333-8444-555555555555");
    EXPECT_EQ(devices[0].parent_uuid, "GPU-00000000-0000-0000-0000-000000000000");
    EXPECT_EQ(devices[0].gpu_instance, 3);
    EXPECT_EQ(devices[0].compute_instance, 0);
    EXPECT_EQ(devices[0].pci_bus_id, "00000000:18:00.0");  // the GPU's
    EXPECT_EQ(devices[0].total_memory_bytes, 18ULL << 30);
    EXPECT_NE(describe_device(devices[0]).find("MIG instance GI 3 CI 0 of GPU-0000"),
              std::string::npos)
        << describe_device(devices[0]);
    auto first = [&](CounterKind kind) {
        auto v = queue_.counters(kind);
        return v.empty() ? -1.0 : v[0].counter.value;
    };
    EXPECT_EQ(first(CounterKind::kDeviceMemoryTotalBytes), double(18ULL << 30));
    EXPECT_EQ(first(CounterKind::kTemperatureC), 77);  // the GPU's, through its handle
    EXPECT_EQ(first(CounterKind::kPowerWatts), 650);
    EXPECT_EQ(first(CounterKind::kSmActivePercent), 70) << "the instance's own GPM";
    EXPECT_EQ(first(CounterKind::kProcessMemoryUsedBytes), double(3ULL << 30));
    EXPECT_EQ(first(CounterKind::kGpuUtilizationPercent), -1) << "NVML has none for an instance";
    EXPECT_EQ(gpudiag_stub_nvml_card_calls_on_mig(), 0);
    // The report's Prometheus samples carry dcgm-exporter's MIG labels: the GPU's UUID and
    // the GPU instance id.
    SourceInfo info;
    info.devices = devices;
    gpudiag_stub_nvml_set(0, 0x20 /*SW thermal*/, 88, 650000, 700000);
    for (int i = 0; i < 4; ++i) sampler.sample_once(queue_);  // a finding on the instance
    ASSERT_EQ(sampler.devices().size(), 1u);
    auto report = analyze_events(queue_.events(), info, strings_);
    ASSERT_TRUE(report.is_ok());
    ASSERT_NE(report->finding("thermal_throttle"), nullptr);
    const std::string prom = render_prometheus(*report);
    EXPECT_NE(prom.find("UUID=\"GPU-00000000-0000-0000-0000-000000000000\""), std::string::npos)
        << prom;
    EXPECT_NE(prom.find("GPU_I_ID=\"3\""), std::string::npos);
}

// Other processes on GPU 0 are named by their PIDs, the largest first, and their share of the
// SMs is measured apart from this process' own.
TEST_F(CaptureStubTest, OtherProcessesAreNamedWithTheirComputeShare) {
    const detail::NvmlApi* nvml = detail::nvml_api();
    ASSERT_NE(nvml, nullptr);
    const auto self = static_cast<unsigned>(getpid());
    gpudiag_stub_nvml_set_processes(0, 10ULL << 30, 0, 1);
    gpudiag_stub_nvml_add_process(0, 777001, 20ULL << 30);
    gpudiag_stub_nvml_add_process(0, 777002, 2ULL << 30);
    gpudiag_stub_nvml_set_process_sm(0, self, 50);
    gpudiag_stub_nvml_set_process_sm(0, 777001, 35);
    gpudiag_stub_nvml_set_process_sm(0, 777002, 10);
    detail::NvmlSampler sampler(*nvml);
    for (int i = 0; i < 3; ++i) sampler.sample_once(queue_);
    std::vector<std::pair<std::uint32_t, double>> others;
    for (const Event& e : queue_.counters(CounterKind::kOtherProcessMemoryBytes)) {
        if (e.device == 0) others.emplace_back(e.process, e.counter.value);
    }
    ASSERT_EQ(others.size(), 6u);  // two processes, three rounds
    EXPECT_EQ(others[0], (std::pair<std::uint32_t, double>{777001, double(20ULL << 30)}));
    EXPECT_EQ(others[1].first, 777002u);
    auto sm = queue_.counters(CounterKind::kForeignProcessSmPercent);
    ASSERT_FALSE(sm.empty());
    EXPECT_EQ(sm[0].device, 0);
    EXPECT_EQ(sm[0].counter.value, 45) << "35 + 10, not this process' 50";
    auto report = analyze_events(queue_.events(), SourceInfo{}, strings_);
    ASSERT_TRUE(report.is_ok());
    const Finding* f = report->finding("foreign_process_memory");
    ASSERT_NE(f, nullptr);
    bool named = false;
    for (const std::string& e : f->evidence) {
        named = named || e.find("PID 777001 20.0 GiB, PID 777002 2.0 GiB") != std::string::npos;
    }
    EXPECT_TRUE(named) << f->evidence[0];
    bool share = false;
    for (const Figure& x : f->figures)
        share = share || (x.key == "foreign_sm_percent_mean" && x.value == 45);
    EXPECT_TRUE(share);
}

// The same utilization with most SMs at work is a busy GPU, not a finding.
TEST_F(CaptureStubTest, GpmActivityOfABusyGpuIsNoFinding) {
    const detail::NvmlApi* nvml = detail::nvml_api();
    ASSERT_NE(nvml, nullptr);
    gpudiag_stub_nvml_set_utilization(0, 97);
    gpudiag_stub_nvml_set_gpm(0, 85, 40, 60, 35);
    detail::NvmlSampler sampler(*nvml);
    for (int i = 0; i < 7; ++i) {
        sampler.sample_once(queue_);
        std::this_thread::sleep_for(std::chrono::milliseconds(110));
    }
    ASSERT_GE(queue_.counters(CounterKind::kSmActivePercent).size(), 5u);
    auto report = analyze_events(queue_.events(), SourceInfo{}, strings_);
    ASSERT_TRUE(report.is_ok());
    EXPECT_EQ(report->finding("gpu_busy_not_computing"), nullptr);
}

// A live report names each GPU it sampled (model, UUID, PCI bus id), in text and in the labels
// Prometheus joins with dcgm-exporter's.
TEST_F(CaptureStubTest, ALiveReportNamesEachGpu) {
    gpudiag_stub_nvml_set(0, 0x20 /*SW thermal*/, 88, 650000, 700000);  // a finding on GPU 0
    SessionOptions o = options();
    o.nvml_hz = 50;
    auto session = Session::create(o);
    ASSERT_TRUE(session.is_ok());
    ASSERT_TRUE((*session)->start().is_ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_TRUE((*session)->stop().is_ok());
    auto report = (*session)->report();
    ASSERT_TRUE(report.is_ok());
    ASSERT_EQ(report->source.devices.size(), 2u);
    const DeviceInfo& d = report->source.devices[0];
    EXPECT_EQ(d.name, "NVIDIA H200 (stub)");
    EXPECT_FALSE(d.uuid.empty());
    EXPECT_EQ(d.pci_bus_id, "00000000:18:00.0");
    const std::string text = render_text(*report);
    EXPECT_NE(text.find("device 0: NVIDIA H200 (stub)"), std::string::npos) << text;
    EXPECT_NE(text.find("PCI 00000000:18:00.0"), std::string::npos) << text;
    ASSERT_NE(report->finding("thermal_throttle"), nullptr);
    const std::string prom = render_prometheus(*report);
    EXPECT_NE(prom.find("pci_bus_id=\"00000000:18:00.0\""), std::string::npos);
    EXPECT_NE(prom.find("UUID=\"" + d.uuid + "\""), std::string::npos);
}

// In a container NVML lists this process under its host PID, which getpid() is not. On a GPU
// this process computes on, a single listed process is this one: its memory is ours and no
// other process holds any. With two listed, which is ours cannot be told: nothing is reported.
TEST_F(CaptureStubTest, InsideAPidNamespaceTheOnlyProcessOnOurGpuIsUs) {
    const detail::NvmlApi* nvml = detail::nvml_api();
    ASSERT_NE(nvml, nullptr);
    gpudiag_stub_cuda_set_initialised(1);                   // CUDA ordinal 0 is NVML's GPU 1
    gpudiag_stub_nvml_set_processes(1, 0, 12ULL << 30, 0);  // listed under a PID we cannot see
    auto sample = [&] {
        queue_.clear();
        detail::NvmlSampler sampler(*nvml);
        sampler.sample_once(queue_);
    };
    sample();
    EXPECT_TRUE(queue_.counters(CounterKind::kProcessMemoryUsedBytes).empty())
        << "no context on the GPU: the process listed is another program";
    gpudiag_stub_cuda_set_context_active(1);
    sample();
    auto own = queue_.counters(CounterKind::kProcessMemoryUsedBytes);
    auto foreign = queue_.counters(CounterKind::kForeignProcessMemoryBytes);
    ASSERT_EQ(own.size(), 1u);
    EXPECT_EQ(own[0].counter.value, double(12ULL << 30));
    ASSERT_EQ(foreign.size(), 1u);
    EXPECT_EQ(foreign[0].counter.value, 0);
    gpudiag_stub_nvml_add_process(1, 777777, 3ULL << 30);
    sample();
    EXPECT_TRUE(queue_.counters(CounterKind::kForeignProcessMemoryBytes).empty())
        << "two processes, neither known to be ours: no guess";
}

// Inside a PID namespace with another program on the same GPU: this process is recognised under
// its host PID once its own memory (from its memory records) took two steps that only that PID's
// memory followed; from then on the other program is reported, by its PID.
TEST_F(CaptureStubTest, InsideAPidNamespaceThisProcessIsRecognisedByItsMemorySteps) {
    const detail::NvmlApi* nvml = detail::nvml_api();
    ASSERT_NE(nvml, nullptr);
    gpudiag_stub_cuda_set_initialised(1);  // CUDA ordinal 0 is NVML's GPU 1
    gpudiag_stub_cuda_set_context_active(1);
    detail::OwnDeviceMemory own;
    detail::NvmlSampler sampler(*nvml, &own);
    std::uint64_t now = 1'000'000'000;
    const unsigned long long context = 500ULL << 20;
    auto list = [](unsigned long long ours) {  // both under PIDs this process cannot see
        gpudiag_stub_nvml_set_processes(1, 0, 0, 0);
        gpudiag_stub_nvml_add_process(1, 777001, ours);
        gpudiag_stub_nvml_add_process(1, 777002, 3ULL << 30);
    };
    auto watch = [&] {  // two seconds at 10 Hz
        for (int i = 0; i < 20; ++i) {
            sampler.sample_once(queue_, now);
            now += 100'000'000;
        }
    };
    auto mentions = [&](const std::string& what) {
        for (const std::string& n : sampler.notes()) {
            if (n.find(what) != std::string::npos) return true;
        }
        return false;
    };
    list(context);
    watch();
    own.add(0, 6LL << 30);
    list(context + (6ULL << 30));
    watch();
    EXPECT_TRUE(queue_.counters(CounterKind::kForeignProcessMemoryBytes).empty())
        << "one step: not recognised yet";
    EXPECT_TRUE(mentions("other processes' memory not reported in"));
    own.add(0, 2LL << 30);
    list(context + (8ULL << 30));
    watch();
    auto foreign = queue_.counters(CounterKind::kForeignProcessMemoryBytes);
    ASSERT_FALSE(foreign.empty());
    EXPECT_EQ(foreign.back().counter.value, double(3ULL << 30));
    auto mine = queue_.counters(CounterKind::kProcessMemoryUsedBytes);
    ASSERT_FALSE(mine.empty());
    EXPECT_EQ(mine.back().counter.value, double(context + (8ULL << 30)));
    auto others = queue_.counters(CounterKind::kOtherProcessMemoryBytes);
    ASSERT_FALSE(others.empty());
    EXPECT_EQ(others.back().process, 777002u);
    EXPECT_TRUE(mentions("this process is PID 777001 in NVML's process list"));
}

// A healthy card gives no card finding: a full link, nothing retired, no Xid.
TEST_F(CaptureStubTest, NvmlHealthyCardHasNoCardFinding) {
    const detail::NvmlApi* nvml = detail::nvml_api();
    ASSERT_NE(nvml, nullptr);
    detail::NvmlSampler sampler(*nvml);
    for (int i = 0; i < 3; ++i) sampler.sample_once(queue_);
    EXPECT_FALSE(queue_.counters(CounterKind::kPcieLinkGenerationMax).empty());
    auto report = analyze_events(queue_.events(), SourceInfo{}, strings_);
    ASSERT_TRUE(report.is_ok());
    for (const char* id : {"xid_error", "ecc_pages_retired", "pcie_link_degraded"}) {
        EXPECT_EQ(report->finding(id), nullptr) << id;
    }
}

TEST_F(CaptureStubTest, NvmlDevicesFollowCudaOrdinalsOnceCudaIsInitialised) {
    const detail::NvmlApi* nvml = detail::nvml_api();
    ASSERT_NE(nvml, nullptr);
    gpudiag_stub_cuda_set_initialised(1);  // CUDA ordinal 0 is NVML's GPU 1
    gpudiag_stub_nvml_set(1, 0, 42, 100000, 700000);
    detail::NvmlSampler sampler(*nvml);
    sampler.sample_once(queue_);
    ASSERT_EQ(sampler.devices().size(), 1u);
    EXPECT_EQ(sampler.devices()[0].uuid, "GPU-01010101-0101-0101-0101-010101010101");
    auto temps = queue_.counters(CounterKind::kTemperatureC);
    ASSERT_EQ(temps.size(), 1u);
    EXPECT_EQ(temps[0].device, 0);
    EXPECT_EQ(temps[0].counter.value, 42);
}

TEST_F(CaptureStubTest, NvmlSamplerThreadRunsAtTheConfiguredRate) {
    detail::CaptureOptions o = backend_options();
    o.nvml_hz = 50;
    o.capture_gpu = false;
    auto backend = detail::make_capture_backend(o);
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    backend->stop();
    auto temps = queue_.counters(CounterKind::kTemperatureC);
    EXPECT_GE(temps.size(), 2u * 5);  // 2 GPUs, >= 5 samples in 300 ms at 50 Hz
    EXPECT_LE(temps.size(), 2u * 20);
    CaptureStatus st = backend->status();
    EXPECT_TRUE(contains(st.reasons, "capture_gpu is false"));
}

}  // namespace
}  // namespace gpudiag
