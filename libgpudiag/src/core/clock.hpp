// SPDX-License-Identifier: Apache-2.0
// The session clock: CLOCK_MONOTONIC nanoseconds. Every live event is stamped on it (CUPTI's
// CLOCK_REALTIME-based timestamps are mapped onto it by capture/platform/clock_calibration.hpp).
#pragma once

#include <cstdint>

namespace gpudiag::detail {

/// Nanoseconds on CLOCK_MONOTONIC: never steps, unaffected by NTP or `date`.
/// Thread-safety: safe. Callback-safe: yes (vDSO, no locks, no allocation).
std::uint64_t monotonic_now_ns() noexcept;

/// Nanoseconds on CLOCK_REALTIME (Unix epoch). Used only to relate the session clock to wall
/// time and to CUPTI, whose Linux timestamps are CLOCK_REALTIME-based.
std::uint64_t realtime_now_ns() noexcept;

}  // namespace gpudiag::detail
