// SPDX-License-Identifier: Apache-2.0
// CuptiApi: the CUPTI functions gpudiag calls, resolved with dlsym from the one libcupti of the
// process. Compiled against the CUDA 13 headers; the functions it declares have the same
// signatures in CUPTI 12, and those CUPTI 12 lacks are optional (cuptiActivityEnableRuntimeApi
// before 12.5, cuptiActivityEnableAllSyncRecords before 12.8, cuptiSubscribe_v2 before 13.0).
// The per-subscriber activity functions (CUPTI 13.3+) are typed by gpudiag's own declarations
// (cupti_per_subscriber.hpp): the 13.0 headers lack them.
#pragma once

#if GPUDIAG_HAVE_CUDA_HEADERS

#    include "capture/cupti/cupti_per_subscriber.hpp"

#    include <cupti.h>

#    include <cstdint>
#    include <string>

namespace gpudiag::detail {

struct CuptiApi {
    // ---- required: without one of these there is no activity capture ----
    decltype(&cuptiGetVersion) get_version = nullptr;
    decltype(&cuptiGetResultString) get_result_string = nullptr;
    decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
    decltype(&cuptiActivityEnable) enable = nullptr;
    decltype(&cuptiActivityDisable) disable = nullptr;
    decltype(&cuptiActivityGetNextRecord) get_next_record = nullptr;
    decltype(&cuptiActivityFlushAll) flush_all = nullptr;
    decltype(&cuptiActivityGetNumDroppedRecords) get_num_dropped_records = nullptr;
    // ---- optional: each absence loses one feature, named in status() ----
    decltype(&cuptiGetTimestamp) get_timestamp = nullptr;
    decltype(&cuptiActivitySetAttribute) set_attribute = nullptr;
    decltype(&cuptiActivityEnableRuntimeApi) enable_runtime_api = nullptr;
    decltype(&cuptiActivityEnableDriverApi) enable_driver_api = nullptr;
    decltype(&cuptiActivityEnableAllSyncRecords) enable_all_sync_records = nullptr;
    decltype(&cuptiSubscribe) subscribe = nullptr;
    decltype(&cuptiSubscribe_v2) subscribe_v2 = nullptr;
    decltype(&cuptiUnsubscribe) unsubscribe = nullptr;
    decltype(&cuptiEnableCallback) enable_callback = nullptr;
    // ---- optional: the per-subscriber activity API (CUPTI 13.3+) ----
    cupti_v2::SubscribeFn subscribe_multi = nullptr;  ///< cuptiSubscribe_v2, 13.3's params
    cupti_v2::RegisterCallbacksFn register_callbacks_v2 = nullptr;
    cupti_v2::EnableFn enable_v2 = nullptr;
    cupti_v2::EnableFn disable_v2 = nullptr;
    cupti_v2::GetNextRecordFn get_next_record_v2 = nullptr;
    cupti_v2::GetNumDroppedRecordsFn get_num_dropped_records_v2 = nullptr;
    cupti_v2::EnableApiFn enable_runtime_api_v2 = nullptr;
    cupti_v2::EnableApiFn enable_driver_api_v2 = nullptr;

    void* handle = nullptr;
    std::string path;           ///< the file in use
    bool reused = false;        ///< a framework (torch) loaded it before us
    std::uint32_t version = 0;  ///< cuptiGetVersion: 130001 = CUDA 13.0 Update 1, 22 = 12.4
    bool cupti12_abi = false;   ///< its symbols carry the libcupti.so.12 version node
    std::string description;    ///< "CUPTI 12.4 (API version 22)"

    /// "CUPTI_ERROR_UNKNOWN" for a result code, never null.
    [[nodiscard]] std::string result_name(CUptiResult result) const noexcept;
    /// The per-subscriber functions gpudiag needs that this libcupti lacks ("" when it has
    /// them all), named as in CUPTI.
    [[nodiscard]] std::string missing_per_subscriber_functions() const;
};

/// The process' CUPTI: a libcupti already mapped in the process (any name or path; refused,
/// never doubled, when it is not CUPTI 12 or 13), else $GPUDIAG_CUPTI_PATH, else libcupti.so.13
/// or .12 from the directories given to add_library_search_dir, the loader path, $CUDA_HOME and
/// /usr/local/cuda. Null when unusable, with the reason in `why_not`; a failure is tried again
/// once the process has loaded more libraries. Thread-safety: safe. Callback-safe: no.
const CuptiApi* cupti_api(std::string* why_not = nullptr) noexcept;

}  // namespace gpudiag::detail

#endif  // GPUDIAG_HAVE_CUDA_HEADERS
