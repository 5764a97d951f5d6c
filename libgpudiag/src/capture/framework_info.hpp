// SPDX-License-Identifier: Apache-2.0
// The framework the embedding program runs, as its integration last reported it
// (set_framework_info): capture reports it with the rest of the software stack it finds.
#pragma once

#include <gpudiag/capture.hpp>

namespace gpudiag::detail {

/// What set_framework_info() last recorded; `reported` false when nothing was.
/// Thread-safety: safe.
FrameworkInfo current_framework(bool* reported = nullptr);

}  // namespace gpudiag::detail
