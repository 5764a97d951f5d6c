// SPDX-License-Identifier: Apache-2.0
// The calling thread's CPU time, and a way to spend some: how the cost-budget tests plant a
// sink that costs a known amount of CPU (wall-clock sleeps would cost nothing).
#pragma once

#include <time.h>

#include <cstdint>

namespace gpudiag::testing {

inline std::uint64_t thread_cpu_ns() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u +
           static_cast<std::uint64_t>(ts.tv_nsec);
}

// Spins until the calling thread has used `ns` more CPU time.
inline void burn_cpu(std::uint64_t ns) {
    const std::uint64_t until = thread_cpu_ns() + ns;
    while (thread_cpu_ns() < until) {
    }
}

}  // namespace gpudiag::testing
