// SPDX-License-Identifier: Apache-2.0
// CuptiApi: loading. CUPTI 13.x only: record layouts and the cbid tables gpudiag reads are the
// 13.0 ones; CUPTI 12 (API version <= 28) numbers versions differently and is refused.
#include "capture/cupti_api.hpp"
#include "capture/cuda_driver_api.hpp"

#if GPUDIAG_HAVE_CUDA_HEADERS

#  include "capture/dynamic_library.hpp"

#  include <cstdlib>

namespace gpudiag::detail {
namespace {

// CUPTI 13 reports xxyyzz (major, minor, patch): 130001 = CUDA 13.0 Update 1.
constexpr std::uint32_t kMinVersion = 130000;
constexpr std::uint32_t kMaxVersionExclusive = 140000;

LibrarySearch cupti_search() {
    LibrarySearch s;
    s.reuse_names = {"libcupti.so.13", "libcupti.so"};
    s.env_var = "GPUDIAG_CUPTI_PATH";
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
    LoadedLibrary lib = load_library(cupti_search(), why);
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
    if (version < kMinVersion || version >= kMaxVersionExclusive) {
        r.why_not = "libcupti at " + a.path + " reports API version " + std::to_string(version) +
                    "; gpudiag reads CUPTI 13.x records (130000..139999)";
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
    return load_api_once<CuptiApi>(&load, "libcupti", why_not);
}

}  // namespace gpudiag::detail

#endif  // GPUDIAG_HAVE_CUDA_HEADERS
