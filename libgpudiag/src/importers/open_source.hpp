// SPDX-License-Identifier: Apache-2.0
// Opening an input: the format is told by content (magic bytes, gzip peeked), not by extension,
// and each format's reader lives in its own folder here.
#pragma once

#include "core/event_source.hpp"

#include <gpudiag/analyze.hpp>
#include <gpudiag/status.hpp>

#include <memory>
#include <string>

namespace gpudiag::detail {

/// Opens the right reader for `path`. Defined in importers/open_source.cpp.
Result<std::unique_ptr<EventSource>> open_event_source(const std::string& path,
                                                       const AnalysisOptions& options);

// One opener per format: importers/recording_source.cpp, kineto/, torch_snapshot/.
Result<std::unique_ptr<EventSource>> open_recording_source(const std::string& path,
                                                           const AnalysisOptions& options);
Result<std::unique_ptr<EventSource>> open_kineto_source(const std::string& path,
                                                        const AnalysisOptions& options);
Result<std::unique_ptr<EventSource>> open_snapshot_source(const std::string& path,
                                                          const AnalysisOptions& options);

}  // namespace gpudiag::detail
