// SPDX-License-Identifier: Apache-2.0
// CUPTI's per-subscriber activity API (CUPTI 13.3+, with a driver that supports it: R610+),
// declared by gpudiag itself: the library is compiled against the CUDA 13.0 headers, which lack
// it, and must build without a download. Spelled after cupti_activity.h / cupti_callbacks.h of
// the nvidia-cuda-cupti 13.4.92 wheel; tests/cpp/capture/cupti/cupti_per_subscriber_check.cpp
// holds every type here against those headers with static_asserts wherever
// tools/fetch_cupti_libs.sh could fetch them.
//
// Each function takes the subscriber handle cuptiSubscribe_v2 returned. Several clients
// (PyTorch's CUPTI monitor, Nsight Systems, gpudiag) each get their own buffers, kinds and
// drop counts, once the first of them subscribed with allowMultipleSubscribers = 1. CUPTI
// refuses to mix that mode with the process-wide (v1) activity API.
#pragma once

#if GPUDIAG_HAVE_CUDA_HEADERS

// Not <cupti.h>: 13.4's pulls in the CUDA 13.4 runtime's meta headers, and the header check
// compiles this with 13.4's CUPTI headers beside an older toolkit.
#    include <cupti_activity.h>
#    include <cupti_callbacks.h>

#    include <cstddef>
#    include <cstdint>

namespace gpudiag::detail::cupti_v2 {

/// cuptiGetVersion of the first CUPTI with the per-subscriber activity API (CUDA 13.3).
constexpr std::uint32_t kFirstVersion = 130300;

/// CUpti_SubscriberParams of CUPTI 13.3+: 13.0's, plus allowMultipleSubscribers.
struct SubscriberParams {
    std::size_t structSize;
    const char* subscriberName;
    char* oldSubscriberName;  ///< CUPTI writes the holder's name here on refusal
    std::size_t oldSubscriberSize;
    std::uint8_t allowMultipleSubscribers;
    std::uint8_t padding[7];
};

/// CUpti_BufferCallbackRequestInfo.
struct BufferRequestInfo {
    std::size_t structSize;
};

/// CUpti_BufferCallbackCompleteInfo (the record layouts matter only for user-defined records,
/// which gpudiag does not ask for).
struct BufferCompleteInfo {
    std::size_t structSize;
    std::uint64_t threadId;
    void** ppRecordLayouts;
    std::size_t numRecordLayouts;
};

/// CUpti_ActivityConfig: gpudiag passes none (null), so it is never defined here.
struct ActivityConfig;

// The signatures, each a template over the struct types so that the header check can instantiate
// them with CUPTI's own structs and compare.
template <typename RequestInfo>
using BufferRequestedFnT = void(CUPTIAPI*)(std::uint8_t**, std::size_t*, std::size_t*,
                                           RequestInfo*);
template <typename CompleteInfo>
using BufferCompletedFnT = void(CUPTIAPI*)(std::uint8_t*, std::size_t, std::size_t, CompleteInfo*);
template <typename Params>
using SubscribeFnT = CUptiResult(CUPTIAPI*)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*,
                                            Params*);
template <typename RequestInfo, typename CompleteInfo>
using RegisterCallbacksFnT = CUptiResult(CUPTIAPI*)(CUpti_SubscriberHandle,
                                                    BufferRequestedFnT<RequestInfo>,
                                                    BufferCompletedFnT<CompleteInfo>);
template <typename Config>
using EnableFnT = CUptiResult(CUPTIAPI*)(CUpti_SubscriberHandle, CUpti_ActivityKind, Config*);

using BufferRequestedFn = BufferRequestedFnT<BufferRequestInfo>;
using BufferCompletedFn = BufferCompletedFnT<BufferCompleteInfo>;
/// cuptiSubscribe_v2 (13.0 has it with the shorter params; structSize tells CUPTI which).
using SubscribeFn = SubscribeFnT<SubscriberParams>;
/// cuptiActivityRegisterCallbacks_v2
using RegisterCallbacksFn = RegisterCallbacksFnT<BufferRequestInfo, BufferCompleteInfo>;
/// cuptiActivityEnable_v2, cuptiActivityDisable_v2
using EnableFn = EnableFnT<ActivityConfig>;
/// cuptiActivityGetNextRecord_v2
using GetNextRecordFn = CUptiResult(CUPTIAPI*)(CUpti_SubscriberHandle, std::uint8_t*, std::size_t,
                                               CUpti_Activity**);
/// cuptiActivityGetNumDroppedRecords_v2
using GetNumDroppedRecordsFn = CUptiResult(CUPTIAPI*)(CUpti_SubscriberHandle, CUcontext,
                                                      std::uint32_t, std::size_t*);
/// cuptiActivityEnableRuntimeApi_v2, cuptiActivityEnableDriverApi_v2
using EnableApiFn = CUptiResult(CUPTIAPI*)(CUpti_SubscriberHandle, CUpti_CallbackId, std::uint8_t);

}  // namespace gpudiag::detail::cupti_v2

#endif  // GPUDIAG_HAVE_CUDA_HEADERS
