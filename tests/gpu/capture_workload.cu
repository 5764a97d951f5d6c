// SPDX-License-Identifier: Apache-2.0
// GPU workloads for the device check (tests/gpu/device_check.sh). Each mode runs under a gpudiag
// Session that writes a recording, reads the recording back and judges it: the program exits 1
// when the evidence is missing, 77 when there is no CUDA device, 2 when a CUDA call fails.
//
//   capture_workload MODE [--record PATH]
//     memory async vmm kernels copies all   a workload; the recording must hold its events
//     timing     kernels of 2-8 ms, each timed by cudaEvents too: gpudiag's durations within 5 %,
//                timestamps monotonic on the stream and inside the host's launch..sync window
//     overhead   launch-bound loop before, during and after capture (time per launch)
//     early      U1: a session started before CUDA is initialised; does CUDA then say it is?
//     deep       U5: deep mode's allocation call sites: do they find their MEMORY2 records?
//     inflight   U4: pause with a 200 ms kernel in flight; what the flush returned
//     cupti-raw  no gpudiag: CUPTI's own activity buffers of the `all` workload, written raw to
//                PATH for replay on CPU (U2: the first MEMORY2 records of each memory kind)
// Built twice: linked with libgpudiag (the Session API), and with -DGPUDIAG_PLAIN as an unmodified
// program for CUDA_INJECTION64_PATH (modes memory..all).
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#ifndef GPUDIAG_PLAIN
#    include <cupti.h>

#    include <cstddef>
#    include <mutex>

#    include <gpudiag/capture.hpp>
#    include <gpudiag/names.hpp>
#    include <gpudiag/recording.hpp>
#    include <gpudiag/report.hpp>
#    include <gpudiag/session.hpp>
#    include <gpudiag/sink.hpp>
#endif

