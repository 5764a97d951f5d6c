// SPDX-License-Identifier: Apache-2.0
// The list of analyses run on every input, in report order.
#include "analysis/registry.hpp"
#include "analysis/collectives/collective_analyzer.hpp"
#include "analysis/health/health_analyzer.hpp"
#include "analysis/health/stack_analyzer.hpp"
#include "analysis/memory/memory_analyzer.hpp"
#include "analysis/overview/overview_analyzer.hpp"
#include "analysis/phases/phase_times.hpp"
#include "analysis/timeline/timeline_analyzer.hpp"

namespace gpudiag::detail {

Analyses make_analyzers(const AnalysisOptions& options, const AnalyzerBounds& bounds) {
    Analyses a;
    a.all.push_back(std::make_unique<OverviewAnalyzer>());
    auto timeline = std::make_unique<TimelineAnalyzer>(options, bounds.critical_path_nodes);
    const StepIndex* steps = timeline.get();  // the health analysis weighs throttling per step
    a.all.push_back(std::move(timeline));
    a.all.push_back(std::make_unique<PhaseTimeAnalyzer>(options, steps));  // fed after it
    auto memory = std::make_unique<MemoryAnalyzer>(bounds.allocator_history_ops);
    a.memory_ledger = &memory->ledger();
    a.all.push_back(std::move(memory));
    a.all.push_back(std::make_unique<HealthAnalyzer>(steps));
    a.all.push_back(std::make_unique<StackAnalyzer>());
    a.all.push_back(std::make_unique<CollectiveAnalyzer>(!options.for_job));
    return a;
}

}  // namespace gpudiag::detail
