// SPDX-License-Identifier: Apache-2.0
// DynamicLibrary: how gpudiag finds NVIDIA libraries at run time (never at link time), so the
// library has no NEEDED entry on any of them and reuses the copy a framework already loaded; and
// the one loader of their functions: each library's API is a table of rows {names, slot,
// required or optional, since which release}, filled by load_functions(), which says what is
// missing, and kept for the process by load_api().
#pragma once

#include "capture/platform/platform.hpp"

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
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
Fn find_symbol(void* handle, const char* name) noexcept {
    return reinterpret_cast<Fn>(platform::find_symbol_address(handle, name));
}

// ---- function tables: the one loader of every dlopen'ed library's functions ----

/// Where one resolved function goes: a typed function pointer of a library's table.
class FunctionSlot {
public:
    template <typename Fn>
    explicit FunctionSlot(Fn& target) noexcept
        : target_(&target), store_([](void* slot, void* address) noexcept {
              *static_cast<Fn*>(slot) = reinterpret_cast<Fn>(address);
          }) {}
    void store(void* address) const noexcept { store_(target_, address); }

private:
    void* target_;
    void (*store_)(void* slot, void* address) noexcept;
};

/// Whether the library is usable without the function.
enum class Need : std::uint8_t { kRequired, kOptional };

/// One row of a library's function table.
struct LibraryFunction {
    /// The names it goes by, newest first (an older release has only the older name); the first
    /// the library has fills the slot.
    std::array<const char*, 2> names;
    FunctionSlot slot;
    Need need = Need::kOptional;
    /// The first release that has it ("CUPTI 12.5"), said when it is missing; null when every
    /// release gpudiag supports has it.
    const char* since = nullptr;
};

/// The functions a library lacks, each named as "nvmlInit_v2 or nvmlInit" or
/// "cuptiSubscribe_v2 (CUPTI 13.0 on)", in table order.
struct MissingFunctions {
    std::vector<std::string> required;
    std::vector<std::string> optional;
    /// The required ones, joined with ", " ("" when none is missing).
    [[nodiscard]] std::string required_list() const;
};

/// Fills every slot of `table` from the library `handle` (null where it has none of the names)
/// and says which were missing. Thread-safety: safe (writes only the slots). Callback-safe: no.
MissingFunctions load_functions(void* handle, std::span<const LibraryFunction> table);

/// What loading one library's function table gave: the table, or why it is unusable.
template <typename Api>
struct ApiLoadResult {
    Api api;
    bool ok = false;
    std::string why_not;  ///< set when !ok
};

/// Directories given to add_library_search_dir(), in order.
std::vector<std::string> library_search_dirs() noexcept;

/// Changes whenever the process may have more libraries to offer: it loaded objects, or was
/// given search directories. Thread-safety: safe.
std::uint64_t library_environment_generation() noexcept;

/// The process-wide table of `Api`, made by `load`. A success is kept until the process exits
/// (never freed: other threads may still call through it). A failure is not kept for good:
/// `load` runs again once library_environment_generation() has moved (a framework imported
/// after the first attempt may have brought the library). Null when unusable, with the reason
/// in `why_not`; `library_name` names the library if even the attempt fails.
/// Thread-safety: safe. Callback-safe: no (may load).
template <typename Api>
const Api* load_api(ApiLoadResult<Api> (*load)(), const char* library_name,
                    std::string* why_not) noexcept {
    static std::atomic<const Api*> loaded{nullptr};
    static std::mutex mutex;
    static std::string* failure = nullptr;  // leaked, like the table: read after static teardown
    static std::uint64_t failed_at = 0;
    static bool tried = false;
    if (const Api* api = loaded.load(std::memory_order_acquire)) return api;
    try {
        std::lock_guard<std::mutex> lock(mutex);
        if (const Api* api = loaded.load(std::memory_order_acquire)) return api;
        if (!tried || library_environment_generation() != failed_at) {
            auto* result = new ApiLoadResult<Api>(load());
            tried = true;
            if (result->ok) {
                loaded.store(&result->api, std::memory_order_release);
                return &result->api;
            }
            failed_at = library_environment_generation();  // after load: it may have mapped some
            if (failure == nullptr) failure = new std::string;
            *failure = std::move(result->why_not);
            delete result;
        }
        if (why_not != nullptr) *why_not = *failure;
    } catch (...) {
        if (why_not != nullptr) {
            try {
                *why_not = std::string(library_name) + ": could not be loaded (out of memory)";
            } catch (...) {
            }
        }
    }
    return nullptr;
}

}  // namespace gpudiag::detail
