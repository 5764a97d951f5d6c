// SPDX-License-Identifier: Apache-2.0
// CudaDriverApi: loading. Driver symbols are versioned by macro in cuda.h (cuDeviceGetUuid is
// cuDeviceGetUuid_v2 since CUDA 11.4); the versioned names are resolved explicitly.
#include "capture/cuda_driver_api.hpp"

#include "capture/dynamic_library.hpp"

#include <cstdio>

namespace gpudiag::detail {
namespace {

using Loaded = ApiLoadResult<CudaDriverApi>;

Loaded load() {
    Loaded r;
    LibrarySearch search;
    search.reuse_names = {"libcuda.so.1"};
    search.env_var = "GPUDIAG_CUDA_PATH";
    search.candidates = {"libcuda.so.1"};
    std::string why;
    LoadedLibrary lib = load_library(search, why);
    if (lib.handle == nullptr) {
        r.why_not = "no CUDA driver: " + why;
        return r;
    }
    CudaDriverApi& a = r.api;
    a.path = lib.path;
    a.driver_get_version = find_symbol<int (*)(int*)>(lib.handle, "cuDriverGetVersion");
    a.device_get_count = find_symbol<int (*)(int*)>(lib.handle, "cuDeviceGetCount");
    a.device_get = find_symbol<int (*)(int*, int)>(lib.handle, "cuDeviceGet");
    a.device_get_uuid = find_symbol<decltype(a.device_get_uuid)>(lib.handle, "cuDeviceGetUuid_v2");
    if (a.driver_get_version == nullptr || a.driver_get_version(&a.driver_version) != 0) {
        r.why_not = "libcuda at " + a.path + ": cuDriverGetVersion failed";
        return r;
    }
    r.ok = true;
    return r;
}

}  // namespace

std::string CudaDriverApi::version_string() const {
    return std::to_string(driver_version / 1000) + "." + std::to_string((driver_version % 1000) / 10);
}

std::string format_gpu_uuid(const std::array<unsigned char, 16>& b) {
    char buf[64];
    std::snprintf(buf, sizeof buf,
                  "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                  b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                  b[14], b[15]);
    return buf;
}

const CudaDriverApi* cuda_driver_api(std::string* why_not) noexcept {
    return load_api<CudaDriverApi>(&load, "libcuda", why_not);
}

}  // namespace gpudiag::detail
