// SPDX-License-Identifier: Apache-2.0
// ActivityBufferPool: the memory CUPTI writes activity records into.
//
// CUPTI asks for a buffer on the application thread that produced the first record
// (bufferRequested), so acquire() never allocates: it pops a pre-allocated buffer, or returns
// null, which makes CUPTI drop (and count) the records. Growth up to the cap happens only in
// top_up(), on gpudiag's control thread. Buffers are recycled as they are: CUPTI zeroes a buffer
// before filling it, since gpudiag never sets ZEROED_OUT_ACTIVITY_BUFFER (that attribute is
// process-wide and would also skip the zeroing of other clients' buffers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace gpudiag::detail {

class ActivityBufferPool {
public:
    /// `buffer_bytes` per buffer; `initial` allocated by top_up() first; never more than `cap`.
    ActivityBufferPool(std::size_t buffer_bytes, std::size_t initial, std::size_t cap) noexcept;
    ~ActivityBufferPool();
    ActivityBufferPool(const ActivityBufferPool&) = delete;
    ActivityBufferPool& operator=(const ActivityBufferPool&) = delete;

    /// A free buffer, or null when none is free (counted in declined()).
    /// Thread-safety: safe. Callback-safe: yes (short lock, no allocation).
    std::uint8_t* acquire() noexcept;
    /// Returns a buffer from acquire(). Buffers this pool did not hand out are ignored (returns
    /// false). Thread-safety: safe.
    bool release(std::uint8_t* buffer) noexcept;
    /// Allocates until `low_water` buffers are free or the cap is reached (control thread).
    /// Lost buffers do not count toward the cap, but the pool never holds more than twice it.
    void top_up(std::size_t low_water) noexcept;
    /// After a forced flush every buffer CUPTI held for gpudiag should be back; those still out
    /// went to another client's callbacks (which registered over gpudiag's) and will not come
    /// back: they stop counting as outstanding. Returns how many.
    std::size_t mark_outstanding_lost() noexcept;
    /// Frees every buffer that is free now, keeping those CUPTI still holds.
    void trim() noexcept;

    [[nodiscard]] std::size_t buffer_bytes() const noexcept { return buffer_bytes_; }
    [[nodiscard]] bool owns(const std::uint8_t* buffer) const noexcept;
    [[nodiscard]] std::size_t allocated() const noexcept;
    [[nodiscard]] std::size_t outstanding() const noexcept;  ///< handed to CUPTI, not back yet
    [[nodiscard]] std::size_t free_count() const noexcept;
    [[nodiscard]] std::size_t lost() const noexcept;  ///< handed to another client by CUPTI
    [[nodiscard]] std::uint64_t declined() const noexcept;

private:
    enum class SlotState : std::uint8_t { kFree, kOut, kLost };
    struct Slot {
        std::uint8_t* data;
        SlotState state;
    };
    [[nodiscard]] std::size_t count(SlotState state) const noexcept;  // mutex_ held
    const std::size_t buffer_bytes_;
    const std::size_t initial_;
    const std::size_t cap_;
    mutable std::mutex mutex_;
    std::vector<Slot> slots_;  // reserved to twice `cap_` up front: never reallocates in acquire()
    std::uint64_t declined_ = 0;
};

}  // namespace gpudiag::detail
