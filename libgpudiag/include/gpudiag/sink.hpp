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

}  // namespace gpudiag
#endif  // GPUDIAG_HAS_SPAN: the event-sink seam needs C++20
