// SPDX-License-Identifier: Apache-2.0
// CallSiteSymbolizer: turns the return addresses captured at an allocation into a short,
// readable call site ("at::native::empty_cuda+0x3c (libtorch_cuda.so) < ..."), skipping the
// frames of the CUDA stack (libcudart, libcuda, libcupti) and of gpudiag itself.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>

namespace gpudiag::detail {

class CallSiteSymbolizer {
public:
    /// The first `max_frames` frames outside the CUDA stack, innermost first, joined by " < ".
    /// Runs off the application's threads (dladdr and demangling allocate). "" when none.
    std::string describe(void* const* frames, std::size_t count, std::size_t max_frames = 3);
    /// One frame: "symbol+0xoff (module)", or "module+0xoff" without a symbol.
    std::string describe_frame(void* frame);
    /// True for modules whose frames never make a useful call site.
    static bool is_cuda_stack_module(std::string_view module_basename) noexcept;

private:
    static constexpr std::size_t kMaxCached = 65536;
    std::unordered_map<void*, std::string> cache_;  // "" marks a skipped frame
};

}  // namespace gpudiag::detail
