// SPDX-License-Identifier: Apache-2.0
// StackAnalyzer: the stack verdict as findings. A live source names its driver, framework,
// cuDNN and CUPTI in properties ("stack.*", stack_rules.hpp); each mismatch
// check_stack() finds becomes a finding with its fix (driver_too_old_for_framework,
// driver_older_than_framework, cupti_newer_than_driver, second_cupti, cupti_missing_from_wheels).
#pragma once

#include "core/analyzer.hpp"

namespace gpudiag::detail {

class StackAnalyzer final : public Analyzer {
public:
    void consume(std::span<const Event>) override {}
    void contribute(Report& report) override;
};

}  // namespace gpudiag::detail
