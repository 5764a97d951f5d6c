// SPDX-License-Identifier: Apache-2.0
// Session clock.
#include "core/clock.hpp"

#include <ctime>

namespace gpudiag::detail {
namespace {
std::uint64_t read_clock(clockid_t id) noexcept {
    timespec ts{};
    if (clock_gettime(id, &ts) != 0) return 0;
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ULL +
           static_cast<std::uint64_t>(ts.tv_nsec);
}
}  // namespace

std::uint64_t monotonic_now_ns() noexcept {
    return read_clock(CLOCK_MONOTONIC);
}
std::uint64_t realtime_now_ns() noexcept {
    return read_clock(CLOCK_REALTIME);
}

}  // namespace gpudiag::detail
