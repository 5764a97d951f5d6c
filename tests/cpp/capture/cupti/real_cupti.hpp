// SPDX-License-Identifier: Apache-2.0
// The toolkit's real libcupti.so.13, for tests that use its record parser (works with no
// driver). Skips when the library is absent or is not CUPTI 13.0 (record sizes are the
// loaded library's: hand-built 13.0 records only parse under a 13.0 runtime).
#pragma once

#include <cupti.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

namespace gpudiag::test {

struct RealCupti {
    void* handle = nullptr;
    decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
    decltype(&cuptiGetCallbackName) callback_name = nullptr;
    std::uint32_t version = 0;
};

// Fills `out` or returns a reason to skip.
inline const char* load_real_cupti(RealCupti& out) {
#ifdef GPUDIAG_TEST_CUPTI_PATH
    out.handle = dlopen(GPUDIAG_TEST_CUPTI_PATH, RTLD_NOW | RTLD_LOCAL);
#endif
    if (out.handle == nullptr) return "the toolkit's libcupti.so.13 is not installed";
    auto get_version =
        reinterpret_cast<decltype(&cuptiGetVersion)>(dlsym(out.handle, "cuptiGetVersion"));
    out.next_record = reinterpret_cast<decltype(&cuptiActivityGetNextRecord)>(
        dlsym(out.handle, "cuptiActivityGetNextRecord"));
    out.callback_name = reinterpret_cast<decltype(&cuptiGetCallbackName)>(
        dlsym(out.handle, "cuptiGetCallbackName"));
    if (get_version == nullptr || out.next_record == nullptr ||
        get_version(&out.version) != CUPTI_SUCCESS) {
        return "libcupti lacks cuptiGetVersion/cuptiActivityGetNextRecord";
    }
    if (out.version / 100 != 1300) return "records are hand-built with CUPTI 13.0 layouts";
    return nullptr;
}

}  // namespace gpudiag::test