#define CHECK(expr)                                                                               \
    do {                                                                                          \
        auto rc_ = (expr);                                                                        \
        if (rc_ != 0) {                                                                           \
            std::fprintf(stderr, "%s:%d: %s failed (%d)\n", __FILE__, __LINE__, #expr, (int)rc_); \
            std::exit(2);                                                                         \
        }                                                                                         \
    } while (0)

// The driver API through dlopen: linked with the static CUDA runtime only, the program starts on a
// machine without a driver and says "no device" (the preflight's case) instead of failing to load.
struct Driver {
    decltype(&cuMemGetAllocationGranularity) mem_get_granularity = nullptr;
    decltype(&cuMemAddressReserve) mem_address_reserve = nullptr;
    decltype(&cuMemCreate) mem_create = nullptr;
    decltype(&cuMemMap) mem_map = nullptr;
    decltype(&cuMemSetAccess) mem_set_access = nullptr;
    decltype(&cuMemUnmap) mem_unmap = nullptr;
    decltype(&cuMemRelease) mem_release = nullptr;
    decltype(&cuMemAddressFree) mem_address_free = nullptr;
    decltype(&cuDeviceGetCount) device_get_count = nullptr;
};

static const Driver& driver() {
    static Driver d = [] {
        Driver t;
        void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (h == nullptr) return t;
        auto get = [&](auto& fn, const char* name) {
            fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
        };
        get(t.mem_get_granularity, "cuMemGetAllocationGranularity");
        get(t.mem_address_reserve, "cuMemAddressReserve");
        get(t.mem_create, "cuMemCreate");
        get(t.mem_map, "cuMemMap");
        get(t.mem_set_access, "cuMemSetAccess");
        get(t.mem_unmap, "cuMemUnmap");
        get(t.mem_release, "cuMemRelease");
        get(t.mem_address_free, "cuMemAddressFree");
        get(t.device_get_count, "cuDeviceGetCount");
        return t;
    }();
    return d;
}

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

// What each workload issues, so the recording can be held to it.
struct Issued {
    int device_allocs = 0;
    int kernels = 0;
    int copies = 0;
    int memsets = 0;
};

static void memory_workload(Issued& issued) {
    for (int i = 0; i < 4; ++i) {
        void* p = nullptr;
        CHECK(cudaMalloc(&p, size_t(i + 1) << 22));
        CHECK(cudaFree(p));
    }
    void* kept = nullptr;
    CHECK(cudaMalloc(&kept, 64 << 20));  // never freed: a leak for the analyses to see
    issued.device_allocs += 5;
    void* host = nullptr;
    CHECK(cudaMallocHost(&host, 8 << 20));
    CHECK(cudaFreeHost(host));
    void* managed = nullptr;
    CHECK(cudaMallocManaged(&managed, 4 << 20));
    CHECK(cudaFree(managed));
}

static void async_workload(Issued& issued) {
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    for (int i = 0; i < 3; ++i) {  // first grows the default pool, later calls are pool hits
        void* p = nullptr;
        CHECK(cudaMallocAsync(&p, 32 << 20, s));
        tiny_kernel<<<1, 32, 0, s>>>(static_cast<float*>(p));
        CHECK(cudaFreeAsync(p, s));
    }
    issued.kernels += 3;
    CHECK(cudaStreamSynchronize(s));
    cudaMemPool_t pool;
    CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    CHECK(cudaMemPoolTrimTo(pool, 0));
    CHECK(cudaStreamDestroy(s));
}

// Expandable-segment style: reserve a range, back it chunk by chunk, unmap, release.
static void vmm_workload(Issued& issued) {
    const Driver& d = driver();
    if (d.mem_create == nullptr || d.mem_address_free == nullptr) {
        std::fprintf(stderr, "driver API: libcuda.so.1 or its VMM functions not found\n");
        std::exit(2);
    }
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran = 0;
    CHECK(d.mem_get_granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    const int chunks = 4;
    CUdeviceptr base = 0;
    CHECK(d.mem_address_reserve(&base, 16 * gran, 0, 0, 0));
    std::vector<CUmemGenericAllocationHandle> handles(chunks);
    for (int i = 0; i < chunks; ++i) {
        CHECK(d.mem_create(&handles[i], gran, &prop, 0));
        CHECK(d.mem_map(base + i * gran, gran, 0, handles[i], 0));
    }
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CHECK(d.mem_set_access(base, chunks * gran, &access, 1));
    tiny_kernel<<<1, 32>>>(reinterpret_cast<float*>(base));
    issued.kernels += 1;
    CHECK(cudaDeviceSynchronize());
    CHECK(d.mem_unmap(base, chunks * gran));
    for (auto h : handles) CHECK(d.mem_release(h));
    CHECK(d.mem_address_free(base, 16 * gran));
}

static void kernels_workload(Issued& issued, int tiny) {
    float* data = nullptr;
    const int n = 1 << 20;
    CHECK(cudaMalloc(&data, n * sizeof(float)));
    for (int i = 0; i < tiny; ++i) tiny_kernel<<<1, 32>>>(data);
    for (int i = 0; i < 20; ++i) busy_kernel<<<(n + 255) / 256, 256>>>(data, n, 2000);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaFree(data));
    issued.device_allocs += 1;
    issued.kernels += tiny + 20;
}

static void copies_workload(Issued& issued) {
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
    issued.device_allocs += 1;
    issued.copies += 12;
    issued.memsets += 4;
}

static Issued run(const std::string& mode) {
    Issued issued;
    if (mode == "memory" || mode == "all") memory_workload(issued);
    if (mode == "async" || mode == "all") async_workload(issued);
    if (mode == "vmm" || mode == "all") vmm_workload(issued);
    if (mode == "kernels" || mode == "all") kernels_workload(issued, mode == "all" ? 1000 : 10000);
    if (mode == "copies" || mode == "all") copies_workload(issued);
    return issued;
}

static bool is_workload(const std::string& mode) {
    for (const char* m : {"memory", "async", "vmm", "kernels", "copies", "all"}) {
        if (mode == m) return true;
    }
    return false;
}

// Exits 77 (skipped) without a device, so the check can tell "no GPU" from "broken".
static void require_device() {
    int n = 0;
    cudaError_t rc = cudaGetDeviceCount(&n);
    if (rc != cudaSuccess || n == 0) {
        std::printf("no CUDA device (%s): skipped\n", cudaGetErrorString(rc));
        std::exit(77);
    }
}

#ifndef GPUDIAG_PLAIN
namespace {

int g_failures = 0;

void expect(bool ok, const char* what, double got, double want) {
    std::printf("%s %s: %.6g (want %.6g)\n", ok ? "EVIDENCE ok  " : "EVIDENCE FAIL", what, got,
                want);
    if (!ok) ++g_failures;
}

// Collects a recording's events: counts per kind, and the GPU work for the timing checks.
class Collected final : public gpudiag::EventSink {
public:
    void consume(std::span<const gpudiag::Event> events) override {
        for (const auto& e : events) {
            ++counts[e.kind];
            if (e.end_ns < e.start_ns) ++inverted;
            if (e.kind == gpudiag::EventKind::kKernel) kernels.push_back(e);
            if (e.kind == gpudiag::EventKind::kCounter && e.device == 0) {
                last_counter[e.counter.counter] = e.counter.value;
            }
            if (e.kind == gpudiag::EventKind::kDeviceAlloc && e.memory.site != gpudiag::kNoString) {
                ++sited_allocs;
            }
        }
    }
    void end(const gpudiag::SourceSummary& s) override { summary = s; }

    [[nodiscard]] std::uint64_t count(gpudiag::EventKind k) const {
        auto it = counts.find(k);
        return it == counts.end() ? 0 : it->second;
    }
    std::map<gpudiag::EventKind, std::uint64_t> counts;
    std::vector<gpudiag::Event> kernels;
    std::map<gpudiag::CounterKind, double> last_counter;  // device 0's latest of each
    std::uint64_t inverted = 0;
    std::uint64_t sited_allocs = 0;
    gpudiag::SourceSummary summary;
};

// Reads the recording back (the evidence is what was written, not what the session claims).
bool read_back(const std::string& path, Collected& out, gpudiag::StringTable& strings) {
    auto info = gpudiag::read_recording_info(path);
    if (!info) {
        std::printf("EVIDENCE FAIL recording %s unreadable: %s\n", path.c_str(),
                    info.status().to_string().c_str());
        ++g_failures;
        return false;
    }
    gpudiag::Status st = gpudiag::read_recording(path, out, strings);
    std::printf(
        "RECORDING %s: %llu events, %llu chunks, closed_cleanly=%d truncated=%d dropped=%llu\n",
        path.c_str(), (unsigned long long)info->events, (unsigned long long)info->chunks,
        info->closed_cleanly ? 1 : 0, info->truncated ? 1 : 0,
        (unsigned long long)out.summary.dropped);
    expect(st.is_ok(), "recording read without error", st.is_ok(), 1);
    expect(info->closed_cleanly, "recording closed cleanly", info->closed_cleanly, 1);
    expect(info->events > 0, "events in the recording", double(info->events), 1);
    expect(out.inverted == 0, "events ending before they start", double(out.inverted), 0);
    std::printf("SUMMARY");
    for (const auto& [kind, n] : out.counts) {
        std::printf(" %s=%llu", gpudiag::event_kind_name(kind), (unsigned long long)n);
    }
    std::printf("\n");
    // What NVML said about GPU 0, every reading it gave (the card's health included).
    if (!out.last_counter.empty()) {
        std::printf("NVML GPU 0:");
        for (const auto& [kind, value] : out.last_counter) {
            std::printf(" %s=%.6g", gpudiag::enum_name(kind), value);
        }
        std::printf("\n");
    }
    return st.is_ok();
}

std::unique_ptr<gpudiag::Session> start_session(const std::string& record, double nvml_hz) {
    gpudiag::SessionOptions o;
    o.record_path = record;
    o.nvml_hz = nvml_hz;
    auto s = gpudiag::Session::create(o);
    if (!s) {
        std::fprintf(stderr, "Session::create: %s\n", s.status().to_string().c_str());
        std::exit(3);
    }
    if (gpudiag::Status st = (*s)->start(); !st) {
        std::fprintf(stderr, "start: %s\n", st.to_string().c_str());
        std::exit(3);
    }
    return std::move(*s);
}

void print_status(const char* mode, const gpudiag::CaptureStatus& cs) {
    std::printf("STATUS %s level=%s cupti=%u (%s) driver=%s events=%llu dropped=%llu paused=%d\n",
                mode, gpudiag::capture_level_name(cs.level), cs.cupti_version,
                cs.cupti_library.c_str(), cs.driver_version.c_str(), (unsigned long long)cs.events,
                (unsigned long long)cs.dropped, cs.paused ? 1 : 0);
    for (const auto& r : cs.reasons) std::printf("  reason: %s\n", r.c_str());
}

// Stops the session and prints its status, report summary and findings.
void stop_and_report(const std::string& mode, gpudiag::Session& s) {
    gpudiag::CaptureStatus cs = s.status();
    (void)s.stop();
    print_status(mode.c_str(), cs);
    expect(cs.level >= gpudiag::CaptureLevel::kCuptiActivity, "capture level >= cupti_activity",
           double(int(cs.level)), double(int(gpudiag::CaptureLevel::kCuptiActivity)));
    expect(cs.events > 0, "events delivered", double(cs.events), 1);
    auto report = s.report();
    if (!report) {
        std::printf("EVIDENCE FAIL report: %s\n", report.status().to_string().c_str());
        ++g_failures;
        return;
    }
    std::printf("FINDINGS %s:", mode.c_str());
    for (const auto& f : report->findings) std::printf(" %s", f.id.c_str());
    std::printf("\n");
}

int workload_mode(const std::string& mode, const std::string& record) {
    auto s = start_session(record, 10);
    Issued issued = run(mode);
    stop_and_report(mode, *s);
    Collected c;
    gpudiag::StringTable strings;
    if (!read_back(record, c, strings)) return 1;
    using K = gpudiag::EventKind;
    expect(c.count(K::kDeviceAlloc) >= std::uint64_t(issued.device_allocs), "device allocations",
           double(c.count(K::kDeviceAlloc)), issued.device_allocs);
    expect(c.count(K::kKernel) >= std::uint64_t(issued.kernels), "kernels",
           double(c.count(K::kKernel)), issued.kernels);
    expect(c.count(K::kMemcpy) >= std::uint64_t(issued.copies), "copies",
           double(c.count(K::kMemcpy)), issued.copies);
    expect(c.count(K::kMemset) >= std::uint64_t(issued.memsets), "memsets",
           double(c.count(K::kMemset)), issued.memsets);
    return 0;
}

// ---- timing: gpudiag's kernel durations against cudaEvents around the same kernels ----------
struct Timed {
    float event_ms = 0;
};

float time_busy(float* data, int n, int iterations, cudaStream_t s) {
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    CHECK(cudaEventRecord(a, s));
    busy_kernel<<<(n + 255) / 256, 256, 0, s>>>(data, n, iterations);
    CHECK(cudaEventRecord(b, s));
    CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    CHECK(cudaEventDestroy(a));
    CHECK(cudaEventDestroy(b));
    return ms;
}

void check_kernel_times(const std::vector<gpudiag::Event>& busy, const std::vector<float>& event_ms,
                        std::uint64_t host_before, std::uint64_t host_after) {
    expect(busy.size() == event_ms.size(), "busy kernels recorded", double(busy.size()),
           double(event_ms.size()));
    if (busy.size() != event_ms.size() || busy.empty()) return;
    double worst = 0;
    std::uint64_t backwards = 0;
    for (size_t i = 0; i < busy.size(); ++i) {
        double got_ms = double(busy[i].duration_ns()) / 1e6;
        double rel = std::fabs(got_ms - event_ms[i]) / event_ms[i];
        worst = std::max(worst, rel);
        std::printf("TIMING kernel %zu: gpudiag %.4f ms, cudaEvent %.4f ms (%+.2f %%)\n", i, got_ms,
                    event_ms[i], 100.0 * (got_ms - event_ms[i]) / event_ms[i]);
        if (i > 0 && busy[i].start_ns < busy[i - 1].end_ns) ++backwards;
    }
    expect(worst <= 0.05, "worst relative difference to cudaEvent", worst, 0.05);
    expect(backwards == 0, "kernels overlapping their predecessor on one stream", double(backwards),
           0);
    // The mapping of CUPTI time to the host clock: every kernel lies between the host's first
    // launch and its synchronisation (1 ms of slack for the mapping's own error).
    const double slack_ns = 1e6;
    double lead_us = (double(busy.front().start_ns) - double(host_before)) / 1e3;
    double tail_us = (double(host_after) - double(busy.back().end_ns)) / 1e3;
    std::printf(
        "HOSTCLOCK first kernel starts %.1f us after the first launch; last ends %.1f us "
        "before the sync returned\n",
        lead_us, tail_us);
    expect(lead_us * 1e3 >= -slack_ns, "first kernel start - host launch time (us)", lead_us, 0);
    expect(tail_us * 1e3 >= -slack_ns, "host sync time - last kernel end (us)", tail_us, 0);
}

int timing_mode(const std::string& record) {
    const int n = 1 << 22;
    float* data = nullptr;
    CHECK(cudaMalloc(&data, n * sizeof(float)));
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    // Calibrate outside the session: iterations for about 2 ms on this GPU.
    time_busy(data, n, 1000, s);
    float probe_ms = time_busy(data, n, 20000, s);
    int per_2ms = std::max(1000, int(20000 * 2.0 / std::max(probe_ms, 0.01f)));
    std::printf("calibration: 20000 iterations took %.3f ms; %d for 2 ms\n", probe_ms, per_2ms);

    auto session = start_session(record, 0);
    std::vector<float> event_ms;
    std::uint64_t host_before = gpudiag::Session::now_ns();
    for (int rep = 0; rep < 3; ++rep) {
        for (int scale : {1, 2, 4}) event_ms.push_back(time_busy(data, n, per_2ms * scale, s));
    }
    CHECK(cudaStreamSynchronize(s));
    std::uint64_t host_after = gpudiag::Session::now_ns();
    stop_and_report("timing", *session);
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(data));

    Collected c;
    gpudiag::StringTable strings;
    if (!read_back(record, c, strings)) return 1;
    std::vector<gpudiag::Event> busy;
    for (const auto& k : c.kernels) {
        if (strings.lookup(k.kernel.name).find("busy_kernel") != std::string_view::npos)
            busy.push_back(k);
    }
    std::sort(busy.begin(), busy.end(),
              [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
    check_kernel_times(busy, event_ms, host_before, host_after);
    return 0;
}

// ---- overhead: a launch-bound loop, the worst case for kernel tracing ------------------------
double launch_loop_seconds(int launches) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < launches; ++i) tiny_kernel<<<1, 32>>>(nullptr);
    CHECK(cudaDeviceSynchronize());
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int overhead_mode(const std::string& record) {
    const int launches = 20000;
    launch_loop_seconds(2000);  // warm up
    double before = launch_loop_seconds(launches);
    auto s = start_session(record, 0);
    double during = launch_loop_seconds(launches);
    stop_and_report("overhead", *s);
    // After: CUPTI's instrumentation may stay in the process once its kinds are disabled.
    double after = launch_loop_seconds(launches);
    std::printf(
        "OVERHEAD launches=%d before=%.1fns during=%.1fns after=%.1fns per launch "
        "(+%.1f%% during, +%.1f%% after)\n",
        launches, before * 1e9 / launches, during * 1e9 / launches, after * 1e9 / launches,
        100.0 * (during - before) / before, 100.0 * (after - before) / before);
    Collected c;
    gpudiag::StringTable strings;
    if (!read_back(record, c, strings)) return 1;
    expect(c.count(gpudiag::EventKind::kKernel) >= std::uint64_t(launches), "kernels of the loop",
           double(c.count(gpudiag::EventKind::kKernel)), launches);
    return 0;
}

// ---- U1: does a session started before CUDA initialises CUDA itself? ---------------------------
int early_mode(const std::string& record) {
    auto s = start_session(record, 0);
    int count = -1;
    // dlopen does not initialise CUDA; only cuInit (by gpudiag or CUPTI, if anyone) would.
    CUresult rc = driver().device_get_count != nullptr ? driver().device_get_count(&count)
                                                       : CUDA_ERROR_NO_DEVICE;
    std::printf(
        "U1 cuDeviceGetCount right after start(), before any CUDA use: rc=%d count=%d "
        "(%s)\n",
        int(rc), count,
        rc == CUDA_ERROR_NOT_INITIALIZED ? "CUDA not initialised by gpudiag: fork-safe"
        : rc == CUDA_SUCCESS             ? "CUDA was initialised by the session"
                                         : "no driver to ask");
    require_device();  // now the program's own first CUDA use
    Issued issued;
    kernels_workload(issued, 100);
    stop_and_report("early", *s);
    Collected c;
    gpudiag::StringTable strings;
    if (!read_back(record, c, strings)) return 1;
    expect(c.count(gpudiag::EventKind::kKernel) >= std::uint64_t(issued.kernels),
           "kernels of a program that initialised CUDA after start()",
           double(c.count(gpudiag::EventKind::kKernel)), issued.kernels);
    return 0;
}

// ---- U5: in deep mode, do the allocation call sites find their MEMORY2 records? ---------------
int deep_mode(const std::string& record) {
    gpudiag::SessionOptions o;
    o.record_path = record;
    o.deep = true;
    o.nvml_hz = 0;
    auto created = gpudiag::Session::create(o);
    if (!created || !(*created)->start()) return 3;
    auto& s = **created;
    Issued issued;
    memory_workload(issued);
    bool deep = s.status().level == gpudiag::CaptureLevel::kCuptiDeep;
    stop_and_report("deep", s);
    Collected c;
    gpudiag::StringTable strings;
    if (!read_back(record, c, strings)) return 1;
    std::printf("U5 deep mode %s; device allocations with a call site: %llu of %llu\n",
                deep ? "on" : "refused (subscriber taken?)", (unsigned long long)c.sited_allocs,
                (unsigned long long)c.count(gpudiag::EventKind::kDeviceAlloc));
    expect(c.count(gpudiag::EventKind::kDeviceAlloc) >= std::uint64_t(issued.device_allocs),
           "device allocations", double(c.count(gpudiag::EventKind::kDeviceAlloc)),
           issued.device_allocs);
    return 0;
}

// ---- U4: pause (a forced flush) with a long kernel still running -------------------------------
int inflight_mode(const std::string& record) {
    const int n = 1 << 22;
    float* data = nullptr;
    CHECK(cudaMalloc(&data, n * sizeof(float)));
    float probe_ms = time_busy(data, n, 20000, nullptr);
    int iterations = std::max(1000, int(20000 * 200.0 / std::max(probe_ms, 0.01f)));
    auto s = start_session(record, 0);
    busy_kernel<<<(n + 255) / 256, 256>>>(data, n, iterations);  // about 200 ms
    auto t0 = std::chrono::steady_clock::now();
    gpudiag::Status paused = s->pause_capture("u4: kernel in flight");
    double pause_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    cudaError_t running = cudaStreamQuery(nullptr);
    CHECK(cudaDeviceSynchronize());
    gpudiag::Status resumed = s->resume_capture();
    busy_kernel<<<(n + 255) / 256, 256>>>(data, n, 1000);
    CHECK(cudaDeviceSynchronize());
    std::printf(
        "U4 pause with a ~200 ms kernel in flight: pause %s in %.1f ms, kernel still "
        "running after it: %s; resume %s\n",
        paused.to_string().c_str(), pause_ms, running == cudaErrorNotReady ? "yes" : "no",
        resumed.to_string().c_str());
    stop_and_report("inflight", *s);
    CHECK(cudaFree(data));
    Collected c;
    gpudiag::StringTable strings;
    if (!read_back(record, c, strings)) return 1;
    std::uint64_t untimed = 0;
    for (const auto& k : c.kernels) untimed += k.start_ns == 0 || k.end_ns <= k.start_ns;
    std::printf("U4 kernels recorded: %zu (2 launched), without timing: %llu\n", c.kernels.size(),
                (unsigned long long)untimed);
    expect(!c.kernels.empty(), "kernels recorded around the pause", double(c.kernels.size()), 1);
    return 0;
}

// ---- cupti-raw: CUPTI's buffers as CUPTI wrote them, for replay on CPU ------------------------
// File: "GPUDIAG_CUPTI_RAW 1 cupti_version=N\n", then per completed buffer the tag "BUF\0", the
// stream id (u32), the valid size (u64) and the bytes; then "STR\0", a count (u64) and, per
// string a record pointed to, (buffer index u64, byte offset of the pointer u64, length u32,
// bytes): the replay points those fields at its own copies.
struct RawCupti {
    decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
    decltype(&cuptiActivityEnable) enable = nullptr;
    decltype(&cuptiActivityFlushAll) flush_all = nullptr;
    decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
    decltype(&cuptiGetVersion) get_version = nullptr;
};
RawCupti g_raw;
std::mutex g_raw_mutex;
FILE* g_raw_file = nullptr;
std::uint64_t g_raw_buffers = 0;
std::map<int, int> g_raw_kinds;
std::map<int, int> g_memory2_shown;
struct RawString {
    std::uint64_t buffer, offset;
    std::string text;
};
std::vector<RawString> g_raw_strings;

void raw_string(std::uint64_t offset, const char* text) {
    if (text != nullptr) g_raw_strings.push_back({g_raw_buffers, offset, text});
}

void show_memory2(const CUpti_ActivityMemory4& m) {
    if (g_memory2_shown[m.memoryKind]++ >= 3) return;
    std::printf(
        "U2 MEMORY2 op=%d memoryKind=%d device=%u address=0x%llx bytes=%llu async=%u "
        "poolType=%d correlation=%u\n",
        int(m.memoryOperationType), int(m.memoryKind), m.deviceId, (unsigned long long)m.address,
        (unsigned long long)m.bytes, m.isAsync, int(m.memoryPoolConfig.memoryPoolType),
        m.correlationId);
}

void note_record(const uint8_t* buffer, const CUpti_Activity* r) {
    ++g_raw_kinds[r->kind];
    auto at = std::uint64_t(reinterpret_cast<const uint8_t*>(r) - buffer);
    if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || r->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
        raw_string(at + offsetof(CUpti_ActivityKernel10, name),
                   reinterpret_cast<const CUpti_ActivityKernel10*>(r)->name);
    } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMORY2) {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemory4*>(r);
        raw_string(at + offsetof(CUpti_ActivityMemory4, name), m->name);
        raw_string(at + offsetof(CUpti_ActivityMemory4, source), m->source);
        show_memory2(*m);
    }
}

