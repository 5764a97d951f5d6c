// SPDX-License-Identifier: Apache-2.0
// Allocator what-if: replays a program's allocation history (a torch memory snapshot with its
// trace, a gpudiag recording) through a model of PyTorch's CUDA caching allocator under other
// settings, and predicts what they would have changed: peak reserved memory, memory stranded in
// split segments, driver calls, and whether an out-of-memory failure would recur.
//
// The replay first reproduces the recording under its own settings; how exact that is (segment
// by segment, block by block) is part of the answer, so a prediction is never trusted further
// than the model proved itself on the same program.
#pragma once

#include <gpudiag/event.hpp>
#include <gpudiag/export.hpp>
#include <gpudiag/names.hpp>
#include <gpudiag/source_info.hpp>
#include <gpudiag/status.hpp>
#include <gpudiag/string_table.hpp>

#include <cstdint>
#if GPUDIAG_HAS_SPAN
#    include <span>
#endif
#include <string>
#include <vector>

namespace gpudiag {

struct WhatIfOptions {
    /// Settings to try, applied over the recorded ones, each in PYTORCH_CUDA_ALLOC_CONF form
    /// ("expandable_segments:True", "max_split_size_mb:128,roundup_power2_divisions:4") or as
    /// key=value. Also accepted: per_process_memory_fraction.
    std::vector<std::string> settings;
    /// Memory the allocator can obtain from the driver in total (device memory minus the CUDA
    /// context and other processes). 0: unlimited, except where the recording's own OOM
    /// failures say how much was reachable.
    std::uint64_t capacity_bytes = 0;
    /// The device's total memory, which a memory fraction is taken of; 0: the capacity.
    std::uint64_t device_total_bytes = 0;
    /// Also try the usual settings one at a time (expandable segments, max_split_size_mb,
    /// roundup_power2_divisions, and garbage_collection_threshold when a fraction applies).
    bool sweep = true;
    /// Device to replay; -1: the one with the most allocations.
    int device = -1;
    /// The torch release whose allocator to follow ("2.15"); "": the one the input records
    /// (a session's framework version), else the newest the model covers.
    std::string torch_version;
};

/// A setting that would fit but is unsafe or unsupported for this program here.
struct WhatIfCaution {
    std::string change;        ///< the setting ("expandable_segments:True")
    bool unsupported = false;  ///< it would fail or be ignored here (else: a known risk)
    std::string reason;        ///< what goes wrong, and what in this input shows it
    std::string source;        ///< the PyTorch or vLLM source that states the limitation
};

/// Where a replay starts.
enum class WhatIfStart : std::uint8_t {
    /// The state the recording had before its history: its segments, cache and live blocks.
    kRecordedState = 0,
    /// Only the blocks live before the history, allocated afresh under the tried settings with
    /// an empty cache (used when the history starts late: the cache built before it came from
    /// the recorded settings and would bias the comparison).
    kLiveBlocks = 1,
};
template <>
GPUDIAG_API EnumNames<WhatIfStart> enum_names<WhatIfStart>() noexcept;
GPUDIAG_API const char* whatif_start_name(WhatIfStart s) noexcept;  ///< "recorded_state", ...

/// One replay's predictions.
struct WhatIfOutcome {
    std::string label;     ///< "recorded", "chosen" or "sweep"
    std::string change;    ///< what differs from the recorded settings; "" for the recorded ones
    std::string settings;  ///< the full settings in PYTORCH_CUDA_ALLOC_CONF form ("" = defaults)
    WhatIfStart start = WhatIfStart::kRecordedState;
    bool replayed_to_end = true;
    std::uint64_t peak_reserved_bytes = 0;
    std::uint64_t peak_allocated_bytes = 0;  ///< live and not-yet-reusable blocks, rounded
    /// Peak of the free bytes held in segments that cannot be returned to the driver (free
    /// blocks of partly used segments, partly used pages of expandable segments).
    std::uint64_t peak_stranded_bytes = 0;
    std::uint64_t final_reserved_bytes = 0;
    std::uint64_t device_mallocs = 0;  ///< cudaMalloc calls
    std::uint64_t device_frees = 0;    ///< cudaFree calls
    std::uint64_t page_maps = 0;       ///< expandable segments: map calls
    std::uint64_t page_unmaps = 0;
    std::uint64_t alloc_retries = 0;  ///< cache released and cudaMalloc retried
    /// An allocation that succeeded in the recording fails here (at the capacity): the program
    /// would have stopped at that history entry.
    bool oom = false;
    std::uint64_t oom_entry = 0;
    std::uint64_t oom_request_bytes = 0;
    std::uint64_t recorded_ooms = 0;
    std::uint64_t recorded_ooms_avoided = 0;  ///< recorded failures that fit under these settings
    /// Why these settings, though they may fit, are unsafe or unsupported for this program.
    std::vector<WhatIfCaution> cautions;
};

/// How exactly the replay under the recorded settings reproduced the recording.
struct WhatIfReproduction {
    bool checked = false;  ///< the recording holds the allocator's own segment records
    bool exact = false;
    std::uint64_t recorded_peak_reserved_bytes = 0;
    std::uint64_t modelled_peak_reserved_bytes = 0;
    std::uint64_t recorded_segment_actions = 0;  ///< cudaMalloc/cudaFree/map/unmap, in order
    std::uint64_t modelled_segment_actions = 0;
    std::uint64_t matching_segment_actions = 0;  ///< same kind, size and address, from the start
    std::uint64_t allocations = 0;
    std::uint64_t allocations_at_recorded_address = 0;
    std::uint64_t recorded_final_segments = 0;
    std::uint64_t modelled_final_segments = 0;
    bool final_segments_match = false;
    std::string first_difference;  ///< "" when exact
};

struct WhatIfResult {
    std::string source;
    int device = 0;
    std::uint64_t history_entries = 0;  ///< allocations, frees, cache releases, OOMs
    std::uint64_t allocations = 0;
    /// The history starts before the device's first segment (nothing had to be rebuilt).
    bool history_from_start = true;
    /// False when the recording says its trace ring buffer overflowed (trace_alloc_overflowed):
    /// the history is complete only from its first entry, and no replay of it is exact.
    bool history_complete = true;
    /// The torch release whose allocator the model followed ("2.15"), and where that came
    /// from: "given", "the recording", or "assumed" (torch_version_note says why).
    std::string torch_version;
    std::string torch_version_origin;
    std::string torch_version_note;
    std::uint64_t segments_before_history = 0;
    std::uint64_t live_blocks_before_history = 0;
    bool settings_recorded = false;
    std::string recorded_settings;     ///< PYTORCH_CUDA_ALLOC_CONF form; "" = defaults
    std::uint64_t capacity_bytes = 0;  ///< 0 = unlimited
    std::string capacity_origin;       ///< "given", "unlimited", "the recorded OOM"
    WhatIfReproduction reproduction;
    /// [0]: the recorded settings from the recorded state (the reproduction). Then, when the
    /// history starts late, the recorded settings from live blocks only (the baseline of the
    /// rows after it); then the chosen settings and the sweep.
    std::vector<WhatIfOutcome> outcomes;
    /// The conclusion in one sentence: the setting that helps most, or that none does.
    std::string advice;
    std::vector<std::string> notes;
};

/// Replays the allocation history in `path` (a torch memory snapshot with a trace, or a gpudiag
/// recording with allocator events). Errors: as analyze_files for the file; kInvalidArgument
/// for bad settings or a device without history; kFailedPrecondition when the input holds no
/// allocation history (a snapshot taken without _record_memory_history); kUnsupported for
/// backend:cudaMallocAsync. Thread-safety: safe to call concurrently.
GPUDIAG_API Result<WhatIfResult> whatif_file(const std::string& path,
                                             const WhatIfOptions& options = {}) noexcept;

#if GPUDIAG_HAS_SPAN  // takes a span of events: C++20
/// The same for events already in memory.
GPUDIAG_API Result<WhatIfResult> whatif_events(std::span<const Event> events,
                                               const SourceInfo& info, const StringTable& strings,
                                               const WhatIfOptions& options = {}) noexcept;
#endif

/// Plain-text rendering (the CLI's output) and JSON rendering of a result.
GPUDIAG_API std::string whatif_text(const WhatIfResult& result);
GPUDIAG_API std::string whatif_json(const WhatIfResult& result);

}  // namespace gpudiag
