// SPDX-License-Identifier: Apache-2.0
// TraceReplay: the records are laid out as CUPTI 13.0 fills them (the structs of the CUDA 13
// headers: Kernel10, Memcpy6, Memset4, Synchronization2, API, Memory4, MemoryPool3, each at its
// size, 8-byte aligned), which is what the stub libcupti reports (cuptiGetVersion 130001) and
// what ActivityDecoder reads for it. Field by field, the inverse of activity_decoder.cpp's map.
#include "cupti_replay.hpp"

#include "capture/cupti/api_whitelist.hpp"
#include "core/event_source.hpp"
#include "core/event_strings.hpp"
#include "importers/open_source.hpp"

#include <gpudiag/sink.hpp>

#include <cupti.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>

namespace gpudiag::replay {
namespace {

using Clock = std::chrono::steady_clock;

// ---- gpudiag's enums -> CUPTI's (the decoder's mapping read backwards) ----------------------

std::uint8_t cupti_copy_kind(CopyDirection d) {
    switch (d) {
        case CopyDirection::kHostToDevice: return CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
        case CopyDirection::kDeviceToHost: return CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
        case CopyDirection::kDeviceToDevice: return CUPTI_ACTIVITY_MEMCPY_KIND_DTOD;
        case CopyDirection::kHostToHost: return CUPTI_ACTIVITY_MEMCPY_KIND_HTOH;
        case CopyDirection::kPeerToPeer: return CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
        default: return CUPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN;
    }
}

std::uint8_t cupti_memory_kind(MemoryKind k) {
    switch (k) {
        case MemoryKind::kPageable: return CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
        case MemoryKind::kPinned: return CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
        case MemoryKind::kDevice: return CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
        case MemoryKind::kArray: return CUPTI_ACTIVITY_MEMORY_KIND_ARRAY;
        case MemoryKind::kManaged: return CUPTI_ACTIVITY_MEMORY_KIND_MANAGED;
        default: return CUPTI_ACTIVITY_MEMORY_KIND_UNKNOWN;
    }
}

std::uint32_t cupti_sync_type(SyncKind k) {
    switch (k) {
        case SyncKind::kEvent: return CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE;
        case SyncKind::kStreamWaitEvent:
            return CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT;
        case SyncKind::kStream: return CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
        case SyncKind::kDevice: return CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
        default: return CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN;
    }
}

std::uint32_t cupti_stream(std::uint32_t stream) {
    return stream == kNoStream ? CUPTI_INVALID_STREAM_ID : stream;
}

std::int32_t clamp_i32(std::uint32_t v) {
    return v > static_cast<std::uint32_t>(INT32_MAX) ? INT32_MAX : static_cast<std::int32_t>(v);
}

// The memory a MEMORY2 record of this event names: the event's own kind when it says, else what
// its book implies.
std::uint32_t record_memory_kind(const Event& e) {
    auto own = static_cast<MemoryKind>(e.flags & kMemoryKindMask);
    if (own != MemoryKind::kUnknown) return cupti_memory_kind(own);
    switch (e.kind) {
        case EventKind::kHostAlloc:
        case EventKind::kHostFree: return CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
        case EventKind::kManagedAlloc:
        case EventKind::kManagedFree: return CUPTI_ACTIVITY_MEMORY_KIND_MANAGED;
        default: return CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    }
}

bool is_allocation(EventKind k) {
    return k == EventKind::kDeviceAlloc || k == EventKind::kPoolAlloc ||
           k == EventKind::kHostAlloc || k == EventKind::kManagedAlloc;
}

// A runtime/driver call's name without CUPTI's version suffix ("cudaLaunchKernel_v7000").
std::string_view base_name(std::string_view name) {
    const auto at = name.rfind("_v");
    if (at == std::string_view::npos || at + 2 >= name.size()) return name;
    const bool digits = std::all_of(name.begin() + static_cast<std::ptrdiff_t>(at) + 2, name.end(),
                                    [](char c) { return c >= '0' && c <= '9'; });
    return digits ? name.substr(0, at) : name;
}

// What the live path would receive for an API call: the whitelisted entry of its cbid (the
// trace's, or found by name), or null when CUPTI would not record it for gpudiag.
const detail::WhitelistedApi* recordable_api(const Event& e, std::string_view name) {
    const ApiDomain domain =
        e.api.domain == ApiDomain::kDriver ? ApiDomain::kDriver : ApiDomain::kRuntime;
    if (e.api.callback_id != 0) return detail::find_whitelisted_api(domain, e.api.callback_id);
    const std::string_view wanted = base_name(name);
    for (const auto& api : detail::api_whitelist()) {
        if (api.domain == domain && wanted == api.name) return &api;
    }
    return nullptr;
}

// When the live path receives an observation: a CUPTI record once the work has ended, a complete
// range at its end, a marker at its time; but a step as it begins, as step_begin() gives it (the
// analyses place the work they see in the steps they know).
std::uint64_t due(const Event& e) {
    if (e.kind == EventKind::kRange && e.range.category == RangeCategory::kStep) return e.start_ns;
    return std::max(e.start_ns, e.end_ns);
}

bool is_step(const Event& e) {
    return e.kind == EventKind::kStepBegin || e.kind == EventKind::kStepEnd ||
           (e.kind == EventKind::kRange && e.range.category == RangeCategory::kStep);
}

// Keeps the trace's events and nothing else.
class Collect final : public EventSink {
public:
    void consume(std::span<const Event> events) override {
        events_.insert(events_.end(), events.begin(), events.end());
    }
    std::vector<Event> take() { return std::move(events_); }

private:
    std::vector<Event> events_;
};

// CUPTI records being laid out, 8-byte aligned (CUPTI_ACTIVITY_RECORD_ALIGNMENT).
class Records {
public:
    template <typename Record>
    void add(const Record& r, std::vector<std::uint32_t>* kinds) {
        static_assert(sizeof(Record) % 8 == 0, "CUPTI records are 8-byte aligned");
        const std::size_t at = words_.size();
        words_.resize(at + sizeof(Record) / 8);
        std::memcpy(words_.data() + at, &r, sizeof(Record));
        if (kinds != nullptr) kinds->push_back(static_cast<std::uint32_t>(r.kind));
        ++count_;
    }
    [[nodiscard]] std::size_t count() const { return count_; }
    [[nodiscard]] const std::vector<std::uint64_t>& words() const { return words_; }
    void clear() {
        words_.clear();
        count_ = 0;
    }
    std::vector<std::uint64_t> take() { return std::move(words_); }

private:
    std::vector<std::uint64_t> words_;
    std::size_t count_ = 0;
};

// What a memcpy and a memset record share: the bytes, the time on the GPU, where it ran, and the
// correlation id that joins it to its API call.
template <typename Record>
void place_transfer(Record& r, const Event& e, std::uint64_t start, std::uint64_t end) {
    r.bytes = e.copy.bytes;
    r.start = start;
    r.end = end;
    r.deviceId = e.device;
    r.contextId = 1;
    r.streamId = cupti_stream(e.stream);
    r.correlationId = e.copy.correlation;
}

}  // namespace

struct TraceReplay::Impl {
    std::string path;
    std::unique_ptr<StringTable> strings = std::make_unique<StringTable>();
    std::vector<Event> events;  // in the order the live path would receive them
    ReplayCounts counts;
    // Kernel names as CUPTI hands them: NUL-terminated, alive until the session has decoded them.
    std::unordered_map<StringId, std::string> kernel_names;
    std::unordered_map<StringId, const detail::WhitelistedApi*> apis;  // by the call's name
    std::uint64_t cupti_base = 0;  // CUPTI's clock at the trace's first_ns

