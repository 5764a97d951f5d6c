// SPDX-License-Identifier: Apache-2.0
// The job view: cross-rank findings and tables over per-rank reports (a Report -> Report step,
// not an event Analyzer).
#pragma once

#include <gpudiag/analyze.hpp>
#include <gpudiag/report.hpp>

namespace gpudiag::detail {

/// Adds cross-rank findings and tables to `job`, whose `ranks` hold one report per rank.
void analyze_job(Report& job, const AnalysisOptions& options);

}  // namespace gpudiag::detail
