// SPDX-License-Identifier: Apache-2.0
// EventChannel: the bounded multi-producer, single-consumer hand-off between capture threads and
// the analysis/recording thread. Never blocks, never allocates after construction, never grows.
#pragma once

#include <gpudiag/event.hpp>
#include <gpudiag/sink.hpp>
#include <gpudiag/status.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>

namespace gpudiag::detail {

/// What a channel has seen, for status() and reports. Counters only ever grow.
struct ChannelStats {
    std::size_t capacity = 0;
    std::uint64_t pushed = 0;    ///< events accepted by try_push
    std::uint64_t dropped = 0;   ///< events refused because the channel was full
    std::uint64_t drained = 0;   ///< events handed to a sink
    std::size_t high_water = 0;  ///< most events held at once (see EventChannel::stats)
    std::size_t occupancy = 0;   ///< events held now (a snapshot; producers may be mid-push)
};

/// A bounded MPSC queue of Events (Vyukov's array queue with a sequence number per slot).
///
/// Why this design rather than one SPSC ring per producer thread: the producers are a handful of
/// gpudiag threads (CUPTI decoder, NVTX/callback forwarders, samplers) that come and go with the
/// host's threads; a single array keeps memory fixed at `capacity` whatever the number of threads,
/// needs no per-thread registration (which would allocate on a thread's first event) and no
/// consumer-side merge. A producer claims a slot with one CAS on the enqueue position and
/// publishes it with a release store of the slot's sequence, so producers are lock-free (a CAS
/// fails only because another producer succeeded) and never wait for the consumer: a full
/// channel is detected from the slot's sequence and the event is dropped and counted.
/// Each producer's events are delivered in the order it pushed them (positions are claimed in
/// program order and consumed in position order). Caveat of the design: a producer pre-empted
/// between claim and publish holds back the consumer (not other producers) until it resumes;
/// drain() then returns early and the events follow on the next drain.
class EventChannel {
public:
    /// Largest capacity accepted (16 Mi events = 1.1 GiB of slots).
    static constexpr std::size_t kMaxCapacity = std::size_t{1} << 24;
    /// Events handed to the sink per consume() call.
    static constexpr std::size_t kDrainBatch = 1024;

    /// Allocates a channel of `capacity` slots (a power of two, 2..kMaxCapacity).
    /// Errors: kInvalidArgument for a bad capacity, kResourceExhausted when memory is short.
    static Result<std::unique_ptr<EventChannel>> create(std::size_t capacity) noexcept;

    EventChannel(const EventChannel&) = delete;
    EventChannel& operator=(const EventChannel&) = delete;
    ~EventChannel();

    /// Copies `event` into the channel. False when full (the drop is counted).
    /// Thread-safety: any number of threads. Callback-safe: yes (no lock, no allocation, no
    /// system call). Errors: none.
    bool try_push(const Event& event) noexcept;

    /// Hands up to `max` events to `sink.consume()` in batches of at most kDrainBatch, in
    /// position order, and returns how many. Stops early at a slot still being written.
    /// Thread-safety: one consumer thread at a time. Errors: exceptions from the sink propagate
    /// (the events of that batch count as drained).
    std::size_t drain(EventSink& sink, std::size_t max = std::numeric_limits<std::size_t>::max());

    /// Counters. `high_water` is sampled by the consumer before and after each drained batch
    /// (between drains only producers change occupancy, so the peak is seen at the next sample,
    /// within one batch) and pinned to capacity on any drop. Thread-safety: any thread.
    [[nodiscard]] ChannelStats stats() const noexcept;
    [[nodiscard]] std::size_t capacity() const noexcept { return mask_ + 1; }

private:
    struct Slot {
        std::atomic<std::uint64_t> sequence;
        Event event;
    };

    EventChannel(std::unique_ptr<Slot[]> slots, std::unique_ptr<Event[]> batch,
                 std::size_t capacity) noexcept;
    void note_occupancy(std::size_t occupancy) noexcept;

    const std::unique_ptr<Slot[]> slots_;
    const std::unique_ptr<Event[]> batch_;  // consumer-owned staging for sink.consume()
    const std::uint64_t mask_;

    // Each hot word on its own cache line: producers hammer enqueue_pos_, the consumer owns
    // dequeue_pos_, and drops are rare.
    alignas(64) std::atomic<std::uint64_t> enqueue_pos_{0};
    alignas(64) std::atomic<std::uint64_t> dequeue_pos_{0};  // written by the consumer only
    std::atomic<std::uint64_t> high_water_{0};
    alignas(64) std::atomic<std::uint64_t> dropped_{0};
};

}  // namespace gpudiag::detail
