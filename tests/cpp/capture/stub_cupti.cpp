// SPDX-License-Identifier: Apache-2.0
// A stand-in libcupti for tests without a GPU. It models the behaviour of CUPTI 13's activity API
// that gpudiag depends on, as the CUDA 13.0 headers (cupti_activity.h, cupti_callbacks.h,
// cupti_result.h) document it:
//
// * Buffers: per-thread by default (CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER = 1): a thread
//   asks for a buffer (the registered request callback, on that thread) at its first record and
//   keeps it; a full buffer goes to CUPTI's worker thread, which completes it asynchronously once
//   its records are complete. PER_THREAD = 0 shares one buffer.
// * cuptiActivityFlushAll(0) completes, on the caller, every buffer whose records are complete,
//   full or not, and withholds the rest. FORCED completes all; a record still in flight comes back
//   either with zero timestamps or as a record the parser calls CUPTI_ERROR_INVALID_KIND (which
//   it cannot step over: the real libcupti 13.0 parser leaves the record pointer where it was).
// * Completion goes to whichever callbacks are registered *then*: another client that registered
//   its own (Kineto) receives gpudiag's outstanding buffers, and drops them as unknown.
// * Records of disabled kinds are not made. cuptiActivityEnable(RUNTIME/DRIVER) overrides the
//   per-cbid settings made before it, as the header says.
// * cuptiActivityRegisterTimestampCallback replaces the clock of every record and of
//   cuptiGetTimestamp ("normalized to correspond with" the records); the foreign client can
//   install one returning raw cycles, as Kineto does.
// * Error codes are the ones the header lists per function: cuptiActivityEnable returns
//   NOT_INITIALIZED (driver missing or older than CUPTI), NOT_COMPATIBLE (KERNEL with
//   CONCURRENT_KERNEL) or INVALID_KIND; cuptiSubscribe returns MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
//   with the holder's name; cuptiActivityFlushAll without callbacks, INVALID_OPERATION.
//
// Built a third time as a CUPTI 13.4 (GPUDIAG_STUB_CUPTI_V2), it also has the per-subscriber
// activity API (cupti_per_subscriber.hpp spells it): a subscriber made by cuptiSubscribe_v2 with
// allowMultipleSubscribers gets its own buffer callbacks, kinds, per-cbid API records and drop
// count, and records reach every such subscriber that enabled their kind. The headers do not say
// which code each refusal returns; the stub's choice, for the tests to tell the causes apart:
// * cuptiSubscribe_v2(allowMultipleSubscribers) while the process-wide API is in use (a kind
//   enabled through it, a v1 subscriber, or a tool holding CUPTI): MULTIPLE_SUBSCRIBERS_NOT_
//   SUPPORTED with the holder's name; on a driver without support (switch): NOT_SUPPORTED.
// * The process-wide cuptiActivityRegisterCallbacks / cuptiActivityEnable while a per-subscriber
//   client is subscribed: NOT_COMPATIBLE.
//
// Test hooks: the gpudiag_stub_cupti_* functions at the end.
#include "capture/cupti/cupti_per_subscriber.hpp"

#include <cupti.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <time.h>

namespace {

using SteadyClock = std::chrono::steady_clock;

struct InFlight {
    std::size_t offset;  // of a kernel record whose timestamps are not known yet
    SteadyClock::time_point done_at;
    std::uint64_t start;
    std::uint64_t end;
};

struct Buffer {
    std::uint8_t* data = nullptr;
    std::size_t size = 0;
    std::size_t used = 0;
    std::vector<InFlight> in_flight;
};

// Kineto's kinds (CuptiActivityApi::enableCuptiActivities for a CUDA trace).
constexpr CUpti_ActivityKind kForeignKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                                CUPTI_ACTIVITY_KIND_MEMCPY,
                                                CUPTI_ACTIVITY_KIND_MEMSET,
                                                CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
                                                CUPTI_ACTIVITY_KIND_RUNTIME,
                                                CUPTI_ACTIVITY_KIND_DRIVER,
                                                CUPTI_ACTIVITY_KIND_OVERHEAD,
                                                CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};
constexpr std::size_t kForeignBufferBytes = 64 * 1024;

struct StubState {
    std::mutex mutex;
    std::condition_variable worker_cv;
    std::thread worker;
    bool worker_started = false;

    CUpti_BuffersCallbackRequestFunc request = nullptr;
    CUpti_BuffersCallbackCompleteFunc complete = nullptr;
    CUpti_BuffersCallbackCompleteFunc client_complete = nullptr;  // the library under test's
    int register_calls = 0;
    int v1_setting_calls = 0;  // process-wide kind and per-cbid API record settings asked for
    std::set<int> kinds;
    std::set<int> kinds_ever;
    bool runtime_all = false;
    bool driver_all = false;
    std::map<unsigned, bool> runtime_cbids;
    std::map<unsigned, bool> driver_cbids;
    int all_sync_records = -1;
    int zeroed = -1;     // -1: never set by anyone
    int per_thread = 1;  // the documented default
    CUpti_TimestampCallbackFunc timestamp = nullptr;

    CUptiResult global_result = CUPTI_SUCCESS;  // NOT_INITIALIZED: no usable driver
    std::map<int, CUptiResult> kind_results;
    CUptiResult flush_result = CUPTI_SUCCESS;
    bool forced_invalid_kind = false;  // how FORCED renders records in flight

    std::string holder;  // non-empty: a foreign subscriber (or tool) reported under this name
    CUpti_CallbackFunc subscriber = nullptr;
    void* subscriber_data = nullptr;
    std::set<std::pair<int, unsigned>> callbacks;

    std::map<std::thread::id, Buffer> thread_buffers;
    Buffer shared_buffer;
    std::deque<Buffer> full;  // for the worker
    std::vector<std::pair<std::uint8_t*, std::size_t>> held;
    std::size_t dropped = 0;
    int flushes = 0;
    int forced_flushes = 0;
    int worker_completions = 0;

