// SPDX-License-Identifier: Apache-2.0
// LaunchTable: correlation id -> start of the API call that launched the GPU work.
//
// Every runtime call of a trace goes in (tens of thousands per second of profile) and every
// kernel, copy and memset looks its launch up. A node-based map allocates, and later frees, one
// node per call; this flat open-addressing table (linear probing, Fibonacci hashing, at most half
// full) allocates only when it doubles.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpudiag::detail {

class LaunchTable {
public:
    /// Records (or replaces) the launch of `correlation`; 0 is reserved and ignored.
    /// Throws std::bad_alloc.
    void put(std::uint32_t correlation, std::uint64_t start) {
        if (correlation == 0) return;
        if (slots_.empty()) {
            rehash(kInitialSlots);
        } else if ((used_ + 1) * 2 > slots_.size()) {
            rehash(slots_.size() * 2);
        }
        Slot& s = probe(correlation);
        if (s.key == 0) {
            s.key = correlation;
            ++used_;
        }
        s.start = start;
    }

    /// The launch start of `correlation`, when recorded.
    [[nodiscard]] bool find(std::uint32_t correlation, std::uint64_t& start) const noexcept {
        if (correlation == 0 || slots_.empty()) return false;
        const std::size_t mask = slots_.size() - 1;
        for (std::size_t i = home(correlation);; i = (i + 1) & mask) {
            const Slot& s = slots_[i];
            if (s.key == correlation) {
                start = s.start;
                return true;
            }
            if (s.key == 0) return false;
        }
    }

    /// Forgets launches that started before `cutoff`. Throws std::bad_alloc.
    void drop_older_than(std::uint64_t cutoff) {
        std::vector<Slot> old;
        old.swap(slots_);
        std::size_t keep = 0;
        for (const Slot& s : old) keep += s.key != 0 && s.start >= cutoff ? 1 : 0;
        std::size_t size = kInitialSlots;
        while (keep * 2 > size) size *= 2;
        slots_.assign(size, Slot{});
        set_shift(size);
        used_ = 0;
        for (const Slot& s : old) {
            if (s.key == 0 || s.start < cutoff) continue;
            probe(s.key) = s;
            ++used_;
        }
    }

    [[nodiscard]] std::size_t size() const noexcept { return used_; }

private:
    static constexpr std::size_t kInitialSlots = 4096;

    struct Slot {
        std::uint64_t start = 0;
        std::uint32_t key = 0;  // 0: empty
    };

    [[nodiscard]] std::size_t home(std::uint32_t key) const noexcept {
        return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
    }

    // The slot holding `key`, or the empty slot where it belongs.
    Slot& probe(std::uint32_t key) noexcept {
        const std::size_t mask = slots_.size() - 1;
        std::size_t i = home(key);
        while (slots_[i].key != 0 && slots_[i].key != key) i = (i + 1) & mask;
        return slots_[i];
    }

    void set_shift(std::size_t size) noexcept {
        unsigned bits = 0;
        while ((std::size_t{1} << bits) < size) ++bits;
        shift_ = 64 - bits;
    }

    void rehash(std::size_t size) {
        std::vector<Slot> old(size);
        old.swap(slots_);
        set_shift(size);
        for (const Slot& s : old) {
            if (s.key != 0) probe(s.key) = s;
        }
    }

    std::vector<Slot> slots_;
    std::size_t used_ = 0;
    unsigned shift_ = 64;
};

}  // namespace gpudiag::detail
