// SPDX-License-Identifier: Apache-2.0
// Memory trends: does a level keep rising across repeated iterations? The points are the lowest
// level of each iteration (what persists: transient activations do not raise it, kept tensors
// do; the thresholds named here are in analysis/findings/finding_catalog.hpp), over
//   1. steps, when the program marks at least kMinRepetitions of them;
//   2. else a period found in the allocation pattern (AllocationPattern), in windows of one
//      period, when it repeats at least kMinRepetitions times over at least kMinPatternSpanNs:
//      one forward or backward pass lasts well under a minute, so a shorter step-less recording
//      may hold less than one iteration, and its regular allocations may be its layers (each
//      keeping an activation until the backward pass looks like a leak per "period");
//   3. else windows of kServiceWindowNs or more, at least kMinServiceWindows of them: a service
//      sampled on a timer (NVML, polled allocator totals) whose iterations are far shorter.
// With fewer repetitions, growth may be memory held until later in one iteration: it is reported
// as that (growth_only), never as a leak, and never with a per-hour rate.
//
// The onset (since when) is the earliest suffix of the points on which the leak test passes
// (candidates every eighth of the points), so growth that starts late in a long run is found
// with the rate it has since then, not diluted by the flat part before.
#pragma once

#include "analysis/findings/finding_catalog.hpp"
#include "analysis/memory/memory_ledger.hpp"
#include "analysis/memory/memory_summary.hpp"

#include <functional>
#include <string>
#include <vector>

namespace gpudiag::detail {

using SiteNamer = std::function<std::string(StringId)>;

/// The trends of one device with a verdict (leak or growth_only), the most specific first:
/// allocated and outside are reported on their own; reserved only without an allocated leak
/// (then the cache itself grows); the process figure only when nothing else explains it.
std::vector<MemoryTrend> compute_trends(const MemoryLedger& ledger, const DeviceMemorySummary& d,
                                        const SiteNamer& site_name);

}  // namespace gpudiag::detail
