// SPDX-License-Identifier: Apache-2.0
// PipelinedSink: runs another sink's consume() on a thread of its own (a BatchPipe), so that a
// source produces its next batch of events while the analyses take the last one: on two cores,
// the end of an import and the analyses overlap instead of adding up.
//
// begin() and end() run on the caller's thread once every batch before them has been consumed,
// so the inner sink still sees one call at a time, in order. consume() copies the batch;
// hand_over() moves it. When no thread can be started, every call goes straight through. An
// exception thrown by the inner sink on the worker comes back to the producer at its next call.
#pragma once

#include <gpudiag/sink.hpp>

#include "core/batch_pipe.hpp"

#include <cstddef>
#include <vector>

namespace gpudiag::detail {

class PipelinedSink final : public EventSink {
public:
    /// `inner` must outlive this object. `buffers`: batches in flight at most.
    explicit PipelinedSink(EventSink& inner, std::size_t buffers = 4)
        : inner_(inner),
          pipe_([this](std::span<const Event> events) { inner_.consume(events); }, buffers) {}

    void begin(const SourceInfo& info, const StringTable& strings) override {
        pipe_.drain();
        inner_.begin(info, strings);
    }
    void consume(std::span<const Event> events) override {
        staging_.assign(events.begin(), events.end());
        pipe_.submit(staging_);
    }
    /// Hands `batch` over without copying it; it comes back empty.
    void hand_over(std::vector<Event>& batch) { pipe_.submit(batch); }
    void end(const SourceSummary& summary) override {
        pipe_.drain();
        inner_.end(summary);
    }

    /// True when a worker thread runs the inner sink (false: calls go straight through).
    [[nodiscard]] bool pipelined() const noexcept { return pipe_.threaded(); }

private:
    EventSink& inner_;
    std::vector<Event> staging_;
    BatchPipe<Event> pipe_;  // last: its worker stops before the members it uses go
};

}  // namespace gpudiag::detail
