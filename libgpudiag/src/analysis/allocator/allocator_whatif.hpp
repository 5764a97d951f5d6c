// SPDX-License-Identifier: Apache-2.0
// The what-if over an allocation history: a reproduction under the recorded settings, then the
// chosen settings and a sweep of the usual ones, and the conclusion for memory findings.
#pragma once

#include <gpudiag/whatif.hpp>

#include "analysis/allocator/allocation_history.hpp"

#include <cstdint>
#include <string>

namespace gpudiag::detail {

/// Bytes with three significant digits ("1.77 GiB", "228 MiB"): what-if figures differ by a few
/// percent, which one decimal of a GiB would hide.
std::string whatif_bytes(std::uint64_t bytes);

/// Runs the what-if on a history collected from a source. Errors as whatif_file.
Result<WhatIfResult> run_whatif(const AllocationHistory& history, const WhatIfOptions& options);

/// The quantified advice a memory finding quotes (fragmentation, reserved_unused,
/// out_of_memory): the best of the usual settings replayed on this program's history, or that
/// none helps. `available` is false when the source has no allocation history to replay.
struct AllocatorAdvice {
    bool available = false;
    std::string sentence;     ///< ready to append to a finding's advice
    std::string best_change;  ///< "expandable_segments:True"; "" when none helps
    std::uint64_t best_peak_reserved_bytes = 0;
    std::uint64_t baseline_peak_reserved_bytes = 0;  ///< the recorded settings, replayed alike
    bool recorded_oom = false;
    bool oom_avoided = false;  ///< best_change makes every recorded OOM fit
    /// The sentence answers whether a setting avoids an out-of-memory failure (one was recorded,
    /// or the replay ran out of the capacity given); otherwise it is about the peak reserved.
    bool about_oom = false;
    bool reproduction_exact = false;  ///< the model reproduced the recording exactly
};

/// `device` -1: the device with the most allocations. `capacity_bytes` 0: unlimited except at
/// recorded OOMs.
AllocatorAdvice allocator_advice(const AllocationHistory& history, int device = -1,
                                 std::uint64_t capacity_bytes = 0);

}  // namespace gpudiag::detail
