// SPDX-License-Identifier: Apache-2.0
// Live capture on a real GPU (label gpu; the process exits 77 = skipped without a device):
// cudaMalloc/cudaFree, cudaMallocAsync (first and pool hit), cuMemCreate/cuMemMap, kernels
// (a PTX kernel, no nvcc needed), pageable vs pinned copies, memset and synchronisation, in
// default and deep mode, and pause/resume. Prints what it saw for the device-check summary.
#include "capture/capture_backend.hpp"
#include "capture/test_event_queue.hpp"

#include <gpudiag/capture.hpp>

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

// No device: skip the whole program (ctest SKIP_RETURN_CODE 77).
class RequireGpu : public ::testing::Environment {
public:
    void SetUp() override {
        int n = 0;
        if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
            std::fprintf(stderr, "no CUDA device: skipped\n");
            std::_Exit(77);
        }
    }
};
const auto* kRequireGpu = ::testing::AddGlobalTestEnvironment(new RequireGpu);

// Driver API through dlopen: the test binary needs no libcuda at link time (cuda.h for types).
struct Driver {
    decltype(&cuMemGetAllocationGranularity) mem_get_granularity = nullptr;
    decltype(&cuMemCreate) mem_create = nullptr;
    decltype(&cuMemAddressReserve) mem_address_reserve = nullptr;
    decltype(&cuMemMap) mem_map = nullptr;
    decltype(&cuMemSetAccess) mem_set_access = nullptr;
    decltype(&cuMemUnmap) mem_unmap = nullptr;
    decltype(&cuMemRelease) mem_release = nullptr;
    decltype(&cuMemAddressFree) mem_address_free = nullptr;
    decltype(&cuModuleLoadData) module_load_data = nullptr;
    decltype(&cuModuleGetFunction) module_get_function = nullptr;
    decltype(&cuLaunchKernel) launch_kernel = nullptr;
    bool load() {
        void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (h == nullptr) return false;
        auto get = [&](auto& fn, const char* name) {
            fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
            return fn != nullptr;
        };
        return get(mem_get_granularity, "cuMemGetAllocationGranularity") &&
               get(mem_create, "cuMemCreate") && get(mem_address_reserve, "cuMemAddressReserve") &&
               get(mem_map, "cuMemMap") && get(mem_set_access, "cuMemSetAccess") &&
               get(mem_unmap, "cuMemUnmap") && get(mem_release, "cuMemRelease") &&
               get(mem_address_free, "cuMemAddressFree") &&
               get(module_load_data, "cuModuleLoadData") &&
               get(module_get_function, "cuModuleGetFunction") &&
               get(launch_kernel, "cuLaunchKernel");
    }
};

const char kPtx[] = R"(
.version 7.0
.target sm_70
.address_size 64
.visible .entry gpudiag_empty_kernel() { ret; }
)";

void summarize(const char* title, const gpudiag::test::TestEventQueue& q,
               const gpudiag::StringTable& strings) {
    std::map<std::string, int> counts;
    for (const auto& e : q.events()) ++counts[gpudiag::event_kind_name(e.kind)];
    std::printf("SUMMARY %s:", title);
    for (const auto& [k, n] : counts) std::printf(" %s=%d", k.c_str(), n);
    std::printf("\n");
    (void)strings;
}

void print_status(const gpudiag::CaptureStatus& st) {
    std::printf("STATUS level=%s cupti=%u (%s) driver=%s devices=%d events=%llu dropped=%llu\n",
                gpudiag::capture_level_name(st.level), st.cupti_version, st.cupti_library.c_str(),
                st.driver_version.c_str(), st.device_count,
                static_cast<unsigned long long>(st.events),
                static_cast<unsigned long long>(st.dropped));
    for (const auto& r : st.reasons) std::printf("  reason: %s\n", r.c_str());
}

class CaptureGpuTest : public ::testing::Test {
protected:
    void SetUp() override { ASSERT_TRUE(driver_.load()); }
    Driver driver_;
    gpudiag::test::TestEventQueue queue_;
    gpudiag::StringTable strings_;
};

