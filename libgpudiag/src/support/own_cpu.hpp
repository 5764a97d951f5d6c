// SPDX-License-Identifier: Apache-2.0
// What gpudiag's own work costs in CPU time, so that every live report can say it: the threads
// gpudiag starts (every one through quiet_thread, which registers it here) and the work it does
// on threads that are not its own (CUPTI's buffer thread, the program's threads handing events
// over), measured where it runs.
//
// Threads: each one's CPU clock (CLOCK_THREAD_CPUTIME_ID, read through pthread_getcpuclockid)
// while it lives, its final reading once it ends. Work on other threads: timed whole where calls
// are rare (a CUPTI buffer of thousands of records), and sampled, one call in kSampleEvery, where
// they are many and short (an event handed over): a clock read per call would cost more than the
// call.
#pragma once

#include <cstdint>

namespace gpudiag::detail {

struct OwnCpu {
    std::uint64_t threads_ns = 0;    ///< CPU time of gpudiag's threads, ended ones included
    std::uint64_t elsewhere_ns = 0;  ///< its work on threads not its own (part sampled)
    std::uint32_t threads_running = 0;
};

/// Process-wide, now. Thread-safety: safe.
OwnCpu own_cpu() noexcept;
/// CPU time of the whole process (all threads), now.
std::uint64_t process_cpu_ns() noexcept;

/// Called by quiet_thread on the new thread first and last.
void own_thread_started() noexcept;
void own_thread_ending() noexcept;
/// True on a thread gpudiag started.
bool on_own_thread() noexcept;

/// Times gpudiag's work on a thread not its own for as long as it lives (nothing on its own
/// threads, which are counted whole; nested scopes count once).
class ElsewhereCpu {
public:
    ElsewhereCpu() noexcept;
    ~ElsewhereCpu();
    ElsewhereCpu(const ElsewhereCpu&) = delete;
    ElsewhereCpu& operator=(const ElsewhereCpu&) = delete;

private:
    std::uint64_t start_ns_ = 0;
    bool timing_ = false;
};

/// For short calls made very often on the program's threads (handing an event over): times one
/// call in kSampleEvery and counts it kSampleEvery times. Use: `SampledCpu s;` at the call's top.
class SampledCpu {
public:
    static constexpr std::uint32_t kSampleEvery = 64;
    SampledCpu() noexcept;
    ~SampledCpu();
    SampledCpu(const SampledCpu&) = delete;
    SampledCpu& operator=(const SampledCpu&) = delete;

private:
    std::uint64_t start_ns_ = 0;
    bool timing_ = false;
};

}  // namespace gpudiag::detail
