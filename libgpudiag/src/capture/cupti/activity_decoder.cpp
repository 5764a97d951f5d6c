// SPDX-License-Identifier: Apache-2.0
// ActivityDecoder. Field-by-field mapping of CUPTI 12.0-13.x records (their fields as declared in
// cupti_record_layouts.hpp) to Events:
//
//   MEMORY2            -> by memory kind: DEVICE, DEVICE_STATIC and ARRAY (device memory)
//                         become kDeviceAlloc/kDeviceFree, or kPoolAlloc/kPoolFree when the
//                         record names a stream-ordered pool (aux = pool address); PINNED and
//                         PAGEABLE become kHostAlloc/kHostFree, MANAGED(_STATIC)
//                         kManagedAlloc/kManagedFree; UNKNOWN is counted, not booked.
//                         flags = MemoryKind; extra = correlation id. A pool whose size changed
//                         since the last record also yields kPoolResize (bytes = pool size,
//                         aux = utilized).
//   MEMORY_POOL        -> kPoolResize (created / trimmed; destroyed reports size 0)
//   CONCURRENT_KERNEL  -> kKernel; start == end == 0 means CUPTI lost the timing (device buffer
//                         full): counted, never emitted as a zero-length kernel
//   MEMCPY / MEMCPY2   -> kMemcpy (direction, src/dst MemoryKind incl. pageable, async flag)
//   MEMSET             -> kMemset
//   SYNCHRONIZATION    -> kSync
//   RUNTIME / DRIVER   -> kApiCall (name, cbid, correlation, return code); a failed allocation
//                         call returning out-of-memory also yields a retryable kOutOfMemory
//                         (device, requested size when deep mode knows it), withdrawn when the
//                         same request then succeeds on the same thread (an allocator retry)
//   OVERHEAD           -> counted (CUPTI's own cost, reported as a counter by the source); the
//                         overheadData CUPTI allocates (Overhead3, 12.4+) is freed
#include "capture/cupti/activity_decoder.hpp"

#include <fmt/format.h>

#if GPUDIAG_HAVE_CUDA_HEADERS

#    include "capture/cupti/api_whitelist.hpp"
#    include "capture/platform/platform.hpp"

#    include <algorithm>
#    include <cstdlib>
#    include <cstring>
#    include <string>

