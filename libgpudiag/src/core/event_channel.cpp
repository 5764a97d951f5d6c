// SPDX-License-Identifier: Apache-2.0
// Bounded MPSC event channel (design notes in event_channel.hpp).
//
// Slot protocol (after D. Vyukov's bounded MPMC queue): slot i starts with sequence i. A producer
// at position p may write slot p & mask when its sequence equals p; it claims p by CAS on
// enqueue_pos_, writes the event and publishes sequence p + 1. The consumer at position q reads
// slot q & mask when its sequence equals q + 1 and frees it by storing q + capacity, the value the
// producer one lap later expects. Sequences are 64-bit, so they never wrap in practice.
// `pushed` is enqueue_pos_ itself (every successful claim advances it by one), so the hot path
// touches no counter besides the position it must CAS anyway.
#include "core/event_channel.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <new>

namespace gpudiag::detail {

Result<std::unique_ptr<EventChannel>> EventChannel::create(std::size_t capacity) noexcept {
    if (capacity < 2 || capacity > kMaxCapacity || (capacity & (capacity - 1)) != 0) {
        return invalid_argument(
            fmt::format("event channel capacity must be a power of two between 2 and {}, got {}",
                        kMaxCapacity, capacity));
    }
    try {
        auto slots = std::make_unique<Slot[]>(capacity);
        for (std::size_t i = 0; i < capacity; ++i) {
            slots[i].sequence.store(i, std::memory_order_relaxed);
        }
        auto batch = std::make_unique<Event[]>(kDrainBatch);
        return std::unique_ptr<EventChannel>(
            new EventChannel(std::move(slots), std::move(batch), capacity));
    } catch (const std::bad_alloc&) {
        return resource_exhausted(
            fmt::format("cannot allocate an event channel of {} events", capacity));
    }
}

EventChannel::EventChannel(std::unique_ptr<Slot[]> slots, std::unique_ptr<Event[]> batch,
                           std::size_t capacity) noexcept
    : slots_(std::move(slots)), batch_(std::move(batch)), mask_(capacity - 1) {}

EventChannel::~EventChannel() = default;

bool EventChannel::try_push(const Event& event) noexcept {
    std::uint64_t pos = enqueue_pos_.load(std::memory_order_relaxed);
    Slot* slot = nullptr;
    for (;;) {
        slot = &slots_[pos & mask_];
        const std::uint64_t seq = slot->sequence.load(std::memory_order_acquire);
        const auto diff = static_cast<std::int64_t>(seq - pos);
        if (diff == 0) {
            // On failure compare_exchange reloads `pos`: another producer took it; retry there.
            if (enqueue_pos_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
                break;
            }
        } else if (diff < 0) {
            // The slot still holds the event from one lap ago: the channel is full.
            dropped_.fetch_add(1, std::memory_order_relaxed);
            note_occupancy(capacity());
            return false;
        } else {
            pos = enqueue_pos_.load(std::memory_order_relaxed);  // we fell behind; catch up
        }
    }
    slot->event = event;
    slot->sequence.store(pos + 1, std::memory_order_release);
    return true;
}

std::size_t EventChannel::drain(EventSink& sink, std::size_t max) {
    std::uint64_t pos = dequeue_pos_.load(std::memory_order_relaxed);
    std::size_t delivered = 0;
    while (delivered < max) {
        note_occupancy(
            static_cast<std::size_t>(enqueue_pos_.load(std::memory_order_relaxed) - pos));
        const std::size_t want = std::min(kDrainBatch, max - delivered);
        std::size_t n = 0;
        while (n < want) {
            Slot& slot = slots_[pos & mask_];
            if (slot.sequence.load(std::memory_order_acquire) != pos + 1)
                break;  // empty/unpublished
            batch_[n++] = slot.event;
            slot.sequence.store(pos + mask_ + 1, std::memory_order_release);
            ++pos;
        }
        if (n == 0) break;
        // Publish before calling the sink so stats stay right if the sink throws.
        dequeue_pos_.store(pos, std::memory_order_relaxed);
        delivered += n;
        sink.consume(std::span<const Event>(batch_.get(), n));
        if (n < want) break;
    }
    return delivered;
}

void EventChannel::note_occupancy(std::size_t occupancy) noexcept {
    std::uint64_t seen = high_water_.load(std::memory_order_relaxed);
    while (occupancy > seen &&
           !high_water_.compare_exchange_weak(seen, occupancy, std::memory_order_relaxed)) {
    }
}

ChannelStats EventChannel::stats() const noexcept {
    ChannelStats s;
    s.capacity = capacity();
    s.pushed = enqueue_pos_.load(std::memory_order_relaxed);
    s.dropped = dropped_.load(std::memory_order_relaxed);
    s.drained = dequeue_pos_.load(std::memory_order_relaxed);
    s.high_water = static_cast<std::size_t>(high_water_.load(std::memory_order_relaxed));
    s.occupancy = static_cast<std::size_t>(s.pushed > s.drained ? s.pushed - s.drained : 0);
    return s;
}

}  // namespace gpudiag::detail
