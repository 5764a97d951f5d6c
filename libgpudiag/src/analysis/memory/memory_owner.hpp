// SPDX-License-Identifier: Apache-2.0
// Who holds a driver-level allocation (cudaMalloc, cuMemMap, a stream-ordered pool), told from the
// call site CUPTI's deep mode or the caller attached: the library that made the call.
#pragma once

#include <cstdint>
#include <string_view>

namespace gpudiag::detail {

enum class MemoryOwner : std::uint8_t {
    kNoSite = 0,      ///< no call site: the owner cannot be known
    kFramework = 1,   ///< the framework's allocator (torch's caching allocator: libc10_cuda)
    kNccl = 2,        ///< NCCL communication buffers
    kCublas = 3,      ///< cuBLAS / cuBLASLt workspaces
    kCudnn = 4,       ///< cuDNN workspaces
    kTensorRt = 5,    ///< TensorRT engines and contexts (libnvinfer)
    kStreamPool = 6,  ///< stream-ordered pools: cudaMallocAsync, CUDA graph memory nodes
    kOther = 7,       ///< a call site that names none of the above (the program, another allocator)
};
inline constexpr std::size_t kMemoryOwnerCount = 8;

/// Stable snake_case name ("nccl", "no_site", ...).
const char* memory_owner_name(MemoryOwner owner) noexcept;
/// Words for a report line ("NCCL buffers", ...).
const char* memory_owner_label(MemoryOwner owner) noexcept;

/// The owner a call site names: the first library of a known owner among its frames
/// ("... (libnccl.so.2) < ..."), else kOther; kNoSite for an empty site.
MemoryOwner classify_owner(std::string_view site) noexcept;

}  // namespace gpudiag::detail
