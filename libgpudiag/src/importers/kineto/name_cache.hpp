// SPDX-License-Identifier: Apache-2.0
// NameCache: a small direct-mapped cache in front of a StringTable for one import.
//
// A trace repeats a few hundred names (operators, kernels, runtime calls) across hundreds of
// thousands of events. StringTable::intern takes a lock and hashes the whole string every time;
// here a repeat costs a hash of three 8-byte words and one comparison. A slot collision only costs
// a call to the table, so results are the table's own ids either way.
#pragma once

#include <gpudiag/string_table.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace gpudiag::detail {

class NameCache {
public:
    /// Throws std::bad_alloc (the slots live on the heap: importers may run on small stacks).
    explicit NameCache(StringTable& strings) : strings_(strings), slots_(kSlots) {}

    StringId intern(std::string_view text) noexcept {
        if (text.empty()) return kNoString;
        Slot& slot = slots_[slot_of(text)];
        if (slot.id != kNoString && slot.text == text) return slot.id;
        StringId id = strings_.intern(text);
        // The overflow id stands for many strings: caching it under one text would be wrong.
        if (id != StringTable::kOverflowString) slot = Slot{strings_.lookup(id), id};
        return id;
    }

private:
    static constexpr std::size_t kSlots = 1024;

    struct Slot {
        std::string_view text;  // the table's copy: stable for the table's lifetime
        StringId id = kNoString;
    };

    static std::uint64_t word_at(std::string_view s, std::size_t at) noexcept {
        std::uint64_t w = 0;
        std::memcpy(&w, s.data() + at, std::min<std::size_t>(8, s.size() - at));
        return w;
    }

    // Names share long prefixes ("aten::", "void at::native::"): mix the first, middle and last
    // words with the length.
    static std::size_t slot_of(std::string_view s) noexcept {
        std::size_t n = s.size();
        std::uint64_t h = word_at(s, 0) * 0x9E3779B97F4A7C15ull;
        h ^= word_at(s, n / 2) * 0xC2B2AE3D27D4EB4Full;
        h ^= word_at(s, n > 8 ? n - 8 : 0) * 0x165667B19E3779F9ull;
        h ^= n;
        h ^= h >> 29;
        return static_cast<std::size_t>(h * 0xBF58476D1CE4E5B9ull >> 54) & (kSlots - 1);
    }

    StringTable& strings_;
    std::vector<Slot> slots_;
};

}  // namespace gpudiag::detail
