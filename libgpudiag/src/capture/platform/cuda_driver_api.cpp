// SPDX-License-Identifier: Apache-2.0
// CudaDriverApi: loading. Driver symbols are versioned by macro in cuda.h (cuDeviceGetUuid is
// cuDeviceGetUuid_v2 since CUDA 11.4); the versioned names are resolved explicitly.
#include "capture/platform/cuda_driver_api.hpp"

#include "capture/platform/dynamic_library.hpp"

#include <fmt/format.h>

#include <iterator>
#include <vector>

namespace gpudiag::detail {
namespace {

using Loaded = ApiLoadResult<CudaDriverApi>;

std::vector<LibraryFunction> functions(CudaDriverApi& a) {
    using F = FunctionSlot;
    return {
        {{"cuDriverGetVersion"}, F(a.driver_get_version), Need::kRequired},
        {{"cuDeviceGetCount"}, F(a.device_get_count)},
        {{"cuDeviceGet"}, F(a.device_get)},
        {{"cuDeviceGetUuid_v2"}, F(a.device_get_uuid), Need::kOptional, "CUDA 11.4"},
        {{"cuDevicePrimaryCtxGetState"}, F(a.primary_ctx_get_state)},
    };
}

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
    if (MissingFunctions missing = load_functions(lib.handle, functions(a));
        !missing.required.empty()) {
        r.why_not = "libcuda at " + a.path + " lacks " + missing.required_list();
        return r;
    }
    if (a.driver_get_version(&a.driver_version) != 0) {
        r.why_not = "libcuda at " + a.path + ": cuDriverGetVersion failed";
        return r;
    }
    r.ok = true;
    return r;
}

}  // namespace

std::string CudaDriverApi::version_string() const {
    return fmt::format("{}.{}", driver_version / 1000, (driver_version % 1000) / 10);
}

std::string format_gpu_uuid(const std::array<unsigned char, 16>& b) {
    // nvidia-smi's spelling: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx
    std::string out = "GPU-";
    for (std::size_t i = 0; i < b.size(); ++i) {
        if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
        fmt::format_to(std::back_inserter(out), "{:02x}", b[i]);
    }
    return out;
}

const CudaDriverApi* cuda_driver_api(std::string* why_not) noexcept {
    return load_api<CudaDriverApi>(&load, "libcuda", why_not);
}

}  // namespace gpudiag::detail
