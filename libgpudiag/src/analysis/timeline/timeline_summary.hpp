// SPDX-License-Identifier: Apache-2.0
// TimelineSummary: the figures of one analysis window, from which the "timeline" section and the
// timeline findings are built (and which tests can check directly).
#pragma once

#include "analysis/timeline/critical_path.hpp"
#include "analysis/timeline/host_activity.hpp"
#include "analysis/timeline/timeline_stats.hpp"
#include "core/serving_names.hpp"

#include <gpudiag/analyze.hpp>
#include <gpudiag/report.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gpudiag::detail {

/// A DataLoader's settings as the program had them (-1: not known).
struct LoaderSettings {
    std::int64_t num_workers = -1;
    std::int64_t pin_memory = -1;
    std::int64_t prefetch_factor = -1;  ///< -1 also when the loader has none (num_workers=0)
    std::int64_t persistent_workers = -1;
    std::int64_t batch_size = -1;
    std::int64_t cpu_cores = -1;      ///< CPU cores the process may run on
    std::uint64_t input_wait_ns = 0;  ///< input wait while this loader was the last described
};

/// One stretch of host time that holds most of what the GPU waited for: the host time before the
/// first GPU work, or one host-wait gap. It happens once (first calls, warm-up, compilation, a
/// checkpoint), so it is reported on its own and left out of the window the other findings
/// describe and replay.
struct OneOffStall {
    bool found = false;
    bool before_gpu = false;  ///< the host time before the first GPU work, else one idle gap
    HostActivity activity;    ///< its start, end and what the host did in it
    std::uint64_t idle_with_stall_ns = 0;  ///< the GPU's idle time with the stall counted
    std::uint64_t span_with_stall_ns = 0;  ///< the window with the stall counted
    std::uint64_t steps_before = 0;        ///< steps completed before it began (warm-up)
    std::uint64_t allocator_calls = 0;     ///< cudaMalloc / cudaFree calls in the whole input
    std::uint64_t allocator_ns = 0;
    [[nodiscard]] std::uint64_t length_ns() const noexcept { return activity.end - activity.start; }
};

struct TimelineSummary {
    AnalysisWindow window = AnalysisWindow::kSteps;
    std::string window_description;  ///< how the window was chosen, in words
    bool has_gpu_activity = false;
    std::int32_t device = -1;  ///< the device the headline figures describe
    std::int32_t rank = -1;
    GpuTimeStats gpu;  ///< that device, over the window (less a one-off stall)
    /// The window every timeline finding's figures and savings refer to, in all: the steps' span,
    /// or without steps the GPU window (first to last GPU work), less a one-off stall.
    std::uint64_t window_ns = 0;
    std::string window_name;  ///< "over 12 steps", "over the GPU window (first to last GPU work)"
    OneOffStall stall;

    // Host side, over the window.
    std::uint64_t steps = 0;
    std::uint64_t host_time_ns = 0;  ///< summed step durations, or the host span without steps
    std::uint64_t step_time_mean_ns = 0;
    std::uint64_t step_time_max_ns = 0;
    std::uint64_t input_wait_ns = 0;
    std::uint64_t input_waits = 0;
    std::uint64_t longest_input_wait_ns = 0;
    bool single_process_loader = false;  ///< the waits are DataLoader(num_workers=0) fetches
    std::uint64_t sync_calls = 0;
    std::uint64_t sync_ns = 0;
    std::vector<std::pair<std::string, std::pair<std::uint64_t, std::uint64_t>>> sync_by_name;
    /// Input waits booked to the step after them (they fell between two steps).
    std::uint64_t lead_in_waits = 0;
    /// Time between consecutive steps of the window that no step covers (a trainer's own work,
    /// validation, checkpoints): a figure of its own, never silently outside the window.
    std::uint64_t between_steps_ns = 0;
    std::uint64_t between_step_gaps = 0;  ///< consecutive steps with time between them
    std::uint64_t longest_between_steps_ns = 0;
    std::uint64_t steps_span_ns = 0;  ///< first step's start to the last step's end

    // Distributions over the whole input.
    double kernel_median_ns = 0;
    double launch_median_ns = 0;  ///< median duration of launch API calls
    std::uint64_t launch_calls = 0;
    std::string top_pageable_direction;  ///< "host to device" ...

    /// The steps' critical path and what each cause costs (the replayed what-ifs).
    CriticalPathSummary critical_path;
    /// The loader behind most of the input wait, when the program described one (live).
    bool loader_known = false;
    LoaderSettings loader;
    /// The serving engine, its iterations and the communication kernels the trace showed.
    ServingSeen serving;
};

/// Adds the timeline findings (input_bound, host_sync_stall, pageable_memcpy, launch_bound,
/// comm_bound, gpu_idle) that `s` supports: input_bound from host time alone, the others only
/// with GPU activity. Thresholds and their reasons are in the .cpp.
void add_timeline_findings(const TimelineSummary& s, Report& report);

}  // namespace gpudiag::detail
