// SPDX-License-Identifier: Apache-2.0
// The stack verdict: which driver, CUDA runtime, cuDNN and CUPTI a process runs on, and the
// mismatches between them that break something (each with its fix). One owner for these rules:
// capture_status() and the live report's findings both come from check_stack().
#pragma once

#include <gpudiag/capture.hpp>
#include <gpudiag/source_info.hpp>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpudiag::detail {

/// What set_framework_info() last recorded; `reported` false when nothing was.
FrameworkInfo current_framework(bool* reported = nullptr);

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
