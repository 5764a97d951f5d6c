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
/// launch, CPU; kernel wait; other); counter tracks for memory (allocated/reserved bytes,
/// block-level allocated bytes) and other sampled counters; per host process, a "steps" track
/// (one slice per step marked), the windows GPU capture did not see, and per thread its ranges
/// nested (phases, input waits, NVTX ranges, operators), CUDA API calls and annotations. Begin/end
/// markers that do not pair are counted in the trace's otherData. Timestamps are µs from the
/// first event of the first input.
/// Errors: as analyze_files; kIoError when the output cannot be written; kFailedPrecondition,
/// saying what the input held, when an input has nothing to draw (no GPU work, memory, counters,
/// steps or host ranges). On error no output file is left behind.
GPUDIAG_API Status export_chrome_trace(const std::vector<std::string>& inputs,
                                       const std::string& output_path,
                                       const AnalysisOptions& options = {}) noexcept;

}  // namespace gpudiag