    std::set<std::uint8_t*> foreign_buffers;
    std::size_t foreign_records = 0;
    std::size_t foreign_unknown_buffers = 0;

    // ---- the per-subscriber API: the client under test, and a foreign one that counts ----
    bool v2_driver_support = true;
    bool v2_subscribed = false;
    gpudiag::detail::cupti_v2::BufferRequestedFn v2_request = nullptr;
    gpudiag::detail::cupti_v2::BufferCompletedFn v2_complete = nullptr;
    CUpti_CallbackFunc v2_callback = nullptr;
    void* v2_callback_data = nullptr;
    std::set<int> v2_kinds;
    std::map<unsigned, bool> v2_runtime_cbids;
    std::map<unsigned, bool> v2_driver_cbids;
    std::size_t v2_dropped = 0;
    int v2_next_record_calls = 0;
    bool foreign_v2 = false;
    std::size_t foreign_v2_records = 0;
};

// The client under test's per-subscriber handle (any unique non-null pointer).
int g_v2_handle_token = 0;
CUpti_SubscriberHandle v2_handle() {
    return reinterpret_cast<CUpti_SubscriberHandle>(&g_v2_handle_token);
}

StubState& state() {
    static auto* s = new StubState;  // leaked: the worker thread outlives static destruction
    return *s;
}

std::uint64_t clock_ns(clockid_t id) {
    timespec ts{};
    clock_gettime(id, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ULL +
           static_cast<std::uint64_t>(ts.tv_nsec);
}

// Raw cycles of a 2.9 GHz counter, as Kineto's TSC timestamp callback returns.
std::uint64_t CUPTIAPI cycle_counter() {
    return clock_ns(CLOCK_MONOTONIC_RAW) / 10 * 29;
}

std::uint64_t now_locked(const StubState& s) {
    return s.timestamp != nullptr ? s.timestamp() : clock_ns(CLOCK_REALTIME);
}

std::size_t record_size(CUpti_ActivityKind kind) {
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
        case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
            return sizeof(CUpti_ActivityExternalCorrelation);
        default: return 0;
    }
}

std::size_t count_records(const std::uint8_t* bytes, std::size_t valid) {
    std::size_t n = 0;
    for (std::size_t off = 0; off + sizeof(CUpti_Activity) <= valid; ++n) {
        std::size_t sz = record_size(reinterpret_cast<const CUpti_Activity*>(bytes + off)->kind);
        if (sz == 0) break;
        off += sz;
    }
    return n;
}

bool kind_recorded(const StubState& s, const CUpti_Activity* record) {
    auto per_cbid = [](const std::map<unsigned, bool>& cbids, bool all, unsigned cbid) {
        auto it = cbids.find(cbid);
        return it != cbids.end() ? it->second : all;
    };
    switch (record->kind) {
        case CUPTI_ACTIVITY_KIND_RUNTIME:
            return per_cbid(s.runtime_cbids, s.runtime_all,
                            reinterpret_cast<const CUpti_ActivityAPI*>(record)->cbid);
        case CUPTI_ACTIVITY_KIND_DRIVER:
            return per_cbid(s.driver_cbids, s.driver_all,
                            reinterpret_cast<const CUpti_ActivityAPI*>(record)->cbid);
        case CUPTI_ACTIVITY_KIND_MEMCPY2: return s.kinds.count(CUPTI_ACTIVITY_KIND_MEMCPY) != 0;
        default: return s.kinds.count(record->kind) != 0;
    }
}

bool foreign_kind(CUpti_ActivityKind kind) {
    for (CUpti_ActivityKind k : kForeignKinds) {
        if (k == kind || (kind == CUPTI_ACTIVITY_KIND_MEMCPY2 && k == CUPTI_ACTIVITY_KIND_MEMCPY)) {
            return true;
        }
    }
    return false;
}

bool per_cbid_on(const std::map<unsigned, bool>& cbids, unsigned cbid) {
    auto it = cbids.find(cbid);
    return it != cbids.end() && it->second;
}

// The per-subscriber client's filter: its own kinds and per-cbid API records.
bool v2_kind_recorded(const StubState& s, const CUpti_Activity* record) {
    switch (record->kind) {
        case CUPTI_ACTIVITY_KIND_RUNTIME:
            return per_cbid_on(s.v2_runtime_cbids,
                               reinterpret_cast<const CUpti_ActivityAPI*>(record)->cbid);
        case CUPTI_ACTIVITY_KIND_DRIVER:
            return per_cbid_on(s.v2_driver_cbids,
                               reinterpret_cast<const CUpti_ActivityAPI*>(record)->cbid);
        case CUPTI_ACTIVITY_KIND_MEMCPY2: return s.v2_kinds.count(CUPTI_ACTIVITY_KIND_MEMCPY) != 0;
        default: return s.v2_kinds.count(record->kind) != 0;
    }
}

// CUPTI serves one mode at a time: the process-wide API, or per-subscriber clients.
bool process_wide_in_use(const StubState& s) {
    return !s.kinds.empty() || s.subscriber != nullptr || !s.holder.empty();
}
bool per_subscriber_in_use(const StubState& s) {
    return s.v2_subscribed || s.foreign_v2;
}

// Writes the timestamps of kernels that finished by `now`; true when none is in flight.
bool settle(Buffer& b, SteadyClock::time_point now) {
    auto still = b.in_flight.begin();
    for (auto it = b.in_flight.begin(); it != b.in_flight.end(); ++it) {
        if (it->done_at <= now) {
            auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(b.data + it->offset);
            k->start = it->start;
            k->end = it->end;
        } else {
            *still++ = *it;
        }
    }
    b.in_flight.erase(still, b.in_flight.end());
    return b.in_flight.empty();
}

