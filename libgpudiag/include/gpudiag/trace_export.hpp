// SPDX-License-Identifier: Apache-2.0
// Chrome / Perfetto trace export of gpudiag's timeline: open the file in https://ui.perfetto.dev
// or chrome://tracing to see what the analysis saw.
#pragma once

#include <gpudiag/analyze.hpp>
#include <gpudiag/export.hpp>
#include <gpudiag/status.hpp>

#include <string>
#include <vector>

namespace gpudiag {

/// Reads `inputs` (any format analyze_files reads; several files = one per rank) and writes a
/// Chrome trace JSON to `output_path` with: GPU kernels, copies and memsets per device and
/// stream; idle gaps per device, named and coloured by cause (host wait: input, sync, copy,
/// launch, CPU; kernel wait; other); host ranges (operators, steps, input waits) and CUDA API
/// calls per thread; counter tracks for memory (allocated/reserved bytes, block-level allocated
/// bytes) and other sampled counters. Timestamps are µs from the first event of the first input.
/// Errors: as analyze_files, plus kIoError when the output cannot be written.
GPUDIAG_API Status export_chrome_trace(const std::vector<std::string>& inputs,
                                       const std::string& output_path,
                                       const AnalysisOptions& options = {}) noexcept;

}  // namespace gpudiag
