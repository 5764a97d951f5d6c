// SPDX-License-Identifier: Apache-2.0
// A stand-in libnvidia-ml for tests: two GPUs with canned, settable health values.
// Built a second time with GPUDIAG_STUB_NVML_OLD_NAMES: then it exports only the first name of
// each call gpudiag uses (nvmlInit, nvmlDeviceGetCount, nvmlDeviceGetMemoryInfo with v1's
// struct, ...ClocksThrottleReasons, nvmlDeviceGetTemperature, nvmlDeviceGetComputeRunningProcesses
// with v1's struct) and no nvmlDeviceGetEnforcedPowerLimit, and says it is driver 535: more is
// hidden than R535 lacks, so that every fallback and one loss are exercised.
#ifndef GPUDIAG_STUB_NVML_OLD_NAMES
#    define GPUDIAG_STUB_NVML_OLD_NAMES 0
#endif
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct ProcessInfo {  // nvmlProcessInfo_t
    unsigned pid;
    unsigned long long used_gpu_memory;
    unsigned gpu_instance_id;
    unsigned compute_instance_id;
};

struct Gpu {
    unsigned util = 90;
    unsigned mem_util = 40;
    unsigned long long total = 80ULL << 30;
    unsigned long long used = 20ULL << 30;
    unsigned sm_clock = 1980;
    unsigned sm_clock_max = 1980;
    unsigned long long reasons = 0;
    int temperature = 60;
    unsigned power_mw = 400000;
    unsigned limit_mw = 700000;
    unsigned long long ecc_corrected = 0;
    unsigned long long ecc_uncorrected = 0;
    std::vector<ProcessInfo> processes;
    unsigned pcie[5] = {5, 5, 16, 16, 0};  // generation, its maximum, width, its maximum, replays
    unsigned pages[3] = {0, 0, 0};         // retired single-bit, double-bit, pending
    unsigned rows[4] = {0, 0, 0, 0};       // remapped correctable, uncorrectable, pending, failed
    std::vector<unsigned long long> xids;  // Xid events waiting in the event set
    bool registered = false;               // for Xid events
    unsigned nvlinks = 0;                  // links up (0: no NVLink, as on PCIe boards)
    unsigned long long nvlink_errors[4] = {0, 0, 0, 0};  // replay, recovery, CRC flit, CRC data
    bool gpm = false;                     // a Hopper: GPM metrics (GPU 0 only, by default)
    double gpm_values[4] = {0, 0, 0, 0};  // SM active, SM occupancy, tensor, DRAM (percent)
    int fan = -1;                         // percent; -1: no fan (NOT_SUPPORTED), as on an H200
    std::vector<std::pair<unsigned, unsigned>> sm;  // PID -> its share of the SMs (percent)
};

// A GPM sample: the metrics as they were when it was taken (the stub's window averages are the
// values in force at the window's end).
struct GpmSample {
    double values[4];
    int gpu;
};

struct State {
    State() {
        gpus[0].gpm = true;
        gpus[1].fan = 55;
    }
    std::mutex mutex;
    Gpu gpus[2];
    int init_calls = 0;
    int gpm_samples_live = 0;           // allocated and not yet freed
    unsigned long long util_clock = 0;  // process-utilization timestamps (µs)
};

State& st() {
    static State s;
    return s;
}

// GPU 0 is split into MIG instances; CUDA_VISIBLE_DEVICES=MIG-... shows the one below. Its
// handle answers what NVML answers for an instance (memory, processes, GPM, ids); every other
// call made with it is counted (the card's readings must go through the GPU's handle).
constexpr uintptr_t kMigHandle = 0x100;
constexpr const char* kMigUuid = "MIG-11111111-2222-4333-8444-555555555555";
std::atomic<int> card_calls_on_mig{0};

bool is_mig(void* device) {
    return reinterpret_cast<uintptr_t>(device) == kMigHandle;
}

int index_of(void* device) {
    if (is_mig(device)) {
        ++card_calls_on_mig;
        return 0;
    }
    return static_cast<int>(reinterpret_cast<uintptr_t>(device)) - 1;
}

}  // namespace

