// SPDX-License-Identifier: Apache-2.0
// CudaDriverApi: the few libcuda functions capture needs (driver presence and version, device
// UUIDs to match NVML devices to CUDA ordinals). Never calls cuInit: initialising the driver
// on the user's behalf would break programs that fork after importing gpudiag.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace gpudiag::detail {

struct CudaDriverApi {
    int (*driver_get_version)(int*) = nullptr;  // works before cuInit
    int (*device_get_count)(int*) = nullptr;    // CUDA_ERROR_NOT_INITIALIZED before cuInit
    int (*device_get)(int*, int) = nullptr;
    int (*device_get_uuid)(std::array<unsigned char, 16>*, int) = nullptr;  // cuDeviceGetUuid_v2
    /// cuDevicePrimaryCtxGetState: whether this process holds the device's primary context.
    int (*primary_ctx_get_state)(int, unsigned*, int*) = nullptr;
    std::string path;
    int driver_version = 0;  ///< 13000 = CUDA 13.0

    /// "13.0" from driver_version.
    [[nodiscard]] std::string version_string() const;
};

/// The process' libcuda ($GPUDIAG_CUDA_PATH, else libcuda.so.1), loaded once. Null when absent
/// (no driver on this machine), with the reason in `why_not`. Thread-safety: safe.
const CudaDriverApi* cuda_driver_api(std::string* why_not = nullptr) noexcept;

/// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", NVML's spelling of a CUDA UUID.
std::string format_gpu_uuid(const std::array<unsigned char, 16>& bytes);

}  // namespace gpudiag::detail