namespace gpudiag::detail {
namespace {

constexpr std::size_t kMaxCachedNames = 16384;
constexpr std::size_t kMaxPools = 1024;
constexpr std::size_t kMaxSites = 65536;
constexpr std::uint32_t kCudaOutOfMemory =
    2;                                    // cudaErrorMemoryAllocation == CUDA_ERROR_OUT_OF_MEMORY
constexpr std::size_t kMaxJoined = 4096;  // correlation -> thread/device entries kept
constexpr std::size_t kMaxThreads = 4096;
constexpr std::size_t kMaxPendingOoms = 64;
// A caching allocator that fails a request frees its cache (a device synchronisation and one
// cudaFree per cached segment) and asks again; a success of the same request on the same
// thread within this window is that retry. Generous, so a slow cache release still counts.
constexpr std::uint64_t kRetryWindowNs = 2'000'000'000;

// Where the memory of a MEMORY2 record lives.
enum class Book { kDevice, kHost, kManaged, kUnknown };

Book book_of(std::uint32_t cupti_kind) noexcept {
    switch (cupti_kind) {
        case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE:
        case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC:
        case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY: return Book::kDevice;
        case CUPTI_ACTIVITY_MEMORY_KIND_PINNED:
        case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE: return Book::kHost;
        case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
        case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC: return Book::kManaged;
        default: return Book::kUnknown;
    }
}

template <typename Map, typename Key, typename Value>
void put_bounded(Map& map, std::size_t cap, const Key& key, const Value& value) {
    if (map.size() >= cap && map.find(key) == map.end()) map.clear();  // a miss only costs a join
    map[key] = value;
}

MemoryKind memory_kind(std::uint32_t cupti_kind) noexcept {
    switch (cupti_kind) {
        case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE: return MemoryKind::kPageable;
        case CUPTI_ACTIVITY_MEMORY_KIND_PINNED: return MemoryKind::kPinned;
        case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE:
        case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC: return MemoryKind::kDevice;
        case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY: return MemoryKind::kArray;
        case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
        case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC: return MemoryKind::kManaged;
        default: return MemoryKind::kUnknown;
    }
}

CopyDirection copy_direction(std::uint32_t copy_kind) noexcept {
    switch (copy_kind) {
        case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
        case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA: return CopyDirection::kHostToDevice;
        case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
        case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH: return CopyDirection::kDeviceToHost;
        case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
        case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
        case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
        case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA: return CopyDirection::kDeviceToDevice;
        case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return CopyDirection::kHostToHost;
        case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return CopyDirection::kPeerToPeer;
        default: return CopyDirection::kUnknown;
    }
}

SyncKind sync_kind(std::uint32_t type) noexcept {
    switch (type) {
        case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE: return SyncKind::kEvent;
        case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT:
            return SyncKind::kStreamWaitEvent;
        case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE: return SyncKind::kStream;
        case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE: return SyncKind::kDevice;
        default: return SyncKind::kUnknown;
    }
}

std::uint16_t device_of(std::uint32_t id) noexcept {
    return id >= kNoDevice ? kNoDevice : static_cast<std::uint16_t>(id);
}

std::uint64_t hash_text(const char* s) noexcept {
    std::uint64_t h = 1469598103934665603ULL;  // FNV-1a
    for (; *s != '\0'; ++s) {
        h = (h ^ static_cast<unsigned char>(*s)) * 1099511628211ULL;
    }
    return h;
}

std::uint64_t clamp_u32(std::int64_t v) noexcept {
    return v < 0 ? 0 : static_cast<std::uint64_t>(v);
}

// A record of the loaded CUPTI's layout, copied into the view of the fields read (every view
// is at most as large as the record in any release: the bytes copied are the record's own).
template <typename View>
View view_of(const CUpti_Activity* record) noexcept {
    View v;
    std::memcpy(&v, record, sizeof v);
    return v;
}

}  // namespace

ActivityDecoder::ActivityDecoder(EventQueue& out, StringTable& strings,
                                 const ClockCalibration& clock,
                                 std::uint32_t cupti_version) noexcept
    : out_(out),
      strings_(strings),
      clock_(clock),
      layout_(cupti_record_layout(cupti_version)),
      pid_(platform::process_id()) {}

std::size_t ActivityDecoder::record_size(std::uint32_t kind) const noexcept {
    const CuptiRecordSizes& z = layout_.sizes;
    switch (kind) {
        case CUPTI_ACTIVITY_KIND_MEMORY2: return z.memory;
        case CUPTI_ACTIVITY_KIND_MEMORY_POOL: return z.memory_pool;
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return z.kernel;
        case CUPTI_ACTIVITY_KIND_MEMCPY: return z.memcpy;
        case CUPTI_ACTIVITY_KIND_MEMCPY2: return z.memcpy_p2p;
        case CUPTI_ACTIVITY_KIND_MEMSET: return z.memset;
        case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: return z.sync;
        case CUPTI_ACTIVITY_KIND_RUNTIME:
        case CUPTI_ACTIVITY_KIND_DRIVER: return z.api;
        case CUPTI_ACTIVITY_KIND_OVERHEAD: return z.overhead;
        default: return sizeof(CUpti_Activity);
    }
}

std::uint32_t ActivityDecoder::stream_of(std::uint32_t id) const noexcept {
    // CUPTI_INVALID_STREAM_ID is 0xFFFFFFFF up to 13.1 and 0 from 13.2.
    return id == layout_.invalid_stream || id == 0xFFFFFFFFu ? kNoStream : id;
}

void ActivityDecoder::push(const Event& e) noexcept {
    if (out_.try_push(e)) {
        ++counters_.events;
    } else {
        ++counters_.queue_refused;
    }
}

void ActivityDecoder::decode_buffer(NextRecordFn next_record, std::uint8_t* buffer,
                                    std::size_t valid, bool forced) noexcept {
    if (next_record == nullptr || buffer == nullptr || valid == 0) return;
    forced_ = forced;
    CUpti_Activity* record = nullptr;
    for (;;) {
        CUpti_Activity* previous = record;
        CUptiResult rc = next_record(buffer, valid, &record);
        if (rc == CUPTI_ERROR_MAX_LIMIT_REACHED) break;  // end of the valid bytes
        if (rc == CUPTI_SUCCESS && record != nullptr) {
            decode_record(record);
            continue;
        }
        // CUPTI's parser stops at a record it cannot size and never moves past it (checked
        // against libcupti 12.0-12.9 and 13.0), so what follows in this buffer cannot be read.
        // After a forced flush that is a record still in flight; otherwise the buffer is damaged.
        if (forced && static_cast<int>(rc) == layout_.unsizable_record_result) {
            ++counters_.incomplete_at_flush;
            counters_.unreadable_bytes += unread_after(buffer, valid, previous);
        } else {
            ++counters_.corrupt_buffers;
        }
        break;
    }
    forced_ = false;
}

std::uint64_t ActivityDecoder::unread_after(const std::uint8_t* buffer, std::size_t valid,
                                            const CUpti_Activity* last_read) const noexcept {
    // The incomplete record follows the last readable one, whose size is the loaded release's
    // (a release newer than the layout table may append fields: then an upper bound).
    if (last_read == nullptr) return valid;
    std::size_t at =
        static_cast<std::size_t>(reinterpret_cast<const std::uint8_t*>(last_read) - buffer) +
        record_size(last_read->kind);
    return at < valid ? valid - at : 0;
}

void ActivityDecoder::decode_record(const CUpti_Activity* record) noexcept {
    if (record == nullptr) return;
    try {
        ++counters_.records;
        auto kind = static_cast<std::uint32_t>(record->kind);
        if (kind < counters_.by_kind.size()) {
            ++counters_.by_kind[kind];
        }
        switch (record->kind) {
            case CUPTI_ACTIVITY_KIND_MEMORY2: on_memory(view_of<MemoryView>(record)); break;
            case CUPTI_ACTIVITY_KIND_MEMORY_POOL:
                if (layout_.pool_has_managed_flag) {
                    auto pool = view_of<MemoryPool3View>(record);
                    on_memory_pool(pool.v2, pool.isManagedPool != 0);
                } else {
                    on_memory_pool(view_of<MemoryPool2View>(record),
                                   false);  // CUDA 12: device pools
                }
                break;
            case CUPTI_ACTIVITY_KIND_KERNEL:  // never enabled by gpudiag; decoded if another
            case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:  // client turned it on
                on_kernel(view_of<KernelView>(record));
                break;
            case CUPTI_ACTIVITY_KIND_MEMCPY: on_memcpy(view_of<MemcpyView>(record)); break;
            case CUPTI_ACTIVITY_KIND_MEMCPY2: on_memcpy_p2p(view_of<MemcpyPtoPView>(record)); break;
            case CUPTI_ACTIVITY_KIND_MEMSET: on_memset(view_of<MemsetView>(record)); break;
            case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: on_sync(view_of<SyncView>(record)); break;
            case CUPTI_ACTIVITY_KIND_RUNTIME:
                on_api(view_of<ApiView>(record), ApiDomain::kRuntime);
                break;
            case CUPTI_ACTIVITY_KIND_DRIVER:
                on_api(view_of<ApiView>(record), ApiDomain::kDriver);
                break;
            case CUPTI_ACTIVITY_KIND_OVERHEAD: on_overhead(record); break;
            default:
                ++counters_.other_kinds;  // newer kinds, or kinds another client enabled
                break;
        }
    } catch (...) {
        // Only interning can throw (it does not: it is noexcept), and the caches' allocation.
        // Losing one record is the right answer to running out of memory here.
    }
}

template <typename Record>
Event ActivityDecoder::timed_device_event(EventKind kind, const Record& r) const noexcept {
    Event e;
    e.kind = kind;
    e.device = device_of(r.deviceId);
    e.stream = stream_of(r.streamId);
    e.process = pid_;
    e.start_ns = ts(r.start);
    e.end_ns = r.end >= r.start ? ts(r.end) : e.start_ns;
    return e;
}

void ActivityDecoder::on_memory(const MemoryView& r) {
    bool alloc = r.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
    if (!alloc && r.memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE) return;
    Book book = book_of(r.memoryKind);
    if (book == Book::kUnknown) {
        ++counters_.memory_unknown_kind;  // booking it anywhere would be a guess
        return;
    }
    bool pooled = book == Book::kDevice &&
                  r.memoryPoolConfig.memoryPoolType != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID;
    Event e;
    switch (book) {
        case Book::kHost: e.kind = alloc ? EventKind::kHostAlloc : EventKind::kHostFree; break;
        case Book::kManaged:
            e.kind = alloc ? EventKind::kManagedAlloc : EventKind::kManagedFree;
            break;
        default:
            e.kind = pooled ? (alloc ? EventKind::kPoolAlloc : EventKind::kPoolFree)
                            : (alloc ? EventKind::kDeviceAlloc : EventKind::kDeviceFree);
            break;
    }
    e.flags = static_cast<std::uint8_t>(memory_kind(r.memoryKind));
    e.device = device_of(r.deviceId);
    e.stream = stream_of(r.streamId);
    e.process = r.processId != 0 ? r.processId : pid_;
    e.start_ns = e.end_ns = ts(r.timestamp);
    e.memory.address = r.address;
    e.memory.bytes = r.bytes;
    e.memory.aux = pooled ? r.memoryPoolConfig.address : 0;
    e.memory.site = call_info(r.correlationId).site;
    e.memory.extra = r.correlationId;
    push(e);
    note_device(e.device, r.contextId);
    if (own_memory_ != nullptr && book == Book::kDevice && !pooled) {
        const auto bytes = static_cast<std::int64_t>(r.bytes);
        own_memory_->add(e.device, alloc ? bytes : -bytes);
    }
    if (alloc && book == Book::kDevice) {
        if (auto it = call_threads_.find(r.correlationId); it != call_threads_.end()) {
            join_thread_device(r.correlationId, it->second, e.device);
        } else {
            put_bounded(call_devices_, kMaxJoined, r.correlationId, e.device);
        }
    }
    if (pooled && r.memoryPoolConfig.memoryPoolType == CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL) {
        note_pool_size(e, r.memoryPoolConfig.address, r.memoryPoolConfig.size,
                       r.memoryPoolConfig.utilizedSize, r.correlationId);
    }
}

void ActivityDecoder::note_pool_size(const Event& like, std::uint64_t pool, std::uint64_t size,
                                     std::uint64_t utilized, std::uint32_t correlation) {
    auto it = pool_sizes_.find(pool);
    if (it != pool_sizes_.end() && it->second == size) return;
    resize_pool(like.device, pool, size);
    Event e;
    e.kind = EventKind::kPoolResize;
    e.flags = static_cast<std::uint8_t>(MemoryKind::kDevice);
    e.device = like.device;
    e.process = like.process;
    e.start_ns = e.end_ns = like.start_ns;
    e.memory.address = pool;
    e.memory.bytes = size;
    e.memory.aux = utilized;
    e.memory.extra = correlation;
    push(e);
}

void ActivityDecoder::on_memory_pool(const MemoryPool2View& r, bool managed) {
    bool destroyed =
        r.memoryPoolOperationType == CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED;
    Event e;
    e.kind = EventKind::kPoolResize;
    e.flags = static_cast<std::uint8_t>(managed ? MemoryKind::kManaged : MemoryKind::kDevice);
    e.device = device_of(r.deviceId);
    e.process = r.processId != 0 ? r.processId : pid_;
    e.start_ns = e.end_ns = ts(r.timestamp);
    e.memory.address = r.address;
    e.memory.bytes = destroyed ? 0 : r.size;
    e.memory.aux = destroyed ? 0 : r.utilizedSize;
    e.memory.extra = r.correlationId;
    push(e);
    resize_pool(e.device, r.address, destroyed ? 0 : r.size);
    if (destroyed) pool_sizes_.erase(r.address);
}

// A pool's new size, and its change in this process' own device memory. Forgetting the sizes
// (too many pools) leaves the own total unknown rather than wrong.
void ActivityDecoder::resize_pool(std::uint16_t device, std::uint64_t pool, std::uint64_t size) {
    auto it = pool_sizes_.find(pool);
    const std::uint64_t before = it != pool_sizes_.end() ? it->second : 0;
    if (it != pool_sizes_.end()) {
        it->second = size;
    } else {
        if (pool_sizes_.size() >= kMaxPools) {
            pool_sizes_.clear();
            if (own_memory_ != nullptr) own_memory_->forget_all();
        }
        pool_sizes_.emplace(pool, size);
    }
    if (own_memory_ != nullptr) {
        own_memory_->add(device,
                         static_cast<std::int64_t>(size) - static_cast<std::int64_t>(before));
    }
}

void ActivityDecoder::on_kernel(const KernelView& r) {
    if (r.start == 0 && r.end == 0) {
        // In a forced flush: still running. Otherwise CUPTI's device buffer was full.
        ++(forced_ ? counters_.incomplete_at_flush : counters_.kernels_without_timing);
        return;
    }
    Event e = timed_device_event(EventKind::kKernel, r);
    e.kernel.name = kernel_name(r.name);
    e.kernel.correlation = r.correlationId;
    std::uint64_t grid = clamp_u32(r.gridX) * clamp_u32(r.gridY) * clamp_u32(r.gridZ);
    std::uint64_t block = clamp_u32(r.blockX) * clamp_u32(r.blockY) * clamp_u32(r.blockZ);
    e.kernel.grid_size = grid > UINT32_MAX ? UINT32_MAX : static_cast<std::uint32_t>(grid);
    e.kernel.block_size = block > UINT32_MAX ? UINT32_MAX : static_cast<std::uint32_t>(block);
    e.kernel.shared_bytes = static_cast<std::uint32_t>(clamp_u32(r.staticSharedMemory) +
                                                       clamp_u32(r.dynamicSharedMemory));
    e.kernel.registers = r.registersPerThread;
    push(e);
    note_device(e.device, r.contextId);
}

void ActivityDecoder::on_memcpy(const MemcpyView& r) {
    Event e = timed_device_event(EventKind::kMemcpy, r);
    e.copy.bytes = r.bytes;
    e.copy.correlation = r.correlationId;
    e.copy.direction = copy_direction(r.copyKind);
    e.copy.src_kind = memory_kind(r.srcKind);
    e.copy.dst_kind = memory_kind(r.dstKind);
    e.copy.is_async = (r.flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) != 0 ? 1 : 0;
    push(e);
    note_device(e.device, r.contextId);
}

void ActivityDecoder::on_memcpy_p2p(const MemcpyPtoPView& r) {
    Event e = timed_device_event(EventKind::kMemcpy, r);
    e.copy.bytes = r.bytes;
    e.copy.correlation = r.correlationId;
    e.copy.direction = CopyDirection::kPeerToPeer;
    e.copy.src_kind = memory_kind(r.srcKind);
    e.copy.dst_kind = memory_kind(r.dstKind);
    e.copy.is_async = (r.flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) != 0 ? 1 : 0;
    push(e);
}

void ActivityDecoder::on_memset(const MemsetView& r) {
    Event e = timed_device_event(EventKind::kMemset, r);
    e.copy.bytes = r.bytes;
    e.copy.correlation = r.correlationId;
    e.copy.dst_kind = memory_kind(r.memoryKind);
    e.copy.is_async = (r.flags & CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC) != 0 ? 1 : 0;
    push(e);
    note_device(e.device, r.contextId);
}

void ActivityDecoder::on_sync(const SyncView& r) {
    Event e;
    e.kind = EventKind::kSync;
    e.stream = stream_of(r.streamId);
    e.process = pid_;
    e.start_ns = ts(r.start);
    e.end_ns = r.end >= r.start ? ts(r.end) : e.start_ns;
    e.sync.correlation = r.correlationId;
    e.sync.sync_kind = sync_kind(r.type);
    e.sync.object = r.cudaEventId != CUPTI_SYNCHRONIZATION_INVALID_VALUE ? r.cudaEventId : 0;
    push(e);
}

void ActivityDecoder::on_api(const ApiView& r, ApiDomain domain) {
    const WhitelistedApi* api = find_whitelisted_api(domain, r.cbid);
    if (api == nullptr && whitelisted_api_only_) {
        ++counters_.api_records_filtered;
        return;
    }
    Event e;
    e.kind = EventKind::kApiCall;
    e.process = r.processId != 0 ? r.processId : pid_;
    e.thread = r.threadId;
    e.start_ns = ts(r.start);
    e.end_ns = r.end >= r.start ? ts(r.end) : e.start_ns;
    e.api.name = api_name(domain, r.cbid);
    e.api.correlation = r.correlationId;
    e.api.callback_id = r.cbid;
    e.api.domain = domain;
    e.api.return_code = r.returnValue;
    push(e);
    if (api != nullptr && (api->role == ApiRole::kAlloc || api->role == ApiRole::kVmm)) {
        on_allocation_call(e, *api);
    }
}

void ActivityDecoder::on_allocation_call(const Event& call, const WhitelistedApi& api) {
    const CallInfo info = call_info(call.api.correlation);  // size and context: deep mode only
    forget_stale_ooms(call.thread, call.start_ns);
    if (call.api.return_code == kCudaOutOfMemory) {
        on_failed_allocation(call, api, info);
    } else if (call.api.return_code == 0) {
        on_allocation_success(call, api, info);
    }
}

bool ActivityDecoder::PendingOom::same_request(const Event& call, const WhitelistedApi& other,
                                               std::uint64_t requested) const noexcept {
    std::uint64_t mine = marker.oom.requested_bytes;
    return marker.thread == call.thread && api == &other &&
           (mine == 0 || requested == 0 || mine == requested);  // a size unknown matches any
}

void ActivityDecoder::on_failed_allocation(const Event& call, const WhitelistedApi& api,
                                           const CallInfo& info) {
    ++counters_.failed_allocations;
    // The same request failing again means the caller's retry did not help: the earlier
    // failure stands as an out-of-memory error and is no longer withdrawn.
    std::erase_if(pending_ooms_, [&](const PendingOom& p) {
        return p.same_request(call, api, info.requested_bytes);
    });
    MemoryKind memory = allocated_memory(api);
    Event oom;
    oom.kind = EventKind::kOutOfMemory;
    oom.flags = static_cast<std::uint8_t>(static_cast<std::uint8_t>(memory) | kEventFlagRetryable);
    oom.device = memory == MemoryKind::kPinned ? kNoDevice : device_of_call(call.thread, info);
    oom.process = call.process;
    oom.thread = call.thread;
    oom.start_ns = oom.end_ns = call.end_ns;
    oom.oom.site = info.site;
    oom.oom.requested_bytes = info.requested_bytes;
    oom.oom.correlation = call.api.correlation;
    push(oom);
    if (pending_ooms_.size() >= kMaxPendingOoms) pending_ooms_.erase(pending_ooms_.begin());
    pending_ooms_.push_back(PendingOom{oom, &api});
}

void ActivityDecoder::on_allocation_success(const Event& call, const WhitelistedApi& api,
                                            const CallInfo& info) {
    const std::uint32_t correlation = call.api.correlation;
    if (auto it = call_devices_.find(correlation); it != call_devices_.end()) {
        join_thread_device(correlation, call.thread, it->second);
    } else if (api.role == ApiRole::kAlloc) {
        put_bounded(call_threads_, kMaxJoined, correlation, call.thread);
    }
    // The caller retried a failed request and it worked: that failure was no OOM for it.
    auto it = std::find_if(pending_ooms_.begin(), pending_ooms_.end(), [&](const PendingOom& p) {
        return p.same_request(call, api, info.requested_bytes);
    });
    if (it == pending_ooms_.end()) return;
    Event withdrawn = it->marker;
    withdrawn.flags = static_cast<std::uint8_t>(withdrawn.flags | kEventFlagRetrySucceeded);
    withdrawn.start_ns = withdrawn.end_ns = call.end_ns;
    pending_ooms_.erase(it);
    ++counters_.retried_allocations;
    push(withdrawn);
}

void ActivityDecoder::forget_stale_ooms(std::uint32_t thread, std::uint64_t now_ns) {
    // Records of one thread arrive in order: a call past the window ends that thread's chance.
    std::erase_if(pending_ooms_, [&](const PendingOom& p) {
        return p.marker.thread == thread && now_ns > p.marker.start_ns + kRetryWindowNs;
    });
}

void ActivityDecoder::note_device(std::uint16_t device, std::uint32_t context) {
    if (device == kNoDevice) return;
    if (only_device_ == kNoDevice) {
        only_device_ = device;
    } else if (device != only_device_) {
        several_devices_ = true;
    }
    if (context != 0) {
        auto it = context_devices_.find(context);
        if (it == context_devices_.end() || it->second != device) {
            put_bounded(context_devices_, kMaxJoined, context, device);
        }
    }
}

void ActivityDecoder::join_thread_device(std::uint32_t correlation, std::uint32_t thread,
                                         std::uint16_t device) {
    call_threads_.erase(correlation);
    call_devices_.erase(correlation);
    put_bounded(thread_devices_, kMaxThreads, thread, device);
}

std::uint16_t ActivityDecoder::device_of_call(std::uint32_t thread, const CallInfo& info) const {
    // The call's own context (deep mode), else the device this thread last allocated on, else
    // the only device the process used.
    if (info.context != 0) {
        if (auto it = context_devices_.find(info.context); it != context_devices_.end()) {
            return it->second;
        }
    }
    if (auto it = thread_devices_.find(thread); it != thread_devices_.end()) return it->second;
    return several_devices_ ? kNoDevice : only_device_;
}

std::uint16_t ActivityDecoder::device_of_context(std::uint32_t context) const noexcept {
    if (auto it = context_devices_.find(context); context != 0 && it != context_devices_.end()) {
        return it->second;
    }
    return several_devices_ ? kNoDevice : only_device_;
}

void ActivityDecoder::on_overhead(const CUpti_Activity* record) {
    // Overhead (12.0-12.2) and Overhead2 (12.3) end before overheadData: reading it there would
    // free whatever the next record holds.
    const auto v1 = view_of<Overhead1View>(record);
    ++counters_.overhead_records;
    if (v1.end > v1.start) counters_.overhead_ns += v1.end - v1.start;
    if (layout_.overhead_version < 3) return;
    // CUPTI allocates overheadData for the client and documents that the client frees it.
    const auto v3 = view_of<Overhead3View>(record);
    if (v3.overheadData != nullptr) std::free(v3.overheadData);
}

StringId ActivityDecoder::kernel_name(const char* mangled) {
    if (mangled == nullptr || *mangled == '\0') return kNoString;
    // CUPTI shares one name string among all records of a kernel: cache by pointer, and check
    // the text's hash so a module unload that reuses the address cannot mislabel.
    std::uint64_t h = hash_text(mangled);
    if (auto it = kernel_names_.find(mangled); it != kernel_names_.end() && it->second.hash == h) {
        return it->second.id;
    }
    const std::string demangled = platform::demangle(mangled);
    StringId id = strings_.intern(demangled.empty() ? std::string_view(mangled) : demangled);
    if (kernel_names_.size() >= kMaxCachedNames) kernel_names_.clear();
    kernel_names_[mangled] = NameEntry{h, id};
    return id;
}

StringId ActivityDecoder::api_name(ApiDomain domain, std::uint32_t cbid) {
    std::uint64_t key = (std::uint64_t{static_cast<std::uint8_t>(domain)} << 32) | cbid;
    if (auto it = api_names_.find(key); it != api_names_.end()) return it->second;
    const WhitelistedApi* api = find_whitelisted_api(domain, cbid);
    std::string name =
        api != nullptr
            ? std::string(api->name)
            : fmt::format("{}#{}", domain == ApiDomain::kRuntime ? "cuda_runtime" : "cuda_driver",
                          cbid);
    StringId id = strings_.intern(name);
    if (api_names_.size() >= kMaxCachedNames) api_names_.clear();
    api_names_.emplace(key, id);
    return id;
}

void ActivityDecoder::note_site(std::uint32_t correlation, StringId site,
                                std::uint64_t requested_bytes, std::uint32_t context) noexcept {
    try {
        if (sites_.size() >= kMaxSites) {  // forget the oldest: its records were long decoded
            sites_.erase(site_order_.front());
            site_order_.pop_front();
        }
        if (sites_.emplace(correlation, CallInfo{site, requested_bytes, context}).second) {
            site_order_.push_back(correlation);
        }
    } catch (...) {
    }
}

ActivityDecoder::CallInfo ActivityDecoder::call_info(std::uint32_t correlation) const {
    if (sites_.empty()) return {};
    auto it = sites_.find(correlation);
    return it != sites_.end() ? it->second : CallInfo{};
}

}  // namespace gpudiag::detail

#endif  // GPUDIAG_HAVE_CUDA_HEADERS