// A forced flush hands over records in flight as they are: zero timestamps, or not yet marked
// with their kind.
void force(StubState& s, Buffer& b) {
    if (s.forced_invalid_kind) {
        for (const InFlight& f : b.in_flight) {
            reinterpret_cast<CUpti_Activity*>(b.data + f.offset)->kind =
                CUPTI_ACTIVITY_KIND_INVALID;
        }
    }
    b.in_flight.clear();
}

// Where completed buffers go: the per-subscriber client's callback while it is subscribed,
// else the process-wide one registered then.
struct Completer {
    CUpti_BuffersCallbackCompleteFunc v1 = nullptr;
    gpudiag::detail::cupti_v2::BufferCompletedFn v2 = nullptr;
};
Completer completer_locked(const StubState& s) {
    if (s.v2_subscribed && s.v2_complete != nullptr) return Completer{nullptr, s.v2_complete};
    return Completer{s.complete, nullptr};
}

void deliver(Completer complete, std::vector<Buffer>& out) {
    for (Buffer& b : out) {
        if (complete.v2 != nullptr) {
            gpudiag::detail::cupti_v2::BufferCompleteInfo info{};
            info.structSize = sizeof info;
            complete.v2(b.data, b.size, b.used, &info);
        } else if (complete.v1 != nullptr) {
            complete.v1(nullptr, 0, b.data, b.size, b.used);
        }
    }
    out.clear();
}

// CUPTI's worker thread: completes full buffers once their records are complete.
void worker_loop() {
    StubState& s = state();
    std::unique_lock<std::mutex> lock(s.mutex);
    for (;;) {
        auto now = SteadyClock::now();
        auto wake = now + std::chrono::milliseconds(50);
        std::vector<Buffer> ready;
        for (auto it = s.full.begin(); it != s.full.end();) {
            if (settle(*it, now)) {
                ready.push_back(*it);
                it = s.full.erase(it);
            } else {
                for (const InFlight& f : it->in_flight) wake = std::min(wake, f.done_at);
                ++it;
            }
        }
        if (!ready.empty()) {
            s.worker_completions += static_cast<int>(ready.size());
            Completer complete = completer_locked(s);
            lock.unlock();
            deliver(complete, ready);
            lock.lock();
            continue;
        }
        s.worker_cv.wait_until(lock, wake);
    }
}

void start_worker_locked(StubState& s) {
    if (s.worker_started) return;
    s.worker_started = true;
    s.worker = std::thread(worker_loop);
    s.worker.detach();
}

// Appends one record to the calling thread's buffer (or the shared one), asking the registered
// request callback for a buffer on this thread when it has none or the record does not fit.
int emit(const void* bytes, std::size_t size, int in_flight_ms) {
    StubState& s = state();
    std::unique_lock<std::mutex> lock(s.mutex);
    const auto* record = static_cast<const CUpti_Activity*>(bytes);
    if (s.global_result != CUPTI_SUCCESS) return 0;
    bool v2 = s.v2_subscribed;
    if (s.foreign_v2 && foreign_kind(record->kind)) ++s.foreign_v2_records;  // its own copy
    if (v2 ? !v2_kind_recorded(s, record) : !kind_recorded(s, record)) return 0;
    auto slot = [&]() -> Buffer& {
        return s.per_thread != 0 ? s.thread_buffers[std::this_thread::get_id()] : s.shared_buffer;
    };
    if (slot().data != nullptr && slot().used + size > slot().size) {
        s.full.push_back(slot());
        slot() = Buffer{};
        s.worker_cv.notify_all();
    }
    if (slot().data == nullptr) {
        CUpti_BuffersCallbackRequestFunc request = s.request;
        gpudiag::detail::cupti_v2::BufferRequestedFn request_v2 = v2 ? s.v2_request : nullptr;
        std::uint8_t* data = nullptr;
        std::size_t got = 0;
        std::size_t max_records = 0;
        if (request_v2 != nullptr) {
            gpudiag::detail::cupti_v2::BufferRequestInfo info{sizeof(info)};
            lock.unlock();
            request_v2(&data, &got, &max_records, &info);
            lock.lock();
        } else if (request != nullptr && !v2) {
            lock.unlock();  // the client's callback runs on this thread, with no stub lock held
            request(&data, &got, &max_records);
            lock.lock();
        }
        if (data == nullptr || got < size) {
            ++(v2 ? s.v2_dropped : s.dropped);  // declined: CUPTI drops the record and counts it
            return 0;
        }
        if (slot().data != nullptr) {  // another thread filled the shared slot meanwhile
            s.full.push_back(Buffer{data, got, 0, {}});
        } else {
            slot() = Buffer{data, got, 0, {}};
        }
    }
    Buffer& b = slot();
    std::memcpy(b.data + b.used, bytes, size);
    if (in_flight_ms > 0 && size >= sizeof(CUpti_ActivityKernel10)) {
        auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(b.data + b.used);
        b.in_flight.push_back(InFlight{b.used,
                                       SteadyClock::now() + std::chrono::milliseconds(in_flight_ms),
                                       k->start, k->end});
        k->start = 0;
        k->end = 0;
    }
    b.used += size;
    return 1;
}

// Takes every buffer a flush returns (FlushAll: all complete ones; forced: all).
std::vector<Buffer> take_flushable(StubState& s, bool forced) {
    std::vector<Buffer> out;
    auto now = SteadyClock::now();
    auto take = [&](Buffer& b) {
        if (b.data == nullptr || b.used == 0) return false;
        if (!settle(b, now)) {
            if (!forced) return false;  // FlushAll(0) withholds buffers with incomplete records
            force(s, b);
        }
        out.push_back(b);
        b = Buffer{};
        return true;
    };
    for (auto it = s.thread_buffers.begin(); it != s.thread_buffers.end();) {
        it = take(it->second) ? s.thread_buffers.erase(it) : std::next(it);
    }
    take(s.shared_buffer);
    for (auto it = s.full.begin(); it != s.full.end();) {
        it = take(*it) ? s.full.erase(it) : std::next(it);
    }
    return out;
}

