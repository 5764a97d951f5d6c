// SPDX-License-Identifier: Apache-2.0
#include "core/pipelined_sink.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <thread>
#include <vector>

namespace gpudiag::detail {
namespace {

std::vector<Event> batch(std::uint64_t first, std::size_t n) {
    std::vector<Event> events(n);
    for (std::size_t i = 0; i < n; ++i) {
        events[i].kind = EventKind::kAnnotation;
        events[i].start_ns = events[i].end_ns = first + i;
    }
    return events;
}

// Records what it receives, on which thread, and how far behind the producer it runs.
class RecordingSink final : public EventSink {
public:
    void begin(const SourceInfo&, const StringTable&) override {
        calls.push_back('b');
        begin_thread = std::this_thread::get_id();
    }
    void consume(std::span<const Event> events) override {
        calls.push_back('c');
        consume_thread = std::this_thread::get_id();
        for (const Event& e : events) times.push_back(e.start_ns);
        if (slow) std::this_thread::sleep_for(std::chrono::milliseconds(2));
        consumed_batches.fetch_add(1);
    }
    void end(const SourceSummary&) override { calls.push_back('e'); }

    std::vector<char> calls;
    std::vector<std::uint64_t> times;
    std::thread::id begin_thread;
    std::thread::id consume_thread;
    std::atomic<std::size_t> consumed_batches{0};
    bool slow = false;
};

TEST(PipelinedSink, DeliversEveryEventInOrderOnItsOwnThread) {
    RecordingSink inner;
    StringTable strings;
    {
        PipelinedSink pipe(inner);
        ASSERT_TRUE(pipe.pipelined());
        pipe.begin(SourceInfo{}, strings);
        for (std::uint64_t b = 0; b < 50; ++b) pipe.consume(batch(b * 100, 100));
        pipe.end(SourceSummary{});
        // end() came after every batch: the inner sink saw them all, then end.
        ASSERT_EQ(inner.times.size(), 5000u);
        EXPECT_EQ(inner.calls.front(), 'b');
        EXPECT_EQ(inner.calls.back(), 'e');
    }
    for (std::size_t i = 0; i < inner.times.size(); ++i) ASSERT_EQ(inner.times[i], i);
    EXPECT_EQ(inner.begin_thread, std::this_thread::get_id());
    EXPECT_NE(inner.consume_thread, std::this_thread::get_id());
}

TEST(PipelinedSink, TheProducerWaitsWhenEveryBufferIsTaken) {
    RecordingSink inner;
    inner.slow = true;
    StringTable strings;
    PipelinedSink pipe(inner, 2);
    pipe.begin(SourceInfo{}, strings);
    std::size_t most_ahead = 0;
    for (std::uint64_t b = 0; b < 20; ++b) {
        pipe.consume(batch(b, 1));
        most_ahead =
            std::max(most_ahead, static_cast<std::size_t>(b + 1) - inner.consumed_batches.load());
    }
    pipe.end(SourceSummary{});
    // Two buffers queued plus the one being consumed: never more ahead than that.
    EXPECT_LE(most_ahead, 3u);
    EXPECT_EQ(inner.times.size(), 20u);
}

TEST(PipelinedSink, WhatIsQueuedIsDeliveredEvenWithoutEnd) {
    RecordingSink inner;
    StringTable strings;
    {
        PipelinedSink pipe(inner);
        pipe.begin(SourceInfo{}, strings);
        for (std::uint64_t b = 0; b < 10; ++b) pipe.consume(batch(b * 10, 10));
    }
    EXPECT_EQ(inner.times.size(), 100u);
}

class ThrowingSink final : public EventSink {
public:
    void consume(std::span<const Event>) override { throw std::runtime_error("analysis broke"); }
};

TEST(PipelinedSink, AFailureOnTheWorkerComesBackToTheProducer) {
    ThrowingSink inner;
    StringTable strings;
    PipelinedSink pipe(inner);
    pipe.begin(SourceInfo{}, strings);
    pipe.consume(batch(0, 4));
    EXPECT_THROW(pipe.end(SourceSummary{}), std::runtime_error);
}

}  // namespace
}  // namespace gpudiag::detail
