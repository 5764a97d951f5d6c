// SPDX-License-Identifier: Apache-2.0
// ActivityBufferPool. CUPTI requires 8-byte aligned buffers (ACTIVITY_RECORD_ALIGNMENT);
// calloc gives 16.
#include "capture/cupti/activity_buffer_pool.hpp"

#include <cstdlib>

namespace gpudiag::detail {

ActivityBufferPool::ActivityBufferPool(std::size_t buffer_bytes, std::size_t initial,
                                       std::size_t cap) noexcept
    : buffer_bytes_(buffer_bytes), initial_(initial < cap ? initial : cap), cap_(cap) {
    try {
        slots_.reserve(2 * cap_);
    } catch (...) {
    }
}

ActivityBufferPool::~ActivityBufferPool() {
    // Only buffers CUPTI gave back are freed; one it still holds would be written to later.
    for (Slot& s : slots_) {
        if (s.state == SlotState::kFree) std::free(s.data);
    }
}

std::uint8_t* ActivityBufferPool::acquire() noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Slot& s : slots_) {
        if (s.state == SlotState::kFree) {
            s.state = SlotState::kOut;
            return s.data;
        }
    }
    ++declined_;
    return nullptr;
}

bool ActivityBufferPool::release(std::uint8_t* buffer) noexcept {
    if (buffer == nullptr) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    for (Slot& s : slots_) {
        if (s.data == buffer) {
            s.state = SlotState::kFree;  // a lost buffer that came back after all is free again
            return true;
        }
    }
    return false;
}

std::size_t ActivityBufferPool::count(SlotState state) const noexcept {
    std::size_t n = 0;
    for (const Slot& s : slots_) n += s.state == state ? 1 : 0;
    return n;
}

void ActivityBufferPool::top_up(std::size_t low_water) noexcept {
    std::size_t want = low_water;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        std::size_t live = slots_.size() - count(SlotState::kLost);
        std::size_t free_count = count(SlotState::kFree);
        if (live < initial_ && initial_ - live > want) {
            want = initial_ - live;
        } else {
            want = free_count >= low_water ? 0 : low_water - free_count;
        }
        if (live + want > cap_) want = cap_ - live;
        if (slots_.size() + want > 2 * cap_) want = 2 * cap_ - slots_.size();
    }
    for (std::size_t i = 0; i < want; ++i) {
        auto* data = static_cast<std::uint8_t*>(std::calloc(1, buffer_bytes_));
        if (data == nullptr) return;
        std::lock_guard<std::mutex> lock(mutex_);
        if (slots_.size() >= 2 * cap_) {
            std::free(data);
            return;
        }
        slots_.push_back(Slot{data, SlotState::kFree});
    }
}

std::size_t ActivityBufferPool::mark_outstanding_lost() noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    std::size_t n = 0;
    for (Slot& s : slots_) {
        if (s.state == SlotState::kOut) {
            s.state = SlotState::kLost;
            ++n;
        }
    }
    return n;
}

void ActivityBufferPool::trim() noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    std::size_t kept = 0;
    for (Slot& s : slots_) {
        if (s.state == SlotState::kFree) {
            std::free(s.data);
        } else {
            slots_[kept++] = s;
        }
    }
    slots_.resize(kept);
}

bool ActivityBufferPool::owns(const std::uint8_t* buffer) const noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Slot& s : slots_) {
        if (s.data == buffer) return true;
    }
    return false;
}

std::size_t ActivityBufferPool::allocated() const noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    return slots_.size();
}

std::size_t ActivityBufferPool::outstanding() const noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    return count(SlotState::kOut);
}

std::size_t ActivityBufferPool::free_count() const noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    return count(SlotState::kFree);
}

std::size_t ActivityBufferPool::lost() const noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    return count(SlotState::kLost);
}

std::uint64_t ActivityBufferPool::declined() const noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    return declined_;
}

}  // namespace gpudiag::detail
