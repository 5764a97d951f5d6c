// SPDX-License-Identifier: Apache-2.0
// Names of event kinds (for JSON output, recordings' debug dumps and error messages).
#include <gpudiag/event.hpp>

namespace gpudiag {

const char* event_kind_name(EventKind kind) noexcept {
    switch (kind) {
        case EventKind::kInvalid: return "invalid";
        case EventKind::kDeviceAlloc: return "device_alloc";
        case EventKind::kDeviceFree: return "device_free";
        case EventKind::kPoolAlloc: return "pool_alloc";
        case EventKind::kPoolFree: return "pool_free";
        case EventKind::kPoolResize: return "pool_resize";
        case EventKind::kVmMap: return "vm_map";
        case EventKind::kVmUnmap: return "vm_unmap";
        case EventKind::kSegmentAlloc: return "segment_alloc";
        case EventKind::kSegmentFree: return "segment_free";
        case EventKind::kBlockAlloc: return "block_alloc";
        case EventKind::kBlockFree: return "block_free";
        case EventKind::kKernel: return "kernel";
        case EventKind::kMemcpy: return "memcpy";
        case EventKind::kMemset: return "memset";
        case EventKind::kSync: return "sync";
        case EventKind::kApiCall: return "api_call";
        case EventKind::kRangeBegin: return "range_begin";
        case EventKind::kRangeEnd: return "range_end";
        case EventKind::kRange: return "range";
        case EventKind::kStepBegin: return "step_begin";
        case EventKind::kStepEnd: return "step_end";
        case EventKind::kOutOfMemory: return "out_of_memory";
        case EventKind::kAnnotation: return "annotation";
        case EventKind::kCounter: return "counter";
    }
    return "unknown";
}

const char* memory_category_name(MemoryCategory c) noexcept {
    switch (c) {
        case MemoryCategory::kOther: return "other";
        case MemoryCategory::kParameters: return "parameters";
        case MemoryCategory::kGradients: return "gradients";
        case MemoryCategory::kOptimizerState: return "optimizer_state";
        case MemoryCategory::kActivations: return "activations";
    }
    return "other";
}

}  // namespace gpudiag
