// SPDX-License-Identifier: Apache-2.0
#include "core/event_channel.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace gpudiag::detail {
namespace {

#if defined(__SANITIZE_THREAD__)
constexpr bool kUnderTsan = true;
#elif defined(__has_feature)
#    if __has_feature(thread_sanitizer)
constexpr bool kUnderTsan = true;
#    else
constexpr bool kUnderTsan = false;
#    endif
#else
constexpr bool kUnderTsan = false;
#endif

Event make_event(std::uint32_t producer, std::uint64_t sequence) {
    Event e;
    e.kind = EventKind::kAnnotation;
    e.thread = producer;
    e.start_ns = sequence;
    e.end_ns = sequence;
    e.annotation.value = static_cast<std::int64_t>(sequence * 7 + producer);
    return e;
}

// Checks every event it sees: per-producer sequence strictly increasing, payload intact.
class CheckingSink final : public EventSink {
public:
    explicit CheckingSink(std::size_t producers) : next_(producers, 0), received_(producers, 0) {}

    void consume(std::span<const Event> events) override {
        ++batches_;
        for (const Event& e : events) {
            if (e.thread >= next_.size()) {
                ++errors_;
                continue;
            }
            // Strictly after the previous one: no duplicate, no reordering. Gaps are drops.
            if (e.start_ns < next_[e.thread]) ++errors_;
            if (e.annotation.value != static_cast<std::int64_t>(e.start_ns * 7 + e.thread)) {
                ++errors_;
            }
            next_[e.thread] = e.start_ns + 1;
            ++received_[e.thread];
        }
    }

