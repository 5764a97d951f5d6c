// SPDX-License-Identifier: Apache-2.0
// CuptiApi: loading. One CUPTI per process: two CUPTIs attached to one driver is undefined (hangs,
// crashes, silent loss), so a libcupti already mapped, whatever its name or path, is the one
// used, or none is. CUPTI 12.0 to 13.x is decoded (decodes_cupti in cupti_record_layouts.cpp
// says so, in one place); the record layouts are chosen from the version read here.
#include "capture/cupti/cupti_api.hpp"
#include "capture/platform/cuda_driver_api.hpp"

#include <fmt/format.h>

#if GPUDIAG_HAVE_CUDA_HEADERS

#    include "capture/cupti/cupti_record_layouts.hpp"
#    include "capture/platform/dynamic_library.hpp"
#    include "capture/platform/platform.hpp"

#    include <cstdlib>
#    include <utility>

namespace gpudiag::detail {
namespace {

// CUPTI 13 reports xxyyzz (major, minor, patch): 130001 = CUDA 13.0 Update 1. CUPTI 12 and
// older report a small API version number instead (CUPTI_API_VERSION: 18 for 11.8 and for the
// 12.0 and 12.1 libraries, 19-28 for 12.x).
std::string cuda_release(int cuda) {
    return fmt::format("{}.{}", cuda / 1000, cuda % 1000 / 10);
}

std::string describe_version(std::uint32_t version, bool cupti12_abi) {
    std::string api = fmt::format(" (API version {})", version);
    if (version >= 100000)
        return "CUPTI " + cuda_release(static_cast<int>(version / 100 * 10)) + api;
    if (!decodes_cupti(version, cupti12_abi)) {
        return std::string(version == 18  ? "CUPTI 11.8"
                           : version < 18 ? "CUPTI 11 or older"
                                          : "CUPTI") +
               api;
    }
    if (version == 18) return "CUPTI 12.0-12.1" + api;
    int cuda = cupti_cuda_version(version);
    return (cuda != 0 ? "CUPTI " + cuda_release(cuda) : std::string("CUPTI 12")) + api;
}

const char* const kDecodedCupti = "gpudiag decodes CUPTI 12.0 to 13.x records";

// The libcupti.so.12 ABI: its symbols carry that version node (12.0 shares API version 18 with
// CUPTI 11.8, whose symbols carry libcupti.so.11.8).
bool has_cupti12_abi(void* handle) {
    // A library without symbol versions answers every dlvsym: it has no such node.
    return platform::find_versioned_symbol(handle, "cuptiGetVersion", "libcupti.so.12") !=
               nullptr &&
           platform::find_versioned_symbol(handle, "cuptiGetVersion", "gpudiag.no.such.version") ==
               nullptr;
}

LibrarySearch cupti_search() {
    LibrarySearch s;
    s.env_var = "GPUDIAG_CUPTI_PATH";
    // Directories the embedding program named (the pip CUDA PyTorch uses) before the system's,
    // so a later import of the framework maps the same file instead of a second CUPTI.
    // In each place the CUDA 13 file first, then the CUDA 12 one.
    const char* const names[] = {"libcupti.so.13", "libcupti.so.12"};
    for (const std::string& dir : library_search_dirs()) {
        for (const char* name : names) s.candidates.push_back(dir + "/" + name);
    }
    for (const char* name : names) s.candidates.push_back(name);
    std::vector<std::string> roots;
    if (const char* home = std::getenv("CUDA_HOME"); home != nullptr && *home != '\0') {
        roots.emplace_back(home);
    }
    roots.emplace_back("/usr/local/cuda");
    for (const std::string& root : roots) {
        for (const char* name : names) {
            s.candidates.push_back(root + "/extras/CUPTI/lib64/" + name);
            s.candidates.push_back(root + "/lib64/" + name);
        }
    }
    return s;
}

using Loaded = ApiLoadResult<CuptiApi>;

// The functions gpudiag calls, and the release of those CUPTI 12 lacks.
std::vector<LibraryFunction> functions(CuptiApi& a) {
    constexpr Need kRequired = Need::kRequired;
    constexpr Need kOptional = Need::kOptional;
    const char* const kV2 = "CUPTI 13.3";  // the per-subscriber activity API
    using F = FunctionSlot;
    return {
        {{"cuptiGetVersion"}, F(a.get_version), kRequired},
        {{"cuptiGetResultString"}, F(a.get_result_string), kRequired},
        {{"cuptiActivityRegisterCallbacks"}, F(a.register_callbacks), kRequired},
        {{"cuptiActivityEnable"}, F(a.enable), kRequired},
        {{"cuptiActivityDisable"}, F(a.disable), kRequired},
        {{"cuptiActivityGetNextRecord"}, F(a.get_next_record), kRequired},
        {{"cuptiActivityFlushAll"}, F(a.flush_all), kRequired},
        {{"cuptiActivityGetNumDroppedRecords"}, F(a.get_num_dropped_records), kRequired},
        {{"cuptiGetTimestamp"}, F(a.get_timestamp), kOptional},
        {{"cuptiActivitySetAttribute"}, F(a.set_attribute), kOptional},
        {{"cuptiActivityEnableRuntimeApi"}, F(a.enable_runtime_api), kOptional, "CUPTI 12.5"},
        {{"cuptiActivityEnableDriverApi"}, F(a.enable_driver_api), kOptional, "CUPTI 12.5"},
        {{"cuptiActivityEnableAllSyncRecords"},
         F(a.enable_all_sync_records),
         kOptional,
         "CUPTI 12.8"},
        {{"cuptiSubscribe"}, F(a.subscribe), kOptional},
        {{"cuptiSubscribe_v2"}, F(a.subscribe_v2), kOptional, "CUPTI 13.0"},
        {{"cuptiUnsubscribe"}, F(a.unsubscribe), kOptional},
        {{"cuptiEnableCallback"}, F(a.enable_callback), kOptional},
        // The same symbol as subscribe_v2, typed with 13.3's params (allowMultipleSubscribers).
        {{"cuptiSubscribe_v2"}, F(a.subscribe_multi), kOptional, "CUPTI 13.0"},
        {{"cuptiActivityRegisterCallbacks_v2"}, F(a.register_callbacks_v2), kOptional, kV2},
        {{"cuptiActivityEnable_v2"}, F(a.enable_v2), kOptional, kV2},
        {{"cuptiActivityDisable_v2"}, F(a.disable_v2), kOptional, kV2},
        {{"cuptiActivityGetNextRecord_v2"}, F(a.get_next_record_v2), kOptional, kV2},
        {{"cuptiActivityGetNumDroppedRecords_v2"}, F(a.get_num_dropped_records_v2), kOptional, kV2},
        {{"cuptiActivityEnableRuntimeApi_v2"}, F(a.enable_runtime_api_v2), kOptional, kV2},
        {{"cuptiActivityEnableDriverApi_v2"}, F(a.enable_driver_api_v2), kOptional, kV2},
    };
}

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
        void* handle = platform::open_library(path.c_str(), platform::Open::kIfMapped);
        if (handle == nullptr) continue;
        std::uint32_t version = version_of(handle);
        bool cupti12 = has_cupti12_abi(handle);
        if (decodes_cupti(version, cupti12)) {
            out.handle = handle;
            out.path = path;
            out.reused = true;
            return out;
        }
        if (!refused.empty()) refused += ", ";
        refused +=
            path + " (" +
            (version != 0 ? describe_version(version, cupti12) : std::string("version unknown")) +
            ")";
    }
    why_not = "this process already has " + (refused.empty() ? mapped.front() : refused) +
              " loaded; " + kDecodedCupti +
              " and does not load a second CUPTI beside it (two "
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
    std::vector<std::string> mapped = platform::mapped_libraries("libcupti.so");
    LoadedLibrary lib =
        !mapped.empty() ? adopt_mapped(mapped, why) : load_library(cupti_search(), why);
    if (lib.handle == nullptr) {
        r.why_not = "libcupti: " + why;
        return r;
    }
    CuptiApi& a = r.api;
    a.handle = lib.handle;
    a.path = lib.path;
    a.reused = lib.reused;
    if (MissingFunctions missing = load_functions(a.handle, functions(a));
        !missing.required.empty()) {
        r.why_not = "libcupti at " + a.path + " lacks " + missing.required_list();
        return r;
    }
    // An optional function's absence loses one feature, said where the feature is used.
    std::uint32_t version = 0;
    if (a.get_version(&version) != CUPTI_SUCCESS) {
        r.why_not = "libcupti at " + a.path + ": cuptiGetVersion failed";
        return r;
    }
    a.version = version;
    a.cupti12_abi = has_cupti12_abi(a.handle);
    a.description = describe_version(version, a.cupti12_abi);
    if (!decodes_cupti(version, a.cupti12_abi)) {
        r.why_not = "libcupti at " + a.path + " is " + a.description + "; " + kDecodedCupti;
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
        return fmt::format("CUPTI error {}", static_cast<int>(result));
    } catch (...) {
        return {};
    }
}

