// SPDX-License-Identifier: Apache-2.0
// The one seam: every producer feeds an EventSink; every analysis and writer is one.
#pragma once

#include <gpudiag/event.hpp>
#include <gpudiag/export.hpp>
#include <gpudiag/source_info.hpp>
#include <gpudiag/string_table.hpp>

#if GPUDIAG_HAS_SPAN
#    include <span>

namespace gpudiag {

/// Receives events in batches. A producer calls begin() once, consume() any number of times with
/// events in roughly increasing start time (analyses tolerate small disorder), then end() once.
/// All calls come from one thread at a time. `strings` outlives the sink's use of it.
class GPUDIAG_API EventSink {
public:
    virtual ~EventSink();
    virtual void begin(const SourceInfo& info, const StringTable& strings);
    virtual void consume(std::span<const Event> events) = 0;
    virtual void end(const SourceSummary& summary);
};

/// Forwards every call to several sinks (an analysis engine and a recording writer, say).
class GPUDIAG_API FanoutSink final : public EventSink {
public:
    FanoutSink() = default;
    /// Adds a sink (not owned; must outlive this object). False when 8 are already attached.
    bool add(EventSink* sink);
    void begin(const SourceInfo& info, const StringTable& strings) override;
    void consume(std::span<const Event> events) override;
    void end(const SourceSummary& summary) override;

private:
    EventSink* sinks_[8] = {};
    int count_ = 0;
};

}  // namespace gpudiag
#endif  // GPUDIAG_HAS_SPAN: the event-sink seam needs C++20