void CUPTIAPI raw_request(uint8_t** buffer, size_t* size, size_t* max_records) {
    *size = size_t(8) << 20;
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
    *max_records = 0;
}

void CUPTIAPI raw_complete(CUcontext, uint32_t stream, uint8_t* buffer, size_t, size_t valid) {
    std::lock_guard<std::mutex> lock(g_raw_mutex);
    std::uint64_t bytes = valid;
    std::fwrite("BUF", 1, 4, g_raw_file);
    std::fwrite(&stream, sizeof stream, 1, g_raw_file);
    std::fwrite(&bytes, sizeof bytes, 1, g_raw_file);
    std::fwrite(buffer, 1, valid, g_raw_file);
    CUpti_Activity* r = nullptr;
    while (g_raw.next_record(buffer, valid, &r) == CUPTI_SUCCESS) note_record(buffer, r);
    ++g_raw_buffers;
    std::free(buffer);
}

bool load_raw_cupti() {
    const char* path = std::getenv("GPUDIAG_CUPTI_PATH");
    void* h =
        dlopen(path != nullptr && *path != 0 ? path : "libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
        std::printf("cupti-raw: cannot load libcupti (%s); set GPUDIAG_CUPTI_PATH\n", dlerror());
        return false;
    }
    auto get = [&](auto& fn, const char* name) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
        return fn != nullptr;
    };
    return get(g_raw.register_callbacks, "cuptiActivityRegisterCallbacks") &&
           get(g_raw.enable, "cuptiActivityEnable") &&
           get(g_raw.flush_all, "cuptiActivityFlushAll") &&
           get(g_raw.next_record, "cuptiActivityGetNextRecord") &&
           get(g_raw.get_version, "cuptiGetVersion");
}

