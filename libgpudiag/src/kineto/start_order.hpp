// SPDX-License-Identifier: Apache-2.0
// Putting imported events in start order, stably, as sinks expect.
#pragma once

#include <gpudiag/event.hpp>

#include <vector>

namespace gpudiag::detail {

/// Sorts `events` by start_ns; events that start together keep their input order. Linear time in
/// the common case (a trace spanning under ~2^40 ns with under 2^24 events); otherwise a
/// comparison sort. Uses 16 bytes of scratch per event and copies each event once. Throws
/// std::bad_alloc.
void sort_by_start(std::vector<Event>& events);

}  // namespace gpudiag::detail
