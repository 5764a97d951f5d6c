// SPDX-License-Identifier: Apache-2.0
// The analyses run on every input, in report order: adding one means one line in registry.cpp.
#pragma once

#include "core/analyzer.hpp"

#include <gpudiag/analyze.hpp>

#include <memory>
#include <vector>

namespace gpudiag::detail {

/// What the analyses may keep beyond their fixed-size state. A file is analysed once and ends; a
/// live session runs for days inside someone else's process and reports every so often (each
/// mid-run report copies the critical path), so it keeps less of both histories.
struct AnalyzerBounds {
    /// Allocator operations kept for the allocator what-if (24 bytes each, per device).
    std::size_t allocator_history_ops = std::size_t{1} << 24;
    /// GPU activities kept for tracing a step's critical path back (about 128 bytes each).
    std::size_t critical_path_nodes = std::size_t{1} << 19;

    /// For a live session: 512 Ki operations (12 MiB: the first few hours of a service, the
    /// warm-up and peak of a training run) and 128 Ki activities (16 MiB: steps larger than that
    /// are counted as untraced, and the report says so).
    static AnalyzerBounds live() noexcept { return {std::size_t{1} << 19, std::size_t{1} << 17}; }
};

class MemoryLedger;

/// The analyses, in report order, and the ones other parts reach by type: the memory ledger
/// (a live session's watches read it), without a cast.
struct Analyses {
    std::vector<std::unique_ptr<Analyzer>> all;
    MemoryLedger* memory_ledger = nullptr;
};

Analyses make_analyzers(const AnalysisOptions& options, const AnalyzerBounds& bounds = {});

}  // namespace gpudiag::detail
