// SPDX-License-Identifier: Apache-2.0
// AddressMap: small values by address, open addressing with linear probing and backward-shift
// deletion: the per-address bookkeeping of a trace of millions of entries without a heap node
// (and a cache miss to reach it) per address. Any 64-bit key, 0 included.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace gpudiag::detail {

template <typename V>
class AddressMap {
public:
    [[nodiscard]] std::size_t size() const noexcept { return size_; }

    /// The value at `key`, value-initialized when it is new (`.second` tells).
    std::pair<V*, bool> try_emplace(std::uint64_t key) {
        if ((size_ + 1) * 4 > slots_.size() * 3) grow();
        for (std::size_t i = home(key);; i = (i + 1) & mask()) {
            Slot& s = slots_[i];
            if (!s.used) {
                s = Slot{key, V{}, true};
                ++size_;
                return {&s.value, true};
            }
            if (s.key == key) return {&s.value, false};
        }
    }
    V& operator[](std::uint64_t key) { return *try_emplace(key).first; }

    [[nodiscard]] V* find(std::uint64_t key) noexcept {
        return const_cast<V*>(static_cast<const AddressMap*>(this)->find(key));
    }
    [[nodiscard]] const V* find(std::uint64_t key) const noexcept {
        if (size_ == 0) return nullptr;
        for (std::size_t i = home(key);; i = (i + 1) & mask()) {
            const Slot& s = slots_[i];
            if (!s.used) return nullptr;
            if (s.key == key) return &s.value;
        }
    }
    [[nodiscard]] bool contains(std::uint64_t key) const noexcept { return find(key) != nullptr; }

    /// Asks for the memory where a lookup of `key` starts (a hint: nothing changes).
    void prefetch(std::uint64_t key) const noexcept {
        if (!slots_.empty()) __builtin_prefetch(&slots_[home(key)]);
    }

    /// Removes `key`; false when it was absent.
    bool erase(std::uint64_t key) noexcept {
        if (size_ == 0) return false;
        std::size_t i = home(key);
        for (;; i = (i + 1) & mask()) {
            if (!slots_[i].used) return false;
            if (slots_[i].key == key) break;
        }
        // Backward shift: pull later members of the probe run into the hole, so lookups never
        // need tombstones.
        for (std::size_t j = (i + 1) & mask();; j = (j + 1) & mask()) {
            if (!slots_[j].used) break;
            const std::size_t h = home(slots_[j].key);
            const bool movable = i <= j ? (h <= i || h > j) : (h <= i && h > j);
            if (movable) {
                slots_[i] = slots_[j];
                i = j;
            }
        }
        slots_[i].used = false;
        --size_;
        return true;
    }

    void clear() noexcept {
        slots_ = {};
        size_ = 0;
        shift_ = 64;
    }

    /// Calls f(key, value) for every entry, in no particular order.
    template <typename F>
    void for_each(F&& f) const {
        for (const Slot& s : slots_) {
            if (s.used) f(s.key, s.value);
        }
    }

private:
    struct Slot {
        std::uint64_t key = 0;
        V value{};
        bool used = false;
    };

    [[nodiscard]] std::size_t mask() const noexcept { return slots_.size() - 1; }
    // Fibonacci hashing: addresses are aligned, and the product's top bits mix all of theirs.
    [[nodiscard]] std::size_t home(std::uint64_t key) const noexcept {
        return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
    }
    void grow() {
        std::vector<Slot> old = std::move(slots_);
        slots_ = std::vector<Slot>(old.empty() ? 64 : old.size() * 2);
        shift_ = 64;
        for (std::size_t n = slots_.size(); n > 1; n >>= 1) --shift_;
        size_ = 0;
        for (const Slot& s : old) {
            if (s.used) *try_emplace(s.key).first = s.value;
        }
    }

    std::vector<Slot> slots_;
    std::size_t size_ = 0;
    unsigned shift_ = 64;
};

}  // namespace gpudiag::detail
