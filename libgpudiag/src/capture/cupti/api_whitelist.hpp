// SPDX-License-Identifier: Apache-2.0
// The runtime/driver API calls gpudiag records: launches, allocations and frees (including
// stream-ordered and virtual-memory ones), copies and synchronisations. Enabling these cbids
// one by one (cuptiActivityEnableRuntimeApi/DriverApi) instead of the whole RUNTIME/DRIVER
// kinds keeps CUPTI away from the thousands of cheap calls (cudaGetDevice ...) frameworks make.
#pragma once

#include <gpudiag/event.hpp>

#include <cstdint>
#include <span>

namespace gpudiag::detail {

enum class ApiRole : std::uint8_t { kLaunch, kAlloc, kFree, kCopy, kSync, kVmm, kPool };

struct WhitelistedApi {
    ApiDomain domain;
    std::uint32_t cbid;  ///< CUPTI_RUNTIME_TRACE_CBID_* / CUPTI_DRIVER_TRACE_CBID_* (13.0)
    const char* name;    ///< function name without the CUPTI version suffix
    ApiRole role;
    /// The first CUPTI (cuptiGetVersion) whose callback table has this cbid; 0 = every CUPTI
    /// gpudiag decodes (12.0 on).
    std::uint32_t since_cupti = 0;
};

/// Every whitelisted call. Thread-safety: immutable.
std::span<const WhitelistedApi> api_whitelist() noexcept;

/// True when the CUPTI of `cupti_version` knows this call (its cbid means this function there).
[[nodiscard]] constexpr bool api_in_cupti(const WhitelistedApi& api,
                                          std::uint32_t cupti_version) noexcept {
    return cupti_version >= api.since_cupti;
}

/// The entry for (domain, cbid), or null.
const WhitelistedApi* find_whitelisted_api(ApiDomain domain, std::uint32_t cbid) noexcept;

/// The memory an allocation call asks for: kPinned for page-locked host memory (cudaMallocHost,
/// cudaHostAlloc, cudaHostRegister and their driver forms), kManaged for unified memory, else
/// kDevice.
MemoryKind allocated_memory(const WhitelistedApi& api) noexcept;

// Driver cbids of the virtual-memory calls (CUDA 13.0 cupti_driver_cbid.h).
inline constexpr std::uint32_t kCbidCuMemCreate = 549;
inline constexpr std::uint32_t kCbidCuMemRelease = 550;
inline constexpr std::uint32_t kCbidCuMemMap = 551;
inline constexpr std::uint32_t kCbidCuMemUnmap = 552;

}  // namespace gpudiag::detail
