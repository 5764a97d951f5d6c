// SPDX-License-Identifier: Apache-2.0
// The API whitelist. Values are CUDA 13.0's (cupti_runtime_cbid.h, cupti_driver_cbid.h). Cbids
// are append-only: every number below names the same function in the tables of CUPTI 12.0 to
// 13.5 (compared header by header), except cuCtxSynchronize_v2, which CUDA 13.0 added
// (since_cupti). Per-thread-default-stream (_ptsz/_ptds) variants are listed too: code built
// with --default-stream per-thread calls only those.
#include "capture/cupti/api_whitelist.hpp"

#if GPUDIAG_HAVE_CUDA_HEADERS
#    include <cupti_driver_cbid.h>
#    include <cupti_runtime_cbid.h>
#endif

#include <array>

namespace gpudiag::detail {
namespace {

constexpr ApiDomain R = ApiDomain::kRuntime;
constexpr ApiDomain D = ApiDomain::kDriver;

constexpr std::array<WhitelistedApi, 66> kApis{{
    // ---- runtime ----
    {R, 20, "cudaMalloc", ApiRole::kAlloc},
    {R, 22, "cudaFree", ApiRole::kFree},
    {R, 25, "cudaMallocHost", ApiRole::kAlloc},
    {R, 26, "cudaFreeHost", ApiRole::kFree},
    {R, 27, "cudaHostAlloc", ApiRole::kAlloc},
    {R, 31, "cudaMemcpy", ApiRole::kCopy},
    {R, 41, "cudaMemcpyAsync", ApiRole::kCopy},
    {R, 49, "cudaMemset", ApiRole::kCopy},
    {R, 51, "cudaMemsetAsync", ApiRole::kCopy},
    {R, 131, "cudaStreamSynchronize", ApiRole::kSync},
    {R, 137, "cudaEventSynchronize", ApiRole::kSync},
    {R, 147, "cudaStreamWaitEvent", ApiRole::kSync},
    {R, 152, "cudaHostRegister", ApiRole::kAlloc},
    {R, 165, "cudaDeviceSynchronize", ApiRole::kSync},
    {R, 206, "cudaMallocManaged", ApiRole::kAlloc},
    {R, 211, "cudaLaunchKernel", ApiRole::kLaunch},
    {R, 214, "cudaLaunchKernel_ptsz", ApiRole::kLaunch},
    {R, 215, "cudaMemcpy_ptds", ApiRole::kCopy},
    {R, 225, "cudaMemcpyAsync_ptsz", ApiRole::kCopy},
    {R, 239, "cudaStreamSynchronize_ptsz", ApiRole::kSync},
    {R, 247, "cudaStreamWaitEvent_ptsz", ApiRole::kSync},
    {R, 311, "cudaGraphLaunch", ApiRole::kLaunch},
    {R, 312, "cudaGraphLaunch_ptsz", ApiRole::kLaunch},
    {R, 373, "cudaMallocAsync", ApiRole::kAlloc},
    {R, 374, "cudaMallocAsync_ptsz", ApiRole::kAlloc},
    {R, 375, "cudaFreeAsync", ApiRole::kFree},
    {R, 376, "cudaFreeAsync_ptsz", ApiRole::kFree},
    {R, 377, "cudaMemPoolTrimTo", ApiRole::kPool},
    {R, 391, "cudaMallocFromPoolAsync", ApiRole::kAlloc},
    {R, 392, "cudaMallocFromPoolAsync_ptsz", ApiRole::kAlloc},
    {R, 430, "cudaLaunchKernelExC", ApiRole::kLaunch},
    {R, 431, "cudaLaunchKernelExC_ptsz", ApiRole::kLaunch},
    // ---- driver ----
    {D, 17, "cuCtxSynchronize", ApiRole::kSync},
    {D, 39, "cuMemHostAlloc", ApiRole::kAlloc},
    {D, 121, "cuEventSynchronize", ApiRole::kSync},
    {D, 126, "cuStreamSynchronize", ApiRole::kSync},
    {D, 243, "cuMemAlloc", ApiRole::kAlloc},
    {D, 245, "cuMemFree", ApiRole::kFree},
    {D, 276, "cuMemcpyHtoD", ApiRole::kCopy},
    {D, 278, "cuMemcpyDtoH", ApiRole::kCopy},
    {D, 294, "cuMemAllocHost", ApiRole::kAlloc},
    {D, 305, "cuMemcpy", ApiRole::kCopy},
    {D, 306, "cuMemcpyAsync", ApiRole::kCopy},
    {D, 307, "cuLaunchKernel", ApiRole::kLaunch},
    {D, 371, "cuMemAllocManaged", ApiRole::kAlloc},
    {D, 379, "cuMemHostRegister", ApiRole::kAlloc},
    {D, 440, "cuStreamSynchronize_ptsz", ApiRole::kSync},
    {D, 442, "cuLaunchKernel_ptsz", ApiRole::kLaunch},
    {D, 514, "cuGraphLaunch", ApiRole::kLaunch},
    {D, 515, "cuGraphLaunch_ptsz", ApiRole::kLaunch},
    {D, 547, "cuMemAddressReserve", ApiRole::kVmm},
    {D, 548, "cuMemAddressFree", ApiRole::kVmm},
    {D, kCbidCuMemCreate, "cuMemCreate", ApiRole::kVmm},
    {D, kCbidCuMemRelease, "cuMemRelease", ApiRole::kVmm},
    {D, kCbidCuMemMap, "cuMemMap", ApiRole::kVmm},
    {D, kCbidCuMemUnmap, "cuMemUnmap", ApiRole::kVmm},
    {D, 553, "cuMemSetAccess", ApiRole::kVmm},
    {D, 598, "cuMemAllocAsync", ApiRole::kAlloc},
    {D, 599, "cuMemAllocAsync_ptsz", ApiRole::kAlloc},
    {D, 600, "cuMemFreeAsync", ApiRole::kFree},
    {D, 601, "cuMemFreeAsync_ptsz", ApiRole::kFree},
    {D, 602, "cuMemPoolTrimTo", ApiRole::kPool},
    {D, 611, "cuMemAllocFromPoolAsync", ApiRole::kAlloc},
    {D, 612, "cuMemAllocFromPoolAsync_ptsz", ApiRole::kAlloc},
    {D, 652, "cuLaunchKernelEx", ApiRole::kLaunch},
    {D, 800, "cuCtxSynchronize_v2", ApiRole::kSync, 130000},  // CUPTI 12 has no cbid 800
}};

#if GPUDIAG_HAVE_CUDA_HEADERS
// The numbers above are checked against the headers wherever they are available.
static_assert(CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020 == 20);
static_assert(CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020 == 373);
static_assert(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000 == 211);
static_assert(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060 == 431);
static_assert(CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020 == 165);
static_assert(CUPTI_DRIVER_TRACE_CBID_cuMemCreate == kCbidCuMemCreate);
static_assert(CUPTI_DRIVER_TRACE_CBID_cuMemRelease == kCbidCuMemRelease);
static_assert(CUPTI_DRIVER_TRACE_CBID_cuMemMap == kCbidCuMemMap);
static_assert(CUPTI_DRIVER_TRACE_CBID_cuMemUnmap == kCbidCuMemUnmap);
static_assert(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2 == 243);
static_assert(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx == 652);
static_assert(CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2 == 800);
static_assert(CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz == 612);
static_assert(CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020 == 25);
static_assert(CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020 == 27);
static_assert(CUPTI_RUNTIME_TRACE_CBID_cudaHostRegister_v4000 == 152);
static_assert(CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000 == 206);
static_assert(CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc == 39);
static_assert(CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2 == 294);
static_assert(CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged == 371);
static_assert(CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2 == 379);
#endif

}  // namespace

std::span<const WhitelistedApi> api_whitelist() noexcept {
    return kApis;
}

const WhitelistedApi* find_whitelisted_api(ApiDomain domain, std::uint32_t cbid) noexcept {
    for (const auto& api : kApis) {
        if (api.domain == domain && api.cbid == cbid) return &api;
    }
    return nullptr;
}

MemoryKind allocated_memory(const WhitelistedApi& api) noexcept {
    if (api.domain == ApiDomain::kRuntime) {
        switch (api.cbid) {
            case 25:   // cudaMallocHost
            case 27:   // cudaHostAlloc
            case 152:  // cudaHostRegister
                return MemoryKind::kPinned;
            case 206: return MemoryKind::kManaged;  // cudaMallocManaged
            default: return MemoryKind::kDevice;
        }
    }
    switch (api.cbid) {
        case 39:   // cuMemHostAlloc
        case 294:  // cuMemAllocHost
        case 379:  // cuMemHostRegister
            return MemoryKind::kPinned;
        case 371: return MemoryKind::kManaged;  // cuMemAllocManaged
        default: return MemoryKind::kDevice;
    }
}

}  // namespace gpudiag::detail