int cupti_raw_mode(const std::string& path) {
    if (!load_raw_cupti()) return 1;
    g_raw_file = std::fopen(path.c_str(), "wb");
    if (g_raw_file == nullptr) return 1;
    uint32_t version = 0;
    g_raw.get_version(&version);
    std::fprintf(g_raw_file, "GPUDIAG_CUPTI_RAW 1 cupti_version=%u\n", version);
    CHECK(g_raw.register_callbacks(raw_request, raw_complete));
    for (CUpti_ActivityKind k :
         {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
          CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_MEMORY2, CUPTI_ACTIVITY_KIND_MEMORY_POOL,
          CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, CUPTI_ACTIVITY_KIND_RUNTIME,
          CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_ACTIVITY_KIND_OVERHEAD}) {
        CUptiResult rc = g_raw.enable(k);
        if (rc != CUPTI_SUCCESS)
            std::printf("cupti-raw: enabling kind %d: error %d\n", int(k), int(rc));
    }
    run("all");
    CHECK(cudaDeviceSynchronize());
    CHECK(g_raw.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    std::lock_guard<std::mutex> lock(g_raw_mutex);
    std::uint64_t count = g_raw_strings.size();
    std::fwrite("STR", 1, 4, g_raw_file);
    std::fwrite(&count, sizeof count, 1, g_raw_file);
    for (const auto& s : g_raw_strings) {
        auto len = std::uint32_t(s.text.size());
        std::fwrite(&s.buffer, sizeof s.buffer, 1, g_raw_file);
        std::fwrite(&s.offset, sizeof s.offset, 1, g_raw_file);
        std::fwrite(&len, sizeof len, 1, g_raw_file);
        std::fwrite(s.text.data(), 1, len, g_raw_file);
    }
    std::fclose(g_raw_file);
    std::printf("CUPTIRAW cupti_version=%u buffers=%llu strings=%llu records:", version,
                (unsigned long long)g_raw_buffers, (unsigned long long)count);
    for (const auto& [kind, n] : g_raw_kinds) std::printf(" kind%d=%d", kind, n);
    std::printf("\n");
    expect(g_raw_kinds[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL] > 0, "raw kernel records",
           g_raw_kinds[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL], 1);
    return 0;
}

}  // namespace
#endif  // GPUDIAG_PLAIN

