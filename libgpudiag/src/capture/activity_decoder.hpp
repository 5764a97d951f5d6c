// SPDX-License-Identifier: Apache-2.0
// ActivityDecoder: turns completed CUPTI activity buffers into gpudiag Events.
//
// Records are walked only with the loaded library's cuptiActivityGetNextRecord (record sizes
// belong to the runtime, not to our headers) and read through the CUDA 13.0 structs, prefix
// fields only: CUPTI appends fields when it bumps a struct version (Kernel10 -> 11 ...).
#pragma once

#if GPUDIAG_HAVE_CUDA_HEADERS

#  include <gpudiag/event.hpp>
#  include <gpudiag/string_table.hpp>

#  include "capture/clock_calibration.hpp"
#  include "core/event_queue.hpp"

#  include <cupti_activity.h>

#  include <array>
#  include <cstddef>
#  include <cstdint>
#  include <deque>
#  include <unordered_map>

namespace gpudiag::detail {

/// What the decoder has seen; read by status() and tests.
struct DecoderCounters {
    std::uint64_t records = 0;
    std::array<std::uint64_t, 64> by_kind{};  ///< CUPTI kind value -> records (64+ in `other`)
    std::uint64_t other_kinds = 0;            ///< kinds gpudiag does not decode (skipped)
    std::uint64_t events = 0;                 ///< handed to the queue
    std::uint64_t queue_refused = 0;          ///< the queue was full
    std::uint64_t kernels_without_timing = 0; ///< start == end == 0: device buffer was full
    std::uint64_t overhead_records = 0;
    std::uint64_t overhead_ns = 0;            ///< CUPTI's own time, summed over OVERHEAD records
    std::uint64_t corrupt_buffers = 0;        ///< the parser stopped with an unexpected error
    /// Records still in flight when a forced flush (pause, stop) returned them: kernels without
    /// timestamps, or a record CUPTI's parser calls CUPTI_ERROR_INVALID_KIND ("incomplete").
    std::uint64_t incomplete_at_flush = 0;
    /// Bytes left unread behind incomplete records (an upper bound: the last readable record
    /// may be larger in the loaded CUPTI than its 13.0 struct). CUPTI's parser cannot step over a record it cannot size, so complete
    /// records behind one in the same buffer are lost; they are counted, never guessed at.
    std::uint64_t unreadable_bytes = 0;
};

class ActivityDecoder {
public:
    using NextRecordFn = CUptiResult (*)(uint8_t*, size_t, CUpti_Activity**);

    ActivityDecoder(EventQueue& out, StringTable& strings, const ClockCalibration& clock) noexcept;

    /// Decodes every record of one completed buffer (`valid` bytes) with `next_record`.
    /// `forced`: the buffer came back through a forced flush, so records may still be in flight.
    /// Thread-safety: one thread at a time. Callback-safe: no (interns, allocates).
    void decode_buffer(NextRecordFn next_record, std::uint8_t* buffer, std::size_t valid,
                       bool forced = false) noexcept;
    /// Decodes one record (used by decode_buffer; tests feed hand-built records).
    void decode_record(const CUpti_Activity* record) noexcept;

    /// Deep mode: the call site and requested size of the allocation with this correlation id
    /// (memory records and out-of-memory markers carry them).
    void note_site(std::uint32_t correlation, StringId site, std::uint64_t requested_bytes) noexcept;

    [[nodiscard]] const DecoderCounters& counters() const noexcept { return counters_; }

private:
    void push(const Event& e) noexcept;
    static std::uint64_t unread_after(const std::uint8_t* buffer, std::size_t valid,
                                      const CUpti_Activity* last_read) noexcept;
    void on_memory(const CUpti_ActivityMemory4& r);
    void on_memory_pool(const CUpti_ActivityMemoryPool3& r);
    void on_kernel(const CUpti_ActivityKernel10& r);
    void on_memcpy(const CUpti_ActivityMemcpy6& r);
    void on_memcpy_p2p(const CUpti_ActivityMemcpyPtoP4& r);
    void on_memset(const CUpti_ActivityMemset4& r);
    void on_sync(const CUpti_ActivitySynchronization2& r);
    void on_api(const CUpti_ActivityAPI& r, ApiDomain domain);
    void on_overhead(const CUpti_ActivityOverhead3& r);
    void note_pool_size(const Event& like, std::uint64_t pool, std::uint64_t size,
                        std::uint64_t utilized, std::uint32_t correlation);
    StringId kernel_name(const char* mangled);
    StringId api_name(ApiDomain domain, std::uint32_t cbid);
    struct CallInfo {
        StringId site;
        std::uint64_t requested_bytes;
    };
    CallInfo call_info(std::uint32_t correlation) const;
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
    std::uint32_t pid_;
    DecoderCounters counters_;
    bool forced_ = false;  // the buffer being decoded came from a forced flush

    // Bounded caches: each is cleared when full (a cache miss only costs an intern).
    struct NameEntry {
        std::uint64_t hash;
        StringId id;
    };
    std::unordered_map<const char*, NameEntry> kernel_names_;
    std::unordered_map<std::uint64_t, StringId> api_names_;  // domain << 32 | cbid
    std::unordered_map<std::uint64_t, std::uint64_t> pool_sizes_;  // pool address -> size
    std::unordered_map<std::uint32_t, CallInfo> sites_;
    std::deque<std::uint32_t> site_order_;
};

}  // namespace gpudiag::detail

#endif  // GPUDIAG_HAVE_CUDA_HEADERS
