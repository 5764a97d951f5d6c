// SPDX-License-Identifier: Apache-2.0
// A stand-in libcupti for tests without a GPU: exports the CUPTI functions gpudiag resolves,
// records what gpudiag enables, and delivers hand-built activity records through the buffer
// callbacks gpudiag registered. Test hooks: the gpudiag_stub_cupti_* functions.
#include <cupti.h>

#include <chrono>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace {

struct StubState {
    std::mutex mutex;
    CUpti_BuffersCallbackRequestFunc request = nullptr;
    CUpti_BuffersCallbackCompleteFunc complete = nullptr;
    int register_calls = 0;
    std::set<int> kinds;
    std::set<int> kinds_ever;
    std::set<unsigned> runtime_apis;
    std::set<unsigned> driver_apis;
    int all_sync_records = -1;
    int zeroed = -1;
    CUptiResult enable_result = CUPTI_SUCCESS;
    std::string holder;  // non-empty: subscribe fails with 39 naming it
    CUpti_CallbackFunc subscriber = nullptr;
    void* subscriber_data = nullptr;
    std::set<std::pair<int, unsigned>> callbacks;
    std::vector<std::vector<uint8_t>> pending;  // one buffer per entry
    std::vector<std::pair<uint8_t*, size_t>> held;
    size_t dropped = 0;
    int flushes = 0;
    int forced_flushes = 0;
};

StubState& state() {
    static StubState s;
    return s;
}

size_t record_size(CUpti_ActivityKind kind) {
    switch (kind) {
        case CUPTI_ACTIVITY_KIND_MEMORY2: return sizeof(CUpti_ActivityMemory4);
        case CUPTI_ACTIVITY_KIND_MEMORY_POOL: return sizeof(CUpti_ActivityMemoryPool3);
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return sizeof(CUpti_ActivityKernel10);
        case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(CUpti_ActivityMemcpy6);
        case CUPTI_ACTIVITY_KIND_MEMCPY2: return sizeof(CUpti_ActivityMemcpyPtoP4);
        case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(CUpti_ActivityMemset4);
        case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: return sizeof(CUpti_ActivitySynchronization2);
        case CUPTI_ACTIVITY_KIND_RUNTIME:
        case CUPTI_ACTIVITY_KIND_DRIVER: return sizeof(CUpti_ActivityAPI);
        case CUPTI_ACTIVITY_KIND_OVERHEAD: return sizeof(CUpti_ActivityOverhead3);
        case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return sizeof(CUpti_ActivityExternalCorrelation);
        default: return 0;
    }
}

// Delivers one buffer's worth of records through gpudiag's callbacks (no lock held: the
// complete callback may call back into the stub).
void deliver(const std::vector<uint8_t>& records, CUpti_BuffersCallbackRequestFunc request,
             CUpti_BuffersCallbackCompleteFunc complete, size_t record_count) {
    uint8_t* buffer = nullptr;
    size_t size = 0;
    size_t max_records = 0;
    request(&buffer, &size, &max_records);
    if (buffer == nullptr || size < records.size()) {
        std::lock_guard<std::mutex> lock(state().mutex);
        state().dropped += record_count;
        return;
    }
    std::memcpy(buffer, records.data(), records.size());
    complete(nullptr, 0, buffer, size, records.size());
}

size_t count_records(const std::vector<uint8_t>& bytes) {
    size_t n = 0;
    size_t off = 0;
    while (off + sizeof(CUpti_Activity) <= bytes.size()) {
        auto kind = reinterpret_cast<const CUpti_Activity*>(bytes.data() + off)->kind;
        size_t sz = record_size(kind);
        if (sz == 0) break;
        off += sz;
        ++n;
    }
    return n;
}

}  // namespace

