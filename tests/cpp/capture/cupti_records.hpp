// SPDX-License-Identifier: Apache-2.0
// Hand-built CUPTI 13.0 activity records for tests, written into an 8-byte aligned buffer the
// way CUPTI lays them out (each record at its struct size; CUPTI_ACTIVITY_RECORD_ALIGNMENT 8).
#pragma once

#include <cupti.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace gpudiag::test {

class RecordBuffer {
public:
    template <typename Record>
    RecordBuffer& add(const Record& r) {
        static_assert(sizeof(Record) % 8 == 0, "CUPTI records are 8-byte aligned");
        std::size_t at = bytes_.size();
        bytes_.resize(at + sizeof(Record) / 8);
        std::memcpy(reinterpret_cast<std::uint8_t*>(bytes_.data()) + at * 8, &r, sizeof(Record));
        return *this;
    }
    std::uint8_t* data() { return reinterpret_cast<std::uint8_t*>(bytes_.data()); }
    [[nodiscard]] std::size_t size() const { return bytes_.size() * 8; }

private:
    std::vector<std::uint64_t> bytes_;  // uint64_t storage: 8-byte alignment for free
};

inline CUpti_ActivityMemory4 memory_record(
    bool alloc, std::uint64_t address, std::uint64_t bytes, std::uint32_t correlation,
    std::uint64_t ts, CUpti_ActivityMemoryKind kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE) {
    CUpti_ActivityMemory4 r{};
    r.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
    r.memoryOperationType = alloc ? CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION
                                  : CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
    r.memoryKind = kind;
    r.correlationId = correlation;
    r.address = address;
    r.bytes = bytes;
    r.timestamp = ts;
    r.processId = 4242;
    r.deviceId = 0;
    r.contextId = 1;
    r.streamId = CUPTI_INVALID_STREAM_ID;
    return r;
}

inline CUpti_ActivityKernel10 kernel_record(const char* name, std::uint64_t start,
                                            std::uint64_t end, std::uint32_t correlation) {
    CUpti_ActivityKernel10 r{};
    r.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    r.start = start;
    r.end = end;
    r.deviceId = 0;
    r.contextId = 1;
    r.streamId = 7;
    r.gridX = 4;
    r.gridY = 2;
    r.gridZ = 1;
    r.blockX = 128;
    r.blockY = 1;
    r.blockZ = 1;
    r.staticSharedMemory = 1024;
    r.dynamicSharedMemory = 2048;
    r.registersPerThread = 32;
    r.correlationId = correlation;
    r.name = name;
    return r;
}

inline CUpti_ActivityMemcpy6 memcpy_record(std::uint8_t copy_kind, std::uint8_t src,
                                           std::uint8_t dst, std::uint64_t bytes,
                                           std::uint64_t start, std::uint64_t end, bool async,
                                           std::uint32_t correlation) {
    CUpti_ActivityMemcpy6 r{};
    r.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    r.copyKind = copy_kind;
    r.srcKind = src;
    r.dstKind = dst;
    r.flags = async ? CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC : 0;
    r.bytes = bytes;
    r.start = start;
    r.end = end;
    r.deviceId = 0;
    r.streamId = 7;
    r.correlationId = correlation;
    return r;
}

inline CUpti_ActivityAPI api_record(CUpti_ActivityKind kind, std::uint32_t cbid,
                                    std::uint64_t start, std::uint64_t end,
                                    std::uint32_t correlation, std::uint32_t rc = 0) {
    CUpti_ActivityAPI r{};
    r.kind = kind;
    r.cbid = cbid;
    r.start = start;
    r.end = end;
    r.processId = 4242;
    r.threadId = 99;
    r.correlationId = correlation;
    r.returnValue = rc;
    return r;
}

}  // namespace gpudiag::test
