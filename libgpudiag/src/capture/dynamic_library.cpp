// SPDX-License-Identifier: Apache-2.0
// DynamicLibrary.
#include "capture/dynamic_library.hpp"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>

namespace gpudiag::detail {

void* find_symbol_address(void* handle, const char* name) noexcept {
    if (handle == nullptr) return nullptr;
    return dlsym(handle, name);
}

std::string library_path_of(const void* symbol_address) noexcept {
    try {
        Dl_info info{};
        if (symbol_address != nullptr && dladdr(symbol_address, &info) != 0 &&
            info.dli_fname != nullptr) {
            return info.dli_fname;
        }
    } catch (...) {
    }
    return {};
}

namespace {
// The file dlopen actually mapped (a bare SONAME becomes its full path).
std::string resolved_path(void* handle, const std::string& fallback) {
    link_map* map = nullptr;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr &&
        map->l_name[0] != '\0') {
        return map->l_name;
    }
    return fallback;
}

std::string last_dl_error() {
    const char* e = dlerror();
    return e != nullptr ? std::string(e) : std::string("unknown dlopen error");
}
}  // namespace

LoadedLibrary load_library(const LibrarySearch& search, std::string& why_not) noexcept {
    LoadedLibrary out;
    try {
        for (const auto& name : search.reuse_names) {
            void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
            if (h != nullptr) {
                out.handle = h;
                out.path = resolved_path(h, name);
                out.reused = true;
                return out;
            }
        }
        if (!search.env_var.empty()) {
            const char* env = std::getenv(search.env_var.c_str());
            if (env != nullptr && *env != '\0') {
                void* h = dlopen(env, RTLD_NOW | RTLD_LOCAL);
                if (h == nullptr) {
                    why_not = search.env_var + "=" + env + " could not be loaded: " +
                              last_dl_error();
                    return out;
                }
                out.handle = h;
                out.path = resolved_path(h, env);
                return out;
            }
        }
        std::string tried;
        for (const auto& name : search.candidates) {
            void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
            if (h != nullptr) {
                out.handle = h;
                out.path = resolved_path(h, name);
                return out;
            }
            if (tried.empty()) tried = last_dl_error();
        }
        why_not = search.candidates.empty() ? std::string("no candidates")
                                             : search.candidates.front() + " not found (" +
                                                   tried + ")";
    } catch (...) {
        why_not = "out of memory while loading a library";
    }
    return out;
}

}  // namespace gpudiag::detail
