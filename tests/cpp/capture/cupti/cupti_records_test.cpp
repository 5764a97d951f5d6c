// SPDX-License-Identifier: Apache-2.0
// Every record layout gpudiag decodes, parsed by the real library of each CUPTI release: the
// libcupti.so.12 of the nvidia-cuda-cupti-cu12 wheels and the libcupti.so.13 of the toolkit and of
// the nvidia-cuda-cupti wheels (tools/fetch_cupti_libs.sh unpacks them; tools/cupti12_wheels.txt
// and tools/cupti13_wheels.txt list them). Records are hand-built
// at the sizes gpudiag's layout table gives for the library's version: the real parser walks by
// its own sizes, so a wrong size in the table misaligns every record after it and the decoded
// events come out wrong. No driver is needed (the parser works without one).
#include "capture/cupti/activity_decoder.hpp"
#include "capture/cupti/api_whitelist.hpp"
#include "capture/cupti/cupti_record_layouts.hpp"
#include "capture/platform/clock_calibration.hpp"
#include "capture/test_event_queue.hpp"

#include <cupti.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

namespace gpudiag {
namespace {

using detail::ActivityDecoder;
using detail::CuptiRecordLayout;

constexpr std::uint64_t kBase = 1'700'000'000'000'000'000ULL;

struct Library {
    std::string label;  ///< "12.4.127", "toolkit 13.0"
    std::string path;
    /// cuptiGetVersion: a CUPTI 12's API version; for a CUPTI 13 its release 13mm00 (any
    /// update of 13.mm answers 13mmuu).
    std::uint32_t expected_version;
};

// gtest names the parameter by its label, not by its bytes.
void PrintTo(const Library& lib, std::ostream* os) {
    *os << lib.label << " (" << lib.path << ")";
}

std::vector<std::string> split(const std::string& list) {
    std::vector<std::string> out;
    std::stringstream in(list);
    std::string item;
    while (std::getline(in, item, ',')) {
        if (!item.empty()) out.push_back(item);
    }
    return out;
}

// What each wheel's library reports (its cupti_version.h CUPTI_API_VERSION).
std::uint32_t api_version_of_wheel(const std::string& version) {
    struct Row {
        const char* prefix;
        std::uint32_t api;
    };
    const Row rows[] = {{"12.0.", 18}, {"12.1.", 18}, {"12.2.", 20}, {"12.3.", 21},  {"12.4.", 22},
                        {"12.5.", 23}, {"12.6.", 24}, {"12.8.", 26}, {"12.9.79", 28}};
    for (const Row& r : rows) {
        if (version.rfind(r.prefix, 0) == 0) return r.api;
    }
    return 0;
}

std::vector<Library> cupti12_libraries() {
    std::vector<Library> out;
#ifdef GPUDIAG_TEST_CUPTI12_VERSIONS
    for (const std::string& v : split(GPUDIAG_TEST_CUPTI12_VERSIONS)) {
        out.push_back({v, std::string(GPUDIAG_TEST_CUPTI12_DIR) + "/" + v + "/libcupti.so.12",
                       api_version_of_wheel(v)});
    }
#endif
    return out;
}

// "13.4.92" -> 130400.
std::uint32_t release_of_wheel(const std::string& version) {
    return static_cast<std::uint32_t>(130000 + 100 * std::atoi(version.c_str() + 3));
}

std::vector<Library> cupti13_libraries() {
    std::vector<Library> out;
#ifdef GPUDIAG_TEST_CUPTI_PATH
    out.push_back({"toolkit_13_0", GPUDIAG_TEST_CUPTI_PATH, 130000});
#endif
#ifdef GPUDIAG_TEST_CUPTI13_VERSIONS
    for (const std::string& v : split(GPUDIAG_TEST_CUPTI13_VERSIONS)) {
        out.push_back({v, std::string(GPUDIAG_TEST_CUPTI12_DIR) + "/" + v + "/libcupti.so.13",
                       release_of_wheel(v)});
    }
#endif
    return out;
}

// Whether this library's cuptiGetVersion answers in this process's setting, asked in a child:
// without a CUDA driver, CUPTI 13.2.86 crashes there and 13.3 on return CUPTI_ERROR_UNKNOWN,
// while 12.x, 13.0 and 13.1 answer (measured on a machine without a driver). The crash takes
// seconds (a stack overflow), so each library is asked once.
bool ask_version_in_child(void* handle) {
    auto get_version =
        reinterpret_cast<decltype(&cuptiGetVersion)>(dlsym(handle, "cuptiGetVersion"));
    if (get_version == nullptr) return false;
    pid_t child = fork();
    if (child == 0) {
        std::uint32_t v = 0;
        _exit(get_version(&v) == CUPTI_SUCCESS ? 0 : 1);
    }
    int status = 0;
    if (child < 0 || waitpid(child, &status, 0) != child) return false;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

bool version_answers(const std::string& path, void* handle) {
    static std::map<std::string, bool> answers;
    auto [it, fresh] = answers.try_emplace(path, false);
    if (fresh) it->second = ask_version_in_child(handle);
    return it->second;
}

// Hand-built records, each at the size its kind has in the library under test, 8-byte aligned.
class LayoutBuffer {
public:
    template <typename View>
    void add(const View& v, std::size_t record_size) {
        ASSERT_GE(record_size, sizeof(View));
        std::size_t at = bytes_.size();
        bytes_.resize(at + record_size, 0);
        std::memcpy(bytes_.data() + at, &v, sizeof(View));
    }
    std::uint8_t* data() { return bytes_.data(); }
    [[nodiscard]] std::size_t size() const { return bytes_.size(); }

private:
    std::vector<std::uint8_t> bytes_;
};

detail::MemoryView memory_view(std::uint64_t address, std::uint64_t bytes,
                               std::uint32_t correlation, std::uint64_t t,
                               std::uint32_t memory_kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE) {
    detail::MemoryView r{};
    r.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
    r.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
    r.memoryKind = memory_kind;
    r.correlationId = correlation;
    r.address = address;
    r.bytes = bytes;
    r.timestamp = t;
    r.processId = 4242;
    r.deviceId = 1;
    r.contextId = 5;
    r.streamId = 0xFFFFFFFFu;
    return r;
}

detail::ApiView api_view(CUpti_ActivityKind kind, std::uint32_t cbid, std::uint32_t correlation,
                         std::uint32_t rc = 0) {
    detail::ApiView r{};
    r.kind = kind;
    r.cbid = cbid;
    r.start = kBase + correlation * 10;
    r.end = r.start + 5;
    r.processId = 4242;
    r.threadId = 77;
    r.correlationId = correlation;
    r.returnValue = rc;
    return r;
}

class RealCuptiRecordsTest : public ::testing::TestWithParam<Library> {
protected:
    void SetUp() override {
        const Library& lib = GetParam();
        if (!std::filesystem::exists(lib.path)) {
            if (lib.label.find("toolkit") != std::string::npos) {
                GTEST_SKIP() << "the toolkit's libcupti.so.13 is not installed";
            }
            // The folder is made by tools/fetch_cupti_libs.sh (tools/check.sh runs it): absent
            // means the step did not run; a folder without a listed version is a broken fetch.
            if (!std::filesystem::exists(GPUDIAG_TEST_CUPTI12_DIR)) {
                GTEST_SKIP() << GPUDIAG_TEST_CUPTI12_DIR
                             << " is absent: run tools/fetch_cupti_libs.sh to test the CUPTI 12 "
                                "libraries";
            }
            FAIL() << lib.path << " is missing: tools/fetch_cupti_libs.sh did not unpack it";
        }
        handle_ = dlopen(lib.path.c_str(), RTLD_NOW | RTLD_LOCAL);
        ASSERT_NE(handle_, nullptr) << dlerror();
        // A CUPTI 13 wheel newer than the toolkit may need the driver this machine lacks; the
        // device check runs these tests where one is.
        if (lib.label.rfind("13.", 0) == 0 && !version_answers(lib.path, handle_)) {
            GTEST_SKIP() << "CUPTI " << lib.label
                         << " answers cuptiGetVersion only with a CUDA driver, and none is here";
        }
        auto get_version =
            reinterpret_cast<decltype(&cuptiGetVersion)>(dlsym(handle_, "cuptiGetVersion"));
        next_record_ = reinterpret_cast<decltype(&cuptiActivityGetNextRecord)>(
            dlsym(handle_, "cuptiActivityGetNextRecord"));
        callback_name_ = reinterpret_cast<decltype(&cuptiGetCallbackName)>(
            dlsym(handle_, "cuptiGetCallbackName"));
        ASSERT_NE(get_version, nullptr);
        ASSERT_NE(next_record_, nullptr);
        ASSERT_EQ(get_version(&version_), CUPTI_SUCCESS);
        cupti12_abi_ = dlvsym(handle_, "cuptiGetVersion", "libcupti.so.12") != nullptr;
        clock_.add_pair(kBase, 5'000);
        decoder_ = std::make_unique<ActivityDecoder>(queue_, strings_, clock_, version_);
    }
    void TearDown() override {
        decoder_.reset();
        // Never dlclose a libcupti: its threads may outlive the call.
    }
    std::uint64_t mono(std::uint64_t t) const { return t - kBase + 5'000; }
    const CuptiRecordLayout& layout() const { return decoder_->layout(); }
    void decode(LayoutBuffer& buf, bool forced = false) {
        decoder_->decode_buffer(next_record_, buf.data(), buf.size(), forced);
    }

    void* handle_ = nullptr;
    decltype(&cuptiActivityGetNextRecord) next_record_ = nullptr;
    decltype(&cuptiGetCallbackName) callback_name_ = nullptr;
    std::uint32_t version_ = 0;
    bool cupti12_abi_ = false;
    detail::ClockCalibration clock_;
    test::TestEventQueue queue_;
    StringTable strings_;
    std::unique_ptr<ActivityDecoder> decoder_;
};

TEST_P(RealCuptiRecordsTest, TheVersionIsOneGpudiagDecodes) {
    const Library& lib = GetParam();
    if (lib.expected_version < 130000) {
        EXPECT_EQ(version_, lib.expected_version);
        EXPECT_TRUE(cupti12_abi_) << "a CUPTI 12 without the libcupti.so.12 symbol version";
    } else {
        EXPECT_EQ(version_ / 100, lib.expected_version / 100);  // any update of the release
    }
    EXPECT_TRUE(detail::decodes_cupti(version_, cupti12_abi_)) << version_;
    EXPECT_NE(detail::cupti_cuda_version(version_), 0);
}

// One record of every kind gpudiag decodes, at this release's sizes, then a sentinel: a wrong
// size anywhere shifts every later record, so the sentinel would not come out whole.
TEST_P(RealCuptiRecordsTest, EveryRecordKindParsesAtThisReleasesSize) {
    const detail::CuptiRecordSizes& z = layout().sizes;
    LayoutBuffer buf;
    buf.add(memory_view(0x7f0000000000, 1 << 20, 11, kBase + 100), z.memory);

    detail::MemoryPool3View pool{};
    pool.v2.kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
    pool.v2.memoryPoolOperationType = CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED;
    pool.v2.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
    pool.v2.address = 0xabc000;
    pool.v2.size = 8 << 20;
    pool.v2.utilizedSize = 4096;
    pool.v2.timestamp = kBase + 150;
    pool.v2.deviceId = 1;
    pool.isManagedPool = 1;  // 13.0+ only: a 12.x record ends before it
    if (layout().pool_has_managed_flag) {
        buf.add(pool, z.memory_pool);
    } else {
        buf.add(pool.v2, z.memory_pool);
    }

    static const char kName[] = "_Z5scalePfi";
    detail::KernelView k{};
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.registersPerThread = 32;
    k.start = kBase + 1000;
    k.end = kBase + 3000;
    k.deviceId = 1;
    k.contextId = 5;
    k.streamId = 7;
    k.gridX = 4, k.gridY = 2, k.gridZ = 1;
    k.blockX = 128, k.blockY = 1, k.blockZ = 1;
    k.staticSharedMemory = 1024;
    k.dynamicSharedMemory = 2048;
    k.correlationId = 31;
    k.name = kName;
    buf.add(k, z.kernel);

    detail::MemcpyView copy{};
    copy.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    copy.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
    copy.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
    copy.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    copy.flags = CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC;
    copy.bytes = 1 << 24;
    copy.start = kBase + 3100;
    copy.end = kBase + 3600;
    copy.deviceId = 1;
    copy.streamId = 7;
    copy.correlationId = 41;
    buf.add(copy, z.memcpy);

    detail::MemcpyPtoPView p2p{};
    p2p.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
    p2p.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
    p2p.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    p2p.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    p2p.bytes = 1 << 22;
    p2p.start = kBase + 3700;
    p2p.end = kBase + 3800;
    p2p.deviceId = 1;
    p2p.streamId = 8;
    p2p.correlationId = 42;
    buf.add(p2p, z.memcpy_p2p);

    detail::MemsetView set{};
    set.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    set.bytes = 4096;
    set.start = kBase + 3900;
    set.end = kBase + 4000;
    set.deviceId = 1;
    set.streamId = 7;
    set.correlationId = 43;
    set.flags = CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC;
    set.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    buf.add(set, z.memset);

    detail::SyncView sync{};
    sync.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    sync.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
    sync.start = kBase + 4100;
    sync.end = kBase + 9100;
    sync.correlationId = 51;
    sync.streamId = 7;
    sync.cudaEventId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
    buf.add(sync, z.sync);

    buf.add(api_view(CUPTI_ACTIVITY_KIND_RUNTIME, 211, 52), z.api);            // cudaLaunchKernel
    buf.add(api_view(CUPTI_ACTIVITY_KIND_DRIVER, 551, 53), z.api);             // cuMemMap
    buf.add(api_view(CUPTI_ACTIVITY_KIND_RUNTIME, 20, 54, /*OOM*/ 2), z.api);  // cudaMalloc

    detail::Overhead3View oh{};
    oh.v2.v1.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
    oh.v2.v1.overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH;
    oh.v2.v1.start = kBase + 9200;
    oh.v2.v1.end = kBase + 9950;
    oh.v2.correlationId = 55;
    switch (layout().overhead_version) {
        case 1: buf.add(oh.v2.v1, z.overhead); break;
        case 2: buf.add(oh.v2, z.overhead); break;
        default:
            oh.overheadData = std::malloc(16);  // CUPTI's to the client: the decoder frees it
            buf.add(oh, z.overhead);
            break;
    }
    // The sentinel, right behind the overhead record. Were a 12.0-12.3 overhead record read as
    // Overhead3, its overheadData would be this record's memoryKind and correlation id.
    buf.add(memory_view(0x7f5555555000, 3 << 20, 0x5555, kBase + 10'000,
                        CUPTI_ACTIVITY_MEMORY_KIND_MANAGED),
            z.memory);

    decode(buf);

    const detail::DecoderCounters& c = decoder_->counters();
    EXPECT_EQ(c.records, 12u);
    EXPECT_EQ(c.corrupt_buffers, 0u);
    EXPECT_EQ(c.other_kinds, 0u);
    auto allocs = queue_.of_kind(EventKind::kDeviceAlloc);
    ASSERT_EQ(allocs.size(), 1u);
    EXPECT_EQ(allocs[0].memory.address, 0x7f0000000000u);
    EXPECT_EQ(allocs[0].memory.bytes, 1u << 20);
    EXPECT_EQ(allocs[0].device, 1);
    EXPECT_EQ(allocs[0].stream, kNoStream);
    EXPECT_EQ(allocs[0].start_ns, mono(kBase + 100));
    auto resizes = queue_.of_kind(EventKind::kPoolResize);
    ASSERT_EQ(resizes.size(), 1u);
    EXPECT_EQ(resizes[0].memory.address, 0xabc000u);
    EXPECT_EQ(resizes[0].memory.bytes, 8u << 20);
    EXPECT_EQ(resizes[0].memory.aux, 4096u);
    // CUDA 12 has no managed pools: the flag is read only where the record has it.
    EXPECT_EQ(resizes[0].flags,
              static_cast<std::uint8_t>(layout().pool_has_managed_flag ? MemoryKind::kManaged
                                                                       : MemoryKind::kDevice));
    auto kernels = queue_.of_kind(EventKind::kKernel);
    ASSERT_EQ(kernels.size(), 1u);
    EXPECT_EQ(strings_.lookup(kernels[0].kernel.name), "scale(float*, int)");
    EXPECT_EQ(kernels[0].duration_ns(), 2000u);
    EXPECT_EQ(kernels[0].kernel.grid_size, 8u);
    EXPECT_EQ(kernels[0].kernel.block_size, 128u);
    EXPECT_EQ(kernels[0].kernel.shared_bytes, 3072u);
    EXPECT_EQ(kernels[0].kernel.registers, 32u);
    EXPECT_EQ(kernels[0].kernel.correlation, 31u);
    EXPECT_EQ(kernels[0].stream, 7u);
    auto copies = queue_.of_kind(EventKind::kMemcpy);
    ASSERT_EQ(copies.size(), 2u);
    EXPECT_EQ(copies[0].copy.direction, CopyDirection::kHostToDevice);
    EXPECT_EQ(copies[0].copy.src_kind, MemoryKind::kPageable);
    EXPECT_EQ(copies[0].copy.is_async, 1);
    EXPECT_EQ(copies[0].copy.bytes, 1u << 24);
    EXPECT_EQ(copies[0].copy.correlation, 41u);
    EXPECT_EQ(copies[1].copy.direction, CopyDirection::kPeerToPeer);
    EXPECT_EQ(copies[1].copy.bytes, 1u << 22);
    EXPECT_EQ(copies[1].copy.correlation, 42u);
    EXPECT_EQ(copies[1].stream, 8u);
    auto sets = queue_.of_kind(EventKind::kMemset);
    ASSERT_EQ(sets.size(), 1u);
    EXPECT_EQ(sets[0].copy.bytes, 4096u);
    EXPECT_EQ(sets[0].copy.correlation, 43u);
    EXPECT_EQ(sets[0].copy.dst_kind, MemoryKind::kDevice);
    auto syncs = queue_.of_kind(EventKind::kSync);
    ASSERT_EQ(syncs.size(), 1u);
    EXPECT_EQ(syncs[0].sync.sync_kind, SyncKind::kStream);
    EXPECT_EQ(syncs[0].duration_ns(), 5000u);
    EXPECT_EQ(syncs[0].sync.object, 0u);
    auto apis = queue_.of_kind(EventKind::kApiCall);
    ASSERT_EQ(apis.size(), 3u);
    EXPECT_EQ(strings_.lookup(apis[0].api.name), "cudaLaunchKernel");
    EXPECT_EQ(strings_.lookup(apis[1].api.name), "cuMemMap");
    EXPECT_EQ(apis[1].api.domain, ApiDomain::kDriver);
    EXPECT_EQ(apis[2].api.return_code, 2);
    EXPECT_EQ(apis[2].thread, 77u);
    EXPECT_EQ(queue_.of_kind(EventKind::kOutOfMemory).size(), 1u);
    EXPECT_EQ(c.overhead_records, 1u);
    EXPECT_EQ(c.overhead_ns, 750u);
    auto managed = queue_.of_kind(EventKind::kManagedAlloc);
    ASSERT_EQ(managed.size(), 1u) << "the record behind the overhead record was misread";
    EXPECT_EQ(managed[0].memory.address, 0x7f5555555000u);
    EXPECT_EQ(managed[0].memory.extra, 0x5555u);
}

// A record still in flight at a forced flush: the parser stops there, as with CUPTI 13.
TEST_P(RealCuptiRecordsTest, ARecordInFlightAtAForcedFlushIsCountedIncomplete) {
    const detail::CuptiRecordSizes& z = layout().sizes;
    LayoutBuffer buf;
    buf.add(memory_view(0x1, 64, 1, kBase + 1), z.memory);
    detail::KernelView running{};
    running.kind = CUPTI_ACTIVITY_KIND_INVALID;  // not yet marked complete
    buf.add(running, z.kernel);
    buf.add(memory_view(0x2, 64, 3, kBase + 3), z.memory);
    decode(buf, /*forced=*/true);
    EXPECT_EQ(queue_.of_kind(EventKind::kDeviceAlloc).size(), 1u);
    EXPECT_EQ(decoder_->counters().corrupt_buffers, 0u);
    EXPECT_EQ(decoder_->counters().incomplete_at_flush, 1u);
    EXPECT_EQ(decoder_->counters().unreadable_bytes, z.kernel + z.memory);
}

// The whitelist's cbids mean the same functions in this release's callback table; a cbid the
// release lacks is not enabled there.
TEST_P(RealCuptiRecordsTest, WhitelistedCallbackIdsNameTheSameFunctions) {
    ASSERT_NE(callback_name_, nullptr);
    int checked = 0;
    int absent = 0;
    for (const auto& api : detail::api_whitelist()) {
        auto domain = api.domain == ApiDomain::kRuntime ? CUPTI_CB_DOMAIN_RUNTIME_API
                                                        : CUPTI_CB_DOMAIN_DRIVER_API;
        const char* name = nullptr;
        CUptiResult rc = callback_name_(domain, api.cbid, &name);
        std::string real = rc == CUPTI_SUCCESS && name != nullptr ? name : "";
        if (!detail::api_in_cupti(api, version_)) {
            // CUPTI's names carry version suffixes (cudaMalloc_v3020, cuMemAlloc_v2).
            EXPECT_NE(real.rfind(api.name, 0), 0u) << api.cbid << " is " << real << " here";
            ++absent;
            continue;
        }
        EXPECT_EQ(real.rfind(api.name, 0), 0u) << api.cbid << ": " << real << " vs " << api.name;
        ++checked;
    }
    EXPECT_GE(checked, 65);
    EXPECT_EQ(absent, version_ < 130000 ? 1 : 0);  // cuCtxSynchronize_v2 came with CUDA 13.0
}

std::string library_name(const ::testing::TestParamInfo<Library>& info) {
    std::string out = info.param.label;
    for (char& c : out) {
        if (std::isalnum(static_cast<unsigned char>(c)) == 0) c = '_';
    }
    return out;
}

INSTANTIATE_TEST_SUITE_P(Cupti12, RealCuptiRecordsTest, ::testing::ValuesIn(cupti12_libraries()),
                         library_name);
INSTANTIATE_TEST_SUITE_P(Cupti13, RealCuptiRecordsTest, ::testing::ValuesIn(cupti13_libraries()),
                         library_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(RealCuptiRecordsTest);

// The layout table: rows in order, and each row's sizes never shrink (records only grow).
TEST(CuptiRecordLayoutCupti12Test, LayoutsAreOrderedAndRecordsOnlyGrow) {
    std::size_t n = 0;
    const CuptiRecordLayout* rows = detail::cupti_record_layouts(&n);
    ASSERT_GE(n, 2u);
    for (std::size_t i = 1; i < n; ++i) {
        const auto& a = rows[i - 1].sizes;
        const auto& b = rows[i].sizes;
        EXPECT_LT(rows[i - 1].first_version, rows[i].first_version);
        EXPECT_LE(a.kernel, b.kernel);
        EXPECT_LE(a.memcpy, b.memcpy);
        EXPECT_LE(a.memset, b.memset);
        EXPECT_LE(a.memory, b.memory);
        EXPECT_LE(a.memory_pool, b.memory_pool);
        EXPECT_LE(a.sync, b.sync);
        EXPECT_LE(a.overhead, b.overhead);
    }
    EXPECT_STREQ(detail::cupti_record_layout(22).releases, "CUDA 12.4-12.5");
    EXPECT_STREQ(detail::cupti_record_layout(130001).releases, "CUDA 13.0");
    EXPECT_EQ(detail::cupti_record_layout(21).overhead_version, 2);
    EXPECT_EQ(detail::cupti_record_layout(130202).invalid_stream, 0u);
    // 18 is CUPTI 11.8's number too: a CUPTI 12 only with the libcupti.so.12 symbols.
    EXPECT_FALSE(detail::decodes_cupti(18, false));
    EXPECT_TRUE(detail::decodes_cupti(18, true));
    EXPECT_FALSE(detail::decodes_cupti(17, true));
    EXPECT_TRUE(detail::decodes_cupti(28, false));
    EXPECT_FALSE(detail::decodes_cupti(140000, false));
    EXPECT_EQ(detail::cupti_cuda_version(22), 12040);
    EXPECT_EQ(detail::cupti_cuda_version(130101), 13010);
}

// CUPTI before 12.5 can only record the whole runtime API: everything but the whitelist drops.
TEST(ActivityDecoderCupti12Test, OnlyWhitelistedCallsSurviveWhenTheWholeRuntimeIsRecorded) {
    test::TestEventQueue queue;
    StringTable strings;
    detail::ClockCalibration clock;
    clock.add_pair(kBase, 0);
    ActivityDecoder decoder(queue, strings, clock, 22);
    decoder.keep_whitelisted_api_only(true);
    for (std::uint32_t cbid :
         {211u /*cudaLaunchKernel*/, 3u /*cudaGetDevice*/, 20u /*cudaMalloc*/}) {
        detail::ApiView v = api_view(CUPTI_ACTIVITY_KIND_RUNTIME, cbid, cbid);
        decoder.decode_record(reinterpret_cast<const CUpti_Activity*>(&v));
    }
    auto apis = queue.of_kind(EventKind::kApiCall);
    ASSERT_EQ(apis.size(), 2u);
    EXPECT_EQ(strings.lookup(apis[0].api.name), "cudaLaunchKernel");
    EXPECT_EQ(strings.lookup(apis[1].api.name), "cudaMalloc");
    EXPECT_EQ(decoder.counters().api_records_filtered, 1u);
}

}  // namespace
}  // namespace gpudiag