    [[nodiscard]] std::uint64_t at(std::uint64_t ns) const {
        return cupti_base + (ns > counts.first_ns ? ns - counts.first_ns : 0);
    }
    const detail::WhitelistedApi* api_of(const Event& e);
    bool add_record(const Event& e, Records& out, std::vector<std::uint32_t>* kinds);
    void add_kernel(const Event& e, Records& out, std::vector<std::uint32_t>* kinds);
    void add_copy(const Event& e, Records& out, std::vector<std::uint32_t>* kinds) const;
    void add_memset(const Event& e, Records& out, std::vector<std::uint32_t>* kinds) const;
    void add_sync(const Event& e, Records& out, std::vector<std::uint32_t>* kinds) const;
    void add_api(const Event& e, const detail::WhitelistedApi& api, Records& out,
                 std::vector<std::uint32_t>* kinds) const;
    void add_memory(const Event& e, Records& out, std::vector<std::uint32_t>* kinds) const;
    void add_pool(const Event& e, Records& out, std::vector<std::uint32_t>* kinds) const;
    void count();
};

const detail::WhitelistedApi* TraceReplay::Impl::api_of(const Event& e) {
    if (e.api.callback_id != 0) return recordable_api(e, {});
    auto it = apis.find(e.api.name);
    if (it == apis.end()) {
        it = apis.emplace(e.api.name, recordable_api(e, strings->lookup(e.api.name))).first;
    }
    return it->second;
}

void TraceReplay::Impl::add_kernel(const Event& e, Records& out,
                                   std::vector<std::uint32_t>* kinds) {
    CUpti_ActivityKernel10 r{};
    r.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    r.start = at(e.start_ns);
    r.end = at(e.end_ns);
    r.deviceId = e.device;
    r.contextId = 1;
    r.streamId = cupti_stream(e.stream);
    r.gridX = clamp_i32(e.kernel.grid_size);
    r.gridY = r.gridZ = 1;
    r.blockX = clamp_i32(e.kernel.block_size);
    r.blockY = r.blockZ = 1;
    r.staticSharedMemory = clamp_i32(e.kernel.shared_bytes);
    r.registersPerThread = static_cast<std::uint16_t>(
        std::min<std::uint32_t>(e.kernel.registers, std::numeric_limits<std::uint16_t>::max()));
    r.correlationId = e.kernel.correlation;
    if (e.kernel.name != kNoString) {
        auto it = kernel_names.find(e.kernel.name);
        if (it == kernel_names.end()) {
            it = kernel_names.emplace(e.kernel.name, std::string(strings->lookup(e.kernel.name)))
                     .first;
        }
        r.name = it->second.c_str();
    }
    out.add(r, kinds);
}

void TraceReplay::Impl::add_copy(const Event& e, Records& out,
                                 std::vector<std::uint32_t>* kinds) const {
    CUpti_ActivityMemcpy6 r{};
    r.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    r.copyKind = cupti_copy_kind(e.copy.direction);
    r.srcKind = cupti_memory_kind(e.copy.src_kind);
    r.dstKind = cupti_memory_kind(e.copy.dst_kind);
    r.flags = e.copy.is_async != 0 ? CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC : 0;
    place_transfer(r, e, at(e.start_ns), at(e.end_ns));
    out.add(r, kinds);
}

void TraceReplay::Impl::add_memset(const Event& e, Records& out,
                                   std::vector<std::uint32_t>* kinds) const {
    CUpti_ActivityMemset4 r{};
    r.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    place_transfer(r, e, at(e.start_ns), at(e.end_ns));
    r.flags = e.copy.is_async != 0 ? CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC : 0;
    r.memoryKind = cupti_memory_kind(e.copy.dst_kind);
    out.add(r, kinds);
}

void TraceReplay::Impl::add_sync(const Event& e, Records& out,
                                 std::vector<std::uint32_t>* kinds) const {
    CUpti_ActivitySynchronization2 r{};
    r.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    r.type = static_cast<CUpti_ActivitySynchronizationType>(cupti_sync_type(e.sync.sync_kind));
    r.start = at(e.start_ns);
    r.end = at(e.end_ns);
    r.correlationId = e.sync.correlation;
    r.contextId = 1;
    r.streamId = cupti_stream(e.stream);
    r.cudaEventId = e.sync.object != 0 && e.sync.object < CUPTI_SYNCHRONIZATION_INVALID_VALUE
                        ? static_cast<std::uint32_t>(e.sync.object)
                        : CUPTI_SYNCHRONIZATION_INVALID_VALUE;
    r.cudaEventSyncId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
    out.add(r, kinds);
}

void TraceReplay::Impl::add_api(const Event& e, const detail::WhitelistedApi& api, Records& out,
                                std::vector<std::uint32_t>* kinds) const {
    CUpti_ActivityAPI r{};
    r.kind =
        api.domain == ApiDomain::kDriver ? CUPTI_ACTIVITY_KIND_DRIVER : CUPTI_ACTIVITY_KIND_RUNTIME;
    r.cbid = static_cast<CUpti_CallbackId>(api.cbid);
    r.start = at(e.start_ns);
    r.end = at(e.end_ns);
    r.processId = e.process;
    r.threadId = e.thread;
    r.correlationId = e.api.correlation;
    r.returnValue = static_cast<std::uint32_t>(e.api.return_code);
    out.add(r, kinds);
}

void TraceReplay::Impl::add_memory(const Event& e, Records& out,
                                   std::vector<std::uint32_t>* kinds) const {
    CUpti_ActivityMemory4 r{};
    r.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
    r.memoryOperationType = is_allocation(e.kind) ? CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION
                                                  : CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
    r.memoryKind = static_cast<CUpti_ActivityMemoryKind>(record_memory_kind(e));
    r.correlationId = e.memory.extra;
    r.address = e.memory.address;
    r.bytes = e.memory.bytes;
    r.timestamp = at(e.start_ns);
    r.processId = e.process;
    r.deviceId = e.device;
    r.contextId = 1;
    r.streamId = cupti_stream(e.stream);
    const bool pooled = e.kind == EventKind::kPoolAlloc || e.kind == EventKind::kPoolFree;
    r.memoryPoolConfig.memoryPoolType =
        pooled ? CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL : CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID;
    r.memoryPoolConfig.address = pooled ? e.memory.aux : 0;
    out.add(r, kinds);
}

void TraceReplay::Impl::add_pool(const Event& e, Records& out,
                                 std::vector<std::uint32_t>* kinds) const {
    CUpti_ActivityMemoryPool3 r{};
    r.kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
    r.memoryPoolOperationType = e.memory.bytes == 0
                                    ? CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED
                                    : CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED;
    r.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
    r.correlationId = e.memory.extra;
    r.processId = e.process;
    r.deviceId = e.device;
    r.address = e.memory.address;
    r.size = e.memory.bytes;
    r.utilizedSize = e.memory.aux;
    r.timestamp = at(e.start_ns);
    r.isManagedPool =
        static_cast<MemoryKind>(e.flags & kMemoryKindMask) == MemoryKind::kManaged ? 1 : 0;
    out.add(r, kinds);
}

// Lays `e` out as the record CUPTI would deliver for it; false for what CUPTI does not deliver.
bool TraceReplay::Impl::add_record(const Event& e, Records& out,
                                   std::vector<std::uint32_t>* kinds) {
    switch (e.kind) {
        case EventKind::kKernel: add_kernel(e, out, kinds); return true;
        case EventKind::kMemcpy: add_copy(e, out, kinds); return true;
        case EventKind::kMemset: add_memset(e, out, kinds); return true;
        case EventKind::kSync: add_sync(e, out, kinds); return true;
        case EventKind::kDeviceAlloc:
        case EventKind::kDeviceFree:
        case EventKind::kPoolAlloc:
        case EventKind::kPoolFree:
        case EventKind::kHostAlloc:
        case EventKind::kHostFree:
        case EventKind::kManagedAlloc:
        case EventKind::kManagedFree: add_memory(e, out, kinds); return true;
        case EventKind::kPoolResize: add_pool(e, out, kinds); return true;
        default: return false;
    }
}

// What the trace becomes, by kind.
void TraceReplay::Impl::count() {
    ReplayCounts& c = counts;
    c.events = events.size();
    c.first_ns = UINT64_MAX;
    for (const Event& e : events) {
        c.first_ns = std::min(c.first_ns, e.start_ns);
        c.last_ns = std::max(c.last_ns, std::max(e.start_ns, e.end_ns));
        switch (e.kind) {
            case EventKind::kKernel: ++c.kernels; break;
            case EventKind::kMemcpy: ++c.copies; break;
            case EventKind::kMemset: ++c.memsets; break;
            case EventKind::kSync: ++c.syncs; break;
            case EventKind::kApiCall:
                ++(api_of(e) != nullptr ? c.api_calls : c.api_not_recordable);
                break;
            case EventKind::kDeviceAlloc:
            case EventKind::kDeviceFree:
            case EventKind::kPoolAlloc:
            case EventKind::kPoolFree:
            case EventKind::kHostAlloc:
            case EventKind::kHostFree:
            case EventKind::kManagedAlloc:
            case EventKind::kManagedFree:
            case EventKind::kPoolResize: ++c.memory; break;
            default:
                ++c.host_events;
                c.host_steps += is_step(e) ? 1 : 0;
                break;
        }
    }
    if (events.empty()) c.first_ns = 0;
}

TraceReplay::TraceReplay() : impl_(std::make_unique<Impl>()) {}
TraceReplay::~TraceReplay() = default;
TraceReplay::TraceReplay(TraceReplay&&) noexcept = default;
TraceReplay& TraceReplay::operator=(TraceReplay&&) noexcept = default;

const ReplayCounts& TraceReplay::counts() const noexcept {
    return impl_->counts;
}
const std::string& TraceReplay::path() const noexcept {
    return impl_->path;
}

std::vector<std::pair<std::string, std::uint64_t>> TraceReplay::unrecorded_calls() const {
    std::unordered_map<StringId, std::uint64_t> by_name;
    for (const Event& e : impl_->events) {
        if (e.kind == EventKind::kApiCall && impl_->api_of(e) == nullptr) ++by_name[e.api.name];
    }
    std::vector<std::pair<std::string, std::uint64_t>> out;
    out.reserve(by_name.size());
    for (const auto& [name, n] : by_name) {
        out.emplace_back(std::string(impl_->strings->lookup(name)), n);
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
        return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
    return out;
}

Result<TraceReplay> TraceReplay::load(const std::string& path, const AnalysisOptions& options) {
    auto source = detail::open_event_source(path, options);
    if (!source) return source.status();
    TraceReplay replay;
    Impl& r = *replay.impl_;
    r.path = path;
    Collect collect;
    if (Status read = (*source)->run(collect, *r.strings); !read.is_ok()) return read;
    r.events = collect.take();
    std::stable_sort(r.events.begin(), r.events.end(),
                     [](const Event& a, const Event& b) { return due(a) < due(b); });
    r.count();
    return replay;
}

std::vector<std::uint64_t> TraceReplay::all_records(std::vector<std::uint32_t>* kinds) const {
    Records out;
    impl_->cupti_base = 0;
    for (const Event& e : impl_->events) {
        if (e.kind == EventKind::kApiCall) {
            if (const auto* api = impl_->api_of(e)) impl_->add_api(e, *api, out, kinds);
        } else {
            (void)impl_->add_record(e, out, kinds);
        }
    }
    return out.take();
}

namespace {

// Feeds one trace: records through the replay libcupti, the rest through Session::record.
class Feeder {
public:
    Feeder(Session& session, const ReplayLibrary& library, const ReplayOptions& options,
           const StringTable& strings, std::uint64_t first_ns)
        : session_(session),
          library_(library),
          options_(options),
          strings_(strings),
          first_ns_(first_ns) {}

    void start_clocks(std::uint64_t* cupti_base) {
        // One pair taken together: the session's clock between two readings of CUPTI's.
        const std::uint64_t mono_before = Session::now_ns();
        *cupti_base = library_.now();
        const std::uint64_t mono_after = Session::now_ns();
        mono_base_ = mono_before + (mono_after - mono_before) / 2;
        wall_start_ = Clock::now();
    }

    // Waits until `due_ns` (the trace's clock) is due at the replay's pace.
    void pace(std::uint64_t due_ns) {
        if (options_.speed > 0) {
            const auto offset = std::chrono::nanoseconds(static_cast<std::int64_t>(
                static_cast<double>(due_ns - std::min(due_ns, first_ns_)) / options_.speed));
            if (wall_start_ + offset > Clock::now() + std::chrono::milliseconds(1)) {
                send_records();
                std::this_thread::sleep_until(wall_start_ + offset);
            }
        } else if (since_wait_ >= options_.chunk_records) {
            send_records();
            std::this_thread::sleep_for(std::chrono::milliseconds(options_.drain_wait_ms));
            since_wait_ = 0;
        }
    }

    Records& records() {
        ++since_wait_;
        return pending_;
    }

    // A host event, handed over as the framework integration would: waiting, not dropping.
    bool host(Event e) {
        send_records();  // what CUPTI holds is delivered later anyway; keep the trace's order
        if (StringId* id = detail::string_id_of(e)) *id = session_id(*id);
        e.start_ns = mono(e.start_ns);
        e.end_ns = mono(e.end_ns);
        ++since_wait_;
        while (!session_.record(e)) {
            if (!session_.running()) return false;
            std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
        return true;
    }

    void send_records() {
        if (pending_.count() == 0) return;
        library_.queue_buffer(pending_.words().data(), pending_.words().size() * 8);
        pending_.clear();
    }

private:
    [[nodiscard]] std::uint64_t mono(std::uint64_t ns) const {
        return mono_base_ + (ns > first_ns_ ? ns - first_ns_ : 0);
    }
    StringId session_id(StringId id) {
        if (id == kNoString) return id;
        auto it = ids_.find(id);
        if (it == ids_.end()) it = ids_.emplace(id, session_.intern(strings_.lookup(id))).first;
        return it->second;
    }

    Session& session_;
    const ReplayLibrary& library_;
    const ReplayOptions& options_;
    const StringTable& strings_;
    std::uint64_t first_ns_;
    std::uint64_t mono_base_ = 0;
    Clock::time_point wall_start_;
    Records pending_;
    std::size_t since_wait_ = 0;
    std::unordered_map<StringId, StringId> ids_;
};

}  // namespace

Status TraceReplay::run(Session& session, const ReplayLibrary& library,
                        const ReplayOptions& options) {
    if (!session.running()) return failed_precondition("the replay needs a running session");
    if (library.queue_buffer == nullptr || library.now == nullptr) {
        return failed_precondition("the replay libcupti is not loaded");
    }
    Impl& r = *impl_;
    Feeder feed(session, library, options, *r.strings, r.counts.first_ns);
    feed.start_clocks(&r.cupti_base);
    for (const Event& e : r.events) {
        feed.pace(due(e));
        if (e.kind == EventKind::kApiCall) {
            if (const auto* api = r.api_of(e)) r.add_api(e, *api, feed.records(), nullptr);
        } else if (!r.add_record(e, feed.records(), nullptr) &&
                   (options.host_events || is_step(e)) && !feed.host(e)) {
            return failed_precondition("the session stopped during the replay");
        }
    }
    feed.send_records();
    return Status::ok();
}

Result<ReplayLibrary> select_replay_libraries(const std::string& cupti, const std::string& cuda,
                                              const std::string& nvml) {
    ::setenv("GPUDIAG_CUPTI_PATH", cupti.c_str(), 1);
    ::setenv("GPUDIAG_CUDA_PATH", cuda.c_str(), 1);
    ::setenv("GPUDIAG_NVML_PATH", nvml.c_str(), 1);
    ::unsetenv("CUDA_VISIBLE_DEVICES");
    // The same file gpudiag loads: one copy of the stub, whose hooks drive what gpudiag sees.
    void* handle = ::dlopen(cupti.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) return not_found("replay libcupti: " + cupti + ": " + ::dlerror());
    ReplayLibrary lib;
    lib.queue_buffer = reinterpret_cast<decltype(lib.queue_buffer)>(
        ::dlsym(handle, "gpudiag_stub_cupti_queue_buffer"));
    lib.now = reinterpret_cast<decltype(lib.now)>(::dlsym(handle, "gpudiag_stub_cupti_now"));
    lib.parser = reinterpret_cast<decltype(lib.parser)>(::dlsym(handle, "gpudiag_replay_parser"));
    if (lib.queue_buffer == nullptr || lib.now == nullptr || lib.parser == nullptr) {
        return not_found("replay libcupti: " + cupti + " lacks the replay hooks");
    }
    return lib;
}

}  // namespace gpudiag::replay
