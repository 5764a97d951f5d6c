// SPDX-License-Identifier: Apache-2.0
// CUPTI record layouts: the table of what each release fills, and the checks that the views sit
// where CUPTI puts the fields.
#include "capture/cupti/cupti_record_layouts.hpp"

#include <array>
#include <iterator>

#if GPUDIAG_HAVE_CUDA_HEADERS
#    include <cupti_activity.h>
#endif

namespace gpudiag::detail {
namespace {

// ---- the views against the CUDA 12 headers (numbers read from the 12.0.146 ... 12.9.79 wheels;
// identical in every 12.x release unless a comment says otherwise) ----
static_assert(sizeof(KernelView) == 112);
static_assert(offsetof(KernelView, registersPerThread) == 6);
static_assert(offsetof(KernelView, start) == 16 && offsetof(KernelView, end) == 24);
static_assert(offsetof(KernelView, deviceId) == 40 && offsetof(KernelView, streamId) == 48);
static_assert(offsetof(KernelView, gridX) == 52 && offsetof(KernelView, blockZ) == 72);
static_assert(offsetof(KernelView, dynamicSharedMemory) == 80);
static_assert(offsetof(KernelView, correlationId) == 92 && offsetof(KernelView, name) == 104);
static_assert(sizeof(MemcpyView) == 48 && offsetof(MemcpyView, bytes) == 8);
static_assert(offsetof(MemcpyView, deviceId) == 32 && offsetof(MemcpyView, correlationId) == 44);
static_assert(sizeof(MemcpyPtoPView) == 64 && offsetof(MemcpyPtoPView, correlationId) == 60);
static_assert(sizeof(MemsetView) == 56 && offsetof(MemsetView, flags) == 48);
static_assert(offsetof(MemsetView, memoryKind) == 50 && offsetof(MemsetView, correlationId) == 44);
static_assert(sizeof(MemoryView) == 120);  // CUpti_ActivityMemory3, 12.0-12.5
static_assert(offsetof(MemoryView, address) == 16 && offsetof(MemoryView, timestamp) == 32);
static_assert(offsetof(MemoryView, processId) == 48 && offsetof(MemoryView, streamId) == 60);
static_assert(offsetof(MemoryView, memoryPoolConfig) == 80);
static_assert(offsetof(MemoryView, memoryPoolConfig.address) == 88);
static_assert(offsetof(MemoryView, memoryPoolConfig.size) == 104);
static_assert(offsetof(MemoryView, memoryPoolConfig.utilizedSize) == 112);
static_assert(sizeof(MemoryPool2View) == 72);  // CUpti_ActivityMemoryPool2, 12.0-12.9
static_assert(offsetof(MemoryPool2View, address) == 32 && offsetof(MemoryPool2View, size) == 40);
static_assert(offsetof(MemoryPool2View, timestamp) == 56);
static_assert(offsetof(MemoryPool2View, utilizedSize) == 64);
static_assert(sizeof(MemoryPool3View) == 80 && offsetof(MemoryPool3View, isManagedPool) == 72);
static_assert(sizeof(SyncView) == 40);  // CUpti_ActivitySynchronization, 12.0-12.6
static_assert(offsetof(SyncView, correlationId) == 24 && offsetof(SyncView, cudaEventId) == 36);
static_assert(sizeof(ApiView) == 40 && offsetof(ApiView, returnValue) == 36);
static_assert(sizeof(Overhead1View) == 40 && offsetof(Overhead1View, start) == 24);  // 12.0-12.2
static_assert(sizeof(Overhead2View) == 48 && offsetof(Overhead2View, correlationId) == 40);  // 12.3
static_assert(sizeof(Overhead3View) == 56 && offsetof(Overhead3View, overheadData) == 48);  // 12.4+

#if GPUDIAG_HAVE_CUDA_HEADERS
// ---- the views against the CUDA 13 headers of this build ----
#    define GPUDIAG_SAME_FIELD(view, record, field) \
        static_assert(offsetof(view, field) == offsetof(record, field), #record "." #field)
GPUDIAG_SAME_FIELD(KernelView, CUpti_ActivityKernel10, registersPerThread);
GPUDIAG_SAME_FIELD(KernelView, CUpti_ActivityKernel10, start);
GPUDIAG_SAME_FIELD(KernelView, CUpti_ActivityKernel10, end);
GPUDIAG_SAME_FIELD(KernelView, CUpti_ActivityKernel10, deviceId);
GPUDIAG_SAME_FIELD(KernelView, CUpti_ActivityKernel10, contextId);
GPUDIAG_SAME_FIELD(KernelView, CUpti_ActivityKernel10, streamId);
GPUDIAG_SAME_FIELD(KernelView, CUpti_ActivityKernel10, gridX);
GPUDIAG_SAME_FIELD(KernelView, CUpti_ActivityKernel10, blockZ);
GPUDIAG_SAME_FIELD(KernelView, CUpti_ActivityKernel10, staticSharedMemory);
GPUDIAG_SAME_FIELD(KernelView, CUpti_ActivityKernel10, dynamicSharedMemory);
GPUDIAG_SAME_FIELD(KernelView, CUpti_ActivityKernel10, correlationId);
GPUDIAG_SAME_FIELD(KernelView, CUpti_ActivityKernel10, name);
GPUDIAG_SAME_FIELD(MemcpyView, CUpti_ActivityMemcpy6, copyKind);
GPUDIAG_SAME_FIELD(MemcpyView, CUpti_ActivityMemcpy6, flags);
GPUDIAG_SAME_FIELD(MemcpyView, CUpti_ActivityMemcpy6, bytes);
GPUDIAG_SAME_FIELD(MemcpyView, CUpti_ActivityMemcpy6, start);
GPUDIAG_SAME_FIELD(MemcpyView, CUpti_ActivityMemcpy6, streamId);
GPUDIAG_SAME_FIELD(MemcpyView, CUpti_ActivityMemcpy6, correlationId);
GPUDIAG_SAME_FIELD(MemcpyPtoPView, CUpti_ActivityMemcpyPtoP4, streamId);
GPUDIAG_SAME_FIELD(MemcpyPtoPView, CUpti_ActivityMemcpyPtoP4, correlationId);
GPUDIAG_SAME_FIELD(MemsetView, CUpti_ActivityMemset4, bytes);
GPUDIAG_SAME_FIELD(MemsetView, CUpti_ActivityMemset4, correlationId);
GPUDIAG_SAME_FIELD(MemsetView, CUpti_ActivityMemset4, flags);
GPUDIAG_SAME_FIELD(MemsetView, CUpti_ActivityMemset4, memoryKind);
GPUDIAG_SAME_FIELD(MemoryView, CUpti_ActivityMemory4, memoryOperationType);
GPUDIAG_SAME_FIELD(MemoryView, CUpti_ActivityMemory4, correlationId);
GPUDIAG_SAME_FIELD(MemoryView, CUpti_ActivityMemory4, address);
GPUDIAG_SAME_FIELD(MemoryView, CUpti_ActivityMemory4, timestamp);
GPUDIAG_SAME_FIELD(MemoryView, CUpti_ActivityMemory4, processId);
GPUDIAG_SAME_FIELD(MemoryView, CUpti_ActivityMemory4, streamId);
GPUDIAG_SAME_FIELD(MemoryView, CUpti_ActivityMemory4, memoryPoolConfig);
GPUDIAG_SAME_FIELD(MemoryView, CUpti_ActivityMemory4, memoryPoolConfig.address);
GPUDIAG_SAME_FIELD(MemoryView, CUpti_ActivityMemory4, memoryPoolConfig.utilizedSize);
GPUDIAG_SAME_FIELD(MemoryPool3View, CUpti_ActivityMemoryPool3, isManagedPool);
GPUDIAG_SAME_FIELD(SyncView, CUpti_ActivitySynchronization2, type);
GPUDIAG_SAME_FIELD(SyncView, CUpti_ActivitySynchronization2, correlationId);
GPUDIAG_SAME_FIELD(SyncView, CUpti_ActivitySynchronization2, cudaEventId);
GPUDIAG_SAME_FIELD(ApiView, CUpti_ActivityAPI, cbid);
GPUDIAG_SAME_FIELD(ApiView, CUpti_ActivityAPI, threadId);
GPUDIAG_SAME_FIELD(ApiView, CUpti_ActivityAPI, returnValue);
GPUDIAG_SAME_FIELD(Overhead3View, CUpti_ActivityOverhead3, overheadData);
#    undef GPUDIAG_SAME_FIELD
static_assert(offsetof(MemoryView, memoryPoolConfig.size) ==
              offsetof(CUpti_ActivityMemory4, memoryPoolConfig.pool.size));
static_assert(offsetof(MemoryPool2View, utilizedSize) ==
              offsetof(CUpti_ActivityMemoryPool3, utilizedSize));
static_assert(offsetof(Overhead1View, end) == offsetof(CUpti_ActivityOverhead3, end));
static_assert(offsetof(Overhead2View, correlationId) ==
              offsetof(CUpti_ActivityOverhead3, correlationId));
static_assert(sizeof(CUpti_ActivityKernel10) == 216 && sizeof(CUpti_ActivityMemoryPool3) == 80);
static_assert(sizeof(CUpti_ActivityOverhead3) == 56 && sizeof(CUpti_ActivityAPI) == 40);
#endif

constexpr std::uint32_t kAnyStream = 0xFFFFFFFFu;
constexpr int kUnknown = 999;     // CUPTI_ERROR_UNKNOWN
constexpr int kInvalidKind = 21;  // CUPTI_ERROR_INVALID_KIND
#if GPUDIAG_HAVE_CUDA_HEADERS
static_assert(CUPTI_ERROR_UNKNOWN == kUnknown && CUPTI_ERROR_INVALID_KIND == kInvalidKind);
#endif

// What each release fills, from its cupti_activity.h (the newest version of each record).
// Rows apply from first_version up to the next row's.
constexpr std::array<CuptiRecordLayout, 10> kLayouts{{
    {18,
     "CUDA 12.0-12.2",
     "Kernel9 Memcpy5 MemcpyPtoP4 Memset4 Memory3 MemoryPool2 Synchronization Overhead",
     {208, 88, 96, 88, 120, 72, 40, 40, 40},
     1,
     false,
     kAnyStream,
     kUnknown},
    {21,
     "CUDA 12.3",
     "Kernel9 Memcpy5 MemcpyPtoP4 Memset4 Memory3 MemoryPool2 Synchronization Overhead2",
     {208, 88, 96, 88, 120, 72, 40, 40, 48},
     2,
     false,
     kAnyStream,
     kUnknown},
    {22,
     "CUDA 12.4-12.5",
     "Kernel9 Memcpy5 MemcpyPtoP4 Memset4 Memory3 MemoryPool2 Synchronization Overhead3",
     {208, 88, 96, 88, 120, 72, 40, 40, 56},
     3,
     false,
     kAnyStream,
     kInvalidKind},
    {24,
     "CUDA 12.6",
     "Kernel9 Memcpy5 MemcpyPtoP4 Memset4 Memory4 MemoryPool2 Synchronization Overhead3",
     {208, 88, 96, 88, 128, 72, 40, 40, 56},
     3,
     false,
     kAnyStream,
     kInvalidKind},
    {26,
     "CUDA 12.8-12.9",
     "Kernel9 Memcpy6 MemcpyPtoP4 Memset4 Memory4 MemoryPool2 Synchronization2 Overhead3",
     {208, 96, 96, 88, 128, 72, 56, 40, 56},
     3,
     false,
     kAnyStream,
     kInvalidKind},
    {130000,
     "CUDA 13.0",
     "Kernel10 Memcpy6 MemcpyPtoP4 Memset4 Memory4 MemoryPool3 Synchronization2 Overhead3",
     {216, 96, 96, 88, 128, 80, 56, 40, 56},
     3,
     true,
     kAnyStream,
     kInvalidKind},
    {130100,
     "CUDA 13.1",
     "Kernel11 Memcpy6 MemcpyPtoP4 Memset4 Memory4 MemoryPool3 Synchronization2 Overhead3",
     {224, 96, 96, 88, 128, 80, 56, 40, 56},
     3,
     true,
     kAnyStream,
     kInvalidKind},
    // 13.2 redefined CUPTI_INVALID_STREAM_ID (and _CONTEXT_ID) as 0.
    {130200,
     "CUDA 13.2",
     "Kernel11 Memcpy6 MemcpyPtoP4 Memset4 Memory4 MemoryPool3 Synchronization2 Overhead3",
     {224, 96, 96, 88, 128, 80, 56, 40, 56},
     3,
     true,
     0,
     kInvalidKind},
    {130300,
     "CUDA 13.3",
     "Kernel12 Memcpy6 MemcpyPtoP4 Memset4 Memory4 MemoryPool3 Synchronization2 Overhead3",
     {232, 96, 96, 88, 128, 80, 56, 40, 56},
     3,
     true,
     0,
     kInvalidKind},
    {130400,
     "CUDA 13.4-13.5",
     "Kernel13 Memcpy7 MemcpyPtoP4 Memset5 Memory4 MemoryPool3 Synchronization2 Overhead3",
     {248, 112, 96, 104, 128, 80, 56, 40, 56},
     3,
     true,
     0,
     kInvalidKind},
}};

constexpr std::uint32_t kFirstCupti12 = 18;
constexpr std::uint32_t kPastCupti12 = 100;  // 12.x API versions are small integers
constexpr std::uint32_t kFirstCupti13 = 130000;
constexpr std::uint32_t kPastCupti13 = 140000;

}  // namespace

bool decodes_cupti(std::uint32_t version, bool cupti12_abi) noexcept {
    if (version >= kFirstCupti13) return version < kPastCupti13;
    if (version == kFirstCupti12) return cupti12_abi;  // 18 is also CUPTI 11.8's number
    return version > kFirstCupti12 && version < kPastCupti12;
}

const CuptiRecordLayout& cupti_record_layout(std::uint32_t version) noexcept {
    const CuptiRecordLayout* found = &kLayouts.back();
    if (version < kFirstCupti13 && version >= kPastCupti12) return *found;
    for (const CuptiRecordLayout& l : kLayouts) {
        if (l.first_version <= version) found = &l;
    }
    return *found;
}

const CuptiRecordLayout* cupti_record_layouts(std::size_t* count) noexcept {
    if (count != nullptr) *count = kLayouts.size();
    return kLayouts.data();
}

int cupti_cuda_version(std::uint32_t version) noexcept {
    if (version >= kFirstCupti13 && version < kPastCupti13) {
        return static_cast<int>(version / 10000 * 1000 + version / 100 % 100 * 10);
    }
    // cupti_version.h: v19 12.0, v20 12.2, v21 12.3, v22 12.4, v23 12.5, v24 12.6, v26 12.8,
    // v27 and v28 12.9; the 12.0 and 12.1 libraries report 18.
    switch (version) {
        case 18:
        case 19: return 12000;
        case 20: return 12020;
        case 21: return 12030;
        case 22: return 12040;
        case 23: return 12050;
        case 24: return 12060;
        case 26: return 12080;
        case 27:
        case 28: return 12090;
        default: return 0;
    }
}

}  // namespace gpudiag::detail
