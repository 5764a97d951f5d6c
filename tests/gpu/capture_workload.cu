// SPDX-License-Identifier: Apache-2.0
// GPU workloads for the device check, each captured by a gpudiag Session into a recording:
//   capture_workload MODE [--record PATH]     MODE: memory async vmm kernels copies all overhead
// Built twice by tests/gpu/device_check.sh: linked with libgpudiag (the Session API), and with
// -DGPUDIAG_PLAIN as an unmodified program for CUDA_INJECTION64_PATH.
#include <cuda.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#ifndef GPUDIAG_PLAIN
#  include <gpudiag/capture.hpp>
#  include <gpudiag/report.hpp>
#  include <gpudiag/session.hpp>
#endif

#define CHECK(expr)                                                                          \
    do {                                                                                     \
        auto rc_ = (expr);                                                                   \
        if (rc_ != 0) {                                                                      \
            std::fprintf(stderr, "%s:%d: %s failed (%d)\n", __FILE__, __LINE__, #expr, (int)rc_); \
            std::exit(2);                                                                    \
        }                                                                                    \
    } while (0)

__global__ void tiny_kernel(float* out) {
    if (out != nullptr && threadIdx.x == 0) out[blockIdx.x] += 1.0f;
}

__global__ void busy_kernel(float* data, int n, int iterations) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = data[i];
    for (int k = 0; k < iterations; ++k) v = v * 1.0000001f + 0.5f;
    data[i] = v;
}

static void memory_workload() {
    for (int i = 0; i < 4; ++i) {
        void* p = nullptr;
        CHECK(cudaMalloc(&p, size_t(i + 1) << 22));
        CHECK(cudaFree(p));
    }
    void* kept = nullptr;
    CHECK(cudaMalloc(&kept, 64 << 20));  // never freed: a leak for the analyses to see
    void* host = nullptr;
    CHECK(cudaMallocHost(&host, 8 << 20));
    CHECK(cudaFreeHost(host));
    void* managed = nullptr;
    CHECK(cudaMallocManaged(&managed, 4 << 20));
    CHECK(cudaFree(managed));
}

static void async_workload() {
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    for (int i = 0; i < 3; ++i) {  // first grows the default pool, later calls are pool hits
        void* p = nullptr;
        CHECK(cudaMallocAsync(&p, 32 << 20, s));
        tiny_kernel<<<1, 32, 0, s>>>(static_cast<float*>(p));
        CHECK(cudaFreeAsync(p, s));
    }
    CHECK(cudaStreamSynchronize(s));
    cudaMemPool_t pool;
    CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    CHECK(cudaMemPoolTrimTo(pool, 0));
    CHECK(cudaStreamDestroy(s));
}

// Expandable-segment style: reserve a range, back it chunk by chunk, unmap, release.
static void vmm_workload() {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran = 0;
    CHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    const int chunks = 4;
    CUdeviceptr base = 0;
    CHECK(cuMemAddressReserve(&base, 16 * gran, 0, 0, 0));
    std::vector<CUmemGenericAllocationHandle> handles(chunks);
    for (int i = 0; i < chunks; ++i) {
        CHECK(cuMemCreate(&handles[i], gran, &prop, 0));
        CHECK(cuMemMap(base + i * gran, gran, 0, handles[i], 0));
    }
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CHECK(cuMemSetAccess(base, chunks * gran, &access, 1));
    tiny_kernel<<<1, 32>>>(reinterpret_cast<float*>(base));
    CHECK(cudaDeviceSynchronize());
    CHECK(cuMemUnmap(base, chunks * gran));
    for (auto h : handles) CHECK(cuMemRelease(h));
    CHECK(cuMemAddressFree(base, 16 * gran));
}

static void kernels_workload(int tiny) {
    float* data = nullptr;
    const int n = 1 << 20;
    CHECK(cudaMalloc(&data, n * sizeof(float)));
    for (int i = 0; i < tiny; ++i) tiny_kernel<<<1, 32>>>(data);
    for (int i = 0; i < 20; ++i) busy_kernel<<<(n + 255) / 256, 256>>>(data, n, 2000);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaFree(data));
}

