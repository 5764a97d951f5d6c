// SPDX-License-Identifier: Apache-2.0
// Hand-built CUPTI 13.0 records decoded through the real libcupti parser (no GPU needed); every
// layout of CUPTI 12 and 13 is also parsed by cupti_records_test.cpp.
#include "capture/cupti/activity_decoder.hpp"
#include "capture/cupti/api_whitelist.hpp"
#include "capture/cupti_records.hpp"
#include "capture/platform/clock_calibration.hpp"
#include "capture/test_event_queue.hpp"
#include "real_cupti.hpp"

#include <gpudiag/analyze.hpp>
#include <gpudiag/report.hpp>

#include <gtest/gtest.h>

#include <string>

namespace gpudiag {
namespace {

using detail::ActivityDecoder;
using detail::ClockCalibration;
using test::RecordBuffer;
using test::TestEventQueue;

constexpr std::uint64_t kBase = 1'700'000'000'000'000'000ULL;  // CLOCK_REALTIME-like ns

class ActivityDecoderCupti13Test : public ::testing::Test {
protected:
    void SetUp() override {
        if (const char* why = test::load_real_cupti(cupti_)) GTEST_SKIP() << why;
        clock_.add_pair(kBase, 5'000);  // monotonic = cupti - kBase + 5000
        decoder_.count_own_memory(&own_);
    }
    std::uint64_t mono(std::uint64_t cupti_ns) const { return cupti_ns - kBase + 5'000; }

    void decode(RecordBuffer& buf) {
        decoder_.decode_buffer(cupti_.next_record, buf.data(), buf.size());
    }

    test::RealCupti cupti_;
    ClockCalibration clock_;
    TestEventQueue queue_;
    StringTable strings_;
    ActivityDecoder decoder_{queue_, strings_, clock_};
    detail::OwnDeviceMemory own_;
};

TEST_F(ActivityDecoderCupti13Test, MemoryRecordsBecomeDeviceAndPoolEvents) {
    // GIVEN a cudaMalloc, its cudaFree, and a cudaMallocAsync from a local pool
    RecordBuffer buf;
    buf.add(test::memory_record(true, 0x7f0000000000, 1 << 20, 11, kBase + 100));
    buf.add(test::memory_record(false, 0x7f0000000000, 1 << 20, 12, kBase + 200));
    auto pooled = test::memory_record(true, 0x7f1000000000, 4096, 13, kBase + 300);
    pooled.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
    pooled.memoryPoolConfig.address = 0xabc000;
    pooled.memoryPoolConfig.pool.size = 32 << 20;
    pooled.memoryPoolConfig.utilizedSize = 4096;
    pooled.isAsync = 1;
    pooled.streamId = 7;
    buf.add(pooled);
    auto pinned =
        test::memory_record(true, 0x1000, 8192, 14, kBase + 400, CUPTI_ACTIVITY_MEMORY_KIND_PINNED);
    buf.add(pinned);
    // WHEN decoded
    decode(buf);
    // THEN
    auto allocs = queue_.of_kind(EventKind::kDeviceAlloc);
    ASSERT_EQ(allocs.size(), 1u);  // the pinned one is host memory
    EXPECT_EQ(allocs[0].memory.address, 0x7f0000000000u);
    EXPECT_EQ(allocs[0].memory.bytes, 1u << 20);
    EXPECT_EQ(allocs[0].memory.extra, 11u);
    EXPECT_EQ(allocs[0].flags, static_cast<std::uint8_t>(MemoryKind::kDevice));
    EXPECT_EQ(allocs[0].start_ns, mono(kBase + 100));
    EXPECT_EQ(allocs[0].process, 4242u);
    EXPECT_EQ(allocs[0].stream, kNoStream);
    ASSERT_EQ(queue_.of_kind(EventKind::kHostAlloc).size(), 1u);
    ASSERT_EQ(queue_.of_kind(EventKind::kDeviceFree).size(), 1u);
    auto pool_allocs = queue_.of_kind(EventKind::kPoolAlloc);
    ASSERT_EQ(pool_allocs.size(), 1u);
    EXPECT_EQ(pool_allocs[0].memory.aux, 0xabc000u);
    EXPECT_EQ(pool_allocs[0].stream, 7u);
    auto resizes = queue_.of_kind(EventKind::kPoolResize);
    ASSERT_EQ(resizes.size(), 1u);  // the pool's size was new
    EXPECT_EQ(resizes[0].memory.bytes, 32u << 20);
    EXPECT_EQ(resizes[0].memory.aux, 4096u);
    EXPECT_EQ(decoder_.counters().records, 4u);
    EXPECT_EQ(decoder_.counters().corrupt_buffers, 0u);
    // AND this process' own device memory is the pool's size: the cudaMalloc was freed, a pooled
    // allocation takes nothing beyond its pool, and pinned memory is the host's
    const detail::OwnDeviceMemory::Reading own = own_.read(0);
    EXPECT_EQ(own.bytes, 32 << 20);
    EXPECT_EQ(own.changes, 3u);
    EXPECT_TRUE(own.known);
}

// What cudaMalloc, a __device__ variable, a CUDA array, cudaMallocHost, cudaHostRegister of
// pageable memory, cudaMallocManaged and a __managed__ variable look like in MEMORY2.
RecordBuffer every_memory_kind() {
    struct Case {
        CUpti_ActivityMemoryKind kind;
        std::uint64_t address;
        std::uint64_t bytes;
    };
    const Case cases[] = {
        {CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0x7f0000000000, 64ull << 20},
        {CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC, 0x7f0010000000, 1ull << 20},
        {CUPTI_ACTIVITY_MEMORY_KIND_ARRAY, 0x7f0020000000, 2ull << 20},
        {CUPTI_ACTIVITY_MEMORY_KIND_PINNED, 0x200000000, 512ull << 20},
        {CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE, 0x300000000, 4ull << 20},
        {CUPTI_ACTIVITY_MEMORY_KIND_MANAGED, 0x7f8000000000, 256ull << 20},
        {CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC, 0x7f8010000000, 8ull << 20},
        {CUPTI_ACTIVITY_MEMORY_KIND_UNKNOWN, 0x7f9000000000, 16ull << 20},
    };
    RecordBuffer buf;
    std::uint32_t correlation = 100;
    for (const Case& c : cases) {
        buf.add(test::memory_record(true, c.address, c.bytes, correlation, kBase + correlation,
                                    c.kind));
        ++correlation;
    }
    return buf;
}

TEST_F(ActivityDecoderCupti13Test, DeviceHostAndManagedMemoryAreKeptApart) {
    RecordBuffer buf = every_memory_kind();
    // The pinned buffer is freed again.
    buf.add(test::memory_record(false, 0x200000000, 512ull << 20, 120, kBase + 500,
                                CUPTI_ACTIVITY_MEMORY_KIND_PINNED));
    decode(buf);
    auto device = queue_.of_kind(EventKind::kDeviceAlloc);
    ASSERT_EQ(device.size(), 3u);  // DEVICE, DEVICE_STATIC, ARRAY
    EXPECT_EQ(device[0].flags, static_cast<std::uint8_t>(MemoryKind::kDevice));
    EXPECT_EQ(device[1].flags, static_cast<std::uint8_t>(MemoryKind::kDevice));
    EXPECT_EQ(device[2].flags, static_cast<std::uint8_t>(MemoryKind::kArray));
    auto host = queue_.of_kind(EventKind::kHostAlloc);
    ASSERT_EQ(host.size(), 2u);
    EXPECT_EQ(host[0].flags, static_cast<std::uint8_t>(MemoryKind::kPinned));
    EXPECT_EQ(host[0].memory.bytes, 512ull << 20);
    EXPECT_EQ(host[1].flags, static_cast<std::uint8_t>(MemoryKind::kPageable));
    ASSERT_EQ(queue_.of_kind(EventKind::kHostFree).size(), 1u);
    auto managed = queue_.of_kind(EventKind::kManagedAlloc);
    ASSERT_EQ(managed.size(), 2u);
    EXPECT_EQ(managed[0].flags, static_cast<std::uint8_t>(MemoryKind::kManaged));
    EXPECT_TRUE(queue_.of_kind(EventKind::kDeviceFree).empty());
    EXPECT_EQ(decoder_.counters().memory_unknown_kind, 1u);  // counted, booked nowhere
}

TEST_F(ActivityDecoderCupti13Test, PinnedAndManagedMemoryAreOwnLinesOfTheMemoryReport) {
    RecordBuffer buf = every_memory_kind();
    decode(buf);
    auto report = analyze_events(queue_.events(), SourceInfo{}, strings_);
    ASSERT_TRUE(report.is_ok()) << report.status().to_string();
    const Section* memory = report->section("memory");
    ASSERT_NE(memory, nullptr);
    auto figure = [&](const char* key) {
        const Figure* f = memory->figure(key);
        return f != nullptr ? f->value : -1.0;
    };
    // Device memory: the cudaMalloc, the static variable and the array, nothing else.
    EXPECT_EQ(figure("outside_framework_bytes"), double((64ull + 1 + 2) << 20));
    EXPECT_EQ(figure("peak_used_bytes"), double((64ull + 1 + 2) << 20));
    EXPECT_EQ(figure("pinned_host_bytes"), double(512ull << 20));
    EXPECT_EQ(figure("peak_pinned_host_bytes"), double(512ull << 20));
    EXPECT_EQ(figure("managed_bytes"), double(264ull << 20));
    EXPECT_EQ(figure("pageable_host_bytes"), double(4ull << 20));
    std::string text = render_text(*report);
    auto line = text.find("pinned host memory (host RAM, not GPU memory)");
    ASSERT_NE(line, std::string::npos) << text;
    std::string pinned_line = text.substr(line, text.find('\n', line) - line);
    EXPECT_NE(pinned_line.find("512.0 MiB"), std::string::npos) << pinned_line;
    std::string json = render_json(*report);
    EXPECT_NE(json.find("\"pinned_host_bytes\""), std::string::npos);
}

TEST_F(ActivityDecoderCupti13Test, PoolResizeOnlyWhenThePoolSizeChanges) {
    RecordBuffer buf;
    for (int i = 0; i < 3; ++i) {
        auto r = test::memory_record(true, 0x9000 + i * 64, 64, 20 + i, kBase + i);
        r.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
        r.memoryPoolConfig.address = 0x1;
        r.memoryPoolConfig.pool.size = i < 2 ? 2 << 20 : 4 << 20;  // grows on the third
        buf.add(r);
    }
    CUpti_ActivityMemoryPool3 trim{};
    trim.kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
    trim.memoryPoolOperationType = CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED;
    trim.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
    trim.address = 0x1;
    trim.size = 1 << 20;
    trim.utilizedSize = 128;
    trim.timestamp = kBase + 10;
    buf.add(trim);
    decode(buf);
    auto resizes = queue_.of_kind(EventKind::kPoolResize);
    ASSERT_EQ(resizes.size(), 3u);
    EXPECT_EQ(resizes[0].memory.bytes, 2u << 20);
    EXPECT_EQ(resizes[1].memory.bytes, 4u << 20);
    EXPECT_EQ(resizes[2].memory.bytes, 1u << 20);
    EXPECT_EQ(resizes[2].memory.aux, 128u);
    EXPECT_EQ(own_.read(0).bytes, 1 << 20) << "the pool's last size: grown, then trimmed";
}

TEST_F(ActivityDecoderCupti13Test, KernelsAreNamedAndZeroTimestampsAreCountedNotEmitted) {
    static const char kName[] = "_Z5scalePfi";
    RecordBuffer buf;
    buf.add(test::kernel_record(kName, kBase + 1000, kBase + 3000, 31));
    buf.add(test::kernel_record(kName, 0, 0, 32));  // timing lost: device buffer full
    buf.add(test::kernel_record(kName, kBase + 4000, kBase + 4500, 33));
    decode(buf);
    auto kernels = queue_.of_kind(EventKind::kKernel);
    ASSERT_EQ(kernels.size(), 2u);
    EXPECT_EQ(strings_.lookup(kernels[0].kernel.name), "scale(float*, int)");
    EXPECT_EQ(kernels[0].kernel.name, kernels[1].kernel.name);
    EXPECT_EQ(kernels[0].duration_ns(), 2000u);
    EXPECT_EQ(kernels[0].kernel.grid_size, 8u);
    EXPECT_EQ(kernels[0].kernel.block_size, 128u);
    EXPECT_EQ(kernels[0].kernel.shared_bytes, 3072u);
    EXPECT_EQ(kernels[0].kernel.registers, 32u);
    EXPECT_EQ(kernels[0].kernel.correlation, 31u);
    EXPECT_EQ(kernels[0].stream, 7u);
    EXPECT_EQ(decoder_.counters().kernels_without_timing, 1u);
}

TEST_F(ActivityDecoderCupti13Test, CopiesKeepDirectionAndPageableness) {
    RecordBuffer buf;
    buf.add(test::memcpy_record(
        CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE,
        CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 1 << 24, kBase + 10, kBase + 510, true, 41));
    buf.add(test::memcpy_record(CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                                CUPTI_ACTIVITY_MEMORY_KIND_PINNED, 1 << 20, kBase + 600,
                                kBase + 700, false, 42));
    CUpti_ActivityMemset4 ms{};
    ms.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    ms.bytes = 4096;
    ms.start = kBase + 800;
    ms.end = kBase + 900;
    ms.streamId = 7;
    ms.correlationId = 43;
    ms.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    ms.flags = CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC;
    buf.add(ms);
    decode(buf);
    auto copies = queue_.of_kind(EventKind::kMemcpy);
    ASSERT_EQ(copies.size(), 2u);
    EXPECT_EQ(copies[0].copy.direction, CopyDirection::kHostToDevice);
    EXPECT_EQ(copies[0].copy.src_kind, MemoryKind::kPageable);
    EXPECT_EQ(copies[0].copy.dst_kind, MemoryKind::kDevice);
    EXPECT_EQ(copies[0].copy.is_async, 1);
    EXPECT_EQ(copies[0].copy.bytes, 1u << 24);
    EXPECT_EQ(copies[0].duration_ns(), 500u);
    EXPECT_EQ(copies[1].copy.direction, CopyDirection::kDeviceToHost);
    EXPECT_EQ(copies[1].copy.dst_kind, MemoryKind::kPinned);
    EXPECT_EQ(copies[1].copy.is_async, 0);
    auto sets = queue_.of_kind(EventKind::kMemset);
    ASSERT_EQ(sets.size(), 1u);
    EXPECT_EQ(sets[0].copy.bytes, 4096u);
    EXPECT_EQ(sets[0].copy.dst_kind, MemoryKind::kDevice);
    EXPECT_EQ(sets[0].copy.is_async, 1);
}

TEST_F(ActivityDecoderCupti13Test, SyncApiAndOverheadRecords) {
    RecordBuffer buf;
    CUpti_ActivitySynchronization2 sync{};
    sync.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    sync.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
    sync.start = kBase + 100;
    sync.end = kBase + 9100;
    sync.correlationId = 51;
    sync.streamId = 7;
    sync.cudaEventId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
    buf.add(sync);
    buf.add(test::api_record(CUPTI_ACTIVITY_KIND_RUNTIME, 211, kBase + 10, kBase + 20, 52));
    buf.add(test::api_record(CUPTI_ACTIVITY_KIND_DRIVER, detail::kCbidCuMemMap, kBase + 30,
                             kBase + 40, 53));
    buf.add(
        test::api_record(CUPTI_ACTIVITY_KIND_RUNTIME, 20, kBase + 50, kBase + 60, 54, 2));  // OOM
    buf.add(test::api_record(CUPTI_ACTIVITY_KIND_RUNTIME, 9999, kBase + 70, kBase + 80, 55));
    CUpti_ActivityOverhead3 oh{};
    oh.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
    oh.overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH;
    oh.start = kBase + 1000;
    oh.end = kBase + 1750;
    buf.add(oh);
    decode(buf);
    auto syncs = queue_.of_kind(EventKind::kSync);
    ASSERT_EQ(syncs.size(), 1u);
    EXPECT_EQ(syncs[0].sync.sync_kind, SyncKind::kStream);
    EXPECT_EQ(syncs[0].sync.object, 0u);
    EXPECT_EQ(syncs[0].duration_ns(), 9000u);
    auto apis = queue_.of_kind(EventKind::kApiCall);
    ASSERT_EQ(apis.size(), 4u);
    EXPECT_EQ(strings_.lookup(apis[0].api.name), "cudaLaunchKernel");
    EXPECT_EQ(apis[0].api.domain, ApiDomain::kRuntime);
    EXPECT_EQ(apis[0].api.callback_id, 211u);
    EXPECT_EQ(apis[0].thread, 99u);
    EXPECT_EQ(strings_.lookup(apis[1].api.name), "cuMemMap");
    EXPECT_EQ(apis[1].api.domain, ApiDomain::kDriver);
    EXPECT_EQ(apis[2].api.return_code, 2);
    EXPECT_EQ(strings_.lookup(apis[3].api.name), "cuda_runtime#9999");
    auto ooms = queue_.of_kind(EventKind::kOutOfMemory);
    ASSERT_EQ(ooms.size(), 1u);  // only the failed allocation
    EXPECT_EQ(decoder_.counters().overhead_records, 1u);
    EXPECT_EQ(decoder_.counters().overhead_ns, 750u);
}

TEST_F(ActivityDecoderCupti13Test, DeepModeSitesAndRequestSizesAttachByCorrelation) {
    StringId site = strings_.intern("train_step+0x10 (libapp.so)");
    decoder_.note_site(61, site, 1 << 30);
    RecordBuffer buf;
    buf.add(test::memory_record(true, 0x5000, 1 << 20, 61, kBase + 1));
    buf.add(test::api_record(CUPTI_ACTIVITY_KIND_RUNTIME, 20, kBase + 2, kBase + 3, 61, 2));
    decode(buf);
    auto allocs = queue_.of_kind(EventKind::kDeviceAlloc);
    ASSERT_EQ(allocs.size(), 1u);
    EXPECT_EQ(allocs[0].memory.site, site);
    auto ooms = queue_.of_kind(EventKind::kOutOfMemory);
    ASSERT_EQ(ooms.size(), 1u);
    EXPECT_EQ(ooms[0].oom.requested_bytes, 1u << 30);
    EXPECT_EQ(ooms[0].oom.site, site);
}

// A runtime allocation call record on `thread` (cudaMalloc unless told otherwise).
CUpti_ActivityAPI alloc_call(std::uint32_t thread, std::uint32_t correlation, std::uint64_t t,
                             bool out_of_memory, std::uint32_t cbid = 20) {
    CUpti_ActivityAPI r = test::api_record(CUPTI_ACTIVITY_KIND_RUNTIME, cbid, t, t + 100,
                                           correlation, out_of_memory ? 2 : 0);
    r.threadId = thread;
    return r;
}

CUpti_ActivityMemory4 device_alloc(std::uint64_t address, std::uint32_t device,
                                   std::uint32_t correlation, std::uint64_t t) {
    auto r = test::memory_record(true, address, 1 << 20, correlation, t);
    r.deviceId = device;
    r.contextId = 10 + device;
    return r;
}

TEST_F(ActivityDecoderCupti13Test, OutOfMemoryCarriesTheDeviceTheThreadLastAllocatedOn) {
    RecordBuffer buf;
    // GIVEN thread 7 allocating on device 1 (the MEMORY2 record before its API record) and
    // thread 8 on device 2 (the other way round), so the process uses several devices
    buf.add(device_alloc(0xA000, 1, 70, kBase + 1));
    buf.add(alloc_call(7, 70, kBase + 1, false));
    buf.add(alloc_call(8, 71, kBase + 2, false));
    buf.add(device_alloc(0xB000, 2, 71, kBase + 2));
    // WHEN each thread's next cudaMalloc fails, and one of a thread that never allocated
    buf.add(alloc_call(8, 72, kBase + 10, true));
    buf.add(alloc_call(7, 73, kBase + 11, true));
    buf.add(alloc_call(9, 74, kBase + 12, true));
    decode(buf);
    // THEN each marker names its thread's device; the third cannot be placed
    auto ooms = queue_.of_kind(EventKind::kOutOfMemory);
    ASSERT_EQ(ooms.size(), 3u);
    EXPECT_EQ(ooms[0].device, 2);
    EXPECT_EQ(ooms[0].thread, 8u);
    EXPECT_EQ(ooms[0].oom.correlation, 72u);
    EXPECT_NE(ooms[0].flags & kEventFlagRetryable, 0);
    EXPECT_EQ(ooms[0].flags & kMemoryKindMask, static_cast<int>(MemoryKind::kDevice));
    EXPECT_EQ(ooms[1].device, 1);
    EXPECT_EQ(ooms[2].device, kNoDevice);
    EXPECT_EQ(decoder_.counters().failed_allocations, 3u);
}

TEST_F(ActivityDecoderCupti13Test, OutOfMemoryTakesTheDeviceOfItsContextAndTheSizeInDeepMode) {
    // GIVEN a kernel on device 3 in context 13, and deep mode's note of the failed call
    RecordBuffer buf;
    auto kernel = test::kernel_record("_Z1kv", kBase + 1, kBase + 2, 80);
    kernel.deviceId = 3;
    kernel.contextId = 13;
    buf.add(kernel);
    auto other = test::kernel_record("_Z1kv", kBase + 3, kBase + 4, 81);
    other.deviceId = 0;
    other.contextId = 10;
    buf.add(other);
    decoder_.note_site(82, strings_.intern("train.cpp:10"), 3ull << 30, /*context=*/13);
    buf.add(alloc_call(7, 82, kBase + 5, true));
    decode(buf);
    auto ooms = queue_.of_kind(EventKind::kOutOfMemory);
    ASSERT_EQ(ooms.size(), 1u);
    EXPECT_EQ(ooms[0].device, 3);
    EXPECT_EQ(ooms[0].oom.requested_bytes, 3ull << 30);
}

TEST_F(ActivityDecoderCupti13Test, ARetryThatSucceedsWithdrawsTheMarker) {
    // GIVEN a caching allocator's pattern: cudaMalloc fails, the cache is freed, it succeeds
    RecordBuffer buf;
    buf.add(device_alloc(0xA000, 0, 90, kBase + 1));
    buf.add(alloc_call(7, 90, kBase + 1, false));
    buf.add(alloc_call(7, 91, kBase + 1'000, true));
    buf.add(test::api_record(CUPTI_ACTIVITY_KIND_RUNTIME, 22, kBase + 2'000, kBase + 2'100, 92));
    buf.add(device_alloc(0xC000, 0, 93, kBase + 500'000'000));
    buf.add(alloc_call(7, 93, kBase + 500'000'000, false));
    decode(buf);
    // THEN the marker is withdrawn by correlation
    auto ooms = queue_.of_kind(EventKind::kOutOfMemory);
    ASSERT_EQ(ooms.size(), 2u);
    EXPECT_NE(ooms[0].flags & kEventFlagRetryable, 0);
    EXPECT_EQ(ooms[0].flags & kEventFlagRetrySucceeded, 0);
    EXPECT_NE(ooms[1].flags & kEventFlagRetrySucceeded, 0);
    EXPECT_EQ(ooms[1].oom.correlation, 91u);
    EXPECT_EQ(ooms[1].thread, 7u);
    EXPECT_EQ(decoder_.counters().retried_allocations, 1u);
    // AND the memory analysis reports no out-of-memory error, only the retry
    auto report = analyze_events(queue_.events(), SourceInfo{}, strings_);
    ASSERT_TRUE(report.is_ok());
    EXPECT_EQ(report->finding("out_of_memory"), nullptr);
    bool noted = false;
    for (const auto& n : report->notes)
        noted |= n.find("succeeded when their caller retried") != std::string::npos;
    EXPECT_TRUE(noted);
}

TEST_F(ActivityDecoderCupti13Test, AFailureStandsWhenTheRetryFailsOrNoSuccessFollowsInTime) {
    RecordBuffer buf;
    buf.add(device_alloc(0xA000, 0, 100, kBase + 1));
    buf.add(alloc_call(7, 100, kBase + 1, false));
    // Thread 7: fails, fails again (the retry did not help), then a later success.
    buf.add(alloc_call(7, 101, kBase + 1'000, true));
    buf.add(alloc_call(7, 102, kBase + 2'000, true));
    buf.add(alloc_call(7, 103, kBase + 3'000, false));
    // Thread 8: fails; its next success comes long after any retry.
    buf.add(alloc_call(8, 104, kBase + 4'000, true));
    buf.add(alloc_call(8, 105, kBase + 10'000'000'000ull, false));
    // Thread 9: fails; a different call succeeds (cudaMallocHost, not the failed cudaMalloc).
    buf.add(alloc_call(9, 106, kBase + 5'000, true));
    buf.add(alloc_call(9, 107, kBase + 6'000, false, /*cudaMallocHost*/ 25));
    decode(buf);
    std::vector<std::uint32_t> withdrawn;
    for (const Event& e : queue_.of_kind(EventKind::kOutOfMemory)) {
        if ((e.flags & kEventFlagRetrySucceeded) != 0) withdrawn.push_back(e.oom.correlation);
    }
    EXPECT_EQ(withdrawn, std::vector<std::uint32_t>{102});  // only the retried second failure
    auto report = analyze_events(queue_.events(), SourceInfo{}, strings_);
    ASSERT_TRUE(report.is_ok());
    const Finding* oom = report->finding("out_of_memory");
    ASSERT_NE(oom, nullptr);
    EXPECT_EQ(oom->device, 0);
    EXPECT_NE(oom->title.find("request size unknown"), std::string::npos) << oom->title;
}

TEST_F(ActivityDecoderCupti13Test, AFailedPinnedHostAllocationIsNoDeviceOutOfMemory) {
    RecordBuffer buf;
    buf.add(device_alloc(0xA000, 0, 110, kBase + 1));
    buf.add(alloc_call(7, 111, kBase + 2, true, /*cudaHostAlloc*/ 27));
    decode(buf);
    auto ooms = queue_.of_kind(EventKind::kOutOfMemory);
    ASSERT_EQ(ooms.size(), 1u);
    EXPECT_EQ(ooms[0].device, kNoDevice);
    EXPECT_EQ(ooms[0].flags & kMemoryKindMask, static_cast<int>(MemoryKind::kPinned));
    auto report = analyze_events(queue_.events(), SourceInfo{}, strings_);
    ASSERT_TRUE(report.is_ok());
    EXPECT_EQ(report->finding("out_of_memory"), nullptr);
    bool noted = false;
    for (const auto& n : report->notes)
        noted |= n.find("host memory ran out, not GPU memory") != std::string::npos;
    EXPECT_TRUE(noted);
}

TEST_F(ActivityDecoderCupti13Test, UnknownKindStopsTheWalkAndIsCounted) {
    RecordBuffer buf;
    buf.add(test::memory_record(true, 0x1, 64, 1, kBase + 1));
    CUpti_ActivityAPI bogus{};  // kind 0 (INVALID): the parser cannot size it
    buf.add(bogus);
    buf.add(test::memory_record(true, 0x2, 64, 2, kBase + 2));
    decode(buf);
    EXPECT_EQ(queue_.of_kind(EventKind::kDeviceAlloc).size(), 1u);
    EXPECT_EQ(decoder_.counters().corrupt_buffers, 1u);
}

// A forced flush (pause, stop) hands over records still in flight. The real parser stops at one
// it cannot size and never moves past it (it leaves the record pointer in place), so the
// records behind it are lost: counted as incomplete and unread, not as a damaged buffer.
TEST_F(ActivityDecoderCupti13Test, AForcedFlushCountsARecordInFlightAsIncompleteNotCorrupt) {
    static const char kName[] = "_Z4stepv";
    RecordBuffer buf;
    buf.add(test::memory_record(true, 0x1, 64, 1, kBase + 1));
    auto running = test::kernel_record(kName, 0, 0, 2);
    running.kind = CUPTI_ACTIVITY_KIND_INVALID;  // not yet marked complete
    buf.add(running);
    buf.add(test::memory_record(true, 0x2, 64, 3, kBase + 3));
    decoder_.decode_buffer(cupti_.next_record, buf.data(), buf.size(), /*forced=*/true);
    EXPECT_EQ(queue_.of_kind(EventKind::kDeviceAlloc).size(), 1u);
    EXPECT_EQ(decoder_.counters().corrupt_buffers, 0u);
    EXPECT_EQ(decoder_.counters().incomplete_at_flush, 1u);
    // What follows the first record: the running kernel and the allocation behind it.
    EXPECT_EQ(decoder_.counters().unreadable_bytes,
              sizeof(CUpti_ActivityKernel10) + sizeof(CUpti_ActivityMemory4));
}

TEST_F(ActivityDecoderCupti13Test, AForcedFlushCountsKernelsWithoutTimestampsAsIncomplete) {
    static const char kName[] = "_Z4stepv";
    RecordBuffer buf;
    buf.add(test::kernel_record(kName, 0, 0, 1));  // still running when forced out
    buf.add(test::kernel_record(kName, kBase + 10, kBase + 20, 2));
    decoder_.decode_buffer(cupti_.next_record, buf.data(), buf.size(), /*forced=*/true);
    EXPECT_EQ(queue_.of_kind(EventKind::kKernel).size(), 1u);  // the complete one after it
    EXPECT_EQ(decoder_.counters().incomplete_at_flush, 1u);
    EXPECT_EQ(decoder_.counters().kernels_without_timing, 0u);  // not a full device buffer
}

TEST_F(ActivityDecoderCupti13Test, TruncatedBufferYieldsTheCompleteRecordsOnly) {
    RecordBuffer buf;
    buf.add(test::memory_record(true, 0x1, 64, 1, kBase + 1));
    buf.add(test::memory_record(true, 0x2, 64, 2, kBase + 2));
    decoder_.decode_buffer(cupti_.next_record, buf.data(), buf.size() - 16);
    EXPECT_EQ(queue_.of_kind(EventKind::kDeviceAlloc).size(), 1u);
    EXPECT_EQ(decoder_.counters().corrupt_buffers, 0u);
}

TEST_F(ActivityDecoderCupti13Test, AFullQueueCountsRefusals) {
    TestEventQueue tiny(1);
    ActivityDecoder decoder(tiny, strings_, clock_);
    RecordBuffer buf;
    buf.add(test::memory_record(true, 0x1, 64, 1, kBase + 1));
    buf.add(test::memory_record(true, 0x2, 64, 2, kBase + 2));
    decoder.decode_buffer(cupti_.next_record, buf.data(), buf.size());
    EXPECT_EQ(decoder.counters().events, 1u);
    EXPECT_EQ(decoder.counters().queue_refused, 1u);
}

// The whitelist's names and numbers agree with the real library's callback table.
TEST(ApiWhitelistCupti13Test, NamesMatchTheRealCallbackTable) {
    test::RealCupti cupti;
    if (const char* why = test::load_real_cupti(cupti)) GTEST_SKIP() << why;
    if (cupti.callback_name == nullptr) GTEST_SKIP() << "no cuptiGetCallbackName";
    int checked = 0;
    for (const auto& api : detail::api_whitelist()) {
        const char* name = nullptr;
        auto domain = api.domain == ApiDomain::kRuntime ? CUPTI_CB_DOMAIN_RUNTIME_API
                                                        : CUPTI_CB_DOMAIN_DRIVER_API;
        if (cupti.callback_name(domain, api.cbid, &name) != CUPTI_SUCCESS || name == nullptr)
            continue;
        std::string real(name);
        // CUPTI's names carry version suffixes (cudaMalloc_v3020, cuMemAlloc_v2).
        EXPECT_EQ(real.rfind(api.name, 0), 0u) << api.cbid << ": " << real << " vs " << api.name;
        ++checked;
    }
    if (checked == 0) GTEST_SKIP() << "cuptiGetCallbackName needs a driver here";
}

}  // namespace
}  // namespace gpudiag
