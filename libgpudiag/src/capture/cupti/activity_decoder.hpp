// SPDX-License-Identifier: Apache-2.0
// ActivityDecoder: turns completed CUPTI activity buffers into gpudiag Events.
//
// Records are walked only with the loaded library's cuptiActivityGetNextRecord (record sizes
// belong to the runtime, not to our headers) and read through views of the fields gpudiag uses
// (cupti_record_layouts.hpp), chosen for the loaded CUPTI (12.0 to 13.x) where they differ.
#pragma once

#if GPUDIAG_HAVE_CUDA_HEADERS

#    include <gpudiag/event.hpp>
#    include <gpudiag/string_table.hpp>

#    include "capture/cupti/cupti_record_layouts.hpp"
#    include "capture/platform/clock_calibration.hpp"
#    include "capture/platform/own_device_memory.hpp"
#    include "core/event_queue.hpp"

#    include <cupti_activity.h>

#    include <array>
#    include <cstddef>
#    include <cstdint>
#    include <deque>
#    include <unordered_map>
#    include <vector>

namespace gpudiag::detail {

/// What the decoder has seen; read by status() and tests.
struct DecoderCounters {
    std::uint64_t records = 0;
    std::array<std::uint64_t, 64> by_kind{};   ///< CUPTI kind value -> records (64+ in `other`)
    std::uint64_t other_kinds = 0;             ///< kinds gpudiag does not decode (skipped)
    std::uint64_t events = 0;                  ///< handed to the queue
    std::uint64_t queue_refused = 0;           ///< the queue was full
    std::uint64_t kernels_without_timing = 0;  ///< start == end == 0: device buffer was full
    std::uint64_t overhead_records = 0;
    std::uint64_t overhead_ns = 0;      ///< CUPTI's own time, summed over OVERHEAD records
    std::uint64_t corrupt_buffers = 0;  ///< the parser stopped with an unexpected error
    /// Records still in flight when a forced flush (pause, stop) returned them: kernels without
    /// timestamps, or a record CUPTI's parser calls CUPTI_ERROR_INVALID_KIND ("incomplete").
    std::uint64_t incomplete_at_flush = 0;
    /// Bytes left unread behind incomplete records (an upper bound: the last readable record
    /// may be larger in the loaded CUPTI than its 13.0 struct). CUPTI's parser cannot step over a
    /// record it cannot size, so complete records behind one in the same buffer are lost; they are
    /// counted, never guessed at.
    std::uint64_t unreadable_bytes = 0;
    std::uint64_t memory_unknown_kind = 0;  ///< MEMORY2 records of no known memory kind: not booked
    /// API records of calls outside the whitelist, dropped (CUPTI before 12.5 can only record
    /// the whole runtime API, see keep_whitelisted_api_only).
    std::uint64_t api_records_filtered = 0;
    std::uint64_t failed_allocations = 0;   ///< allocation calls that returned out-of-memory
    std::uint64_t retried_allocations = 0;  ///< of those, requests that then succeeded on retry
};

struct WhitelistedApi;

class ActivityDecoder {
public:
    using NextRecordFn = CUptiResult (*)(uint8_t*, size_t, CUpti_Activity**);

    /// `cupti_version`: cuptiGetVersion of the library whose records are decoded (13.0's when
    /// not given).
    ActivityDecoder(EventQueue& out, StringTable& strings, const ClockCalibration& clock,
                    std::uint32_t cupti_version = 130000) noexcept;

    /// Drops API records of calls gpudiag does not whitelist (counted in api_records_filtered):
    /// set when the whole runtime API kind had to be enabled.
    void keep_whitelisted_api_only(bool on) noexcept { whitelisted_api_only_ = on; }
    [[nodiscard]] const CuptiRecordLayout& layout() const noexcept { return layout_; }
    /// Keeps `own` at the device memory the decoded records hold (allocations outside pools,
    /// pools' sizes); none by default.
    void count_own_memory(OwnDeviceMemory* own) noexcept { own_memory_ = own; }

    /// Decodes every record of one completed buffer (`valid` bytes) with `next_record`.
    /// `forced`: the buffer came back through a forced flush, so records may still be in flight.
    /// Thread-safety: one thread at a time. Callback-safe: no (interns, allocates).
    void decode_buffer(NextRecordFn next_record, std::uint8_t* buffer, std::size_t valid,
                       bool forced = false) noexcept;
    /// Decodes one record (used by decode_buffer; tests feed hand-built records).
    void decode_record(const CUpti_Activity* record) noexcept;

    /// Deep mode: the call site, requested size and CUPTI context id of the allocation with this
    /// correlation id (memory records and out-of-memory markers carry them).
    void note_site(std::uint32_t correlation, StringId site, std::uint64_t requested_bytes,
                   std::uint32_t context = 0) noexcept;

