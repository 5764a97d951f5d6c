// SPDX-License-Identifier: Apache-2.0
// gpudiag's own declarations of CUPTI's per-subscriber activity API (cupti_per_subscriber.hpp)
// held against cupti_activity.h / cupti_callbacks.h of the nvidia-cuda-cupti 13.4.92 wheel
// (tools/fetch_cupti_libs.sh). Compiled, never run: a mismatch fails the build.
#include "capture/cupti/cupti_per_subscriber.hpp"

#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cupti_version.h>

#include <cstddef>
#include <type_traits>

namespace v2 = gpudiag::detail::cupti_v2;

static_assert(CUPTI_API_VERSION >= 130400, "these must be the CUPTI 13.4 headers");
static_assert(v2::kFirstVersion == 130300);

// Structs: the same size and the same fields at the same offsets.
#define GPUDIAG_SAME_FIELD(ours, theirs, field)                       \
    static_assert(offsetof(ours, field) == offsetof(theirs, field) && \
                  sizeof(ours::field) == sizeof(theirs::field))

static_assert(sizeof(v2::SubscriberParams) == sizeof(CUpti_SubscriberParams));
static_assert(sizeof(v2::SubscriberParams) == CUpti_SubscriberParams_STRUCT_SIZE);
GPUDIAG_SAME_FIELD(v2::SubscriberParams, CUpti_SubscriberParams, structSize);
GPUDIAG_SAME_FIELD(v2::SubscriberParams, CUpti_SubscriberParams, subscriberName);
GPUDIAG_SAME_FIELD(v2::SubscriberParams, CUpti_SubscriberParams, oldSubscriberName);
GPUDIAG_SAME_FIELD(v2::SubscriberParams, CUpti_SubscriberParams, oldSubscriberSize);
GPUDIAG_SAME_FIELD(v2::SubscriberParams, CUpti_SubscriberParams, allowMultipleSubscribers);

static_assert(sizeof(v2::BufferRequestInfo) == sizeof(CUpti_BufferCallbackRequestInfo));
GPUDIAG_SAME_FIELD(v2::BufferRequestInfo, CUpti_BufferCallbackRequestInfo, structSize);

static_assert(sizeof(v2::BufferCompleteInfo) == sizeof(CUpti_BufferCallbackCompleteInfo));
GPUDIAG_SAME_FIELD(v2::BufferCompleteInfo, CUpti_BufferCallbackCompleteInfo, structSize);
GPUDIAG_SAME_FIELD(v2::BufferCompleteInfo, CUpti_BufferCallbackCompleteInfo, threadId);
GPUDIAG_SAME_FIELD(v2::BufferCompleteInfo, CUpti_BufferCallbackCompleteInfo, ppRecordLayouts);
GPUDIAG_SAME_FIELD(v2::BufferCompleteInfo, CUpti_BufferCallbackCompleteInfo, numRecordLayouts);

// Functions: CUPTI's own prototypes are gpudiag's signatures with CUPTI's structs put in.
static_assert(
    std::is_same_v<decltype(&cuptiSubscribe_v2), v2::SubscribeFnT<CUpti_SubscriberParams>>);
static_assert(std::is_same_v<decltype(&cuptiActivityRegisterCallbacks_v2),
                             v2::RegisterCallbacksFnT<CUpti_BufferCallbackRequestInfo,
                                                      CUpti_BufferCallbackCompleteInfo>>);
static_assert(std::is_same_v<CUpti_BuffersCallbackRequestFunc_v2,
                             v2::BufferRequestedFnT<CUpti_BufferCallbackRequestInfo>>);
static_assert(std::is_same_v<CUpti_BuffersCallbackCompleteFunc_v2,
                             v2::BufferCompletedFnT<CUpti_BufferCallbackCompleteInfo>>);
static_assert(
    std::is_same_v<decltype(&cuptiActivityEnable_v2), v2::EnableFnT<CUpti_ActivityConfig>>);
static_assert(
    std::is_same_v<decltype(&cuptiActivityDisable_v2), v2::EnableFnT<CUpti_ActivityConfig>>);
static_assert(std::is_same_v<decltype(&cuptiActivityGetNextRecord_v2), v2::GetNextRecordFn>);
static_assert(
    std::is_same_v<decltype(&cuptiActivityGetNumDroppedRecords_v2), v2::GetNumDroppedRecordsFn>);
static_assert(std::is_same_v<decltype(&cuptiActivityEnableRuntimeApi_v2), v2::EnableApiFn>);
static_assert(std::is_same_v<decltype(&cuptiActivityEnableDriverApi_v2), v2::EnableApiFn>);
