// SPDX-License-Identifier: Apache-2.0
// StarvationWatch: notices that CUPTI stopped delivering to gpudiag while the program keeps the
// GPU busy -- the sign that another CUPTI client (libkineto in a C++ service, on-demand tracing,
// a profiler started without gpudiag's Python hook) registered its own buffer callbacks or
// disabled gpudiag's kinds. In CUPTI's process-wide (v1) activity API nothing tells a client that
// this happened, so the watch compares what CUPTI delivers with evidence from outside it.
//
// Quiet alone proves nothing (a program may simply stop using the GPU); the watch declares a
// stall only when nothing came from CUPTI for `stall_ns` *and* outside evidence (NVML utilization,
// deep-mode API callbacks) said the GPU was busy on at least half the ticks of that silence. A
// single kernel running longer than `stall_ns` looks the same; the reason says so.
#pragma once

#include <cstdint>

namespace gpudiag::detail {

class StarvationWatch {
public:
    enum class Change : std::uint8_t { kNone, kStalled, kRecovered };

    explicit StarvationWatch(std::uint64_t stall_ns = 15'000'000'000ULL) noexcept
        : stall_ns_(stall_ns) {}

    /// Starts watching at `now_ns` (capture started or resumed): earlier silence does not count.
    void reset(std::uint64_t now_ns) noexcept;
    /// One tick (about once a second). `last_delivery_ns`: the latest buffer request or returned
    /// record from CUPTI; `last_busy_ns`: the latest outside evidence of GPU work (0 = none).
    Change tick(std::uint64_t now_ns, std::uint64_t last_delivery_ns,
                std::uint64_t last_busy_ns) noexcept;

    [[nodiscard]] bool stalled() const noexcept { return stalled_; }
    /// The last delivery before the stall: the unobserved window starts there.
    [[nodiscard]] std::uint64_t stalled_since() const noexcept { return stalled_since_; }
    [[nodiscard]] std::uint64_t stall_ns() const noexcept { return stall_ns_; }

private:
    [[nodiscard]] std::uint64_t busy_ticks_needed() const noexcept;

    std::uint64_t stall_ns_;
    std::uint64_t watching_since_ = 0;
    std::uint64_t last_delivery_seen_ = 0;
    std::uint64_t last_tick_ = 0;
    std::uint64_t busy_ticks_ = 0;  // ticks with outside evidence since the last delivery
    bool stalled_ = false;
    std::uint64_t stalled_since_ = 0;
};

}  // namespace gpudiag::detail
