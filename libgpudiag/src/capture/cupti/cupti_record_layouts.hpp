// SPDX-License-Identifier: Apache-2.0
// The CUPTI activity records gpudiag reads, for every CUPTI from 12.0 (API version 18 with the
// libcupti.so.12 ABI) to 13.x, declared here so one build decodes them all with only the CUDA 13
// headers on the machine.
//
// CUPTI fills the newest version of a record its release knows (deprecated versions are never
// filled), and each release since 12.0 has only appended fields to the records gpudiag reads:
// the fields below sit at the same offsets in all of them. So a record is read through a view
// of the fields gpudiag uses (the common prefix), and only the fields some versions lack
// (MemoryPool3.isManagedPool, Overhead2.correlationId, Overhead3.overheadData) are read through a
// view chosen from cuptiGetVersion. Records are walked with the loaded library's
// cuptiActivityGetNextRecord, never by these sizes.
//
// Offsets and sizes were read from the headers of the nvidia-cuda-cupti-cu12 wheels 12.0.146,
// 12.1.105, 12.2.142, 12.3.101, 12.4.127, 12.5.82, 12.6.80, 12.8.57, 12.8.90 and 12.9.79 and
// nvidia-cuda-cupti 13.0.85, 13.1.115, 13.2.86 and 13.5.25 (include/cupti_activity.h); the
// static_asserts in the .cpp check the views against the CUDA 13 headers this build uses.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpudiag::detail {

// ---- views: the fields gpudiag reads, at CUPTI's offsets -------------------------------------

/// CONCURRENT_KERNEL / KERNEL: the first 112 bytes of CUpti_ActivityKernel9 (12.0-12.9, 208
/// bytes), Kernel10 (13.0-13.1, 216), Kernel11 (13.2, 224) and Kernel13 (13.5, 248).
struct KernelView {
    std::uint32_t kind;
    std::uint8_t unread_cache_config[2];
    std::uint16_t registersPerThread;
    std::uint8_t unread_partitioned_cache[8];
    std::uint64_t start;
    std::uint64_t end;
    std::uint8_t unread_completed[8];
    std::uint32_t deviceId;
    std::uint32_t contextId;
    std::uint32_t streamId;
    std::int32_t gridX, gridY, gridZ;
    std::int32_t blockX, blockY, blockZ;
    std::int32_t staticSharedMemory;
    std::int32_t dynamicSharedMemory;
    std::uint8_t unread_local_memory[8];
    std::uint32_t correlationId;
    std::uint8_t unread_grid_id[8];
    const char* name;
};

/// MEMCPY: the first 48 bytes of CUpti_ActivityMemcpy5 (12.0-12.6, 88 bytes), Memcpy6
/// (12.8-13.4, 96) and Memcpy7 (13.5, 112).
struct MemcpyView {
    std::uint32_t kind;
    std::uint8_t copyKind;
    std::uint8_t srcKind;
    std::uint8_t dstKind;
    std::uint8_t flags;
    std::uint64_t bytes;
    std::uint64_t start;
    std::uint64_t end;
    std::uint32_t deviceId;
    std::uint32_t contextId;
    std::uint32_t streamId;
    std::uint32_t correlationId;
};

/// MEMCPY2 (peer to peer): the first 64 bytes of CUpti_ActivityMemcpyPtoP4 (12.0-13.5, 96).
struct MemcpyPtoPView {
    std::uint32_t kind;
    std::uint8_t copyKind;
    std::uint8_t srcKind;
    std::uint8_t dstKind;
    std::uint8_t flags;
    std::uint64_t bytes;
    std::uint64_t start;
    std::uint64_t end;
    std::uint32_t deviceId;
    std::uint32_t contextId;
    std::uint32_t streamId;
    std::uint8_t unread_peer_ids[16];
    std::uint32_t correlationId;
};

/// MEMSET: the first 56 bytes of CUpti_ActivityMemset4 (12.0-13.4, 88) and Memset5 (13.5, 104).
struct MemsetView {
    std::uint32_t kind;
    std::uint32_t value;
    std::uint64_t bytes;
    std::uint64_t start;
    std::uint64_t end;
    std::uint32_t deviceId;
    std::uint32_t contextId;
    std::uint32_t streamId;
    std::uint32_t correlationId;
    std::uint16_t flags;
    std::uint16_t memoryKind;
    std::uint8_t unread_padding[4];
};

/// MEMORY2: all 120 bytes of CUpti_ActivityMemory3 (12.0-12.5) = the first 120 of
/// CUpti_ActivityMemory4 (12.6-13.5, 128; it appends `source`).
struct MemoryView {
    std::uint32_t kind;
    std::uint32_t memoryOperationType;
    std::uint32_t memoryKind;
    std::uint32_t correlationId;
    std::uint64_t address;
    std::uint64_t bytes;
    std::uint64_t timestamp;
    std::uint8_t unread_pc[8];
    std::uint32_t processId;
    std::uint32_t deviceId;
    std::uint32_t contextId;
    std::uint32_t streamId;
    std::uint8_t unread_name_is_async[16];
    struct PoolConfig {
        std::uint32_t memoryPoolType;
        std::uint8_t unread_padding[4];
        std::uint64_t address;
        std::uint8_t unread_release_threshold[8];
        std::uint64_t size;  ///< pool.size (a union with pool.processId for imported pools)
        std::uint64_t utilizedSize;
    } memoryPoolConfig;
};

