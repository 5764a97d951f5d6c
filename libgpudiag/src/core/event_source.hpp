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

}  // namespace gpudiag::detail
