// SPDX-License-Identifier: Apache-2.0
// CuptiApi: loading. One CUPTI per process: two CUPTIs attached to one driver is undefined (hangs,
// crashes, silent loss), so a libcupti already mapped, whatever its name or path, is the one
// used, or none is. Record layouts and cbid tables are the 13.0 ones: only CUPTI 13.x is
// decoded (decodes_cupti_version says so, in one place).
#include "capture/cupti_api.hpp"
#include "capture/cuda_driver_api.hpp"

#if GPUDIAG_HAVE_CUDA_HEADERS

#  include "capture/dynamic_library.hpp"

#  include <dlfcn.h>

#  include <cstdlib>

namespace gpudiag::detail {
namespace {

// CUPTI 13 reports xxyyzz (major, minor, patch): 130001 = CUDA 13.0 Update 1. CUPTI 12 and
// older report a small API version number instead (CUPTI_API_VERSION).
constexpr std::uint32_t kMinVersion = 130000;
constexpr std::uint32_t kMaxVersionExclusive = 140000;

// The one place that says which CUPTI versions gpudiag decodes; widen it with the decoder.
bool decodes_cupti_version(std::uint32_t version) {
    return version >= kMinVersion && version < kMaxVersionExclusive;
}

std::string describe_version(std::uint32_t version) {
    if (version >= 100000) return "CUPTI " + std::to_string(version / 10000) + " (API version " +
                                  std::to_string(version) + ")";
    return "CUPTI API version " + std::to_string(version) + " (CUPTI 12 or older)";
}

const char* const kDecodedCupti = "gpudiag decodes CUPTI 13.x records only";

LibrarySearch cupti_search() {
    LibrarySearch s;
    s.env_var = "GPUDIAG_CUPTI_PATH";
    // Directories the embedding program named (the pip CUDA PyTorch uses) before the system's,
    // so a later import of the framework maps the same file instead of a second CUPTI.
    for (const std::string& dir : library_search_dirs()) {
        s.candidates.push_back(dir + "/libcupti.so.13");
    }
    s.candidates.push_back("libcupti.so.13");
    if (const char* home = std::getenv("CUDA_HOME"); home != nullptr && *home != '\0') {
        s.candidates.push_back(std::string(home) + "/extras/CUPTI/lib64/libcupti.so.13");
        s.candidates.push_back(std::string(home) + "/lib64/libcupti.so.13");
    }
    s.candidates.push_back("/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13");
    s.candidates.push_back("/usr/local/cuda/lib64/libcupti.so.13");
    return s;
}

template <typename Fn>
bool resolve(void* handle, const char* name, Fn& out, std::string& missing) {
    out = find_symbol<Fn>(handle, name);
    if (out == nullptr) {
        if (!missing.empty()) missing += ", ";
        missing += name;
        return false;
    }
    return true;
}

using Loaded = ApiLoadResult<CuptiApi>;

// The CUPTI version of a mapped library, 0 when it cannot tell.
std::uint32_t version_of(void* handle) {
    auto get_version = find_symbol<decltype(&cuptiGetVersion)>(handle, "cuptiGetVersion");
    std::uint32_t version = 0;
    if (get_version == nullptr || get_version(&version) != CUPTI_SUCCESS) return 0;
    return version;
}

// A libcupti someone already mapped (a framework, a profiler): the first one gpudiag can
// decode, or a refusal that names what is there. Never a second copy next to it.
LoadedLibrary adopt_mapped(const std::vector<std::string>& mapped, std::string& why_not) {
    LoadedLibrary out;
    std::string refused;
    for (const std::string& path : mapped) {
        void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
        if (handle == nullptr) continue;
        std::uint32_t version = version_of(handle);
        if (decodes_cupti_version(version)) {
            out.handle = handle;
            out.path = path;
            out.reused = true;
            return out;
        }
        if (!refused.empty()) refused += ", ";
        refused += path + " (" + (version != 0 ? describe_version(version)
                                               : std::string("version unknown")) + ")";
    }
    why_not = "this process already has " + (refused.empty() ? mapped.front() : refused) +
              " loaded; " + kDecodedCupti + " and does not load a second CUPTI beside it (two "
              "in one process are undefined)";
    return out;
}

Loaded load() {
    Loaded r;
    std::string why;
    // No driver, no CUPTI: some libcupti builds (seen with the one in PyTorch's CUDA 13 wheels)
    // recurse until the stack overflows when their first call cannot load libcuda. Without a
    // driver there is nothing to capture anyway, so the library is not even opened.
    if (cuda_driver_api(&why) == nullptr) {
        r.why_not = "libcupti not loaded: " + why;
        return r;
    }
    why.clear();
    std::vector<std::string> mapped = mapped_libraries("libcupti.so");
    LoadedLibrary lib = !mapped.empty() ? adopt_mapped(mapped, why) : load_library(cupti_search(), why);
    if (lib.handle == nullptr) {
        r.why_not = "libcupti: " + why;
        return r;
    }
    CuptiApi& a = r.api;
    a.handle = lib.handle;
    a.path = lib.path;
    a.reused = lib.reused;
    std::string missing;
    resolve(a.handle, "cuptiGetVersion", a.get_version, missing);
    resolve(a.handle, "cuptiGetResultString", a.get_result_string, missing);
    resolve(a.handle, "cuptiActivityRegisterCallbacks", a.register_callbacks, missing);
    resolve(a.handle, "cuptiActivityEnable", a.enable, missing);
    resolve(a.handle, "cuptiActivityDisable", a.disable, missing);
    resolve(a.handle, "cuptiActivityGetNextRecord", a.get_next_record, missing);
    resolve(a.handle, "cuptiActivityFlushAll", a.flush_all, missing);
    resolve(a.handle, "cuptiActivityGetNumDroppedRecords", a.get_num_dropped_records, missing);
    if (!missing.empty()) {
        r.why_not = "libcupti at " + a.path + " lacks " + missing;
        return r;
    }
    std::string optional_missing;  // features lost are reported where they are used
    resolve(a.handle, "cuptiGetTimestamp", a.get_timestamp, optional_missing);
    resolve(a.handle, "cuptiActivitySetAttribute", a.set_attribute, optional_missing);
    resolve(a.handle, "cuptiActivityEnableRuntimeApi", a.enable_runtime_api, optional_missing);
    resolve(a.handle, "cuptiActivityEnableDriverApi", a.enable_driver_api, optional_missing);
    resolve(a.handle, "cuptiActivityEnableAllSyncRecords", a.enable_all_sync_records,
            optional_missing);
    resolve(a.handle, "cuptiSubscribe", a.subscribe, optional_missing);
    resolve(a.handle, "cuptiSubscribe_v2", a.subscribe_v2, optional_missing);
    resolve(a.handle, "cuptiUnsubscribe", a.unsubscribe, optional_missing);
    resolve(a.handle, "cuptiEnableCallback", a.enable_callback, optional_missing);

    std::uint32_t version = 0;
    if (a.get_version(&version) != CUPTI_SUCCESS) {
        r.why_not = "libcupti at " + a.path + ": cuptiGetVersion failed";
        return r;
    }
    a.version = version;
    if (!decodes_cupti_version(version)) {
        r.why_not = "libcupti at " + a.path + " is " + describe_version(version) + "; " +
                    kDecodedCupti;
        return r;
    }
    r.ok = true;
    return r;
}

}  // namespace

std::string CuptiApi::result_name(CUptiResult result) const noexcept {
    try {
        const char* s = nullptr;
        if (get_result_string != nullptr && get_result_string(result, &s) == CUPTI_SUCCESS &&
            s != nullptr) {
            return s;
        }
        return "CUPTI error " + std::to_string(static_cast<int>(result));
    } catch (...) {
        return {};
    }
}

const CuptiApi* cupti_api(std::string* why_not) noexcept {
    return load_api<CuptiApi>(&load, "libcupti", why_not);
}

}  // namespace gpudiag::detail

#endif  // GPUDIAG_HAVE_CUDA_HEADERS
