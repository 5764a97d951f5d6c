// SPDX-License-Identifier: Apache-2.0
// The list of analyses run on every input, in report order.
#include "analysis/registry.hpp"
#include "analysis/health/health_analyzer.hpp"
#include "analysis/health/stack_analyzer.hpp"
#include "analysis/memory/memory_analyzer.hpp"
#include "analysis/overview/overview_analyzer.hpp"
#include "analysis/phases/phase_times.hpp"
#include "analysis/timeline/timeline_analyzer.hpp"

namespace gpudiag::detail {

std::vector<std::unique_ptr<Analyzer>> make_analyzers(const AnalysisOptions& options,
                                                      const AnalyzerBounds& bounds) {
    std::vector<std::unique_ptr<Analyzer>> analyzers;
    analyzers.push_back(std::make_unique<OverviewAnalyzer>());
    auto timeline = std::make_unique<TimelineAnalyzer>(options, bounds.critical_path_nodes);
    const StepIndex* steps = timeline.get();  // the health analysis weighs throttling per step
    analyzers.push_back(std::move(timeline));
    analyzers.push_back(std::make_unique<PhaseTimeAnalyzer>(options, steps));  // fed after it
    analyzers.push_back(std::make_unique<MemoryAnalyzer>(bounds.allocator_history_ops));
    analyzers.push_back(std::make_unique<HealthAnalyzer>(steps));
    analyzers.push_back(std::make_unique<StackAnalyzer>());
    return analyzers;
}

}  // namespace gpudiag::detail
