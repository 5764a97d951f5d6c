// SPDX-License-Identifier: Apache-2.0
// A libcupti.so.12 for tests: it reports a CUPTI 12 API version (CUPTI 12 numbers its API with
// small integers; 13 reports 13xxyy) and counts every other call, so a test can tell that
// gpudiag refused it after asking only its version.
#include <cupti.h>

#include <atomic>

namespace {
std::atomic<int> g_other_calls{0};
}

extern "C" {

CUptiResult CUPTIAPI cuptiGetVersion(uint32_t* version) {
    *version = 24;
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

int gpudiag_stub_cupti12_other_calls() { return g_other_calls.load(); }

}  // extern "C"
