// SPDX-License-Identifier: Apache-2.0
// DynamicLibrary.
#include "capture/dynamic_library.hpp"

#include <dlfcn.h>
#include <link.h>

#include <gpudiag/capture.hpp>

#include <cstddef>
#include <cstdlib>
#include <cstring>

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
                    why_not =
                        search.env_var + "=" + env + " could not be loaded: " + last_dl_error();
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
        why_not = search.candidates.empty()
                      ? std::string("no candidates")
                      : search.candidates.front() + " not found (" + tried + ")";
    } catch (...) {
        why_not = "out of memory while loading a library";
    }
    return out;
}

std::vector<std::string> mapped_libraries(const std::string& prefix) noexcept {
    struct Scan {
        const std::string* prefix;
        std::vector<std::string> found;
    } scan{&prefix, {}};
    try {
        dl_iterate_phdr(
            [](dl_phdr_info* info, std::size_t, void* data) -> int {
                auto& s = *static_cast<Scan*>(data);
                if (info->dlpi_name == nullptr || info->dlpi_name[0] == '\0') return 0;
                const char* slash = std::strrchr(info->dlpi_name, '/');
                const char* base = slash != nullptr ? slash + 1 : info->dlpi_name;
                if (std::strncmp(base, s.prefix->c_str(), s.prefix->size()) == 0) {
                    s.found.emplace_back(info->dlpi_name);
                }
                return 0;
            },
            &scan);
    } catch (...) {
    }
    return std::move(scan.found);
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
    std::uint64_t adds = 0;
    dl_iterate_phdr(
        [](dl_phdr_info* info, std::size_t size, void* data) -> int {
            // dlpi_adds counts every object the process ever loaded (glibc >= 2.4, musl).
            if (size >= offsetof(dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds) {
                *static_cast<std::uint64_t*>(data) = info->dlpi_adds;
            }
            return 1;  // the counter is the same in every entry
        },
        &adds);
    return adds + (search_dirs().added.load(std::memory_order_acquire) << 32);
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