std::string CuptiApi::missing_per_subscriber_functions() const {
    const std::pair<bool, const char*> needed[] = {
        {subscribe_multi != nullptr, "cuptiSubscribe_v2"},
        {unsubscribe != nullptr, "cuptiUnsubscribe"},
        {register_callbacks_v2 != nullptr, "cuptiActivityRegisterCallbacks_v2"},
        {enable_v2 != nullptr, "cuptiActivityEnable_v2"},
        {disable_v2 != nullptr, "cuptiActivityDisable_v2"},
        {get_next_record_v2 != nullptr, "cuptiActivityGetNextRecord_v2"},
        {get_num_dropped_records_v2 != nullptr, "cuptiActivityGetNumDroppedRecords_v2"},
        {enable_runtime_api_v2 != nullptr, "cuptiActivityEnableRuntimeApi_v2"},
        {enable_driver_api_v2 != nullptr, "cuptiActivityEnableDriverApi_v2"},
    };
    std::string missing;
    for (const auto& [present, name] : needed) {
        if (present) continue;
        if (!missing.empty()) missing += ", ";
        missing += name;
    }
    return missing;
}

const CuptiApi* cupti_api(std::string* why_not) noexcept {
    return load_api<CuptiApi>(&load, "libcupti", why_not);
}

}  // namespace gpudiag::detail

#endif  // GPUDIAG_HAVE_CUDA_HEADERS
