// SPDX-License-Identifier: Apache-2.0
// The analyses run on every input, in report order: adding one means one line in registry.cpp.
#pragma once

#include "core/analyzer.hpp"

#include <gpudiag/analyze.hpp>

#include <memory>
#include <vector>

namespace gpudiag::detail {

std::vector<std::unique_ptr<Analyzer>> make_analyzers(const AnalysisOptions& options);

}  // namespace gpudiag::detail