extern "C" {

CUptiResult CUPTIAPI cuptiGetVersion(uint32_t* version) {
    *version = 130001;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char** str) {
    switch (result) {
        case CUPTI_SUCCESS: *str = "CUPTI_SUCCESS"; break;
        case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
            *str = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED";
            break;
        case CUPTI_ERROR_UNKNOWN: *str = "CUPTI_ERROR_UNKNOWN"; break;
        default: *str = "CUPTI_ERROR_STUB"; break;
    }
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                                    CUpti_BuffersCallbackCompleteFunc complete) {
    std::lock_guard<std::mutex> lock(state().mutex);
    state().request = request;
    state().complete = complete;
    ++state().register_calls;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind) {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (state().enable_result != CUPTI_SUCCESS) return state().enable_result;
    state().kinds.insert(kind);
    state().kinds_ever.insert(kind);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
    std::lock_guard<std::mutex> lock(state().mutex);
    state().kinds.erase(kind);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid, CUpti_Activity** record) {
    size_t offset = 0;
    if (*record != nullptr) {
        offset = static_cast<size_t>(reinterpret_cast<uint8_t*>(*record) - buffer);
        size_t sz = record_size((*record)->kind);
        if (sz == 0) return CUPTI_ERROR_INVALID_KIND;
        offset += sz;
    }
    if (offset + sizeof(CUpti_Activity) > valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
    auto* next = reinterpret_cast<CUpti_Activity*>(buffer + offset);
    size_t sz = record_size(next->kind);
    if (sz == 0) return CUPTI_ERROR_INVALID_KIND;
    if (offset + sz > valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *record = next;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag) {
    std::vector<std::vector<uint8_t>> pending;
    CUpti_BuffersCallbackRequestFunc request;
    CUpti_BuffersCallbackCompleteFunc complete;
    {
        std::lock_guard<std::mutex> lock(state().mutex);
        ++state().flushes;
        if ((flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0) ++state().forced_flushes;
        pending.swap(state().pending);
        request = state().request;
        complete = state().complete;
    }
    if (request == nullptr || complete == nullptr) return CUPTI_SUCCESS;
    for (const auto& p : pending) deliver(p, request, complete, count_records(p));
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
    std::lock_guard<std::mutex> lock(state().mutex);
    *dropped = state().dropped;
    state().dropped = 0;  // CUPTI resets the count on read
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t* timestamp) {
    *timestamp = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(
            std::chrono::system_clock::now().time_since_epoch())
            .count());
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivitySetAttribute(CUpti_ActivityAttribute attr, size_t* size, void* value) {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (attr == CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER && *size == 1) {
        state().zeroed = *static_cast<uint8_t*>(value);
    }
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable) {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (enable != 0) {
        state().runtime_apis.insert(cbid);
    } else {
        state().runtime_apis.erase(cbid);
    }
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable) {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (enable != 0) {
        state().driver_apis.insert(cbid);
    } else {
        state().driver_apis.erase(cbid);
    }
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnableAllSyncRecords(uint8_t enable) {
    std::lock_guard<std::mutex> lock(state().mutex);
    state().all_sync_records = enable;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiSubscribe_v2(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                       void* userdata, CUpti_SubscriberParams* params) {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (!state().holder.empty() || state().subscriber != nullptr) {
        if (params != nullptr && params->oldSubscriberName != nullptr && params->oldSubscriberSize > 0) {
            std::string name = state().holder.empty() ? "CUPTI for gpudiag" : state().holder;
            std::strncpy(params->oldSubscriberName, name.c_str(), params->oldSubscriberSize - 1);
            params->oldSubscriberName[params->oldSubscriberSize - 1] = '\0';
        }
        return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    }
    state().subscriber = callback;
    state().subscriber_data = userdata;
    *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&state());
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                    void* userdata) {
    return cuptiSubscribe_v2(subscriber, callback, userdata, nullptr);
}

CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle) {
    std::lock_guard<std::mutex> lock(state().mutex);
    state().subscriber = nullptr;
    state().subscriber_data = nullptr;
    state().callbacks.clear();
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle, CUpti_CallbackDomain domain,
                                         CUpti_CallbackId cbid) {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (enable != 0) {
        state().callbacks.insert({domain, cbid});
    } else {
        state().callbacks.erase({domain, cbid});
    }
    return CUPTI_SUCCESS;
}

// ------------------------------------------------------------------ test hooks
void gpudiag_stub_cupti_reset() {
    std::lock_guard<std::mutex> lock(state().mutex);
    StubState& s = state();
    s.kinds.clear();
    s.kinds_ever.clear();
    s.runtime_apis.clear();
    s.driver_apis.clear();
    s.all_sync_records = -1;
    s.zeroed = -1;
    s.enable_result = CUPTI_SUCCESS;
    s.holder.clear();
    s.callbacks.clear();
    s.pending.clear();
    s.dropped = 0;
    s.flushes = 0;
    s.forced_flushes = 0;
    s.register_calls = 0;
}
void gpudiag_stub_cupti_set_enable_result(int result) {
    std::lock_guard<std::mutex> lock(state().mutex);
    state().enable_result = static_cast<CUptiResult>(result);
}
void gpudiag_stub_cupti_set_subscriber_holder(const char* name) {
    std::lock_guard<std::mutex> lock(state().mutex);
    state().holder = name != nullptr ? name : "";
}
void gpudiag_stub_cupti_queue_buffer(const void* records, size_t bytes) {
    std::lock_guard<std::mutex> lock(state().mutex);
    const auto* p = static_cast<const uint8_t*>(records);
    state().pending.emplace_back(p, p + bytes);
}
int gpudiag_stub_cupti_kind_enabled(int kind) {
    std::lock_guard<std::mutex> lock(state().mutex);
    return state().kinds.count(kind) != 0 ? 1 : 0;
}
int gpudiag_stub_cupti_kind_ever_enabled(int kind) {
    std::lock_guard<std::mutex> lock(state().mutex);
    return state().kinds_ever.count(kind) != 0 ? 1 : 0;
}
int gpudiag_stub_cupti_api_enabled(int runtime, unsigned cbid) {
    std::lock_guard<std::mutex> lock(state().mutex);
    return (runtime != 0 ? state().runtime_apis : state().driver_apis).count(cbid) != 0 ? 1 : 0;
}
int gpudiag_stub_cupti_all_sync_records() {
    std::lock_guard<std::mutex> lock(state().mutex);
    return state().all_sync_records;
}
int gpudiag_stub_cupti_zeroed_attribute() {
    std::lock_guard<std::mutex> lock(state().mutex);
    return state().zeroed;
}
int gpudiag_stub_cupti_has_subscriber() {
    std::lock_guard<std::mutex> lock(state().mutex);
    return state().subscriber != nullptr ? 1 : 0;
}
int gpudiag_stub_cupti_callback_enabled(int domain, unsigned cbid) {
    std::lock_guard<std::mutex> lock(state().mutex);
    return state().callbacks.count({domain, cbid}) != 0 ? 1 : 0;
}
int gpudiag_stub_cupti_register_calls() {
    std::lock_guard<std::mutex> lock(state().mutex);
    return state().register_calls;
}
int gpudiag_stub_cupti_forced_flushes() {
    std::lock_guard<std::mutex> lock(state().mutex);
    return state().forced_flushes;
}
void gpudiag_stub_cupti_add_dropped(size_t n) {
    std::lock_guard<std::mutex> lock(state().mutex);
    state().dropped += n;
}
// Calls the subscriber's callback as CUPTI would from inside an API call.
int gpudiag_stub_cupti_invoke_callback(int domain, unsigned cbid, const void* data) {
    CUpti_CallbackFunc cb;
    void* userdata;
    {
        std::lock_guard<std::mutex> lock(state().mutex);
        if (state().callbacks.count({domain, cbid}) == 0) return 0;
        cb = state().subscriber;
        userdata = state().subscriber_data;
    }
    if (cb == nullptr) return 0;
    cb(userdata, static_cast<CUpti_CallbackDomain>(domain), cbid, data);
    return 1;
}
// Another client (torch.profiler) registering its own buffer callbacks.
void gpudiag_stub_cupti_take_over_callbacks() {
    std::lock_guard<std::mutex> lock(state().mutex);
    state().request = nullptr;
    state().complete = nullptr;
}
// Takes `n` buffers from gpudiag's request callback and keeps them (per-thread buffers held by
// busy CUDA threads); returns how many were granted.
int gpudiag_stub_cupti_hold_buffers(int n) {
    CUpti_BuffersCallbackRequestFunc request;
    {
        std::lock_guard<std::mutex> lock(state().mutex);
        request = state().request;
    }
    int granted = 0;
    for (int i = 0; i < n && request != nullptr; ++i) {
        uint8_t* buffer = nullptr;
        size_t size = 0;
        size_t max_records = 0;
        request(&buffer, &size, &max_records);
        if (buffer == nullptr) continue;
        std::lock_guard<std::mutex> lock(state().mutex);
        state().held.emplace_back(buffer, size);
        ++granted;
    }
    return granted;
}
// Returns the held buffers empty.
void gpudiag_stub_cupti_release_held() {
    std::vector<std::pair<uint8_t*, size_t>> held;
    CUpti_BuffersCallbackCompleteFunc complete;
    {
        std::lock_guard<std::mutex> lock(state().mutex);
        held.swap(state().held);
        complete = state().complete;
    }
    for (auto& [buffer, size] : held) {
        if (complete != nullptr) complete(nullptr, 0, buffer, size, 0);
    }
}

}  // extern "C"