void run_workload(Driver& d) {
    // cudaMalloc / cudaFree
    for (int i = 0; i < 3; ++i) {
        void* p = nullptr;
        ASSERT_EQ(cudaMalloc(&p, (i + 1) << 20), cudaSuccess);
        ASSERT_EQ(cudaFree(p), cudaSuccess);
    }
    // cudaMallocAsync: the first grows the pool, the second is a pool hit
    cudaStream_t s = nullptr;
    ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
    for (int i = 0; i < 2; ++i) {
        void* p = nullptr;
        ASSERT_EQ(cudaMallocAsync(&p, 8 << 20, s), cudaSuccess);
        ASSERT_EQ(cudaFreeAsync(p, s), cudaSuccess);
        ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    }
    // virtual memory: reserve 8 chunks, map 2
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran = 0;
    ASSERT_EQ(d.mem_get_granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
    CUdeviceptr va = 0;
    ASSERT_EQ(d.mem_address_reserve(&va, 8 * gran, 0, 0, 0), 0);
    CUmemGenericAllocationHandle h1 = 0, h2 = 0;
    ASSERT_EQ(d.mem_create(&h1, gran, &prop, 0), 0);
    ASSERT_EQ(d.mem_create(&h2, gran, &prop, 0), 0);
    ASSERT_EQ(d.mem_map(va, gran, 0, h1, 0), 0);
    ASSERT_EQ(d.mem_map(va + gran, gran, 0, h2, 0), 0);
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    ASSERT_EQ(d.mem_set_access(va, 2 * gran, &access, 1), 0);
    ASSERT_EQ(d.mem_unmap(va, 2 * gran), 0);
    ASSERT_EQ(d.mem_release(h1), 0);
    ASSERT_EQ(d.mem_release(h2), 0);
    ASSERT_EQ(d.mem_address_free(va, 8 * gran), 0);
    // kernels
    CUmodule module = nullptr;
    CUfunction fn = nullptr;
    ASSERT_EQ(d.module_load_data(&module, kPtx), 0);
    ASSERT_EQ(d.module_get_function(&fn, module, "gpudiag_empty_kernel"), 0);
    for (int i = 0; i < 200; ++i) {
        ASSERT_EQ(d.launch_kernel(fn, 1, 1, 1, 32, 1, 1, 0, s, nullptr, nullptr), CUDA_SUCCESS);
    }
    // copies: pageable vs pinned, and a memset
    const size_t bytes = 16 << 20;
    void* dev = nullptr;
    ASSERT_EQ(cudaMalloc(&dev, bytes), cudaSuccess);
    std::vector<char> pageable(bytes, 1);
    void* pinned = nullptr;
    ASSERT_EQ(cudaMallocHost(&pinned, bytes), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dev, pageable.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(dev, pinned, bytes, cudaMemcpyHostToDevice, s), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(dev, 0, bytes, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_EQ(cudaFreeHost(pinned), cudaSuccess);
    ASSERT_EQ(cudaFree(dev), cudaSuccess);
    ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST_F(CaptureGpuTest, DefaultModeSeesMemoryKernelsCopiesAndSyncs) {
    ASSERT_EQ(cudaFree(nullptr), cudaSuccess);  // a context first, as in a real program
    gpudiag::detail::CaptureOptions o;
    o.nvml_hz = 10;
    auto backend = gpudiag::detail::make_capture_backend(o);
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());
    print_status(backend->status());
    ASSERT_GE(backend->status().level, gpudiag::CaptureLevel::kCuptiActivity);
    run_workload(driver_);
    backend->flush();
    backend->stop();
    summarize("default", queue_, strings_);
    using gpudiag::EventKind;
    EXPECT_GE(queue_.of_kind(EventKind::kDeviceAlloc).size(), 3u);
    EXPECT_GE(queue_.of_kind(EventKind::kDeviceFree).size(), 3u);
    EXPECT_GE(queue_.of_kind(EventKind::kPoolAlloc).size(), 1u);  // G1: pool hits [I]
    std::printf("pool_alloc records for 2 cudaMallocAsync calls: %zu\n",
                queue_.of_kind(EventKind::kPoolAlloc).size());
    auto kernels = queue_.of_kind(EventKind::kKernel);
    EXPECT_GE(kernels.size(), 190u);
    if (!kernels.empty()) {
        EXPECT_EQ(strings_.lookup(kernels[0].kernel.name), "gpudiag_empty_kernel");
    }
    bool pageable = false, pinned = false;
    for (const auto& c : queue_.of_kind(EventKind::kMemcpy)) {
        pageable |= c.copy.src_kind == gpudiag::MemoryKind::kPageable;
        pinned |= c.copy.src_kind == gpudiag::MemoryKind::kPinned;
    }
    EXPECT_TRUE(pageable);
    EXPECT_TRUE(pinned);
    EXPECT_GE(queue_.of_kind(EventKind::kMemset).size(), 1u);
    EXPECT_GE(queue_.of_kind(EventKind::kSync).size(), 1u);
    int vmm_calls = 0;
    for (const auto& a : queue_.of_kind(EventKind::kApiCall)) {
        std::string name(strings_.lookup(a.api.name));
        vmm_calls += name == "cuMemCreate" || name == "cuMemMap" || name == "cuMemUnmap";
    }
    EXPECT_GE(vmm_calls, 5);
    // G2: do kernel records carry the correlation ids of whitelisted launches?
    int correlated = 0;
    for (const auto& k : kernels) correlated += k.kernel.correlation != 0;
    std::printf("kernels with a correlation id: %d of %zu\n", correlated, kernels.size());
    EXPECT_FALSE(queue_.counters(gpudiag::CounterKind::kTemperatureC).empty());
}

TEST_F(CaptureGpuTest, DeepModeAddsCallSitesAndPhysicalMappings) {
    ASSERT_EQ(cudaFree(nullptr), cudaSuccess);
    gpudiag::detail::CaptureOptions o;
    o.deep = true;
    o.nvml_hz = 0;
    auto backend = gpudiag::detail::make_capture_backend(o);
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());
    print_status(backend->status());
    if (backend->status().level != gpudiag::CaptureLevel::kCuptiDeep) {
        backend->stop();
        GTEST_SKIP() << "CUPTI's subscriber is held by another tool";
    }
    run_workload(driver_);
    backend->flush();
    backend->stop();
    summarize("deep", queue_, strings_);
    int with_site = 0;
    for (const auto& a : queue_.of_kind(gpudiag::EventKind::kDeviceAlloc))
        with_site += a.memory.site != 0;
    EXPECT_GE(with_site, 3);
    auto maps = queue_.of_kind(gpudiag::EventKind::kVmMap);
    ASSERT_EQ(maps.size(), 2u);
    EXPECT_GT(maps[0].memory.aux, 0u);
    EXPECT_EQ(queue_.of_kind(gpudiag::EventKind::kVmUnmap).size(), 1u);
}

TEST_F(CaptureGpuTest, PausedCaptureSeesNothingAndResumes) {
    ASSERT_EQ(cudaFree(nullptr), cudaSuccess);
    gpudiag::detail::CaptureOptions o;
    o.nvml_hz = 0;
    auto backend = gpudiag::detail::make_capture_backend(o);
    ASSERT_TRUE(backend->start(queue_, strings_).is_ok());
    CUmodule module = nullptr;
    CUfunction fn = nullptr;
    ASSERT_EQ(driver_.module_load_data(&module, kPtx), 0);
    ASSERT_EQ(driver_.module_get_function(&fn, module, "gpudiag_empty_kernel"), 0);
    ASSERT_TRUE(backend->pause("test").is_ok());
    for (int i = 0; i < 50; ++i)
        driver_.launch_kernel(fn, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_TRUE(backend->resume().is_ok());
    for (int i = 0; i < 20; ++i)
        driver_.launch_kernel(fn, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    backend->flush();
    backend->stop();
    auto kernels = queue_.of_kind(gpudiag::EventKind::kKernel);
    std::printf("kernels after pause(50 unseen)+resume(20): %zu\n", kernels.size());
    EXPECT_EQ(kernels.size(), 20u);
    // The unobserved window is marked, and the clock puts every later kernel after its end.
    auto paused = queue_.of_kind(gpudiag::EventKind::kCapturePaused);
    auto resumed = queue_.of_kind(gpudiag::EventKind::kCaptureResumed);
    ASSERT_EQ(paused.size(), 1u);
    ASSERT_EQ(resumed.size(), 1u);
    for (const auto& k : kernels) EXPECT_GT(k.start_ns, resumed[0].start_ns);
}

}  // namespace
