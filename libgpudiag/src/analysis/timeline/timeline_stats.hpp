// SPDX-License-Identifier: Apache-2.0
// The additive figures the timeline analysis keeps per step (and per stream), and the summary of
// one analysis window that the section and the findings are built from.
#pragma once

#include "analysis/timeline/host_cause.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace gpudiag::detail {

/// HTA's idle categories for a gap before a GPU activity.
enum class IdleKind : std::uint8_t { kHostWait = 0, kKernelWait = 1, kOther = 2 };

/// Kernel classes, as HTA splits kernel time (NCCL/RCCL kernels are communication; copies and
/// memsets are memory; everything else computes).
enum class WorkClass : std::uint8_t { kCompute = 0, kCommunication = 1, kMemory = 2 };

/// Figures that add up across steps. Times are nanoseconds on the device's clock.
struct GpuTimeStats {
    std::uint64_t busy_ns = 0;        ///< union of all GPU activity
    std::uint64_t idle_ns = 0;        ///< gaps in that union, less unobserved time
    std::uint64_t unobserved_ns = 0;  ///< gaps while capture was paused: neither busy nor idle
    std::array<std::uint64_t, 3> idle_by_kind{};        ///< IdleKind
    std::array<std::uint64_t, kHostCauses> cause_ns{};  ///< host-wait time by HostCause
    /// The kCpu part of cause_ns spent inside a compiler's host ranges (nvFuser, Inductor, NVRTC):
    /// CPU work that is JIT compilation, not the loop's own Python.
    std::uint64_t compile_ns = 0;
    /// Idle time inside first launches of kernels slow enough to be module loading (see
    /// kColdLaunchNs), a one-off cost; the part in host waits is also in cause_ns[kLaunch], the
    /// rest (the launch call began before the GPU ran dry) in idle_by_kind's "other".
    std::uint64_t cold_launch_ns = 0;
    std::uint64_t cold_launch_host_ns = 0;
    std::uint64_t cold_launches = 0;
    std::array<std::uint64_t, 3> class_ns{};  ///< union per WorkClass
    std::uint64_t comm_or_compute_ns = 0;     ///< union of communication and compute (for overlap)
    std::uint64_t gaps = 0;
    std::uint64_t longest_gap_ns = 0;
    std::uint64_t activities = 0;
    std::uint64_t kernels = 0;
    std::uint64_t kernel_ns = 0;  ///< summed kernel durations (not a union)
    std::uint64_t pageable_copies = 0;
    std::uint64_t pageable_bytes = 0;
    std::uint64_t pageable_ns = 0;
    std::uint64_t first_start_ns = UINT64_MAX;
    std::uint64_t last_end_ns = 0;

    void add(const GpuTimeStats& o) noexcept {
        busy_ns += o.busy_ns;
        idle_ns += o.idle_ns;
        unobserved_ns += o.unobserved_ns;
        for (std::size_t i = 0; i < idle_by_kind.size(); ++i) idle_by_kind[i] += o.idle_by_kind[i];
        for (std::size_t i = 0; i < cause_ns.size(); ++i) cause_ns[i] += o.cause_ns[i];
        compile_ns += o.compile_ns;
        cold_launch_ns += o.cold_launch_ns;
        cold_launch_host_ns += o.cold_launch_host_ns;
        cold_launches += o.cold_launches;
        for (std::size_t i = 0; i < class_ns.size(); ++i) class_ns[i] += o.class_ns[i];
        comm_or_compute_ns += o.comm_or_compute_ns;
        gaps += o.gaps;
        longest_gap_ns = std::max(longest_gap_ns, o.longest_gap_ns);
        activities += o.activities;
        kernels += o.kernels;
        kernel_ns += o.kernel_ns;
        pageable_copies += o.pageable_copies;
        pageable_bytes += o.pageable_bytes;
        pageable_ns += o.pageable_ns;
        first_start_ns = std::min(first_start_ns, o.first_start_ns);
        last_end_ns = std::max(last_end_ns, o.last_end_ns);
    }
    [[nodiscard]] std::uint64_t span_ns() const noexcept { return busy_ns + idle_ns; }
    [[nodiscard]] std::uint64_t comm_overlap_ns() const noexcept {
        std::uint64_t both = class_ns[0] + class_ns[1];
        return both > comm_or_compute_ns ? both - comm_or_compute_ns : 0;
    }
};

/// HTA-style per-stream idle figures (gaps between consecutive activities on one stream).
struct StreamStats {
    std::uint64_t activities = 0;
    std::uint64_t busy_ns = 0;
    std::array<std::uint64_t, 3> idle_by_kind{};

    void add(const StreamStats& o) noexcept {
        activities += o.activities;
        busy_ns += o.busy_ns;
        for (std::size_t i = 0; i < 3; ++i) idle_by_kind[i] += o.idle_by_kind[i];
    }
};

/// One step as the host saw it.
struct StepRecord {
    std::int64_t number = 0;
    std::uint64_t start_ns = 0;
    std::uint64_t end_ns = UINT64_MAX;  ///< UINT64_MAX while a step marker is still open
    std::uint64_t input_wait_ns = 0;
    std::uint64_t input_waits = 0;
    std::uint64_t longest_input_wait_ns = 0;
    std::uint64_t sync_calls = 0;
    std::uint64_t sync_ns = 0;
    /// Input waits that fell between the previous step's end and this step's marked start (a
    /// trainer fetches the batch before the hook that opens a step): booked to this step, whose
    /// start moved back to the first of them.
    std::uint64_t lead_in_waits = 0;
};

}  // namespace gpudiag::detail
