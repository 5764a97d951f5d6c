// SPDX-License-Identifier: Apache-2.0
// Multi-rank jobs: one report out of the reports of each rank (e.g. gathered over torch.distributed).
#pragma once

#include <gpudiag/analyze.hpp>
#include <gpudiag/export.hpp>
#include <gpudiag/report.hpp>
#include <gpudiag/status.hpp>

#include <vector>

namespace gpudiag {

/// Combines per-rank reports into a job report: the ranks go into `Report::ranks` (sorted by
/// rank) and the cross-rank analysis (per-rank table, stragglers, imbalance) adds the job's own
/// sections and findings, exactly as analyze_files does for one file per rank. A single report is
/// returned unchanged. Errors: kInvalidArgument when `ranks` is empty.
/// Thread-safety: safe.
GPUDIAG_API Result<Report> analyze_job(std::vector<Report> ranks,
                                       const AnalysisOptions& options = {}) noexcept;

}  // namespace gpudiag
