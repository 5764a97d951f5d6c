// SPDX-License-Identifier: Apache-2.0
// EventSink defaults and the fan-out sink.
#include <gpudiag/sink.hpp>

#include <iterator>

namespace gpudiag {

EventSink::~EventSink() = default;
void EventSink::begin(const SourceInfo& /*info*/, const StringTable& /*strings*/) {}
void EventSink::end(const SourceSummary& /*summary*/) {}

bool FanoutSink::add(EventSink* sink) {
    if (sink == nullptr || count_ >= static_cast<int>(std::size(sinks_))) return false;
    sinks_[count_++] = sink;
    return true;
}

void FanoutSink::begin(const SourceInfo& info, const StringTable& strings) {
    for (int i = 0; i < count_; ++i) sinks_[i]->begin(info, strings);
}

void FanoutSink::consume(std::span<const Event> events) {
    for (int i = 0; i < count_; ++i) sinks_[i]->consume(events);
}

void FanoutSink::end(const SourceSummary& summary) {
    for (int i = 0; i < count_; ++i) sinks_[i]->end(summary);
}

}  // namespace gpudiag
