// SPDX-License-Identifier: Apache-2.0
// StarvationWatch.
#include "capture/cupti/starvation_watch.hpp"

#include <algorithm>

namespace gpudiag::detail {

void StarvationWatch::reset(std::uint64_t now_ns) noexcept {
    watching_since_ = now_ns;
    last_delivery_seen_ = now_ns;
    last_tick_ = now_ns;
    busy_ticks_ = 0;
    stalled_ = false;
    stalled_since_ = 0;
}

std::uint64_t StarvationWatch::busy_ticks_needed() const noexcept {
    // Ticks come about once a second: busy on half the seconds of the silence, and never fewer
    // than two samples.
    return std::max<std::uint64_t>(2, stall_ns_ / 2'000'000'000ULL);
}

StarvationWatch::Change StarvationWatch::tick(std::uint64_t now_ns, std::uint64_t last_delivery_ns,
                                              std::uint64_t last_busy_ns) noexcept {
    std::uint64_t delivery = std::max(last_delivery_ns, watching_since_);
    std::uint64_t previous_tick = last_tick_;
    last_tick_ = now_ns;
    if (stalled_) {
        if (delivery <= stalled_since_) return Change::kNone;
        stalled_ = false;
        last_delivery_seen_ = delivery;
        busy_ticks_ = 0;
        return Change::kRecovered;
    }
    if (delivery != last_delivery_seen_) {
        last_delivery_seen_ = delivery;
        busy_ticks_ = 0;
    }
    if (last_busy_ns > previous_tick && last_busy_ns > delivery) ++busy_ticks_;
    if (now_ns >= delivery + stall_ns_ && busy_ticks_ >= busy_ticks_needed()) {
        stalled_ = true;
        stalled_since_ = delivery;
        return Change::kStalled;
    }
    return Change::kNone;
}

}  // namespace gpudiag::detail