extern "C" {

#if GPUDIAG_STUB_NVML_OLD_NAMES
#    define STUB_NEW_NAME(name, old) old
#else
#    define STUB_NEW_NAME(name, old) name
#endif

int STUB_NEW_NAME(nvmlInit_v2, nvmlInit)() {
    ++st().init_calls;
    return 0;
}
int nvmlShutdown() {
    return 0;
}
const char* nvmlErrorString(int) {
    return "NVML stub error";
}
int nvmlSystemGetDriverVersion(char* out, unsigned len) {
    std::strncpy(out, GPUDIAG_STUB_NVML_OLD_NAMES ? "535.104.05" : "580.65.06", len);
    return 0;
}
int STUB_NEW_NAME(nvmlDeviceGetCount_v2, nvmlDeviceGetCount)(unsigned* count) {
    *count = 2;
    return 0;
}
int STUB_NEW_NAME(nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetHandleByIndex)(unsigned index,
                                                                             void** device) {
    if (index >= 2) return 2;
    *device = reinterpret_cast<void*>(static_cast<uintptr_t>(index + 1));
    return 0;
}
int nvmlDeviceGetHandleByUUID(const char* uuid, void** device) {
    std::string u(uuid);
    if (u == "GPU-00000000-0000-0000-0000-000000000000") {
        *device = reinterpret_cast<void*>(uintptr_t{1});
        return 0;
    }
    if (u == "GPU-01010101-0101-0101-0101-010101010101") {
        *device = reinterpret_cast<void*>(uintptr_t{2});
        return 0;
    }
    if (u == kMigUuid) {
        *device = reinterpret_cast<void*>(kMigHandle);
        return 0;
    }
    return 6;  // NVML_ERROR_NOT_FOUND
}
int nvmlDeviceGetUUID(void* device, char* out, unsigned len) {
    if (is_mig(device)) {
        std::strncpy(out, kMigUuid, len);
        return 0;
    }
    std::strncpy(out,
                 index_of(device) == 0 ? "GPU-00000000-0000-0000-0000-000000000000"
                                       : "GPU-01010101-0101-0101-0101-010101010101",
                 len);
    return 0;
}
int nvmlDeviceGetName(void*, char* out, unsigned len) {
    std::strncpy(out, "NVIDIA H200 (stub)", len);
    return 0;
}
int nvmlDeviceGetUtilizationRates(void* device, unsigned* util) {
    if (is_mig(device)) return 3;  // NVML: not supported on a MIG instance
    std::lock_guard<std::mutex> lock(st().mutex);
    util[0] = st().gpus[index_of(device)].util;
    util[1] = st().gpus[index_of(device)].mem_util;
    return 0;
}
#if GPUDIAG_STUB_NVML_OLD_NAMES
int nvmlDeviceGetMemoryInfo(void* device, unsigned long long* mem) {  // nvmlMemory_t
    std::lock_guard<std::mutex> lock(st().mutex);
    const Gpu& g = st().gpus[index_of(device)];
    unsigned long long reserved = 1ULL << 29;  // v1's used includes the reservation
    mem[0] = g.total;
    mem[1] = g.total - g.used - reserved;
    mem[2] = g.used + reserved;
    return 0;
}
#else
int nvmlDeviceGetMemoryInfo_v2(void* device, unsigned* mem) {
    if (mem[0] != (40u | (2u << 24))) return 2;  // wrong struct version
    if (is_mig(device)) {  // the instance's own memory: 18 GiB, 4 GiB of it used
        unsigned long long values[4] = {18ULL << 30, 0, 14ULL << 30, 4ULL << 30};
        std::memcpy(mem + 2, values, sizeof values);
        return 0;
    }
    std::lock_guard<std::mutex> lock(st().mutex);
    const Gpu& g = st().gpus[index_of(device)];
    unsigned long long values[4] = {g.total, 1ULL << 29, g.total - g.used, g.used};
    std::memcpy(mem + 2, values, sizeof values);  // after version + padding
    return 0;
}
#endif
int nvmlDeviceGetClockInfo(void* device, unsigned type, unsigned* mhz) {
    if (type != 1) return 3;
    std::lock_guard<std::mutex> lock(st().mutex);
    *mhz = st().gpus[index_of(device)].sm_clock;
    return 0;
}
int nvmlDeviceGetMaxClockInfo(void* device, unsigned type, unsigned* mhz) {
    if (type != 1) return 3;
    std::lock_guard<std::mutex> lock(st().mutex);
    *mhz = st().gpus[index_of(device)].sm_clock_max;
    return 0;
}
int STUB_NEW_NAME(nvmlDeviceGetCurrentClocksEventReasons,
                  nvmlDeviceGetCurrentClocksThrottleReasons)(void* device,
                                                             unsigned long long* reasons) {
    std::lock_guard<std::mutex> lock(st().mutex);
    *reasons = st().gpus[index_of(device)].reasons;
    return 0;
}
#if GPUDIAG_STUB_NVML_OLD_NAMES
int nvmlDeviceGetTemperature(void* device, unsigned sensor, unsigned* celsius) {
    if (sensor != 0) return 2;
    std::lock_guard<std::mutex> lock(st().mutex);
    *celsius = static_cast<unsigned>(st().gpus[index_of(device)].temperature);
    return 0;
}
#else
int nvmlDeviceGetTemperatureV(void* device, unsigned* temp) {
    if (temp[0] != (12u | (1u << 24)) || temp[1] != 0) return 2;
    std::lock_guard<std::mutex> lock(st().mutex);
    int t = st().gpus[index_of(device)].temperature;
    std::memcpy(temp + 2, &t, sizeof t);
    return 0;
}
#endif
int nvmlDeviceGetPowerUsage(void* device, unsigned* mw) {
    std::lock_guard<std::mutex> lock(st().mutex);
    *mw = st().gpus[index_of(device)].power_mw;
    return 0;
}
#if !GPUDIAG_STUB_NVML_OLD_NAMES
int nvmlDeviceGetEnforcedPowerLimit(void* device, unsigned* mw) {
    std::lock_guard<std::mutex> lock(st().mutex);
    *mw = st().gpus[index_of(device)].limit_mw;
    return 0;
}
#endif
int nvmlDeviceGetTotalEccErrors(void* device, unsigned type, unsigned counter,
                                unsigned long long* n) {
    if (counter != 0) return 2;  // the sampler reads volatile counts
    std::lock_guard<std::mutex> lock(st().mutex);
    const Gpu& g = st().gpus[index_of(device)];
    *n = type == 0 ? g.ecc_corrected : g.ecc_uncorrected;
    return 0;
}
#if GPUDIAG_STUB_NVML_OLD_NAMES
struct ProcessInfoV1 {  // nvmlProcessInfo_v1_t
    unsigned pid;
    unsigned long long used_gpu_memory;
};
int nvmlDeviceGetComputeRunningProcesses(void* device, unsigned* count, ProcessInfoV1* out) {
#else
int nvmlDeviceGetComputeRunningProcesses_v3(void* device, unsigned* count, ProcessInfo* out) {
#endif
    std::lock_guard<std::mutex> lock(st().mutex);
    static const std::vector<ProcessInfo> in_instance = {
        {static_cast<unsigned>(getpid()), 3ULL << 30, 3, 0}};
    const auto& procs = is_mig(device) ? in_instance : st().gpus[index_of(device)].processes;
    if (*count < procs.size() || out == nullptr) {
        *count = static_cast<unsigned>(procs.size());
        return procs.empty() ? 0 : 7;  // NVML_ERROR_INSUFFICIENT_SIZE
    }
    for (size_t i = 0; i < procs.size(); ++i) {
#if GPUDIAG_STUB_NVML_OLD_NAMES
        out[i] = {procs[i].pid, procs[i].used_gpu_memory};
#else
        out[i] = procs[i];
#endif
    }
    *count = static_cast<unsigned>(procs.size());
    return 0;
}

struct PciInfo {  // nvmlPciInfo_t (v2/v3)
    char bus_id_legacy[16];
    unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
    char bus_id[32];
};
int nvmlDeviceGetPciInfo_v3(void* device, PciInfo* out) {
    std::memset(out, 0, sizeof *out);
    const unsigned bus = index_of(device) == 0 ? 0x18 : 0x2a;
    std::snprintf(out->bus_id, sizeof out->bus_id, "00000000:%02X:00.0", bus);
    out->bus = bus;
    return 0;
}

// ------------------------------------------------------------------ card health
#if !GPUDIAG_STUB_NVML_OLD_NAMES
namespace {
int pcie_value(void* device, int which, unsigned* out) {
    std::lock_guard<std::mutex> lock(st().mutex);
    *out = st().gpus[index_of(device)].pcie[which];
    return 0;
}
}  // namespace
int nvmlDeviceGetCurrPcieLinkGeneration(void* device, unsigned* v) {
    return pcie_value(device, 0, v);
}
int nvmlDeviceGetMaxPcieLinkGeneration(void* device, unsigned* v) {
    return pcie_value(device, 1, v);
}
int nvmlDeviceGetCurrPcieLinkWidth(void* device, unsigned* v) {
    return pcie_value(device, 2, v);
}
int nvmlDeviceGetMaxPcieLinkWidth(void* device, unsigned* v) {
    return pcie_value(device, 3, v);
}
int nvmlDeviceGetPcieReplayCounter(void* device, unsigned* v) {
    return pcie_value(device, 4, v);
}
// Like NVML: a count without room for addresses is INSUFFICIENT_SIZE when there are pages.
int nvmlDeviceGetRetiredPages(void* device, unsigned cause, unsigned* count, unsigned long long*) {
    std::lock_guard<std::mutex> lock(st().mutex);
    const unsigned n = st().gpus[index_of(device)].pages[cause == 0 ? 0 : 1];
    const bool room = *count >= n;
    *count = n;
    return room ? 0 : 7;
}
int nvmlDeviceGetRetiredPagesPendingStatus(void* device, int* pending) {
    std::lock_guard<std::mutex> lock(st().mutex);
    *pending = static_cast<int>(st().gpus[index_of(device)].pages[2]);
    return 0;
}
int nvmlDeviceGetRemappedRows(void* device, unsigned* corrected, unsigned* uncorrected,
                              unsigned* pending, unsigned* failed) {
    std::lock_guard<std::mutex> lock(st().mutex);
    const unsigned* r = st().gpus[index_of(device)].rows;
    *corrected = r[0];
    *uncorrected = r[1];
    *pending = r[2];
    *failed = r[3];
    return 0;
}
// Links 0..nvlinks-1 are up; past them NVML says the link does not exist.
int nvmlDeviceGetNvLinkState(void* device, unsigned link, int* active) {
    std::lock_guard<std::mutex> lock(st().mutex);
    const Gpu& g = st().gpus[index_of(device)];
    if (g.nvlinks == 0 || link >= g.nvlinks) return 3;  // NVML_ERROR_NOT_SUPPORTED
    *active = 1;
    return 0;
}
int nvmlDeviceGetNvLinkErrorCounter(void* device, unsigned link, unsigned counter,
                                    unsigned long long* value) {
    std::lock_guard<std::mutex> lock(st().mutex);
    const Gpu& g = st().gpus[index_of(device)];
    if (link >= g.nvlinks || counter > 3) return 3;
    *value = link == 0 ? g.nvlink_errors[counter] : 0;  // all on link 0
    return 0;
}
#endif
int nvmlDeviceGetPowerManagementDefaultLimit(void*, unsigned* mw) {
    *mw = 700000;
    return 0;
}
int nvmlDeviceGetPersistenceMode(void*, int* mode) {
    *mode = 1;
    return 0;
}
int nvmlDeviceGetMigMode(void*, unsigned* current, unsigned* pending) {
    *current = *pending = 0;
    return 0;
}
int nvmlEventSetCreate(void** set) {
    *set = reinterpret_cast<void*>(0x5e7);
    return 0;
}
int nvmlDeviceRegisterEvents(void* device, unsigned long long types, void*) {
    std::lock_guard<std::mutex> lock(st().mutex);
    st().gpus[index_of(device)].registered = (types & 0x8) != 0;
    return 0;
}
struct EventData {  // nvmlEventData_t
    void* device;
    unsigned long long type;
    unsigned long long data;
    unsigned gpu_instance;
    unsigned compute_instance;
};
int STUB_NEW_NAME(nvmlEventSetWait_v2, nvmlEventSetWait)(void*, EventData* out, unsigned) {
    std::lock_guard<std::mutex> lock(st().mutex);
    for (int i = 0; i < 2; ++i) {
        Gpu& g = st().gpus[i];
        if (!g.registered || g.xids.empty()) continue;
        out->device = reinterpret_cast<void*>(static_cast<uintptr_t>(i + 1));
        out->type = 0x8;
        out->data = g.xids.front();
        out->gpu_instance = out->compute_instance = 0xFFFFFFFFu;
        g.xids.erase(g.xids.begin());
        return 0;
    }
    return 10;  // NVML_ERROR_TIMEOUT
}
int nvmlEventSetFree(void*) {
    return 0;
}

int nvmlDeviceGetFanSpeed(void* device, unsigned* speed) {
    std::lock_guard<std::mutex> lock(st().mutex);
    const int fan = st().gpus[index_of(device)].fan;
    if (fan < 0) return 3;  // NVML_ERROR_NOT_SUPPORTED
    *speed = static_cast<unsigned>(fan);
    return 0;
}

// One utilization sample per listed process and call, newer than every earlier one; NOT_FOUND
// when there is none newer than `last_seen`, as NVML says when no process ran.
struct UtilizationSample {
    unsigned pid;
    unsigned long long timestamp;
    unsigned sm, mem, enc, dec;
};
int nvmlDeviceGetProcessUtilization(void* device, UtilizationSample* out, unsigned* count,
                                    unsigned long long last_seen) {
    if (is_mig(device)) return 3;  // NVML has no per-process utilization in MIG mode
    std::lock_guard<std::mutex> lock(st().mutex);
    const Gpu& g = st().gpus[index_of(device)];
    if (g.processes.empty() || st().util_clock < last_seen) return 6;
    if (out == nullptr || *count < g.processes.size()) {
        *count = static_cast<unsigned>(g.processes.size());
        return 7;
    }
    st().util_clock = std::max(st().util_clock, last_seen) + 1000;
    for (std::size_t i = 0; i < g.processes.size(); ++i) {
        unsigned sm = 0;
        for (const auto& [pid, share] : g.sm) {
            if (pid == g.processes[i].pid) sm = share;
        }
        out[i] = {g.processes[i].pid, st().util_clock, sm, 0, 0, 0};
    }
    *count = static_cast<unsigned>(g.processes.size());
    return 0;
}
void gpudiag_stub_nvml_set_process_sm(int gpu, unsigned pid, unsigned sm) {
    std::lock_guard<std::mutex> lock(st().mutex);
    st().gpus[gpu].sm.emplace_back(pid, sm);
}

// ------------------------------------------------------------------ MIG
int nvmlDeviceIsMigDeviceHandle(void* device, unsigned* mig) {
    *mig = is_mig(device) ? 1 : 0;
    return 0;
}
int nvmlDeviceGetDeviceHandleFromMigDeviceHandle(void* device, void** parent) {
    if (!is_mig(device)) return 2;
    *parent = reinterpret_cast<void*>(uintptr_t{1});
    return 0;
}
int nvmlDeviceGetGpuInstanceId(void* device, unsigned* id) {
    if (!is_mig(device)) return 2;
    *id = 3;
    return 0;
}
int nvmlDeviceGetComputeInstanceId(void* device, unsigned* id) {
    if (!is_mig(device)) return 2;
    *id = 0;
    return 0;
}
int gpudiag_stub_nvml_card_calls_on_mig() {
    return card_calls_on_mig.load();
}

// ------------------------------------------------------------------ GPM (new names only)
#if !GPUDIAG_STUB_NVML_OLD_NAMES
struct GpmSupport {
    unsigned version;
    unsigned supported;
};
struct GpmMetric {
    unsigned id;
    int result;
    double value;
    const char* names[3];
};
struct GpmMetricsGet {
    unsigned version;
    unsigned count;
    GpmSample* sample1;
    GpmSample* sample2;
    GpmMetric metrics[98];  // NVML_GPM_METRIC_MAX of the first headers that had GPM
};
int nvmlGpmQueryDeviceSupport(void* device, GpmSupport* support) {
    if (support == nullptr || support->version != 1) return 2;  // NVML_ERROR_INVALID_ARGUMENT
    std::lock_guard<std::mutex> lock(st().mutex);
    support->supported = st().gpus[index_of(device)].gpm ? 1 : 0;
    return 0;
}
int nvmlGpmSampleAlloc(GpmSample** sample) {
    std::lock_guard<std::mutex> lock(st().mutex);
    *sample = new GpmSample{};
    ++st().gpm_samples_live;
    return 0;
}
int nvmlGpmSampleFree(GpmSample* sample) {
    std::lock_guard<std::mutex> lock(st().mutex);
    delete sample;
    --st().gpm_samples_live;
    return 0;
}
int nvmlGpmSampleGet(void* device, GpmSample* sample) {
    std::lock_guard<std::mutex> lock(st().mutex);
    const Gpu& g = st().gpus[index_of(device)];
    if (!g.gpm) return 3;
    std::memcpy(sample->values, g.gpm_values, sizeof sample->values);
    sample->gpu = index_of(device);
    return 0;
}
// An instance's sample: its GPU's handle and the instance's GPU instance id; the instance is
// busier than the whole GPU (its SM activity is the GPU's plus 40 points).
int nvmlGpmMigSampleGet(void* device, unsigned gpu_instance, GpmSample* sample) {
    if (is_mig(device) || gpu_instance != 3) return 2;
    const int rc = nvmlGpmSampleGet(device, sample);
    sample->values[0] += 40;
    return rc;
}
// Like NVML: each metric gets its own result; an id it does not know is NOT_SUPPORTED.
int nvmlGpmMetricsGet(GpmMetricsGet* q) {
    if (q == nullptr || q->version != 1 || q->count > 98 || q->sample1 == nullptr ||
        q->sample2 == nullptr || q->sample1->gpu != q->sample2->gpu) {
        return 2;
    }
    for (unsigned i = 0; i < q->count; ++i) {
        GpmMetric& m = q->metrics[i];
        const int slot = m.id == 2 ? 0 : m.id == 3 ? 1 : m.id == 5 ? 2 : m.id == 10 ? 3 : -1;
        m.result = slot < 0 ? 3 : 0;
        m.value = slot < 0 ? 0 : q->sample2->values[slot];
    }
    return 0;
}
#endif

// ------------------------------------------------------------------ test hooks
void gpudiag_stub_nvml_set_gpm(int gpu, double sm_active, double occupancy, double tensor,
                               double dram) {
    std::lock_guard<std::mutex> lock(st().mutex);
    double* v = st().gpus[gpu].gpm_values;
    v[0] = sm_active;
    v[1] = occupancy;
    v[2] = tensor;
    v[3] = dram;
}
void gpudiag_stub_nvml_set_utilization(int gpu, unsigned util) {
    std::lock_guard<std::mutex> lock(st().mutex);
    st().gpus[gpu].util = util;
}
int gpudiag_stub_nvml_gpm_samples_live() {
    std::lock_guard<std::mutex> lock(st().mutex);
    return st().gpm_samples_live;
}
void gpudiag_stub_nvml_set(int gpu, unsigned long long reasons, int temperature, unsigned power_mw,
                           unsigned limit_mw) {
    std::lock_guard<std::mutex> lock(st().mutex);
    Gpu& g = st().gpus[gpu];
    g.reasons = reasons;
    g.temperature = temperature;
    g.power_mw = power_mw;
    g.limit_mw = limit_mw;
}
void gpudiag_stub_nvml_set_ecc(int gpu, unsigned long long corrected,
                               unsigned long long uncorrected) {
    std::lock_guard<std::mutex> lock(st().mutex);
    st().gpus[gpu].ecc_corrected = corrected;
    st().gpus[gpu].ecc_uncorrected = uncorrected;
}
// Lists this process with `own_bytes` and another PID with `foreign_bytes` on `gpu`.
void gpudiag_stub_nvml_set_processes(int gpu, unsigned long long own_bytes,
                                     unsigned long long foreign_bytes, int include_self) {
    std::lock_guard<std::mutex> lock(st().mutex);
    auto& procs = st().gpus[gpu].processes;
    procs.clear();
    if (include_self != 0) procs.push_back({static_cast<unsigned>(getpid()), own_bytes, 0, 0});
    if (foreign_bytes > 0)
        procs.push_back({static_cast<unsigned>(getpid()) + 100000u, foreign_bytes, 0, 0});
}
void gpudiag_stub_nvml_set_pcie(int gpu, unsigned generation, unsigned generation_max,
                                unsigned width, unsigned width_max, unsigned replays) {
    std::lock_guard<std::mutex> lock(st().mutex);
    unsigned* p = st().gpus[gpu].pcie;
    p[0] = generation;
    p[1] = generation_max;
    p[2] = width;
    p[3] = width_max;
    p[4] = replays;
}
void gpudiag_stub_nvml_set_memory_health(int gpu, unsigned pages_single, unsigned pages_double,
                                         unsigned pages_pending, unsigned rows_correctable,
                                         unsigned rows_uncorrectable, unsigned remap_pending,
                                         unsigned remap_failed) {
    std::lock_guard<std::mutex> lock(st().mutex);
    Gpu& g = st().gpus[gpu];
    g.pages[0] = pages_single;
    g.pages[1] = pages_double;
    g.pages[2] = pages_pending;
    g.rows[0] = rows_correctable;
    g.rows[1] = rows_uncorrectable;
    g.rows[2] = remap_pending;
    g.rows[3] = remap_failed;
}
// Queues an Xid event on `gpu` (delivered only once gpudiag registered for them).
void gpudiag_stub_nvml_push_xid(int gpu, unsigned long long xid) {
    std::lock_guard<std::mutex> lock(st().mutex);
    st().gpus[gpu].xids.push_back(xid);
}
int gpudiag_stub_nvml_xid_registered(int gpu) {
    std::lock_guard<std::mutex> lock(st().mutex);
    return st().gpus[gpu].registered ? 1 : 0;
}
void gpudiag_stub_nvml_add_process(int gpu, unsigned pid, unsigned long long bytes) {
    std::lock_guard<std::mutex> lock(st().mutex);
    st().gpus[gpu].processes.push_back({pid, bytes, 0, 0});
}
void gpudiag_stub_nvml_set_nvlink(int gpu, unsigned links, unsigned long long replay,
                                  unsigned long long recovery, unsigned long long crc) {
    std::lock_guard<std::mutex> lock(st().mutex);
    Gpu& g = st().gpus[gpu];
    g.nvlinks = links;
    g.nvlink_errors[0] = replay;
    g.nvlink_errors[1] = recovery;
    g.nvlink_errors[2] = crc;
    g.nvlink_errors[3] = 0;
}
void gpudiag_stub_nvml_reset() {
    card_calls_on_mig = 0;
    std::lock_guard<std::mutex> lock(st().mutex);
    st().util_clock = 0;
    st().gpus[0] = Gpu();
    st().gpus[1] = Gpu();
    st().gpus[0].gpm = true;
    st().gpus[1].fan = 55;
}

}  // extern "C"
