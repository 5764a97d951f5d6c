// SPDX-License-Identifier: Apache-2.0
// Real workloads through the live path without a GPU: a trace gpudiag reads (Kineto, Nsight
// export) becomes the CUPTI 13.0 activity records a live session would receive for it (kernels,
// copies, memsets, synchronisations, runtime/driver calls, memory records), laid out as CUPTI
// lays them out, and is handed to a running Session through the replay libcupti
// (live_replay.cmake: the stub libcupti of tests/cpp/capture, whose records are walked by the
// real libcupti's parser where it loads). From there the real path runs: gpudiag's buffer
// callbacks, its control thread, ActivityDecoder, the session's hand-off, worker and analyses.
//
// What CUPTI does not deliver (steps, host ranges, framework allocator events, counters) is
// handed over through Session::record with the trace's timestamps, as the framework integration
// and NVTX would. Both keep the trace's own spacing: CUPTI records on CUPTI's clock (the stub's
// CLOCK_REALTIME), the rest on the session's, from one pair of readings taken together.
#pragma once

#include <gpudiag/analyze.hpp>
#include <gpudiag/event.hpp>
#include <gpudiag/session.hpp>
#include <gpudiag/status.hpp>
#include <gpudiag/string_table.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gpudiag::replay {

/// What a trace became.
struct ReplayCounts {
    std::uint64_t events = 0;  ///< read from the trace
    std::uint64_t kernels = 0;
    std::uint64_t copies = 0;  ///< memcpy records
    std::uint64_t memsets = 0;
    std::uint64_t syncs = 0;
    std::uint64_t api_calls = 0;  ///< RUNTIME / DRIVER records
    std::uint64_t memory = 0;     ///< MEMORY2 and MEMORY_POOL records
    /// Runtime calls CUPTI cannot record for gpudiag: no cbid in the trace and none in gpudiag's
    /// whitelist by name (CUPTI records only whitelisted cbids for it). Not handed over.
    std::uint64_t api_not_recordable = 0;
    std::uint64_t host_events = 0;  ///< handed over through Session::record
    std::uint64_t record_bytes = 0;
    std::uint64_t host_steps = 0;  ///< of which steps (ranges or markers)
    std::uint64_t first_ns = 0;    ///< the trace's own clock
    std::uint64_t last_ns = 0;
    [[nodiscard]] std::uint64_t records() const noexcept {
        return kernels + copies + memsets + syncs + api_calls + memory;
    }
    [[nodiscard]] std::uint64_t span_ns() const noexcept {
        return last_ns > first_ns ? last_ns - first_ns : 0;
    }
};

struct ReplayOptions {
    /// 0: as fast as the live path takes them; 1: the trace's own pace; 2: twice as fast, ...
    double speed = 0;
    /// As fast as possible: records handed over between two waits for the session's worker
    /// (its hand-off holds 65536 events by default: a chunk must fit with room to spare).
    std::size_t chunk_records = 8192;
    /// How long each wait lasts: two of the session's flush periods.
    std::uint32_t drain_wait_ms = 40;
    /// Off: of the host events, only steps are handed over (what a live session of a program
    /// that marks its steps gets without a profiler: no CPU operators, no allocator events).
    bool host_events = true;
};

/// The functions of the replay libcupti the replay drives (test hooks of the stub).
struct ReplayLibrary {
    void (*queue_buffer)(const void* records, std::size_t bytes) = nullptr;
    std::uint64_t (*now)() = nullptr;   ///< CUPTI's clock
    const char* (*parser)() = nullptr;  ///< the libcupti whose parser walks the buffers
};

/// Points gpudiag's loaders at the replay libcupti and the stub libcuda and libnvidia-ml (through
/// GPUDIAG_CUPTI_PATH, GPUDIAG_CUDA_PATH, GPUDIAG_NVML_PATH): call before anything loads CUDA
/// libraries. Errors: kNotFound when a library does not load, naming it.
Result<ReplayLibrary> select_replay_libraries(const std::string& cupti, const std::string& cuda,
                                              const std::string& nvml);

class TraceReplay {
public:
    TraceReplay();
    ~TraceReplay();
    TraceReplay(TraceReplay&&) noexcept;
    TraceReplay& operator=(TraceReplay&&) noexcept;

    /// Reads `path` through gpudiag's importers (the format told by content).
    static Result<TraceReplay> load(const std::string& path, const AnalysisOptions& options = {});

    /// Hands the trace to `session` (started, capturing through the replay libcupti) at
    /// options' pace. The session is left running; this replay must outlive its stop() (the
    /// kernel records point at names it holds, as CUPTI's point at its own). Errors:
    /// kFailedPrecondition when the session is not running or left mid-way.
    Status run(Session& session, const ReplayLibrary& library, const ReplayOptions& options);

    /// Every record laid out from time 0, for a parser to walk (CUPTI_ACTIVITY_RECORD_ALIGNMENT
    /// 8: the buffer is 8-byte aligned), and the kinds in order.
    [[nodiscard]] std::vector<std::uint64_t> all_records(std::vector<std::uint32_t>* kinds) const;

    [[nodiscard]] const ReplayCounts& counts() const noexcept;
    /// The runtime/driver calls of the trace CUPTI would not record for gpudiag, by name, most
    /// frequent first.
    [[nodiscard]] std::vector<std::pair<std::string, std::uint64_t>> unrecorded_calls() const;
    [[nodiscard]] const std::string& path() const noexcept;

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace gpudiag::replay
