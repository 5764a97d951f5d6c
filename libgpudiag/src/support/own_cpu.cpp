// SPDX-License-Identifier: Apache-2.0
#include "support/own_cpu.hpp"

#include <pthread.h>
#include <time.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <mutex>

namespace gpudiag::detail {
namespace {

// Fixed slots, no allocation: a thread registering itself must not be the first malloc of a
// new thread (which would reserve it an arena of address space the host may have budgeted).
constexpr std::size_t kMaxThreads = 256;

struct Registry {
    std::mutex mutex;
    std::array<clockid_t, kMaxThreads> clocks{};  // guarded by mutex
    std::array<bool, kMaxThreads> used{};         // guarded by mutex
    std::uint64_t ended_ns = 0;                   // guarded by mutex
};

Registry& registry() {
    static Registry r;  // constant-initialised mutex and arrays: usable until exit
    return r;
}

std::atomic<std::uint64_t> g_elsewhere_ns{0};
thread_local bool t_own = false;
thread_local clockid_t t_clock{};
thread_local int t_slot = -1;
thread_local int t_elsewhere_depth = 0;
thread_local std::uint32_t t_calls = 0;

std::uint64_t read_ns(clockid_t clock) noexcept {
    timespec ts{};
    if (clock_gettime(clock, &ts) != 0) return 0;
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ull +
           static_cast<std::uint64_t>(ts.tv_nsec);
}

}  // namespace

OwnCpu own_cpu() noexcept {
    OwnCpu out;
    Registry& r = registry();
    {
        std::lock_guard<std::mutex> lock(r.mutex);
        out.threads_ns = r.ended_ns;
        for (std::size_t i = 0; i < kMaxThreads; ++i) {
            if (!r.used[i]) continue;
            out.threads_ns += read_ns(r.clocks[i]);
            ++out.threads_running;
        }
    }
    out.elsewhere_ns = g_elsewhere_ns.load(std::memory_order_relaxed);
    return out;
}

std::uint64_t process_cpu_ns() noexcept {
    return read_ns(CLOCK_PROCESS_CPUTIME_ID);
}

void own_thread_started() noexcept {
    t_own = true;
    if (pthread_getcpuclockid(pthread_self(), &t_clock) != 0) return;
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    for (std::size_t i = 0; i < kMaxThreads; ++i) {
        if (r.used[i]) continue;
        r.used[i] = true;
        r.clocks[i] = t_clock;
        t_slot = static_cast<int>(i);
        return;
    }
}

// The thread's clock stops being readable once it has ended: its last reading is kept.
void own_thread_ending() noexcept {
    if (t_slot < 0) return;
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.used[static_cast<std::size_t>(t_slot)] = false;
    r.ended_ns += read_ns(CLOCK_THREAD_CPUTIME_ID);
    t_slot = -1;
}

bool on_own_thread() noexcept {
    return t_own;
}

ElsewhereCpu::ElsewhereCpu() noexcept {
    if (t_own || t_elsewhere_depth++ > 0) return;
    timing_ = true;
    start_ns_ = read_ns(CLOCK_THREAD_CPUTIME_ID);
}

ElsewhereCpu::~ElsewhereCpu() {
    if (t_own) return;
    --t_elsewhere_depth;
    if (!timing_) return;
    const std::uint64_t now = read_ns(CLOCK_THREAD_CPUTIME_ID);
    if (now > start_ns_) g_elsewhere_ns.fetch_add(now - start_ns_, std::memory_order_relaxed);
}

// The monotonic clock is read in user space (vDSO): a sampled call costs tens of nanoseconds.
SampledCpu::SampledCpu() noexcept {
    if (t_own || t_elsewhere_depth > 0 || ++t_calls % kSampleEvery != 0) return;
    timing_ = true;
    start_ns_ = read_ns(CLOCK_MONOTONIC);
}

SampledCpu::~SampledCpu() {
    if (!timing_) return;
    const std::uint64_t now = read_ns(CLOCK_MONOTONIC);
    if (now > start_ns_) {
        g_elsewhere_ns.fetch_add((now - start_ns_) * kSampleEvery, std::memory_order_relaxed);
    }
}

}  // namespace gpudiag::detail
