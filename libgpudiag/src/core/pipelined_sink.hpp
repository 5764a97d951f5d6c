// SPDX-License-Identifier: Apache-2.0
// PipelinedSink: runs another sink's consume() on a thread of its own, so that a source produces
// its next batch of events while the analyses take the last one: on two cores, the end of an
// import and the analyses overlap instead of adding up.
//
// Batches are copied into a few buffers that are reused, and the producer waits when all are
// taken, so memory stays bounded whatever the source. begin() and end() run on the caller's
// thread when no batch is pending, so the inner sink still sees one call at a time, in order.
// When no thread can be started, every call goes straight through. An exception thrown by the
// inner sink on the worker comes back to the producer at its next call.
#pragma once

#include <gpudiag/sink.hpp>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace gpudiag::detail {

class PipelinedSink final : public EventSink {
public:
    /// `inner` must outlive this object. `buffers`: batches in flight at most.
    explicit PipelinedSink(EventSink& inner, std::size_t buffers = 4);
    /// Hands what is queued to the inner sink, then stops the worker.
    ~PipelinedSink() override;
    PipelinedSink(const PipelinedSink&) = delete;
    PipelinedSink& operator=(const PipelinedSink&) = delete;

    void begin(const SourceInfo& info, const StringTable& strings) override;
    void consume(std::span<const Event> events) override;
    void end(const SourceSummary& summary) override;

    /// True when a worker thread runs the inner sink (false: calls go straight through).
    [[nodiscard]] bool pipelined() const noexcept { return worker_.joinable(); }

private:
    void work();
    void drain();  // waits until the worker has consumed every queued batch
    void rethrow_failure();

    EventSink& inner_;
    std::mutex mutex_;
    std::condition_variable changed_;
    std::vector<std::vector<Event>> buffers_;
    std::vector<std::size_t> free_;  // buffers the producer may fill
    std::deque<std::size_t> queue_;  // filled buffers, oldest first
    bool busy_ = false;              // the worker is consuming a batch
    bool stopping_ = false;
    std::exception_ptr failure_;
    std::thread worker_;
};

}  // namespace gpudiag::detail