int main(int argc, char** argv) {
    std::string mode = argc > 1 ? argv[1] : "all";
    std::string record;
    for (int i = 2; i + 1 < argc; ++i) {
        if (std::strcmp(argv[i], "--record") == 0) record = argv[i + 1];
    }
    bool known = is_workload(mode);
#ifndef GPUDIAG_PLAIN
    for (const char* m : {"timing", "overhead", "early", "deep", "inflight", "cupti-raw"})
        known |= mode == m;
#endif
    if (!known) {
        std::fprintf(stderr, "unknown mode '%s'\n", mode.c_str());
        return 64;
    }
#ifdef GPUDIAG_PLAIN
    require_device();
    CHECK(cudaFree(nullptr));
    run(mode);
    std::printf("plain run of %s done\n", mode.c_str());
    return 0;
#else
    if (record.empty()) {
        std::fprintf(stderr, "%s needs --record PATH\n", mode.c_str());
        return 64;
    }
    if (mode == "early") return early_mode(record) != 0 || g_failures != 0 ? 1 : 0;
    require_device();
    CHECK(cudaFree(nullptr));  // create the context before capture, as frameworks do
    int rc = 0;
    if (mode == "timing")
        rc = timing_mode(record);
    else if (mode == "overhead")
        rc = overhead_mode(record);
    else if (mode == "inflight")
        rc = inflight_mode(record);
    else if (mode == "deep")
        rc = deep_mode(record);
    else if (mode == "cupti-raw")
        rc = cupti_raw_mode(record);
    else
        rc = workload_mode(mode, record);
    std::printf("%s: %d evidence failures\n", mode.c_str(), g_failures);
    return rc != 0 || g_failures != 0 ? 1 : 0;
#endif
}
