// SPDX-License-Identifier: Apache-2.0
// DynamicLibrary: how gpudiag finds NVIDIA libraries at run time (never at link time), so the
// library has no NEEDED entry on any of them and reuses the copy a framework already loaded.
#pragma once

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

}  // namespace gpudiag::detail
