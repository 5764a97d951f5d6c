// SPDX-License-Identifier: Apache-2.0
// DynamicLibrary: how gpudiag finds NVIDIA libraries at run time (never at link time), so the
// library has no NEEDED entry on any of them and reuses the copy a framework already loaded.
#pragma once

#include <mutex>
#include <string>
#include <vector>

namespace gpudiag::detail {

/// Where to look for one library, in order.
struct LibrarySearch {
    /// Names matched against libraries already in the process (dlopen RTLD_NOLOAD), e.g. the
    /// libcupti.so.13 that torch loaded: one CUPTI per process.
    std::vector<std::string> reuse_names;
    /// Environment variable holding an explicit path (GPUDIAG_CUPTI_PATH ...). When set, it is
    /// the only place tried after reuse: a wrong explicit path is reported, not papered over.
    std::string env_var;
    /// Names or paths handed to dlopen, in order.
    std::vector<std::string> candidates;
};

struct LoadedLibrary {
    void* handle = nullptr;  ///< never dlclose'd: other threads may be inside it
    std::string path;        ///< resolved file, for status()
    bool reused = false;     ///< it was already loaded by someone else
};

/// Loads the first library `search` finds, RTLD_NOW | RTLD_LOCAL. On failure `handle` is null
/// and `why_not` says what was tried. Thread-safety: safe. Callback-safe: no.
LoadedLibrary load_library(const LibrarySearch& search, std::string& why_not) noexcept;

/// The file that defines `symbol_address` ("" when unknown).
std::string library_path_of(const void* symbol_address) noexcept;

/// dlsym as a typed function pointer (null when absent).
template <typename Fn>
Fn find_symbol(void* handle, const char* name) noexcept;

void* find_symbol_address(void* handle, const char* name) noexcept;

template <typename Fn>
Fn find_symbol(void* handle, const char* name) noexcept {
    return reinterpret_cast<Fn>(find_symbol_address(handle, name));
}

/// What loading one library's function table gave: the table, or why it is unusable.
template <typename Api>
struct ApiLoadResult {
    Api api;
    bool ok = false;
    std::string why_not;  ///< set when !ok
};

/// The process-wide table of `Api`, made by `load` on the first call and kept until the process
/// exits (never freed: other threads may still call through it). Null when unusable, with the
/// reason in `why_not`. `library_name` names the library if even the attempt fails.
/// Thread-safety: safe. Callback-safe: no (the first call loads).
template <typename Api>
const Api* load_api_once(ApiLoadResult<Api> (*load)(), const char* library_name,
                         std::string* why_not) noexcept {
    static std::once_flag once;
    static ApiLoadResult<Api>* loaded = nullptr;
    try {
        std::call_once(once, [load] { loaded = new ApiLoadResult<Api>(load()); });
    } catch (...) {
        if (why_not != nullptr) {
            try {
                *why_not = std::string(library_name) + ": could not be loaded (out of memory)";
            } catch (...) {
            }
        }
        return nullptr;
    }
    if (loaded == nullptr) return nullptr;
    if (!loaded->ok) {
        if (why_not != nullptr) {
            try {
                *why_not = loaded->why_not;
            } catch (...) {
            }
        }
        return nullptr;
    }
    return &loaded->api;
}

}  // namespace gpudiag::detail
