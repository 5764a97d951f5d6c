// SPDX-License-Identifier: Apache-2.0
// What one run's report carries that a comparison can use, read once: its per-step values (the
// timeline's per-step tables; for a job, the ranks' steps joined by step number), the sections'
// figures, the allocation sites at the memory peak, the GPUs and the software stack it names.
#pragma once

#include <gpudiag/report.hpp>

#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace gpudiag::detail {

struct RunFigures {
    const Report* report = nullptr;
    /// Steps the per-step values cover (0: the input had no complete steps).
    std::size_t steps = 0;
    /// Per-step values by key: "duration_ns", "gpu_busy_ns", ... of the timeline's steps table,
    /// "critical_path_<part>_ns" of its critical path per step, "gpu_idle_<cause>_ns" of its
    /// per-step idle breakdown. In step order; only what the report has.
    std::map<std::string, std::vector<double>> per_step;
    std::vector<double> step_peak_allocated;  ///< the memory section's per-step peaks
    std::vector<double> step_idle_share;      ///< the timeline's per-step GPU idle share
    const Section* timeline = nullptr;
    const Section* memory = nullptr;
    const Section* health = nullptr;
    const Section* job = nullptr;
    /// Each phase's own time per step (the phases section), by phase name.
    std::vector<std::pair<std::string, double>> phase_per_step;
    /// Live bytes at the memory peak by allocation site (largest first).
    std::vector<std::pair<std::string, double>> peak_sites;
    /// The model of every GPU the input lists ("" where it did not record one).
    std::vector<std::string> device_models;
    /// ("driver" | "cuda_driver" | "cuda" | "framework", version) as the input recorded them.
    std::vector<std::pair<std::string, std::string>> software;
    /// Per-rank step times of a job (rank -> per-step durations).
    std::map<int, std::vector<double>> rank_steps;

    static RunFigures read(const Report& report);

    [[nodiscard]] const Figure* figure(const Section* section, const std::string& key) const;
    [[nodiscard]] const std::vector<double>* step_values(const std::string& key) const;
    [[nodiscard]] std::string software_version(const std::string& key) const;
    [[nodiscard]] const Finding* finding(const std::string& id) const;
};

}  // namespace gpudiag::detail