/// MEMORY_POOL in CUDA 12: all 72 bytes of CUpti_ActivityMemoryPool2 (12.0-12.9).
struct MemoryPool2View {
    std::uint32_t kind;
    std::uint32_t memoryPoolOperationType;
    std::uint32_t memoryPoolType;
    std::uint32_t correlationId;
    std::uint32_t processId;
    std::uint32_t deviceId;
    std::uint8_t unread_min_bytes_to_keep[8];
    std::uint64_t address;
    std::uint64_t size;
    std::uint8_t unread_release_threshold[8];
    std::uint64_t timestamp;
    std::uint64_t utilizedSize;
};

/// MEMORY_POOL from CUDA 13.0: CUpti_ActivityMemoryPool3 (80 bytes) appends isManagedPool.
struct MemoryPool3View {
    MemoryPool2View v2;
    std::uint8_t isManagedPool;
    std::uint8_t unread_padding[7];
};

/// SYNCHRONIZATION: all 40 bytes of CUpti_ActivitySynchronization (12.0-12.6) = the first 40 of
/// CUpti_ActivitySynchronization2 (12.8-13.5, 56; it appends cudaEventSyncId).
struct SyncView {
    std::uint32_t kind;
    std::uint32_t type;
    std::uint64_t start;
    std::uint64_t end;
    std::uint32_t correlationId;
    std::uint32_t contextId;
    std::uint32_t streamId;
    std::uint32_t cudaEventId;
};

/// RUNTIME / DRIVER: CUpti_ActivityAPI, 40 bytes, unchanged from 12.0 to 13.5.
struct ApiView {
    std::uint32_t kind;
    std::uint32_t cbid;
    std::uint64_t start;
    std::uint64_t end;
    std::uint32_t processId;
    std::uint32_t threadId;
    std::uint32_t correlationId;
    std::uint32_t returnValue;
};

/// OVERHEAD in CUDA 12.0-12.2: CUpti_ActivityOverhead, 40 bytes.
struct Overhead1View {
    std::uint32_t kind;
    std::uint32_t overheadKind;
    std::uint32_t objectKind;
    std::uint8_t unread_object_id[12];
    std::uint64_t start;
    std::uint64_t end;
};

/// OVERHEAD in CUDA 12.3: CUpti_ActivityOverhead2, 48 bytes, appends correlationId.
struct Overhead2View {
    Overhead1View v1;
    std::uint32_t correlationId;
    std::uint8_t unread_padding[4];
};

/// OVERHEAD from CUDA 12.4: CUpti_ActivityOverhead3, 56 bytes, appends overheadData, which CUPTI
/// allocates and the client frees ("Client is responsible for freeing this memory").
struct Overhead3View {
    Overhead2View v2;
    void* overheadData;
};

// ---- which versions a CUPTI fills ---------------------------------------------------------

/// Record sizes in one CUPTI release (bytes); used for hand-built test buffers and to bound
/// what is left unread behind a record the parser stops at, never to walk records.
struct CuptiRecordSizes {
    std::uint16_t kernel;
    std::uint16_t memcpy;
    std::uint16_t memcpy_p2p;
    std::uint16_t memset;
    std::uint16_t memory;
    std::uint16_t memory_pool;
    std::uint16_t sync;
    std::uint16_t api;
    std::uint16_t overhead;
};

/// What differs between the CUPTI releases gpudiag decodes.
struct CuptiRecordLayout {
    std::uint32_t first_version;  ///< cuptiGetVersion from which this layout applies
    const char* releases;         ///< "CUDA 12.4-12.5"
    const char* record_versions;  ///< "Kernel9 Memcpy5 ... Overhead3", for status notes
    CuptiRecordSizes sizes;
    std::uint8_t overhead_version;  ///< 1, 2 or 3
    bool pool_has_managed_flag;     ///< MemoryPool3
    std::uint32_t invalid_stream;   ///< CUPTI_INVALID_STREAM_ID: 0xFFFFFFFF, 0 from 13.2
    /// What cuptiActivityGetNextRecord returns at a record it cannot size (one still in flight
    /// at a forced flush): CUPTI_ERROR_UNKNOWN (999) before 12.4, CUPTI_ERROR_INVALID_KIND (21)
    /// from 12.4 (measured with the real libraries).
    int unsizable_record_result;
};

/// True for a CUPTI gpudiag decodes: 12.x (API versions 18-99; 18 was also CUDA 11.8's, so it
/// counts as 12 only with `cupti12_abi`, the libcupti.so.12 symbol version) or 13.x
/// (130000-139999).
bool decodes_cupti(std::uint32_t version, bool cupti12_abi) noexcept;

/// The layout a CUPTI of `version` fills (one gpudiag decodes; else the newest known).
const CuptiRecordLayout& cupti_record_layout(std::uint32_t version) noexcept;

/// Every layout, oldest first (tests). Thread-safety: immutable.
const CuptiRecordLayout* cupti_record_layouts(std::size_t* count) noexcept;

/// The CUDA release of a CUPTI gpudiag decodes, as CUDA numbers it (12040 = 12.4; 0 when
/// unknown), from the list in cupti_version.h ("v22 : CUDA Toolkit 12.4"); API version 18 is
/// CUPTI 12.0 and 12.1. CUPTI needs a driver that supports at least this CUDA version (CUPTI
/// fails with CUPTI_ERROR_NOT_INITIALIZED on an older one).
int cupti_cuda_version(std::uint32_t version) noexcept;

}  // namespace gpudiag::detail
