// SPDX-License-Identifier: Apache-2.0
// Can the two runs be compared one to one? Each thing that differs between them other than the
// change under test (the GPU, its count, the driver, CUDA and framework versions, another
// program on the GPU, throttling in one run only, input shapes) or that keeps a change from being
// measured (too few steps, an input not read to its end, simulated events) is a reason, with
// the areas whose changes it can explain.
#pragma once

#include "analysis/compare/run_figures.hpp"

#include <gpudiag/compare.hpp>

#include <string>
#include <vector>

namespace gpudiag::detail {

class ComparabilityCheck {
public:
    ComparabilityCheck(const RunFigures& before, const RunFigures& after,
                       const CompareOptions& options)
        : before_(before), after_(after), options_(options) {}

    /// The reasons; `notes` gets what could not be checked (a GPU model one input did not record).
    [[nodiscard]] std::vector<CompareReason> reasons(std::vector<std::string>& notes) const;

private:
    void check_gpu_model(std::vector<CompareReason>& out, std::vector<std::string>& notes) const;
    void check_gpu_count(std::vector<CompareReason>& out) const;
    void check_software(std::vector<CompareReason>& out) const;
    void check_foreign_processes(std::vector<CompareReason>& out) const;
    void check_throttling(std::vector<CompareReason>& out) const;
    void check_steps(std::vector<CompareReason>& out) const;
    void check_input_shapes(std::vector<CompareReason>& out) const;
    void check_inputs(std::vector<CompareReason>& out) const;
    void check_peak_sites(std::vector<CompareReason>& out) const;
    void check_input_kinds(std::vector<CompareReason>& out) const;
    void check_window(std::vector<CompareReason>& out) const;

    const RunFigures& before_;
    const RunFigures& after_;
    const CompareOptions& options_;
};

}  // namespace gpudiag::detail
