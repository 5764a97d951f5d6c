// SPDX-License-Identifier: Apache-2.0
// ClockCalibration: maps CUPTI timestamps onto the session clock (CLOCK_MONOTONIC).
//
// On Linux x86-64/aarch64 CUPTI stamps records with CLOCK_REALTIME-based nanoseconds (GPU times
// are converted to that CPU clock by CUPTI). Registering a timestamp callback would change the
// clock for every CUPTI client in the process (and is refused in shared mode), so gpudiag keeps
// the CUPTI clock and records (cupti_ns, monotonic_ns) pairs instead: the control thread takes a
// pair every second, bracketing cuptiGetTimestamp between two monotonic reads and using their
// midpoint. A record is converted with the offset of the latest pair taken before it, so a
// CLOCK_REALTIME step (NTP, `date`) moves only records after the step.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace gpudiag::detail {

class ClockCalibration {
public:
    /// Reads the source clock; false when it cannot.
    using SourceReader = bool (*)(std::uint64_t* out_ns);

    /// Takes one pair now. Returns false when `read_source` fails.
    bool sample(SourceReader read_source) noexcept;
    /// Adds a pair (tests; and sample()). Pairs must come in increasing source time; an older
    /// pair (the source clock stepped back) restarts the table.
    void add_pair(std::uint64_t source_ns, std::uint64_t monotonic_ns) noexcept;
    /// The session-clock time of `source_ns`; 0 stays 0 (unknown). Without any pair, uses the
    /// live CLOCK_REALTIME - CLOCK_MONOTONIC offset.
    [[nodiscard]] std::uint64_t to_monotonic(std::uint64_t source_ns) const noexcept;
    [[nodiscard]] std::size_t pairs() const noexcept { return count_; }

private:
    static constexpr std::size_t kCapacity = 64;  // a minute of history at one pair a second
    struct Pair {
        std::uint64_t source_ns;
        std::int64_t offset_ns;  // monotonic - source
    };
    std::array<Pair, kCapacity> ring_{};
    std::size_t head_ = 0;   // index of the oldest pair
    std::size_t count_ = 0;
};

/// CLOCK_REALTIME as a SourceReader (CUPTI's clock when cuptiGetTimestamp is unavailable).
bool read_realtime_clock(std::uint64_t* out_ns);

}  // namespace gpudiag::detail
