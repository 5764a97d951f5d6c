// SPDX-License-Identifier: Apache-2.0
// ClockCalibration.
#include "capture/clock_calibration.hpp"

#include "core/clock.hpp"

namespace gpudiag::detail {

bool read_realtime_clock(std::uint64_t* out_ns) {
    *out_ns = realtime_now_ns();
    return *out_ns != 0;
}

bool ClockCalibration::sample(SourceReader read_source) noexcept {
    std::uint64_t before = monotonic_now_ns();
    std::uint64_t source = 0;
    if (read_source == nullptr || !read_source(&source) || source == 0) return false;
    std::uint64_t after = monotonic_now_ns();
    add_pair(source, before + (after - before) / 2);
    return true;
}

void ClockCalibration::add_pair(std::uint64_t source_ns, std::uint64_t monotonic_ns) noexcept {
    if (count_ > 0) {
        const Pair& newest = ring_[(head_ + count_ - 1) % kCapacity];
        if (source_ns < newest.source_ns) {  // stepped back: older pairs would mislead lookups
            head_ = 0;
            count_ = 0;
        }
    }
    Pair p{source_ns, static_cast<std::int64_t>(monotonic_ns - source_ns)};
    if (count_ < kCapacity) {
        ring_[(head_ + count_) % kCapacity] = p;
        ++count_;
    } else {
        ring_[head_] = p;
        head_ = (head_ + 1) % kCapacity;
    }
}

std::uint64_t ClockCalibration::to_monotonic(std::uint64_t source_ns) const noexcept {
    if (source_ns == 0) return 0;
    std::int64_t offset = 0;
    if (count_ == 0) {
        offset = static_cast<std::int64_t>(monotonic_now_ns() - realtime_now_ns());
    } else {
        // Latest pair at or before source_ns (binary search over the ring in time order);
        // records older than every pair use the oldest.
        std::size_t lo = 0;
        std::size_t hi = count_;
        while (hi - lo > 1) {
            std::size_t mid = lo + (hi - lo) / 2;
            if (ring_[(head_ + mid) % kCapacity].source_ns <= source_ns) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        offset = ring_[(head_ + lo) % kCapacity].offset_ns;
    }
    return static_cast<std::uint64_t>(static_cast<std::int64_t>(source_ns) + offset);
}

}  // namespace gpudiag::detail
