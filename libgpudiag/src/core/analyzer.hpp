// SPDX-License-Identifier: Apache-2.0
// Analyzer: an EventSink that turns what it consumed into findings and sections of a Report.
#pragma once

#include <gpudiag/analyze.hpp>
#include <gpudiag/report.hpp>
#include <gpudiag/sink.hpp>

#include <memory>
#include <vector>

namespace gpudiag::detail {

class Analyzer : public EventSink {
public:
    /// Adds this analysis' findings, sections and notes. Called once, after end().
    virtual void contribute(Report& report) = 0;
};

/// Every analysis gpudiag runs on a stream, in report order. Defined in analysis/registry.cpp:
/// adding an analysis means adding one line there.
std::vector<std::unique_ptr<Analyzer>> make_analyzers(const AnalysisOptions& options);

}  // namespace gpudiag::detail

namespace gpudiag::detail {

/// Adds cross-rank findings and tables to `job`, whose `ranks` hold one report per rank.
/// Defined in analysis/job.cpp.
void analyze_job(Report& job, const AnalysisOptions& options);

}  // namespace gpudiag::detail
