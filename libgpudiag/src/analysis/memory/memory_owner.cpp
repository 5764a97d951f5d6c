// SPDX-License-Identifier: Apache-2.0
// Owner of a driver-level allocation from its call site. Sites are "frame < frame < ..." with the
// innermost frame first (CallSiteSymbolizer skips the CUDA runtime and driver), so the innermost
// frame that names a known library is the one that asked for the memory: a cuBLAS workspace
// allocated on behalf of torch is cuBLAS's.
#include "analysis/memory/memory_owner.hpp"

#include <array>
#include <utility>

namespace gpudiag::detail {
namespace {

// Markers by owner: library file names and the namespaces or prefixes their symbols use.
constexpr std::array<std::pair<std::string_view, MemoryOwner>, 16> kMarkers{{
    {"libc10_cuda", MemoryOwner::kFramework},
    {"CUDACachingAllocator", MemoryOwner::kFramework},
    {"c10::cuda::", MemoryOwner::kFramework},
    {"libnccl", MemoryOwner::kNccl},
    {"nccl", MemoryOwner::kNccl},
    {"NCCL", MemoryOwner::kNccl},
    {"libcublas", MemoryOwner::kCublas},
    {"cublas", MemoryOwner::kCublas},
    {"cuBLAS", MemoryOwner::kCublas},
    {"libcudnn", MemoryOwner::kCudnn},
    {"cudnn", MemoryOwner::kCudnn},
    {"cuDNN", MemoryOwner::kCudnn},
    {"libnvinfer", MemoryOwner::kTensorRt},
    {"nvinfer1::", MemoryOwner::kTensorRt},
    {"TensorRT", MemoryOwner::kTensorRt},
    {"cudaMallocAsync", MemoryOwner::kStreamPool},
}};

MemoryOwner owner_of_frame(std::string_view frame) noexcept {
    for (const auto& [marker, owner] : kMarkers) {
        if (frame.find(marker) != std::string_view::npos) return owner;
    }
    return MemoryOwner::kOther;
}

}  // namespace

MemoryOwner classify_owner(std::string_view site) noexcept {
    if (site.empty()) return MemoryOwner::kNoSite;
    constexpr std::string_view kSeparator = " < ";
    while (!site.empty()) {
        std::size_t end = site.find(kSeparator);
        MemoryOwner owner = owner_of_frame(site.substr(0, end));
        if (owner != MemoryOwner::kOther) return owner;
        if (end == std::string_view::npos) break;
        site.remove_prefix(end + kSeparator.size());
    }
    return MemoryOwner::kOther;
}

const char* memory_owner_name(MemoryOwner owner) noexcept {
    switch (owner) {
        case MemoryOwner::kNoSite: return "no_site";
        case MemoryOwner::kFramework: return "framework";
        case MemoryOwner::kNccl: return "nccl";
        case MemoryOwner::kCublas: return "cublas";
        case MemoryOwner::kCudnn: return "cudnn";
        case MemoryOwner::kTensorRt: return "tensorrt";
        case MemoryOwner::kStreamPool: return "stream_pools";
        case MemoryOwner::kOther: return "other";
    }
    return "other";
}

const char* memory_owner_label(MemoryOwner owner) noexcept {
    switch (owner) {
        case MemoryOwner::kNoSite: return "driver allocations with no call site";
        case MemoryOwner::kFramework: return "the framework's allocator, no segment seen";
        case MemoryOwner::kNccl: return "NCCL buffers";
        case MemoryOwner::kCublas: return "cuBLAS workspaces";
        case MemoryOwner::kCudnn: return "cuDNN workspaces";
        case MemoryOwner::kTensorRt: return "TensorRT";
        case MemoryOwner::kStreamPool: return "stream-ordered pools (cudaMallocAsync, CUDA graphs)";
        case MemoryOwner::kOther: return "other call sites (the program, other allocators)";
    }
    return "other";
}

}  // namespace gpudiag::detail