    std::vector<std::uint64_t> next_;
    std::vector<std::uint64_t> received_;
    std::uint64_t errors_ = 0;
    std::uint64_t batches_ = 0;
};

TEST(EventChannel, RejectsBadCapacity) {
    EXPECT_EQ(EventChannel::create(0).status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(EventChannel::create(1).status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(EventChannel::create(1000).status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(EventChannel::create(EventChannel::kMaxCapacity * 2).status().code(),
              StatusCode::kInvalidArgument);
    auto ok = EventChannel::create(1024);
    ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
    EXPECT_EQ((*ok)->capacity(), 1024u);
}

TEST(EventChannel, FillDrainAndCountDrops) {
    auto made = EventChannel::create(8);
    ASSERT_TRUE(made.is_ok());
    EventChannel& ch = **made;
    CheckingSink sink(1);

    // GIVEN a full channel
    for (std::uint64_t i = 0; i < 8; ++i) EXPECT_TRUE(ch.try_push(make_event(0, i)));
    // WHEN more events arrive THEN they are refused and counted
    EXPECT_FALSE(ch.try_push(make_event(0, 100)));
    EXPECT_FALSE(ch.try_push(make_event(0, 101)));
    ChannelStats s = ch.stats();
    EXPECT_EQ(s.pushed, 8u);
    EXPECT_EQ(s.dropped, 2u);
    EXPECT_EQ(s.occupancy, 8u);
    EXPECT_EQ(s.high_water, 8u);

    // A bounded drain hands over exactly that many, in order.
    EXPECT_EQ(ch.drain(sink, 3), 3u);
    EXPECT_EQ(sink.received_[0], 3u);
    EXPECT_EQ(sink.next_[0], 3u);
    EXPECT_EQ(ch.stats().occupancy, 5u);

    // Freed slots take new events after the old ones.
    for (std::uint64_t i = 8; i < 11; ++i) EXPECT_TRUE(ch.try_push(make_event(0, i)));
    EXPECT_FALSE(ch.try_push(make_event(0, 200)));
    EXPECT_EQ(ch.drain(sink), 8u);
    EXPECT_EQ(ch.drain(sink), 0u);  // empty: nothing, no empty batch delivered
    EXPECT_EQ(sink.errors_, 0u);
    EXPECT_EQ(sink.received_[0], 11u);
    EXPECT_EQ(sink.next_[0], 11u);
    s = ch.stats();
    EXPECT_EQ(s.pushed, 11u);
    EXPECT_EQ(s.drained, 11u);
    EXPECT_EQ(s.dropped, 3u);
    EXPECT_EQ(s.occupancy, 0u);
}

TEST(EventChannel, DrainBatchesAreBounded) {
    auto made = EventChannel::create(4096);
    ASSERT_TRUE(made.is_ok());
    EventChannel& ch = **made;
    for (std::uint64_t i = 0; i < 3000; ++i) ASSERT_TRUE(ch.try_push(make_event(0, i)));
    CheckingSink sink(1);
    EXPECT_EQ(ch.drain(sink), 3000u);
    EXPECT_EQ(sink.batches_, 3u);  // 1024 + 1024 + 952
    EXPECT_EQ(ch.stats().high_water, 3000u);
    EXPECT_EQ(sink.errors_, 0u);
}

TEST(EventChannel, WrapsAroundManyLaps) {
    auto made = EventChannel::create(16);
    ASSERT_TRUE(made.is_ok());
    EventChannel& ch = **made;
    CheckingSink sink(1);
    std::uint64_t seq = 0;
    for (int lap = 0; lap < 1000; ++lap) {
        for (int i = 0; i < 11; ++i) ASSERT_TRUE(ch.try_push(make_event(0, seq++)));
        ch.drain(sink);
    }
    EXPECT_EQ(sink.received_[0], seq);
    EXPECT_EQ(sink.errors_, 0u);
    EXPECT_EQ(ch.stats().dropped, 0u);
    EXPECT_EQ(ch.stats().high_water, 11u);
}

// Runs `producers` threads pushing `per_producer` events each while this thread drains.
// With `retry`, producers spin until each push succeeds (nothing may be dropped).
void run_stress(std::uint32_t producers, std::uint64_t per_producer, std::size_t capacity,
                bool retry) {
    auto made = EventChannel::create(capacity);
    ASSERT_TRUE(made.is_ok());
    EventChannel& ch = **made;
    CheckingSink sink(producers);
    std::vector<std::uint64_t> refused(producers, 0);           // events given up on
    std::vector<std::uint64_t> refused_attempts(producers, 0);  // every false from try_push
    std::atomic<std::uint32_t> finished{0};
    std::vector<std::thread> threads;
    for (std::uint32_t p = 0; p < producers; ++p) {
        threads.emplace_back([&, p] {
            for (std::uint64_t i = 0; i < per_producer; ++i) {
                const Event e = make_event(p, i);
                if (retry) {
                    while (!ch.try_push(e)) {
                        ++refused_attempts[p];
                        std::this_thread::yield();
                    }
                } else if (!ch.try_push(e)) {
                    ++refused[p];
                    ++refused_attempts[p];
                }
            }
            finished.fetch_add(1, std::memory_order_release);
        });
    }
    while (finished.load(std::memory_order_acquire) < producers) {
        if (ch.drain(sink) == 0) std::this_thread::yield();
    }
    for (auto& t : threads) t.join();
    ch.drain(sink);

    EXPECT_EQ(sink.errors_, 0u) << "duplicated, reordered or damaged events";
    std::uint64_t total_refused = 0;
    std::uint64_t total_attempts_refused = 0;
    std::uint64_t total_received = 0;
    for (std::uint32_t p = 0; p < producers; ++p) {
        // Exactly once: each event was either delivered (and order checked) or refused.
        EXPECT_EQ(sink.received_[p] + refused[p], per_producer) << "producer " << p;
        total_refused += refused[p];
        total_attempts_refused += refused_attempts[p];
        total_received += sink.received_[p];
    }
    const ChannelStats s = ch.stats();
    EXPECT_EQ(s.dropped, total_attempts_refused);  // every refusal is counted
    EXPECT_EQ(s.pushed, total_received);
    EXPECT_EQ(s.drained, total_received);
    EXPECT_EQ(s.occupancy, 0u);
    EXPECT_LE(s.high_water, capacity);
    if (retry) {
        EXPECT_EQ(total_refused, 0u);
    }
}

std::uint64_t stress_events() {
    return kUnderTsan ? 200'000 : 1'000'000;
}

TEST(EventChannelStress, FourProducersDropWhenFull) {
    run_stress(4, stress_events(), 4096, /*retry=*/false);
}

TEST(EventChannelStress, FourProducersNothingLostWhenTheyRetry) {
    run_stress(4, stress_events(), 1024, /*retry=*/true);
}

TEST(EventChannelStress, TinyChannelManyContendedLaps) {
    run_stress(3, stress_events() / 4, 4, /*retry=*/true);
}

}  // namespace
}  // namespace gpudiag::detail
