// SPDX-License-Identifier: Apache-2.0
// CallSiteSymbolizer.
#include "capture/cupti/call_site_symbolizer.hpp"

#include "capture/platform/platform.hpp"

#include <fmt/format.h>

#include <cstdint>

namespace gpudiag::detail {

bool CallSiteSymbolizer::is_cuda_stack_module(std::string_view m) noexcept {
    return m.starts_with("libcuda") || m.starts_with("libcupti") || m.starts_with("libgpudiag") ||
           m.starts_with("libnvidia") || m.starts_with("libc.so") || m.starts_with("ld-linux");
}

std::string CallSiteSymbolizer::describe_frame(void* frame) {
    if (auto it = cache_.find(frame); it != cache_.end()) return it->second;
    std::string out;
    platform::AddressInfo info;
    if (platform::describe_address(frame, info)) {
        std::string_view module = info.file;
        if (auto slash = module.rfind('/'); slash != std::string_view::npos) {
            module.remove_prefix(slash + 1);
        }
        if (!is_cuda_stack_module(module)) {
            if (info.symbol != nullptr) {
                out = platform::demangle(info.symbol);
                if (out.empty()) out = info.symbol;
                out += fmt::format("+{:#x} ({})",
                                   reinterpret_cast<std::uintptr_t>(frame) -
                                       reinterpret_cast<std::uintptr_t>(info.symbol_start),
                                   module);
            } else {
                out = fmt::format("{}+{:#x}", module.empty() ? "?" : module,
                                  reinterpret_cast<std::uintptr_t>(frame) -
                                      reinterpret_cast<std::uintptr_t>(info.file_base));
            }
        }
    }
    if (cache_.size() >= kMaxCached) cache_.clear();
    cache_.emplace(frame, out);
    return out;
}

std::string CallSiteSymbolizer::describe(void* const* frames, std::size_t count,
                                         std::size_t max_frames) {
    std::string site;
    std::size_t used = 0;
    for (std::size_t i = 0; i < count && used < max_frames; ++i) {
        std::string f = describe_frame(frames[i]);
        if (f.empty()) continue;
        if (!site.empty()) site += " < ";
        site += f;
        ++used;
    }
    return site;
}

}  // namespace gpudiag::detail
