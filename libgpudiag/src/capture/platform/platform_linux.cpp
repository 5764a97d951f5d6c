// SPDX-License-Identifier: Apache-2.0
// The platform seam on Linux (glibc or musl): the loader (dlfcn, dl_iterate_phdr), /proc, gettid
// and the unwinder of <execinfo.h>.
#if defined(__linux__)

#    include "capture/platform/platform.hpp"

#    include <cxxabi.h>
#    include <dlfcn.h>
#    include <execinfo.h>
#    include <link.h>
#    include <sys/syscall.h>
#    include <unistd.h>

#    include <cstddef>
#    include <cstdlib>
#    include <cstring>
#    include <fstream>
#    include <iterator>
#    include <sstream>

namespace gpudiag::detail::platform {

// ---------------------------------------------------------------- dynamic libraries

void* open_library(const char* name_or_path, Open how) noexcept {
    switch (how) {
        case Open::kLoad: return dlopen(name_or_path, RTLD_NOW | RTLD_LOCAL);
        case Open::kIfMapped: return dlopen(name_or_path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
        case Open::kPeek: return dlopen(name_or_path, RTLD_LAZY | RTLD_NOLOAD);
    }
    return nullptr;
}

void* program_handle() noexcept {
    return dlopen(nullptr, RTLD_LAZY);
}

void close_library(void* handle) noexcept {
    if (handle != nullptr) dlclose(handle);
}

std::string library_error() {
    const char* e = dlerror();
    return e != nullptr ? std::string(e) : std::string("unknown dlopen error");
}

void* find_symbol_address(void* handle, const char* name) noexcept {
    if (handle == nullptr) return nullptr;
    return dlsym(handle, name);
}

void* find_versioned_symbol(void* handle, const char* name, const char* version) noexcept {
    if (handle == nullptr) return nullptr;
    return dlvsym(handle, name, version);
}

std::string library_file(void* handle, const std::string& fallback) {
    link_map* map = nullptr;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr &&
        map->l_name[0] != '\0') {
        return map->l_name;
    }
    return fallback;
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

std::uint64_t objects_ever_mapped() noexcept {
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
    return adds;
}

bool describe_address(const void* address, AddressInfo& out) noexcept {
    Dl_info info{};
    if (address == nullptr || dladdr(address, &info) == 0) return false;
    out.file = info.dli_fname != nullptr ? info.dli_fname : "";
    out.symbol = info.dli_sname;
    out.symbol_start = info.dli_saddr;
    out.file_base = info.dli_fbase;
    return true;
}

std::string demangle(const char* symbol) {
    int status = 0;
    char* demangled = abi::__cxa_demangle(symbol, nullptr, nullptr, &status);
    std::string out = status == 0 && demangled != nullptr ? demangled : "";
    std::free(demangled);
    return out;
}

// ---------------------------------------------------------------- process and threads

std::uint32_t process_id() noexcept {
    return static_cast<std::uint32_t>(getpid());
}

std::vector<std::uint32_t> parse_nspid(const std::string& status) {
    std::vector<std::uint32_t> pids;
    const std::size_t at = status.find("\nNSpid:");
    if (at == std::string::npos) return pids;
    std::istringstream line(status.substr(at + 7, status.find('\n', at + 1) - at - 7));
    std::uint32_t pid = 0;
    while (line >> pid) pids.push_back(pid);
    return pids;
}

std::vector<std::uint32_t> process_ids() noexcept {
    std::vector<std::uint32_t> ids;
    try {
        ids.push_back(process_id());
        std::ifstream in("/proc/self/status");
        std::string status((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        for (std::uint32_t p : parse_nspid("\n" + status)) ids.push_back(p);
    } catch (...) {  // process_id() alone: the rest is a refinement
    }
    return ids;
}

std::uint32_t thread_id() noexcept {
    thread_local std::uint32_t tid = static_cast<std::uint32_t>(syscall(SYS_gettid));
    return tid;
}

int stack_frames(void** frames, int capacity) noexcept {
    return backtrace(frames, capacity);
}

void warm_stack_walk() noexcept {
    void* warm[2];
    (void)backtrace(warm, 2);  // loads libgcc_s now, not inside the first callback
}

}  // namespace gpudiag::detail::platform

#endif  // __linux__