static void copies_workload() {
    const size_t bytes = 64 << 20;
    void* dev = nullptr;
    CHECK(cudaMalloc(&dev, bytes));
    std::vector<char> pageable(bytes, 1);
    void* pinned = nullptr;
    CHECK(cudaMallocHost(&pinned, bytes));
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    for (int i = 0; i < 4; ++i) {
        CHECK(cudaMemcpyAsync(dev, pageable.data(), bytes, cudaMemcpyHostToDevice, s));  // staged
        CHECK(cudaMemcpyAsync(dev, pinned, bytes, cudaMemcpyHostToDevice, s));
        CHECK(cudaMemcpyAsync(pinned, dev, bytes, cudaMemcpyDeviceToHost, s));
        CHECK(cudaMemsetAsync(dev, 0, bytes, s));
        CHECK(cudaStreamSynchronize(s));
    }
    cudaEvent_t e;
    CHECK(cudaEventCreate(&e));
    CHECK(cudaEventRecord(e, s));
    CHECK(cudaEventSynchronize(e));
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaEventDestroy(e));
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFreeHost(pinned));
    CHECK(cudaFree(dev));
}

#ifndef GPUDIAG_PLAIN
static double launch_loop_seconds(int launches) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < launches; ++i) tiny_kernel<<<1, 32>>>(nullptr);
    CHECK(cudaDeviceSynchronize());
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
#endif

static void run(const std::string& mode) {
    if (mode == "memory" || mode == "all") memory_workload();
    if (mode == "async" || mode == "all") async_workload();
    if (mode == "vmm" || mode == "all") vmm_workload();
    if (mode == "kernels" || mode == "all") kernels_workload(mode == "all" ? 1000 : 10000);
    if (mode == "copies" || mode == "all") copies_workload();
}

int main(int argc, char** argv) {
    std::string mode = argc > 1 ? argv[1] : "all";
    std::string record;
    for (int i = 2; i + 1 < argc; ++i) {
        if (std::strcmp(argv[i], "--record") == 0) record = argv[i + 1];
    }
    CHECK(cudaFree(nullptr));  // create the context before capture, as frameworks do
#ifdef GPUDIAG_PLAIN
    run(mode);
    std::printf("plain run of %s done\n", mode.c_str());
    return 0;
#else
    if (mode == "overhead") {
        // Launch-bound loop: the worst case for kernel tracing. Before, during and after
        // capture (CUPTI's instrumentation may stay after its kinds are disabled).
        const int launches = 20000;
        launch_loop_seconds(2000);  // warm up
        double before = launch_loop_seconds(launches);
        gpudiag::SessionOptions o;
        o.record_path = record;
        auto s = gpudiag::Session::create(o);
        if (!s) return 3;
        if (!(*s)->start()) return 3;
        double during = launch_loop_seconds(launches);
        (void)(*s)->stop();
        double after = launch_loop_seconds(launches);
        std::printf("OVERHEAD launches=%d before=%.1fns during=%.1fns after=%.1fns per launch "
                    "(+%.1f%% during, +%.1f%% after)\n",
                    launches, before * 1e9 / launches, during * 1e9 / launches, after * 1e9 / launches,
                    100.0 * (during - before) / before, 100.0 * (after - before) / before);
        return 0;
    }
    gpudiag::SessionOptions o;
    o.record_path = record;
    o.nvml_hz = 10;
    auto s = gpudiag::Session::create(o);
    if (!s) {
        std::fprintf(stderr, "Session::create: %s\n", s.status().to_string().c_str());
        return 3;
    }
    gpudiag::Status st = (*s)->start();
    if (!st) {
        std::fprintf(stderr, "start: %s\n", st.to_string().c_str());
        return 3;
    }
    run(mode);
    gpudiag::CaptureStatus cs = (*s)->status();
    (void)(*s)->stop();
    std::printf("STATUS %s level=%s cupti=%u driver=%s events=%llu dropped=%llu\n", mode.c_str(),
                gpudiag::capture_level_name(cs.level), cs.cupti_version, cs.driver_version.c_str(),
                (unsigned long long)cs.events, (unsigned long long)cs.dropped);
    for (const auto& r : cs.reasons) std::printf("  reason: %s\n", r.c_str());
    auto report = (*s)->report();
    if (!report) {
        std::fprintf(stderr, "report: %s\n", report.status().to_string().c_str());
        return 4;
    }
    std::printf("SUMMARY %s:", mode.c_str());
    if (const auto* overview = report->section("overview")) {
        for (const auto& t : overview->tables) {
            if (t.id != "event_counts") continue;
            for (const auto& row : t.rows) {
                std::printf(" %s=%.0f", std::get<std::string>(row[0]).c_str(), std::get<double>(row[1]));
            }
        }
    }
    std::printf("\nFINDINGS %s:", mode.c_str());
    for (const auto& f : report->findings) std::printf(" %s", f.id.c_str());
    std::printf("\n");
    return 0;
#endif
}
