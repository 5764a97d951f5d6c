// SPDX-License-Identifier: Apache-2.0
// EventSink defaults.
#include <gpudiag/sink.hpp>

namespace gpudiag {

EventSink::~EventSink() = default;
void EventSink::begin(const SourceInfo& /*info*/, const StringTable& /*strings*/) {}
void EventSink::end(const SourceSummary& /*summary*/) {}

}  // namespace gpudiag
