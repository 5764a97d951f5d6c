// SPDX-License-Identifier: Apache-2.0
// The serving engine's own remedy for a GPU that idles between launches. A serving engine owns
// the forward pass: "torch.compile your step" is not something its user can do, but every engine
// has its own switch for CUDA graphs and the batch sizes they cover.
#pragma once

#include "analysis/timeline/timeline_summary.hpp"

#include <gpudiag/report.hpp>

namespace gpudiag::detail {

/// When `s` names a serving engine: the evidence of it (how it was recognised, whether CUDA graphs
/// ran) and the engine's remedy, put first in `f`'s advice. Nothing otherwise.
void add_serving_remedy(const TimelineSummary& s, Finding& f);

}  // namespace gpudiag::detail
