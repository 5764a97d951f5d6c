// SPDX-License-Identifier: Apache-2.0
// ClockCalibration: maps CUPTI timestamps onto the session clock (CLOCK_MONOTONIC).
//
// CUPTI stamps records with CLOCK_REALTIME nanoseconds on Linux, unless some client in the process
// registered a timestamp callback (cuptiActivityRegisterTimestampCallback is process-wide and
// cannot be undone): PyTorch's Kineto installs one returning raw TSC cycles and never removes it.
// So gpudiag assumes neither the unit nor the origin of CUPTI's clock. It records
// (cupti, monotonic) pairs -- cuptiGetTimestamp bracketed by two monotonic reads, the midpoint
// kept -- at start, at every resume and at every drain, and maps a record by interpolating between
// the two pairs around it (slope and offset); outside the pairs it extrapolates with the slope
// fitted over them. While the fitted slope says the clock is nanoseconds (CUPTI's own), a record
// takes the offset of the pair before it, so durations stay exact.
//
// A pair that does not continue the current clock (earlier than the newest pair, or at a rate
// that differs from the fitted one) starts a new regime: CLOCK_REALTIME was stepped, or a client
// registered a timestamp callback. The previous regime is kept, because records stamped before
// the change are still in flight and are mapped with the clock they were stamped with.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace gpudiag::detail {

class ClockCalibration {
public:
    /// Reads the source clock; false when it cannot.
    using SourceReader = bool (*)(std::uint64_t* out_ticks);

    /// |rate - 1| beyond this means CUPTI's clock does not tick in nanoseconds. CLOCK_REALTIME and
    /// CLOCK_MONOTONIC run at the same rate (NTP slews both; they differ only by steps), and a
    /// pair's error is at most half its bracket (kMaxBracketNs) over a fit spanning at least
    /// kMinFitSpanNs, 5e-5; any other clock (TSC cycles at 1-5 GHz, microseconds) is far off.
    static constexpr double kForeignRateTolerance = 1e-3;
    static constexpr std::uint64_t kMaxBracketNs = 20'000;
    static constexpr std::uint64_t kMinFitSpanNs = 200'000'000;

    /// Takes one pair now. Returns false when `read_source` fails, or when both tries were
    /// preempted (bracket wider than kMaxBracketNs): such a pair would mislead the fit.
    bool sample(SourceReader read_source) noexcept;
    /// Adds a pair (tests; and sample()). See the regime rules above.
    void add_pair(std::uint64_t source, std::uint64_t monotonic_ns) noexcept;
    /// The session-clock time of `source`; 0 stays 0 (unknown). Without any pair, assumes
    /// CLOCK_REALTIME nanoseconds and uses the live CLOCK_REALTIME - CLOCK_MONOTONIC offset.
    [[nodiscard]] std::uint64_t to_monotonic(std::uint64_t source) const noexcept;

    /// Pairs held for the current regime (bounded).
    [[nodiscard]] std::size_t pairs() const noexcept { return current().count; }
    /// Monotonic nanoseconds per source tick, fitted over the current regime; 0 until its pairs
    /// span kMinFitSpanNs.
    [[nodiscard]] double rate() const noexcept;
    /// True when the fitted rate says CUPTI's clock is not nanoseconds: a foreign timestamp
    /// callback (Kineto's TSC) is installed.
    [[nodiscard]] bool foreign_clock() const noexcept;
    /// How many times the source clock changed (steps, or a callback registered) since reset.
    [[nodiscard]] std::uint64_t regime_changes() const noexcept { return regime_changes_; }

private:
    static constexpr std::size_t kCapacity = 64;  // 16 s of drains at 250 ms, more when idle
    struct Pair {
        std::uint64_t source;
        std::uint64_t mono;
    };
    struct Regime {
        std::array<Pair, kCapacity> ring{};
        std::size_t head = 0;  // index of the oldest pair
        std::size_t count = 0;
        std::uint64_t first_source = 0;  // earliest source time of the regime, kept past the ring
        double fitted_rate = 0.0;        // 0 until the pairs span kMinFitSpanNs
        [[nodiscard]] const Pair& at(std::size_t i) const { return ring[(head + i) % kCapacity]; }
        [[nodiscard]] const Pair& newest() const { return at(count - 1); }
        void push(const Pair& p) noexcept;
        void refit() noexcept;
        [[nodiscard]] bool nanoseconds() const noexcept;  // no rate yet, or within tolerance
        [[nodiscard]] double slope_or_one() const noexcept;
        [[nodiscard]] bool covers(std::uint64_t source) const noexcept;
        [[nodiscard]] std::uint64_t map(std::uint64_t source) const noexcept;
    };
    [[nodiscard]] bool continues(const Regime& r, const Pair& p) const noexcept;
    [[nodiscard]] const Regime& current() const noexcept { return regimes_[current_]; }

    std::array<Regime, 2> regimes_{};  // the current one and the one before it
    std::size_t current_ = 0;
    bool has_previous_ = false;
    std::uint64_t regime_changes_ = 0;
};

/// CLOCK_REALTIME as a SourceReader (CUPTI's clock when cuptiGetTimestamp is unavailable).
bool read_realtime_clock(std::uint64_t* out_ns);

}  // namespace gpudiag::detail
