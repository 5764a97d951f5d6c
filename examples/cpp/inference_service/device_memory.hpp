// SPDX-License-Identifier: Apache-2.0
// DeviceMemory: the service's device memory, through the CUDA runtime when there is one.
//
// cudaMalloc and friends are resolved at run time (dlopen + dlsym), so the example needs neither
// the CUDA toolkit to build nor a GPU to run, as gpudiag itself does. With a device, its
// allocations are real cudaMalloc calls that gpudiag sees through CUPTI (with deep capture, with
// the call site). Without a CUDA runtime or a device, memory is simulated: addresses from a
// range of its own, never dereferenced, and each allocation and free is reported with
// Session::record_allocation / record_free, which feeds the same analysis CUPTI's records do.
#pragma once

#include <gpudiag/session.hpp>

#include <dlfcn.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

class DeviceMemory {
public:
    explicit DeviceMemory(gpudiag::Session& session) : session_(session) { load_runtime(); }
    DeviceMemory(const DeviceMemory&) = delete;
    DeviceMemory& operator=(const DeviceMemory&) = delete;
    // The runtime stays loaded: libcudart registers exit handlers of its own.

    [[nodiscard]] bool on_gpu() const { return on_gpu_; }
    /// Where the memory comes from, or why it is simulated, for the service's log.
    [[nodiscard]] const std::string& description() const { return description_; }

    /// nullptr when the device has no room. `site` names the caller for the simulated case
    /// (on a GPU, gpudiag's deep capture takes it from the call stack).
    void* allocate(std::size_t bytes, const char* site) {
        void* p = reserve(bytes);
        if (p != nullptr) report(p, bytes, site);
        return p;
    }

    /// allocate() in two halves, for an allocator that announces its segment first: on a GPU,
    /// CUPTI's record of a cudaMalloc reaches gpudiag after the events the caller records once
    /// cudaMalloc has returned, and the simulation keeps that order.
    void* reserve(std::size_t bytes) {
        if (on_gpu_) {
            void* p = nullptr;
            return malloc_(&p, bytes) == kCudaSuccess ? p : nullptr;
        }
        // 2 MiB apart, as the CUDA driver hands out large allocations.
        std::uint64_t at = next_;
        next_ += (bytes + kAlign - 1) / kAlign * kAlign + kAlign;
        return reinterpret_cast<void*>(at);
    }
    void report(void* p, std::size_t bytes, const char* site) {
        if (on_gpu_) return;  // CUPTI saw the cudaMalloc
        (void)session_.record_allocation(0, reinterpret_cast<std::uint64_t>(p), bytes, site);
    }

    void release(void* p) {
        if (p == nullptr) return;
        if (on_gpu_) {
            (void)free_(p);
            return;
        }
        (void)session_.record_free(0, reinterpret_cast<std::uint64_t>(p));
    }

    /// The request's work on the data (a cudaMemset and a synchronize; nothing when simulated).
    void touch(void* p, std::size_t bytes) {
        if (!on_gpu_ || p == nullptr) return;
        (void)memset_(p, 0, bytes);
        (void)synchronize_();
    }

private:
    // cudaError_t is an enum; cudaSuccess is 0. These are the runtime's C signatures.
    static constexpr int kCudaSuccess = 0;
    using GetDeviceCountFn = int (*)(int*);
    using MallocFn = int (*)(void**, std::size_t);
    using FreeFn = int (*)(void*);
    using MemsetFn = int (*)(void*, int, std::size_t);
    using SynchronizeFn = int (*)();
    static constexpr std::uint64_t kAlign = std::uint64_t{2} << 20;

    void load_runtime() {
        void* lib = nullptr;
        const char* loaded = nullptr;
        for (const char* name : {"libcudart.so.13", "libcudart.so.12", "libcudart.so"}) {
            lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
            if (lib != nullptr) {
                loaded = name;
                break;
            }
        }
        if (lib == nullptr) {
            description_ =
                "simulated device memory: no CUDA runtime (libcudart.so.13, .12 or "
                ".so) could be loaded";
            return;
        }
        auto count = reinterpret_cast<GetDeviceCountFn>(dlsym(lib, "cudaGetDeviceCount"));
        malloc_ = reinterpret_cast<MallocFn>(dlsym(lib, "cudaMalloc"));
        free_ = reinterpret_cast<FreeFn>(dlsym(lib, "cudaFree"));
        memset_ = reinterpret_cast<MemsetFn>(dlsym(lib, "cudaMemset"));
        synchronize_ = reinterpret_cast<SynchronizeFn>(dlsym(lib, "cudaDeviceSynchronize"));
        if (!count || !malloc_ || !free_ || !memset_ || !synchronize_) {
            description_ = std::string("simulated device memory: ") + loaded +
                           " lacks cudaMalloc, cudaFree, cudaMemset or cudaGetDeviceCount";
            return;
        }
        int devices = 0;
        if (int error = count(&devices); error != kCudaSuccess || devices == 0) {
            description_ = std::string("simulated device memory: ") + loaded +
                           " found no CUDA device (cudaGetDeviceCount: error " +
                           std::to_string(error) + ", " + std::to_string(devices) + " devices)";
            return;
        }
        on_gpu_ = true;
        description_ = std::string("device memory through cudaMalloc (") + loaded + ", " +
                       std::to_string(devices) + " device(s); the service uses device 0)";
    }

    gpudiag::Session& session_;
    bool on_gpu_ = false;
    std::string description_;
    MallocFn malloc_ = nullptr;
    FreeFn free_ = nullptr;
    MemsetFn memset_ = nullptr;
    SynchronizeFn synchronize_ = nullptr;
    std::uint64_t next_ = std::uint64_t{0x7f00} << 32;  // where simulated addresses start
};
