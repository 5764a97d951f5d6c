// SPDX-License-Identifier: Apache-2.0
// EventSource: anything that replays events into a sink (importers, recordings, tests).
#pragma once

#include <gpudiag/analyze.hpp>
#include <gpudiag/sink.hpp>
#include <gpudiag/status.hpp>
#include <gpudiag/string_table.hpp>

#include <memory>
#include <string>

namespace gpudiag::detail {

class EventSource {
public:
    virtual ~EventSource() = default;
    /// Streams every event to `sink`: begin(), consume()..., end(). Interns strings into
    /// `strings`. Returns a non-OK status on input it cannot read; events delivered before the
    /// error stay delivered (and end() is still called with `truncated` set) so partial input
    /// is never lost.
    virtual Status run(EventSink& sink, StringTable& strings) = 0;
};

/// Opens the right reader for `path` (by content, not by extension). Defined in
/// importers/open_source.cpp.
Result<std::unique_ptr<EventSource>> open_event_source(const std::string& path,
                                                       const AnalysisOptions& options);

}  // namespace gpudiag::detail

namespace gpudiag::detail {

// One opener per format, each defined by its area (record/, kineto/, snapshot/).
Result<std::unique_ptr<EventSource>> open_recording_source(const std::string& path,
                                                           const AnalysisOptions& options);
Result<std::unique_ptr<EventSource>> open_kineto_source(const std::string& path,
                                                        const AnalysisOptions& options);
Result<std::unique_ptr<EventSource>> open_snapshot_source(const std::string& path,
                                                          const AnalysisOptions& options);

}  // namespace gpudiag::detail