// ---------------------------------------------------------------- the foreign client (Kineto)
void CUPTIAPI foreign_request(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
    auto* b = static_cast<std::uint8_t*>(std::calloc(1, kForeignBufferBytes));
    {
        std::lock_guard<std::mutex> lock(state().mutex);
        if (b != nullptr) state().foreign_buffers.insert(b);
    }
    *buffer = b;
    *size = b != nullptr ? kForeignBufferBytes : 0;
    *max_records = 0;
}

void CUPTIAPI foreign_complete(CUcontext, std::uint32_t, std::uint8_t* buffer, std::size_t,
                               std::size_t valid) {
    StubState& s = state();
    std::unique_lock<std::mutex> lock(s.mutex);
    if (s.foreign_buffers.erase(buffer) == 0) {
        ++s.foreign_unknown_buffers;  // "unknown buffer": logged and dropped, never returned
        return;
    }
    s.foreign_records += count_records(buffer, valid);
    lock.unlock();
    std::free(buffer);
}

CUptiResult enable_locked(StubState& s, CUpti_ActivityKind kind) {
    if (s.global_result != CUPTI_SUCCESS) return s.global_result;
    if (auto it = s.kind_results.find(kind); it != s.kind_results.end()) return it->second;
    if (kind <= CUPTI_ACTIVITY_KIND_INVALID || kind >= CUPTI_ACTIVITY_KIND_COUNT) {
        return CUPTI_ERROR_INVALID_KIND;
    }
    bool serial = kind == CUPTI_ACTIVITY_KIND_KERNEL;
    bool concurrent = kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    if ((serial && s.kinds.count(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != 0) ||
        (concurrent && s.kinds.count(CUPTI_ACTIVITY_KIND_KERNEL) != 0)) {
        return CUPTI_ERROR_NOT_COMPATIBLE;
    }
    s.kinds.insert(kind);
    s.kinds_ever.insert(kind);
    if (kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
        s.runtime_all = true;
        s.runtime_cbids.clear();  // the kind overrides earlier per-cbid settings
    } else if (kind == CUPTI_ACTIVITY_KIND_DRIVER) {
        s.driver_all = true;
        s.driver_cbids.clear();
    }
    return CUPTI_SUCCESS;
}

void disable_locked(StubState& s, CUpti_ActivityKind kind) {
    s.kinds.erase(kind);
    if (kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
        s.runtime_all = false;
        s.runtime_cbids.clear();
    } else if (kind == CUPTI_ACTIVITY_KIND_DRIVER) {
        s.driver_all = false;
        s.driver_cbids.clear();
    }
}

CUptiResult flush_all(std::uint32_t flag) {
    StubState& s = state();
    std::unique_lock<std::mutex> lock(s.mutex);
    bool forced = (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0;
    ++s.flushes;
    if (forced) ++s.forced_flushes;
    if (s.global_result != CUPTI_SUCCESS) return s.global_result;
    if (s.flush_result != CUPTI_SUCCESS) return s.flush_result;
    bool v2_ready = s.v2_subscribed && s.v2_complete != nullptr;
    if (!v2_ready && (s.request == nullptr || s.complete == nullptr)) {
        return CUPTI_ERROR_INVALID_OPERATION;
    }
    std::vector<Buffer> out = take_flushable(s, forced);
    Completer complete = completer_locked(s);
    lock.unlock();  // completion runs on the caller, with no stub lock held
    deliver(complete, out);
    return CUPTI_SUCCESS;
}

}  // namespace

extern "C" {

// Built a second time as a CUPTI 12.4 (GPUDIAG_STUB_CUPTI12): API version 22, the libcupti.so.12
// symbol version node, and without the functions 12.4 lacks (per-call API enables came with
// 12.5, EnableAllSyncRecords with 12.8, cuptiSubscribe_v2 with 13.0). Its records are the 13.0
// structs, so tests give it only records whose size 12.4 shares (API records).
#ifndef GPUDIAG_STUB_CUPTI12
#    define GPUDIAG_STUB_CUPTI12 0
#endif
#ifndef GPUDIAG_STUB_CUPTI_V2
#    define GPUDIAG_STUB_CUPTI_V2 0
#endif

CUptiResult CUPTIAPI cuptiGetVersion(uint32_t* version) {
    if (version == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
    *version = GPUDIAG_STUB_CUPTI12 ? 22 : GPUDIAG_STUB_CUPTI_V2 ? 130400 : 130001;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char** str) {
    if (str == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
    switch (result) {
        case CUPTI_SUCCESS: *str = "CUPTI_SUCCESS"; break;
        case CUPTI_ERROR_INVALID_PARAMETER: *str = "CUPTI_ERROR_INVALID_PARAMETER"; break;
        case CUPTI_ERROR_INVALID_OPERATION: *str = "CUPTI_ERROR_INVALID_OPERATION"; break;
        case CUPTI_ERROR_MAX_LIMIT_REACHED: *str = "CUPTI_ERROR_MAX_LIMIT_REACHED"; break;
        case CUPTI_ERROR_NOT_COMPATIBLE: *str = "CUPTI_ERROR_NOT_COMPATIBLE"; break;
        case CUPTI_ERROR_NOT_INITIALIZED: *str = "CUPTI_ERROR_NOT_INITIALIZED"; break;
        case CUPTI_ERROR_INVALID_KIND: *str = "CUPTI_ERROR_INVALID_KIND"; break;
        case CUPTI_ERROR_NOT_SUPPORTED: *str = "CUPTI_ERROR_NOT_SUPPORTED"; break;
        case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
            *str = "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES";
            break;
        case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
            *str = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED";
            break;
        case CUPTI_ERROR_UNKNOWN: *str = "CUPTI_ERROR_UNKNOWN"; break;
        default: return CUPTI_ERROR_INVALID_PARAMETER;
    }
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                                    CUpti_BuffersCallbackCompleteFunc complete) {
    if (request == nullptr || complete == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
    StubState& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.global_result != CUPTI_SUCCESS) return s.global_result;
    if (per_subscriber_in_use(s)) return CUPTI_ERROR_NOT_COMPATIBLE;
    s.request = request;
    s.complete = complete;
    if (complete != &foreign_complete) s.client_complete = complete;
    ++s.register_calls;
    start_worker_locked(s);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind) {
    std::lock_guard<std::mutex> lock(state().mutex);
    ++state().v1_setting_calls;
    if (state().global_result == CUPTI_SUCCESS && per_subscriber_in_use(state())) {
        return CUPTI_ERROR_NOT_COMPATIBLE;
    }
    return enable_locked(state(), kind);
}

CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
    StubState& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    ++s.v1_setting_calls;
    if (s.global_result != CUPTI_SUCCESS) return s.global_result;
    if (kind <= CUPTI_ACTIVITY_KIND_INVALID || kind >= CUPTI_ACTIVITY_KIND_COUNT) {
        return CUPTI_ERROR_INVALID_KIND;
    }
    disable_locked(s, kind);
    return CUPTI_SUCCESS;
}

// Like libcupti 13.0's: on a record it cannot size it returns INVALID_KIND and leaves `record`
// where it was, so nothing behind it can be reached.
CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid,
                                                CUpti_Activity** record) {
    if (buffer == nullptr || record == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
    std::size_t offset = 0;
    if (*record != nullptr) {
        std::size_t sz = record_size((*record)->kind);
        if (sz == 0) return CUPTI_ERROR_INVALID_KIND;
        offset = static_cast<std::size_t>(reinterpret_cast<uint8_t*>(*record) - buffer) + sz;
    }
    if (offset + sizeof(CUpti_Activity) > valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
    auto* next = reinterpret_cast<CUpti_Activity*>(buffer + offset);
    std::size_t sz = record_size(next->kind);
    if (sz == 0) return CUPTI_ERROR_INVALID_KIND;
    if (offset + sz > valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *record = next;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag) {
    return flush_all(flag);
}

CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
    if (dropped == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
    std::lock_guard<std::mutex> lock(state().mutex);
    if (state().global_result != CUPTI_SUCCESS) return state().global_result;
    *dropped = state().dropped;
    state().dropped = 0;  // reset on read
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t* timestamp) {
    if (timestamp == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
    std::lock_guard<std::mutex> lock(state().mutex);
    *timestamp = now_locked(state());
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc fn) {
    if (fn == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
    std::lock_guard<std::mutex> lock(state().mutex);
    if (state().global_result != CUPTI_SUCCESS) return state().global_result;
    state().timestamp = fn;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivitySetAttribute(CUpti_ActivityAttribute attr, size_t* size,
                                               void* value) {
    if (size == nullptr || value == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
    StubState& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.global_result != CUPTI_SUCCESS) return s.global_result;
    if (attr == CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER ||
        attr == CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER) {
        if (*size < 1) return CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT;
        int v = *static_cast<uint8_t*>(value);
        (attr == CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER ? s.zeroed : s.per_thread) = v;
    }
    return CUPTI_SUCCESS;
}

#if !GPUDIAG_STUB_CUPTI12
CUptiResult CUPTIAPI cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable) {
    std::lock_guard<std::mutex> lock(state().mutex);
    ++state().v1_setting_calls;
    if (state().global_result != CUPTI_SUCCESS) return state().global_result;
    state().runtime_cbids[cbid] = enable != 0;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable) {
    std::lock_guard<std::mutex> lock(state().mutex);
    ++state().v1_setting_calls;
    if (state().global_result != CUPTI_SUCCESS) return state().global_result;
    state().driver_cbids[cbid] = enable != 0;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnableAllSyncRecords(uint8_t enable) {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (state().global_result != CUPTI_SUCCESS) return state().global_result;
    state().all_sync_records = enable;
    return CUPTI_SUCCESS;
}

#endif  // !GPUDIAG_STUB_CUPTI12

static CUptiResult subscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                             void* userdata, CUpti_SubscriberParams* params) {
    if (subscriber == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
    if (params != nullptr && params->structSize < CUpti_SubscriberParams_STRUCT_SIZE) {
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    StubState& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.global_result != CUPTI_SUCCESS) return s.global_result;
    if (!s.holder.empty() || s.subscriber != nullptr) {
        if (params != nullptr && params->oldSubscriberName != nullptr &&
            params->oldSubscriberSize > 0) {
            std::string name = s.holder.empty() ? "CUPTI for gpudiag" : s.holder;
            std::strncpy(params->oldSubscriberName, name.c_str(), params->oldSubscriberSize - 1);
            params->oldSubscriberName[params->oldSubscriberSize - 1] = '\0';
        }
        return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    }
    s.subscriber = callback;
    s.subscriber_data = userdata;
    *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&s);
    return CUPTI_SUCCESS;
}

#if !GPUDIAG_STUB_CUPTI12
#    if GPUDIAG_STUB_CUPTI_V2
namespace v2 = gpudiag::detail::cupti_v2;

// Multiple subscribers asked for: the per-subscriber client under test.
static CUptiResult subscribe_multi(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                   void* userdata, v2::SubscriberParams* params) {
    StubState& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.global_result != CUPTI_SUCCESS) return s.global_result;
    if (!s.v2_driver_support) return CUPTI_ERROR_NOT_SUPPORTED;
    if (process_wide_in_use(s) || s.v2_subscribed) {
        if (params->oldSubscriberName != nullptr && params->oldSubscriberSize > 0) {
            std::string name = !s.holder.empty()                            ? s.holder
                               : s.subscriber != nullptr || s.v2_subscribed ? "CUPTI for gpudiag"
                                                                            : "";
            std::strncpy(params->oldSubscriberName, name.c_str(), params->oldSubscriberSize - 1);
            params->oldSubscriberName[params->oldSubscriberSize - 1] = '\0';
        }
        return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    }
    s.v2_subscribed = true;
    s.v2_callback = callback;
    s.v2_callback_data = userdata;
    *subscriber = v2_handle();
    return CUPTI_SUCCESS;
}
#    endif

CUptiResult CUPTIAPI cuptiSubscribe_v2(CUpti_SubscriberHandle* subscriber,
                                       CUpti_CallbackFunc callback, void* userdata,
                                       CUpti_SubscriberParams* params) {
#    if GPUDIAG_STUB_CUPTI_V2
    auto* multi = reinterpret_cast<v2::SubscriberParams*>(params);
    if (subscriber != nullptr && multi != nullptr && multi->structSize >= sizeof(*multi) &&
        multi->allowMultipleSubscribers != 0) {
        return subscribe_multi(subscriber, callback, userdata, multi);
    }
#    endif
    return subscribe(subscriber, callback, userdata, params);
}
#endif

#if GPUDIAG_STUB_CUPTI_V2
static bool is_v2_handle(CUpti_SubscriberHandle handle) {
    return handle == v2_handle() && state().v2_subscribed;
}

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks_v2(CUpti_SubscriberHandle handle,
                                                       v2::BufferRequestedFn request,
                                                       v2::BufferCompletedFn complete) {
    if (request == nullptr || complete == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
    StubState& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!is_v2_handle(handle)) return CUPTI_ERROR_INVALID_PARAMETER;
    s.v2_request = request;
    s.v2_complete = complete;
    start_worker_locked(s);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnable_v2(CUpti_SubscriberHandle handle, CUpti_ActivityKind kind,
                                            v2::ActivityConfig* /*config*/) {
    StubState& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!is_v2_handle(handle)) return CUPTI_ERROR_INVALID_PARAMETER;
    if (s.global_result != CUPTI_SUCCESS) return s.global_result;
    if (auto it = s.kind_results.find(kind); it != s.kind_results.end()) return it->second;
    if (kind <= CUPTI_ACTIVITY_KIND_INVALID || kind >= CUPTI_ACTIVITY_KIND_COUNT) {
        return CUPTI_ERROR_INVALID_KIND;
    }
    s.v2_kinds.insert(kind);
    s.kinds_ever.insert(kind);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityDisable_v2(CUpti_SubscriberHandle handle, CUpti_ActivityKind kind,
                                             v2::ActivityConfig* /*config*/) {
    StubState& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!is_v2_handle(handle)) return CUPTI_ERROR_INVALID_PARAMETER;
    s.v2_kinds.erase(kind);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNextRecord_v2(CUpti_SubscriberHandle handle, uint8_t* buffer,
                                                   size_t valid, CUpti_Activity** record) {
    {
        std::lock_guard<std::mutex> lock(state().mutex);
        if (!is_v2_handle(handle)) return CUPTI_ERROR_INVALID_PARAMETER;
        ++state().v2_next_record_calls;
    }
    return cuptiActivityGetNextRecord(buffer, valid, record);
}

CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords_v2(CUpti_SubscriberHandle handle, CUcontext,
                                                          uint32_t, size_t* dropped) {
    if (dropped == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
    std::lock_guard<std::mutex> lock(state().mutex);
    if (!is_v2_handle(handle)) return CUPTI_ERROR_INVALID_PARAMETER;
    *dropped = state().v2_dropped;
    state().v2_dropped = 0;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnableRuntimeApi_v2(CUpti_SubscriberHandle handle,
                                                      CUpti_CallbackId cbid, uint8_t enable) {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (!is_v2_handle(handle)) return CUPTI_ERROR_INVALID_PARAMETER;
    state().v2_runtime_cbids[cbid] = enable != 0;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnableDriverApi_v2(CUpti_SubscriberHandle handle,
                                                     CUpti_CallbackId cbid, uint8_t enable) {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (!is_v2_handle(handle)) return CUPTI_ERROR_INVALID_PARAMETER;
    state().v2_driver_cbids[cbid] = enable != 0;
    return CUPTI_SUCCESS;
}
#endif  // GPUDIAG_STUB_CUPTI_V2

CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                    void* userdata) {
    return subscribe(subscriber, callback, userdata, nullptr);
}

CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle handle) {
    if (handle == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
    std::lock_guard<std::mutex> lock(state().mutex);
    StubState& s = state();
    if (handle == v2_handle()) {  // the per-subscriber client: its kinds and callbacks go with it
        s.v2_subscribed = false;
        s.v2_request = nullptr;
        s.v2_complete = nullptr;
        s.v2_callback = nullptr;
        s.v2_callback_data = nullptr;
        s.v2_kinds.clear();
        s.v2_runtime_cbids.clear();
        s.v2_driver_cbids.clear();
        s.callbacks.clear();
        return CUPTI_SUCCESS;
    }
    state().subscriber = nullptr;
    state().subscriber_data = nullptr;
    state().callbacks.clear();
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle handle,
                                         CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
    if (handle == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
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
    StubState& s = state();
    std::vector<Buffer> back;
    CUpti_BuffersCallbackCompleteFunc complete = nullptr;
    gpudiag::detail::cupti_v2::BufferCompletedFn v2_complete = nullptr;
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        // Buffers still held go back to their owner empty, as a final flush would.
        for (auto& [id, b] : s.thread_buffers) back.push_back(b);
        if (s.shared_buffer.data != nullptr) back.push_back(s.shared_buffer);
        for (Buffer& b : s.full) back.push_back(b);
        for (auto& [data, size] : s.held) back.push_back(Buffer{data, size, 0, {}});
        for (Buffer& b : back) b.used = 0;
        s.thread_buffers.clear();
        s.shared_buffer = Buffer{};
        s.full.clear();
        s.held.clear();
        complete = s.client_complete;
        v2_complete = completer_locked(s).v2;  // a subscribed per-subscriber client's
        s.v2_driver_support = true;
        s.v2_dropped = 0;
        s.v2_next_record_calls = 0;
        s.foreign_v2 = false;
        s.foreign_v2_records = 0;
        s.kinds.clear();
        s.kinds_ever.clear();
        s.runtime_all = s.driver_all = false;
        s.runtime_cbids.clear();
        s.driver_cbids.clear();
        s.all_sync_records = -1;
        s.zeroed = -1;
        s.per_thread = 1;
        s.timestamp = nullptr;
        s.global_result = CUPTI_SUCCESS;
        s.kind_results.clear();
        s.flush_result = CUPTI_SUCCESS;
        s.forced_invalid_kind = false;
        s.holder.clear();
        s.callbacks.clear();
        s.dropped = 0;
        s.flushes = s.forced_flushes = s.register_calls = s.worker_completions = 0;
        s.v1_setting_calls = 0;
        s.foreign_records = s.foreign_unknown_buffers = 0;
    }
    for (Buffer& b : back) {
        // A foreign client's own buffer goes back to it; gpudiag's to whoever is registered.
        bool foreign = false;
        {
            std::lock_guard<std::mutex> lock(s.mutex);
            foreign = s.foreign_buffers.count(b.data) != 0;
        }
        if (foreign) {
            foreign_complete(nullptr, 0, b.data, b.size, 0);
        } else if (v2_complete != nullptr) {
            gpudiag::detail::cupti_v2::BufferCompleteInfo info{sizeof(info), 0, nullptr, 0};
            v2_complete(b.data, b.size, 0, &info);
        } else if (complete != nullptr) {
            complete(nullptr, 0, b.data, b.size, 0);
        }
    }
    std::lock_guard<std::mutex> lock(s.mutex);
    for (std::uint8_t* b : s.foreign_buffers) std::free(b);  // dropped by gpudiag, as it should
    s.foreign_buffers.clear();
    s.foreign_records = s.foreign_unknown_buffers = 0;
}

// Every cuptiActivityEnable / cuptiActivityRegisterCallbacks / ... returns `result`
// (CUPTI_ERROR_NOT_INITIALIZED: no driver, or one older than this CUPTI).
void gpudiag_stub_cupti_set_global_result(int result) {
    std::lock_guard<std::mutex> lock(state().mutex);
    state().global_result = static_cast<CUptiResult>(result);
}
void gpudiag_stub_cupti_set_kind_result(int kind, int result) {
    std::lock_guard<std::mutex> lock(state().mutex);
    state().kind_results[kind] = static_cast<CUptiResult>(result);
}
void gpudiag_stub_cupti_set_flush_result(int result) {
    std::lock_guard<std::mutex> lock(state().mutex);
    state().flush_result = static_cast<CUptiResult>(result);
}
void gpudiag_stub_cupti_set_forced_invalid_kind(int on) {
    std::lock_guard<std::mutex> lock(state().mutex);
    state().forced_invalid_kind = on != 0;
}
void gpudiag_stub_cupti_set_subscriber_holder(const char* name) {
    std::lock_guard<std::mutex> lock(state().mutex);
    state().holder = name != nullptr ? name : "";
}
// A record made on the calling thread (an application thread). `in_flight_ms` > 0: a kernel
// still running, complete that many ms from now. Returns 1 when recorded.
int gpudiag_stub_cupti_record(const void* record, size_t bytes, int in_flight_ms) {
    return emit(record, bytes, in_flight_ms);
}
// Records a buffer's worth of hand-built records on the calling thread.
void gpudiag_stub_cupti_queue_buffer(const void* records, size_t bytes) {
    const auto* p = static_cast<const std::uint8_t*>(records);
    for (std::size_t off = 0; off + sizeof(CUpti_Activity) <= bytes;) {
        std::size_t sz = record_size(reinterpret_cast<const CUpti_Activity*>(p + off)->kind);
        if (sz == 0) break;
        emit(p + off, sz, 0);
        off += sz;
    }
}
// CUPTI's clock now: what a record made now carries.
uint64_t gpudiag_stub_cupti_now() {
    std::lock_guard<std::mutex> lock(state().mutex);
    return now_locked(state());
}
uint64_t gpudiag_stub_cupti_cycles_per_1000ns() {
    return 2900;
}
int gpudiag_stub_cupti_kind_enabled(int kind) {
    std::lock_guard<std::mutex> lock(state().mutex);
    return state().kinds.count(kind) != 0 ? 1 : 0;
}
int gpudiag_stub_cupti_kind_ever_enabled(int kind) {
    std::lock_guard<std::mutex> lock(state().mutex);
    return state().kinds_ever.count(kind) != 0 ? 1 : 0;
}
// Whether records of this API would be made now (per-cbid setting, else the kind).
int gpudiag_stub_cupti_api_enabled(int runtime, unsigned cbid) {
    std::lock_guard<std::mutex> lock(state().mutex);
    const StubState& s = state();
    const auto& cbids = runtime != 0 ? s.runtime_cbids : s.driver_cbids;
    auto it = cbids.find(cbid);
    return (it != cbids.end() ? it->second : (runtime != 0 ? s.runtime_all : s.driver_all)) ? 1 : 0;
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
// Calls of the process-wide cuptiActivityEnable/Disable/Enable{Runtime,Driver}Api since reset.
int gpudiag_stub_cupti_v1_setting_calls() {
    std::lock_guard<std::mutex> lock(state().mutex);
    return state().v1_setting_calls;
}
int gpudiag_stub_cupti_flushes() {
    std::lock_guard<std::mutex> lock(state().mutex);
    return state().flushes;
}
int gpudiag_stub_cupti_forced_flushes() {
    std::lock_guard<std::mutex> lock(state().mutex);
    return state().forced_flushes;
}
int gpudiag_stub_cupti_worker_completions() {
    std::lock_guard<std::mutex> lock(state().mutex);
    return state().worker_completions;
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
        bool v1 = state().subscriber != nullptr;
        cb = v1 ? state().subscriber : state().v2_callback;
        userdata = v1 ? state().subscriber_data : state().v2_callback_data;
    }
    if (cb == nullptr) return 0;
    cb(userdata, static_cast<CUpti_CallbackDomain>(domain), cbid, data);
    return 1;
}
// Takes `n` buffers from the request callback on this thread and keeps them (per-thread buffers
// held by busy CUDA threads); returns how many were granted.
int gpudiag_stub_cupti_hold_buffers(int n) {
    int granted = 0;
    for (int i = 0; i < n; ++i) {
        CUpti_BuffersCallbackRequestFunc request;
        {
            std::lock_guard<std::mutex> lock(state().mutex);
            request = state().request;
        }
        if (request == nullptr) break;
        std::uint8_t* buffer = nullptr;
        std::size_t size = 0;
        std::size_t max_records = 0;
        request(&buffer, &size, &max_records);
        if (buffer == nullptr) continue;
        std::lock_guard<std::mutex> lock(state().mutex);
        state().held.emplace_back(buffer, size);
        ++granted;
    }
    return granted;
}
// Completes the held buffers, empty.
void gpudiag_stub_cupti_release_held() {
    std::vector<Buffer> held;
    Completer complete;
    {
        std::lock_guard<std::mutex> lock(state().mutex);
        for (auto& [data, size] : state().held) held.push_back(Buffer{data, size, 0, {}});
        state().held.clear();
        complete = completer_locked(state());
    }
    deliver(complete, held);
}
// Another client registers a CPU-cycle timestamp callback (process-wide, never removed).
void gpudiag_stub_cupti_install_cycle_clock() {
    (void)cuptiActivityRegisterTimestampCallback(&cycle_counter);
}
// Another client starts tracing CUDA the way Kineto does: optionally installs its cycle-counter
// timestamp callback (process-wide, never removed), registers its own buffer callbacks (from now
// on every completed buffer goes to it, gpudiag's outstanding ones included) and enables its
// kinds (RUNTIME and DRIVER override gpudiag's per-cbid settings).
void gpudiag_stub_cupti_foreign_start(int install_cycle_clock) {
    if (install_cycle_clock != 0) (void)cuptiActivityRegisterTimestampCallback(&cycle_counter);
    (void)cuptiActivityRegisterCallbacks(&foreign_request, &foreign_complete);
    std::lock_guard<std::mutex> lock(state().mutex);
    for (CUpti_ActivityKind k : kForeignKinds) (void)enable_locked(state(), k);
}
// ... and stops: a forced flush (to its callbacks), its kinds off -- gpudiag's among them --
// and per-thread buffers off, as Kineto leaves them. Its callbacks stay registered.
void gpudiag_stub_cupti_foreign_stop() {
    (void)flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    std::lock_guard<std::mutex> lock(state().mutex);
    for (CUpti_ActivityKind k : kForeignKinds) disable_locked(state(), k);
    state().per_thread = 0;
}
size_t gpudiag_stub_cupti_foreign_records() {
    std::lock_guard<std::mutex> lock(state().mutex);
    return state().foreign_records;
}
size_t gpudiag_stub_cupti_foreign_unknown_buffers() {
    std::lock_guard<std::mutex> lock(state().mutex);
    return state().foreign_unknown_buffers;
}
// The driver allows per-subscriber activity (R610+) or not.
void gpudiag_stub_cupti_set_per_subscriber_support(int on) {
    std::lock_guard<std::mutex> lock(state().mutex);
    state().v2_driver_support = on != 0;
}
int gpudiag_stub_cupti_v2_subscribed() {
    std::lock_guard<std::mutex> lock(state().mutex);
    return state().v2_subscribed ? 1 : 0;
}
int gpudiag_stub_cupti_v2_kind_enabled(int kind) {
    std::lock_guard<std::mutex> lock(state().mutex);
    return state().v2_kinds.count(kind) != 0 ? 1 : 0;
}
int gpudiag_stub_cupti_v2_api_enabled(int runtime, unsigned cbid) {
    std::lock_guard<std::mutex> lock(state().mutex);
    return per_cbid_on(runtime != 0 ? state().v2_runtime_cbids : state().v2_driver_cbids, cbid) ? 1
                                                                                                : 0;
}
int gpudiag_stub_cupti_v2_next_record_calls() {
    std::lock_guard<std::mutex> lock(state().mutex);
    return state().v2_next_record_calls;
}
void gpudiag_stub_cupti_add_v2_dropped(size_t n) {
    std::lock_guard<std::mutex> lock(state().mutex);
    state().v2_dropped += n;
}
// Another per-subscriber client (PyTorch's CUPTI monitor) starts and stops tracing Kineto's
// kinds beside the client under test; it only counts the records it would receive.
int gpudiag_stub_cupti_foreign_v2_start() {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (process_wide_in_use(state())) return 0;
    state().foreign_v2 = true;
    return 1;
}
void gpudiag_stub_cupti_foreign_v2_stop() {
    std::lock_guard<std::mutex> lock(state().mutex);
    state().foreign_v2 = false;
}
size_t gpudiag_stub_cupti_foreign_v2_records() {
    std::lock_guard<std::mutex> lock(state().mutex);
    return state().foreign_v2_records;
}
int gpudiag_stub_cupti_per_thread() {
    std::lock_guard<std::mutex> lock(state().mutex);
    return state().per_thread;
}

}  // extern "C"
