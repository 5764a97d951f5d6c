// SPDX-License-Identifier: Apache-2.0
// CuptiActivitySource: CUPTI activity capture for the whole process (CUPTI's buffer callbacks
// carry no user pointer and its activity state is process-global, so there is one instance).
//
// Threads: CUPTI calls buffer_requested on application threads and buffer_completed on its
// worker (or inside a FlushAll); both only move buffer pointers. The source's control thread
// flushes every flush period, decodes completed buffers (the only decoder), reads drop counts,
// calibrates the clock, sizes the buffer pool to demand and watches for starvation. No gpudiag
// lock is ever held across a CUPTI call: lifecycle calls serialise with a token taken and
// released around them, not a held mutex.
#pragma once

#include <gpudiag/status.hpp>
#include <gpudiag/string_table.hpp>

#include "core/event_queue.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpudiag::detail {

struct CuptiSourceOptions {
    bool deep = false;  ///< also subscribe for allocation call sites
    std::uint32_t flush_period_ms = 250;
    std::size_t buffer_bytes = std::size_t{1} << 20;  ///< CUPTI recommends 1-10 MB
    std::size_t initial_buffers = 8;
    std::size_t max_buffers = 64;  ///< 64 MiB at most; beyond it records are dropped
    /// The cost budget's reduction to start with (see CuptiActivitySource::reduce).
    std::uint64_t kinds_off = 0;
    /// Starvation: no buffer request and no record for this long while the GPU is seen busy by
    /// other means (NVML utilization, deep-mode API callbacks) means another CUPTI client took
    /// the activity API. Buffers flush every period, so a program that still records into
    /// gpudiag's buffers asks for or returns one within a second or two.
    std::uint32_t stall_seconds = 15;
    /// At pause and stop: how long FlushAll(0) is retried while CUPTI still holds buffers
    /// (kernels running) before a forced flush hands them over incomplete.
    std::uint32_t settle_ms = 150;
};

struct CuptiSourceStatus {
    bool active = false;       ///< activity kinds enabled (or paused with them off)
    bool deep_active = false;  ///< holding CUPTI's subscriber
    bool paused = false;
    std::string paused_reason;
    bool degraded = false;             ///< an internal failure stopped capture; see reasons
    std::vector<std::string> reasons;  ///< "cupti_activity: ...", "cupti_deep: ..."
    std::vector<std::string> notes;    ///< features lost without losing the level
    std::string library;
    std::uint32_t version = 0;
    std::uint64_t records = 0;
    std::uint64_t events = 0;
    std::uint64_t dropped = 0;  ///< records CUPTI dropped (buffers full or declined)
    std::uint64_t kernels_without_timing = 0;
    std::uint64_t overhead_ns = 0;
    std::uint64_t declined_buffers = 0;
    std::uint64_t corrupt_buffers = 0;
    std::uint64_t incomplete_at_flush = 0;  ///< records still in flight at a forced flush
    std::uint64_t unreadable_bytes = 0;     ///< left unread behind them (upper bound)
    std::uint64_t foreign_buffers = 0;      ///< another client's buffers handed to gpudiag, dropped
    bool stalled = false;                   ///< starved: another client has the activity API
    bool per_subscriber = false;            ///< on CUPTI's per-subscriber path (else process-wide)
    double clock_rate = 0.0;                ///< session ns per CUPTI tick; 0 until measured
    bool foreign_clock = false;             ///< CUPTI's clock is not ns: a timestamp callback
    std::uint64_t last_gpu_busy_ns = 0;     ///< latest outside evidence of GPU work (0 = none)
    std::array<std::uint64_t, 64> records_by_kind{};
};

class CuptiActivitySource {
public:
    static CuptiActivitySource& instance() noexcept;

