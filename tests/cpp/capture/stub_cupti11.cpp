// SPDX-License-Identifier: Apache-2.0
// A libcupti.so.11.8 for tests: it reports API version 18, the number CUPTI 11.8 shares with the
// CUPTI 12.0 and 12.1 libraries, without their libcupti.so.12 symbol version, and counts every
// other call, so a test can tell that gpudiag refused it after asking only its version.
#include <cupti.h>

#include <atomic>

namespace {
std::atomic<int> g_other_calls{0};
}

extern "C" {

CUptiResult CUPTIAPI cuptiGetVersion(uint32_t* version) {
    *version = 18;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc,
                                                    CUpti_BuffersCallbackCompleteFunc) {
    ++g_other_calls;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind) {
    ++g_other_calls;
    return CUPTI_SUCCESS;
}

int gpudiag_stub_cupti11_other_calls() {
    return g_other_calls.load();
}

}  // extern "C"
