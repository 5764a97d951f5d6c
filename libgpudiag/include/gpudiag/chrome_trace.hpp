// SPDX-License-Identifier: Apache-2.0
// Export to the Chrome trace-event format (JSON), for ui.perfetto.dev and chrome://tracing.
#pragma once

#include <gpudiag/analyze.hpp>
#include <gpudiag/export.hpp>
#include <gpudiag/status.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace gpudiag {

/// Writes the events of `paths` (recordings, Kineto traces, torch snapshots) to `out_path` as a
/// Chrome trace: GPU work per device and stream, host ranges and API calls per thread, steps as
/// async slices, memory in use and sampled metrics as counters. `options.progress` is called while
/// reading. Returns the number of trace events written. Errors: as analyze_files, plus kIoError
/// when `out_path` cannot be written. Input that fails midway keeps what was read and the status
/// says where it stopped. Thread-safety: safe on different outputs.
GPUDIAG_API Result<std::uint64_t> export_chrome_trace(const std::vector<std::string>& paths,
                                                      const std::string& out_path,
                                                      const AnalysisOptions& options = {}) noexcept;

}  // namespace gpudiag