    /// Loads CUPTI, registers buffer callbacks, enables the default kinds and the API
    /// whitelist, and starts the control thread. Errors: kUnavailable with the reason (no
    /// CUPTI, no driver, CUPTI owned by another tool); kFailedPrecondition when another
    /// session already captures. Nothing stays enabled after an error.
    Status start(const CuptiSourceOptions& options, EventQueue& out, StringTable& strings) noexcept;
    /// Delivers buffered records now (FlushAll; `forced` also returns incomplete buffers).
    void flush(bool forced) noexcept;
    /// Disables every kind gpudiag enabled, flushes as pause() does, reads the last drop
    /// count, stops the control thread.
    void stop() noexcept;
    /// Yields CUPTI to another client (torch.profiler): kinds and whitelist off, buffers
    /// flushed (FlushAll(0) until CUPTI holds none or settle_ms passed, then forced),
    /// subscriber released, a kCapturePaused marker pushed.
    /// Errors: kFailedPrecondition when not started or already paused.
    Status pause(std::string_view reason) noexcept;
    /// Re-registers the buffer callbacks (the other client replaced them) and re-enables.
    Status resume() noexcept;
    /// The cost budget's rung reaches CUPTI: records whose events are in `kinds_off` (bit
    /// 1 << EventKind: kApiCall, kKernel, kMemcpy, kMemset, kSync) are no longer made, so
    /// neither CUPTI nor the decoder pays for them; a later call without them makes them again.
    /// Allocation API calls stay (they carry out-of-memory failures), as do memory records and,
    /// on CUPTI before 12.5, the whole RUNTIME kind. Kept across pause/resume. Applies only while
    /// `session` is the queue start() was given: a late call from a stopped session leaves the
    /// next one's capture alone. Errors: kFailedPrecondition when not capturing for `session`;
    /// kUnavailable when CUPTI refused to make GPU activity records again (status() says so).
    Status reduce(std::uint64_t kinds_off, const EventQueue& session) noexcept;
    /// Evidence, from outside CUPTI, that the program keeps the GPU busy (an NVML utilization
    /// sample above zero): the starvation watch compares it with what CUPTI delivers.
    /// Thread-safety: safe. Callback-safe: yes (one atomic store).
    void note_gpu_busy() noexcept;
    [[nodiscard]] CuptiSourceStatus status() const noexcept;

    struct Impl;

private:
    CuptiActivitySource();
    Impl* impl_;  // process lifetime: CUPTI may call back after any stop
};

/// How gpudiag's attempt at CUPTI's per-subscriber activity path ended.
struct PerSubscriberAttempt {
    bool tried = false;
    int result = 0;           ///< the CUptiResult of the call that refused; 0 when enabled
    std::string call;         ///< that call ("cuptiSubscribe_v2")
    std::string result_name;  ///< "CUPTI_ERROR_NOT_SUPPORTED"
    std::string owner;        ///< the holder CUPTI named on refusal (describe_cupti_owner)
};

struct ActivityPathChoice {
    bool per_subscriber = false;  ///< else the process-wide (v1) activity API
    std::string note;             ///< "cupti_activity: ...": which path, and why
};

/// Whether the per-subscriber path is worth trying: libcupti's cuptiGetVersion is CUPTI 13.3's
/// or later and it has every function gpudiag needs (`missing_functions` empty).
bool should_try_per_subscriber(std::uint32_t cupti_version,
                               std::string_view missing_functions) noexcept;

/// The activity path and the capture note that says why: per-subscriber when it was tried and
/// enabling succeeded, else process-wide, with the refusal CUPTI gave. Pure: the start and
/// resume of CuptiActivitySource call it with what they saw.
ActivityPathChoice choose_activity_path(std::uint32_t cupti_version,
                                        std::string_view missing_functions,
                                        const PerSubscriberAttempt& attempt);

/// What a CUPTI error from enabling capture means, appended to the reason: " (CUPTI could not
/// attach to the CUDA driver: ...)" for CUPTI_ERROR_NOT_INITIALIZED, "" for codes with nothing
/// to add. `per_subscriber_api`: the loaded libcupti has the *_v2 activity functions.
std::string cupti_failure_hint(int cupti_result, bool per_subscriber_api);

/// A readable name for the CUPTI client CUPTI reports as the current owner
/// ("PyTorch profiler (Kineto)", "Nsight Systems", ...), with the raw name appended.
std::string describe_cupti_owner(std::string_view raw_name);

}  // namespace gpudiag::detail
