// SPDX-License-Identifier: Apache-2.0
// The stack rules: which combinations of driver, CUDA runtime, cuDNN and CUPTI break something,
// each mismatch with its fix. Capture only reports the stack it finds (CaptureStatus::stack, and
// the "stack.*" properties of a live source); these rules judge it, in one place, for
// capture_status() and probe_capture() (api/live_capture.cpp) and for the live report's findings
// (StackAnalyzer).
#pragma once

#include <gpudiag/capture.hpp>
#include <gpudiag/source_info.hpp>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpudiag::detail {

/// "12.4" -> 12040, "13.0" -> 13000; 0 when it is not a CUDA version.
int parse_cuda_version(std::string_view text) noexcept;

/// The mismatches in `stack` that break something, most severe first.
std::vector<StackIssue> check_stack(const SoftwareStack& stack);

/// The stack as source properties ("stack.driver", ...), so recordings and reports carry it.
void add_stack_properties(const SoftwareStack& stack,
                          std::vector<std::pair<std::string, std::string>>& properties);
/// The stack a source's properties describe (empty when they hold none).
SoftwareStack stack_from_properties(const SourceInfo& source);

}  // namespace gpudiag::detail
