// SPDX-License-Identifier: Apache-2.0
// LaunchTable: correlation id -> start of the API call that launched the GPU work.
//
// Every runtime call of a trace goes in (tens of thousands per second of profile) and every
// kernel, copy and memset looks its launch up. A node-based map allocates, and later frees, one
// node per call; this flat open-addressing table (linear probing, at most half full) allocates
// only when it doubles. Correlation ids count up, so ids are placed in blocks of eight
// neighbours (two cache lines), the blocks scattered by Fibonacci hashing: a run of calls and the
// kernels they launch then touch one block, where scattering every id would miss the cache on
// almost every call. Ids that pile up on one slot (a hostile or odd trace) make probes run long;
// the table then scatters every id for good.
#pragma once

#include <algorithm>
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
        std::size_t steps = 0;
        Slot& s = probe(correlation, steps);
        if (s.key == 0) {
            s.key = correlation;
            ++used_;
        }
        s.start = start;
        oldest_ = std::min(oldest_, start);
        if ((steps > kLongProbe || long_probe_seen_) && !scrambled_) {
            scrambled_ = true;
            rehash(slots_.size());
        }
    }

    /// The launch start of `correlation`, when recorded.
    /// (Not const: a long search is remembered, and the next put() then rehashes.)
    [[nodiscard]] bool find(std::uint32_t correlation, std::uint64_t& start) noexcept {
        if (correlation == 0 || slots_.empty()) return false;
        const std::size_t mask = slots_.size() - 1;
        std::size_t steps = 0;
        for (std::size_t i = home(correlation);; i = (i + 1) & mask, ++steps) {
            const Slot& s = slots_[i];
            if (s.key == correlation || s.key == 0) {
                if (steps > kLongProbe) long_probe_seen_ = true;
                if (s.key == 0) return false;
                start = s.start;
                return true;
            }
        }
    }

    /// Forgets launches that started before `cutoff`. Throws std::bad_alloc.
    void drop_older_than(std::uint64_t cutoff) {
        // Nothing that old: no rebuild, which would hold the table twice for nothing (in a run
        // shorter than the horizon, every call).
        if (oldest_ >= cutoff) return;
        std::vector<Slot> old;
        old.swap(slots_);
        std::size_t keep = 0;
        for (const Slot& s : old) keep += s.key != 0 && s.start >= cutoff ? 1 : 0;
        std::size_t size = kInitialSlots;
        while (keep * 2 > size) size *= 2;
        slots_.assign(size, Slot{});
        set_shift(size);
        used_ = 0;
        oldest_ = UINT64_MAX;
        for (const Slot& s : old) {
            if (s.key == 0 || s.start < cutoff) continue;
            std::size_t steps = 0;
            probe(s.key, steps) = s;
            ++used_;
            oldest_ = std::min(oldest_, s.start);
        }
    }

    [[nodiscard]] std::size_t size() const noexcept { return used_; }

private:
    static constexpr std::size_t kInitialSlots = 4096;
    static constexpr std::size_t kLongProbe = 32;  // slots; a well-spread table needs 1 or 2

    struct Slot {
        std::uint64_t start = 0;
        std::uint32_t key = 0;  // 0: empty
    };

    static constexpr std::uint64_t kFibonacci = 0x9E3779B97F4A7C15ull;  // 2^64 / golden ratio

    [[nodiscard]] std::size_t home(std::uint32_t key) const noexcept {
        if (scrambled_) return static_cast<std::size_t>((key * kFibonacci) >> shift_);
        auto block = static_cast<std::size_t>(((key >> 3) * kFibonacci) >> shift_);
        return (block & ~std::size_t{7}) | (key & 7u);
    }

    // The slot holding `key`, or the empty slot where it belongs; `steps` counts the slots passed.
    Slot& probe(std::uint32_t key, std::size_t& steps) noexcept {
        const std::size_t mask = slots_.size() - 1;
        std::size_t i = home(key);
        while (slots_[i].key != 0 && slots_[i].key != key) {
            i = (i + 1) & mask;
            ++steps;
        }
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
        std::size_t steps = 0;
        for (const Slot& s : old) {
            if (s.key != 0) probe(s.key, steps) = s;
        }
    }

    std::vector<Slot> slots_;
    std::size_t used_ = 0;
    std::uint64_t oldest_ = UINT64_MAX;  // at most the oldest start held (replaced ones linger)
    unsigned shift_ = 64;
    bool scrambled_ = false;
    bool long_probe_seen_ = false;
};

}  // namespace gpudiag::detail
