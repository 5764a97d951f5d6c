// SPDX-License-Identifier: Apache-2.0
// ActivityBufferPool. CUPTI requires 8-byte aligned buffers (ACTIVITY_RECORD_ALIGNMENT);
// calloc gives 16.
#include "capture/activity_buffer_pool.hpp"

#include <cstdlib>
#include <cstring>

namespace gpudiag::detail {

ActivityBufferPool::ActivityBufferPool(std::size_t buffer_bytes, std::size_t initial,
                                       std::size_t cap) noexcept
    : buffer_bytes_(buffer_bytes), initial_(initial < cap ? initial : cap), cap_(cap) {
    try {
        slots_.reserve(cap_);
    } catch (...) {
    }
}

ActivityBufferPool::~ActivityBufferPool() {
    // Only buffers CUPTI gave back are freed; one it still holds would be written to later.
    for (Slot& s : slots_) {
        if (s.free) std::free(s.data);
    }
}

std::uint8_t* ActivityBufferPool::acquire() noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Slot& s : slots_) {
        if (s.free) {
            s.free = false;
            return s.data;
        }
    }
    ++declined_;
    return nullptr;
}

bool ActivityBufferPool::release(std::uint8_t* buffer, std::size_t used) noexcept {
    if (buffer == nullptr) return false;
    if (!owns(buffer)) return false;
    // Zero all of it, outside the lock (the buffer is ours alone until it is marked free):
    // CUPTI may have written past `used` (a reserved tail, an abandoned record), and whoever
    // relies on zeroed buffers relies on every byte. ~30 us a MiB, on the control thread.
    (void)used;
    std::memset(buffer, 0, buffer_bytes_);
    std::lock_guard<std::mutex> lock(mutex_);
    for (Slot& s : slots_) {
        if (s.data == buffer) {
            s.free = true;
            return true;
        }
    }
    return false;
}

void ActivityBufferPool::top_up(std::size_t low_water) noexcept {
    std::size_t want = low_water;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        std::size_t free_count = 0;
        for (const Slot& s : slots_) free_count += s.free ? 1 : 0;
        if (slots_.size() < initial_ && initial_ - slots_.size() > want) {
            want = initial_ - slots_.size();
        } else {
            want = free_count >= low_water ? 0 : low_water - free_count;
        }
        if (slots_.size() + want > cap_) want = cap_ - slots_.size();
    }
    for (std::size_t i = 0; i < want; ++i) {
        auto* data = static_cast<std::uint8_t*>(std::calloc(1, buffer_bytes_));
        if (data == nullptr) return;
        std::lock_guard<std::mutex> lock(mutex_);
        if (slots_.size() >= cap_) {
            std::free(data);
            return;
        }
        slots_.push_back(Slot{data, true});
    }
}

void ActivityBufferPool::trim() noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    std::size_t kept = 0;
    for (Slot& s : slots_) {
        if (s.free) {
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
    std::size_t n = 0;
    for (const Slot& s : slots_) n += s.free ? 0 : 1;
    return n;
}

std::uint64_t ActivityBufferPool::declined() const noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    return declined_;
}

}  // namespace gpudiag::detail