    /// The device of a CUPTI context id seen in device records, else the only device the process
    /// used, else kNoDevice.
    [[nodiscard]] std::uint16_t device_of_context(std::uint32_t context) const noexcept;

    [[nodiscard]] const DecoderCounters& counters() const noexcept { return counters_; }

private:
    void push(const Event& e) noexcept;
    [[nodiscard]] std::uint64_t unread_after(const std::uint8_t* buffer, std::size_t valid,
                                             const CUpti_Activity* last_read) const noexcept;
    [[nodiscard]] std::size_t record_size(std::uint32_t kind) const noexcept;
    void on_memory(const MemoryView& r);
    void on_memory_pool(const MemoryPool2View& r, bool managed);
    void on_kernel(const KernelView& r);
    void on_memcpy(const MemcpyView& r);
    void on_memcpy_p2p(const MemcpyPtoPView& r);
    void on_memset(const MemsetView& r);
    void on_sync(const SyncView& r);
    void on_api(const ApiView& r, ApiDomain domain);
    void on_overhead(const CUpti_Activity* record);
    [[nodiscard]] std::uint32_t stream_of(std::uint32_t id) const noexcept;
    void note_pool_size(const Event& like, std::uint64_t pool, std::uint64_t size,
                        std::uint64_t utilized, std::uint32_t correlation);
    void resize_pool(std::uint16_t device, std::uint64_t pool, std::uint64_t size);
    StringId kernel_name(const char* mangled);
    StringId api_name(ApiDomain domain, std::uint32_t cbid);
    struct CallInfo {
        StringId site;
        std::uint64_t requested_bytes;
        std::uint32_t context;
    };
    CallInfo call_info(std::uint32_t correlation) const;
    // Out-of-memory markers: the device of a failed call, and the caller's retry.
    void on_allocation_call(const Event& call, const WhitelistedApi& api);
    void on_failed_allocation(const Event& call, const WhitelistedApi& api, const CallInfo& info);
    void on_allocation_success(const Event& call, const WhitelistedApi& api, const CallInfo& info);
    void note_device(std::uint16_t device, std::uint32_t context);
    void join_thread_device(std::uint32_t correlation, std::uint32_t thread, std::uint16_t device);
    [[nodiscard]] std::uint16_t device_of_call(std::uint32_t thread, const CallInfo& info) const;
    void forget_stale_ooms(std::uint32_t thread, std::uint64_t now_ns);
    [[nodiscard]] std::uint64_t ts(std::uint64_t cupti_ns) const noexcept {
        return clock_.to_monotonic(cupti_ns);
    }
    /// An event with what every timed device record (kernel, copy, memset) carries: device,
    /// stream, this process and the interval on the session clock.
    template <typename Record>
    [[nodiscard]] Event timed_device_event(EventKind kind, const Record& r) const noexcept;

    EventQueue& out_;
    StringTable& strings_;
    const ClockCalibration& clock_;
    const CuptiRecordLayout& layout_;
    std::uint32_t pid_;
    bool whitelisted_api_only_ = false;
    OwnDeviceMemory* own_memory_ = nullptr;
    DecoderCounters counters_;
    bool forced_ = false;  // the buffer being decoded came from a forced flush

    // Bounded caches: each is cleared when full (a cache miss only costs an intern).
    struct NameEntry {
        std::uint64_t hash;
        StringId id;
    };
    std::unordered_map<const char*, NameEntry> kernel_names_;
    std::unordered_map<std::uint64_t, StringId> api_names_;        // domain << 32 | cbid
    std::unordered_map<std::uint64_t, std::uint64_t> pool_sizes_;  // pool address -> size
    std::unordered_map<std::uint32_t, CallInfo> sites_;
    std::deque<std::uint32_t> site_order_;
    // Where allocations happen: API records carry the thread and MEMORY2 records the device,
    // joined by correlation id (either may be decoded first).
    std::unordered_map<std::uint32_t, std::uint32_t> call_threads_;     // correlation -> thread
    std::unordered_map<std::uint32_t, std::uint16_t> call_devices_;     // correlation -> device
    std::unordered_map<std::uint32_t, std::uint16_t> thread_devices_;   // thread -> last device
    std::unordered_map<std::uint32_t, std::uint16_t> context_devices_;  // CUPTI context -> device
    std::uint16_t only_device_ = kNoDevice;  // the one device seen, while there is only one
    bool several_devices_ = false;
    // Failed allocation calls whose caller may still retry them successfully.
    struct PendingOom {
        Event marker;
        const WhitelistedApi* api;
        /// The same call of the same thread asking for as much (a size unknown matches any).
        [[nodiscard]] bool same_request(const Event& call, const WhitelistedApi& other,
                                        std::uint64_t requested) const noexcept;
    };
    std::vector<PendingOom> pending_ooms_;
};

}  // namespace gpudiag::detail

#endif  // GPUDIAG_HAVE_CUDA_HEADERS
