// SPDX-License-Identifier: Apache-2.0
// Putting imported events in start order, stably, as sinks expect.
#pragma once

#include <gpudiag/event.hpp>

#include <cstdint>
#include <span>
#include <vector>

namespace gpudiag::detail {

/// The stable start order of `events`: element i is the index of the event that comes i-th by
/// start_ns (events that start together keep their input order). Empty when `events` already are
/// in that order. Linear time in the common case (a trace spanning under ~2^40 ns with under 2^24
/// events), otherwise a comparison sort. Uses 8 bytes per event besides the result. Throws
/// std::bad_alloc.
std::vector<std::uint64_t> start_order(std::span<const Event> events);

/// Sorts `events` by start_ns, stably (start_order, then one copy of each event).
/// Throws std::bad_alloc.
void sort_by_start(std::vector<Event>& events);

}  // namespace gpudiag::detail
