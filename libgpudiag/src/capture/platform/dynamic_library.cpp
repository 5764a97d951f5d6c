// SPDX-License-Identifier: Apache-2.0
// DynamicLibrary.
#include "capture/platform/dynamic_library.hpp"

#include "capture/platform/platform.hpp"

#include <gpudiag/capture.hpp>

#include <cstddef>
#include <cstdlib>

namespace gpudiag::detail {
namespace {

constexpr std::size_t kMaxSearchDirs = 16;

struct SearchDirs {
    std::mutex mutex;
    std::vector<std::string> dirs;
    std::atomic<std::uint64_t> added{0};
};

SearchDirs& search_dirs() {
    static auto* dirs = new SearchDirs;  // leaked: capture may run during static teardown
    return *dirs;
}

}  // namespace

std::string library_path_of(const void* symbol_address) noexcept {
    try {
        platform::AddressInfo info;
        if (platform::describe_address(symbol_address, info)) return std::string(info.file);
    } catch (...) {
    }
    return {};
}

namespace {

std::string describe(const LibraryFunction& f) {
    std::string out;
    for (const char* name : f.names) {
        if (name == nullptr) continue;
        if (!out.empty()) out += " or ";
        out += name;
    }
    if (f.since != nullptr) out += std::string(" (") + f.since + " on)";
    return out;
}

}  // namespace

MissingFunctions load_functions(void* handle, std::span<const LibraryFunction> table) {
    MissingFunctions missing;
    for (const LibraryFunction& f : table) {
        void* address = nullptr;
        for (const char* name : f.names) {
            if (name != nullptr && address == nullptr) {
                address = platform::find_symbol_address(handle, name);
            }
        }
        f.slot.store(address);
        if (address == nullptr) {
            (f.need == Need::kRequired ? missing.required : missing.optional)
                .push_back(describe(f));
        }
    }
    return missing;
}

std::string MissingFunctions::required_list() const {
    std::string out;
    for (const std::string& name : required) {
        if (!out.empty()) out += ", ";
        out += name;
    }
    return out;
}

LoadedLibrary load_library(const LibrarySearch& search, std::string& why_not) noexcept {
    LoadedLibrary out;
    try {
        for (const auto& name : search.reuse_names) {
            void* h = platform::open_library(name.c_str(), platform::Open::kIfMapped);
            if (h != nullptr) {
                out.handle = h;
                out.path = platform::library_file(h, name);
                out.reused = true;
                return out;
            }
        }
        if (!search.env_var.empty()) {
            const char* env = std::getenv(search.env_var.c_str());
            if (env != nullptr && *env != '\0') {
                void* h = platform::open_library(env, platform::Open::kLoad);
                if (h == nullptr) {
                    why_not = search.env_var + "=" + env +
                              " could not be loaded: " + platform::library_error();
                    return out;
                }
                out.handle = h;
                out.path = platform::library_file(h, env);
                return out;
            }
        }
        std::string tried;
        for (const auto& name : search.candidates) {
            void* h = platform::open_library(name.c_str(), platform::Open::kLoad);
            if (h != nullptr) {
                out.handle = h;
                out.path = platform::library_file(h, name);
                return out;
            }
            if (tried.empty()) tried = platform::library_error();
        }
        why_not = search.candidates.empty()
                      ? std::string("no candidates")
                      : search.candidates.front() + " not found (" + tried + ")";
    } catch (...) {
        why_not = "out of memory while loading a library";
    }
    return out;
}

std::vector<std::string> library_search_dirs() noexcept {
    SearchDirs& d = search_dirs();
    try {
        std::lock_guard<std::mutex> lock(d.mutex);
        return d.dirs;
    } catch (...) {
        return {};
    }
}

std::uint64_t library_environment_generation() noexcept {
    return platform::objects_ever_mapped() +
           (search_dirs().added.load(std::memory_order_acquire) << 32);
}

}  // namespace gpudiag::detail

namespace gpudiag {

void add_library_search_dir(std::string_view directory) noexcept {
    if (directory.empty()) return;
    detail::SearchDirs& d = detail::search_dirs();
    try {
        std::lock_guard<std::mutex> lock(d.mutex);
        for (const auto& known : d.dirs) {
            if (known == directory) return;
        }
        if (d.dirs.size() >= detail::kMaxSearchDirs) return;
        d.dirs.emplace_back(directory);
        d.added.fetch_add(1, std::memory_order_release);
    } catch (...) {
    }
}

}  // namespace gpudiag
