// SPDX-License-Identifier: Apache-2.0
// AddressTable: the live allocations of one device, keyed by address, 24 bytes a slot.
//
// Open addressing with linear probing and backward-shift deletion (no tombstones, so a long run
// of alloc/free churn never degrades lookups). The table doubles at load 3/4, so while live
// allocations grow each costs 32-64 bytes; it halves below load 1/4 (at most 96 bytes each
// while shrinking), so a burst does not pin memory. Address 0 marks an empty slot: no device
// allocation lives at address 0, and callers drop events without an address.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

#if defined(__linux__)
#    include <sys/mman.h>
#endif

namespace gpudiag::detail {

/// One live allocation, packed: size in the low 48 bits (256 TiB) with 16 bits of flags above.
struct LiveRecord {
    static constexpr std::uint64_t kSizeMask = (std::uint64_t{1} << 48) - 1;

    std::uint64_t address = 0;
    std::uint64_t size_flags = 0;
    std::uint32_t shortfall = 0;  ///< rounded − requested bytes, saturated at 4 GiB
    std::uint32_t site_slot = 0;  ///< index into the ledger's site table

    [[nodiscard]] std::uint64_t size() const noexcept { return size_flags & kSizeMask; }
    [[nodiscard]] std::uint16_t flags() const noexcept {
        return static_cast<std::uint16_t>(size_flags >> 48);
    }
    void set(std::uint64_t size, std::uint16_t flags) noexcept {
        size_flags = (size & kSizeMask) | (std::uint64_t{flags} << 48);
    }
    void set_flags(std::uint16_t flags) noexcept { set(size(), flags); }
};
static_assert(sizeof(LiveRecord) == 24, "LiveRecord is the per-allocation cost: keep it 24 bytes");

class AddressTable {
public:
    AddressTable() = default;
    AddressTable(const AddressTable&) = delete;
    AddressTable& operator=(const AddressTable&) = delete;
    AddressTable(AddressTable&&) noexcept = default;
    AddressTable& operator=(AddressTable&&) noexcept = default;

    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    [[nodiscard]] std::size_t capacity() const noexcept { return mask_ == 0 ? 0 : mask_ + 1; }
    [[nodiscard]] std::size_t memory_bytes() const noexcept {
        return capacity() * sizeof(LiveRecord);
    }

    /// The record at `address`, or nullptr.
    [[nodiscard]] LiveRecord* find(std::uint64_t address) noexcept {
        if (size_ == 0 || address == 0) return nullptr;
        for (std::size_t i = slot(address);; i = (i + 1) & mask_) {
            if (slots_[i].address == address) return &slots_[i];
            if (slots_[i].address == 0) return nullptr;
        }
    }

    /// Asks the CPU to start loading the cache lines where the probe for `address` begins, so a
    /// later find/insert/erase of it does not stall on memory. A hint: no effect on the contents.
    void prefetch(std::uint64_t address) const noexcept {
        if (mask_ == 0) return;
        const LiveRecord* home = &slots_[slot(address)];
        __builtin_prefetch(home, 1, 3);
        // A record may straddle two lines, and the probe run usually continues into the next.
        __builtin_prefetch(reinterpret_cast<const char*>(home) + 64, 1, 3);
    }

    /// Inserts `record` (address != 0). If the address is present, overwrites it and returns
    /// false with the old record in `replaced`. Throws std::bad_alloc when it cannot grow.
    bool insert(const LiveRecord& record, LiveRecord* replaced = nullptr) {
        if ((size_ + 1) * 4 > capacity() * 3) grow();
        for (std::size_t i = slot(record.address);; i = (i + 1) & mask_) {
            if (slots_[i].address == 0) {
                slots_[i] = record;
                ++size_;
                return true;
            }
            if (slots_[i].address == record.address) {
                if (replaced != nullptr) *replaced = slots_[i];
                slots_[i] = record;
                return false;
            }
        }
    }

    /// Removes the record at `address` into `out`; false when absent.
    bool erase(std::uint64_t address, LiveRecord* out) noexcept {
        if (size_ == 0 || address == 0) return false;
        std::size_t i = slot(address);
        for (;; i = (i + 1) & mask_) {
            if (slots_[i].address == address) break;
            if (slots_[i].address == 0) return false;
        }
        if (out != nullptr) *out = slots_[i];
        // Backward shift: pull later members of the probe run into the hole.
        std::size_t hole = i;
        for (std::size_t j = (i + 1) & mask_; slots_[j].address != 0; j = (j + 1) & mask_) {
            std::size_t home = slot(slots_[j].address);
            // Move j into the hole when its home is not cyclically within (hole, j].
            bool home_in_range =
                hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
            if (!home_in_range) {
                slots_[hole] = slots_[j];
                hole = j;
            }
        }
        slots_[hole] = LiveRecord{};
        --size_;
        if (capacity() > kMinCapacity && size_ * 4 < capacity()) shrink();
        return true;
    }

    /// Calls `fn(const LiveRecord&)` for every record.
    template <typename Fn>
    void for_each(Fn&& fn) const {
        for (std::size_t i = 0; i < capacity(); ++i) {
            if (slots_[i].address != 0) fn(slots_[i]);
        }
    }

    void clear() noexcept {
        slots_.reset();
        mask_ = 0;
        size_ = 0;
    }

private:
    static constexpr std::size_t kMinCapacity = 64;

    [[nodiscard]] std::size_t slot(std::uint64_t address) const noexcept {
        // Fibonacci hashing: device addresses are aligned (low bits zero), so mix before masking.
        return static_cast<std::size_t>((address * 0x9E3779B97F4A7C15ull) >> shift_) & mask_;
    }

    struct FreeSlots {
        void operator()(LiveRecord* p) const noexcept { std::free(p); }
    };
    using Slots = std::unique_ptr<LiveRecord[], FreeSlots>;

    // Slots start cache-line aligned. A table past the TLB's reach (some 2048 pages of 4 KiB) is
    // probed at random, so nearly every probe would also miss the TLB (a page walk costs as much
    // as the cache miss, more under virtualisation): such tables ask for 2 MiB pages (Linux
    // transparent huge pages; only a hint). The alignment wastes up to 2 MiB of address space,
    // under 1/8 of a table that size.
    static Slots allocate(std::size_t count) {
        constexpr std::size_t kHugePage = std::size_t{2} << 20;
        std::size_t bytes = count * sizeof(LiveRecord);
        std::size_t align = bytes >= 8 * kHugePage ? kHugePage : 64;
        bytes = (bytes + align - 1) / align * align;
        void* p = std::aligned_alloc(align, bytes);
        if (p == nullptr) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
        if (align == kHugePage) (void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
        auto* records = static_cast<LiveRecord*>(p);
        for (std::size_t i = 0; i < count; ++i) new (&records[i]) LiveRecord{};
        return Slots(records);
    }

    // Strong guarantee: when the new table cannot be had, the old one stays as it was.
    void rehash(std::size_t new_capacity) {
        Slots fresh = allocate(new_capacity);
        const std::size_t old_capacity = capacity();
        Slots old = std::move(slots_);
        slots_ = std::move(fresh);
        mask_ = new_capacity - 1;
        shift_ = 64;
        for (std::size_t c = new_capacity; c > 1; c >>= 1) --shift_;
        size_ = 0;
        for (std::size_t i = 0; i < old_capacity; ++i) {
            if (old[i].address != 0) insert(old[i]);
        }
    }
    void grow() {
        rehash(capacity() == 0 ? kMinCapacity : capacity() * 2);
    }
    void shrink() {
        try {
            rehash(capacity() / 2);
        } catch (const std::bad_alloc&) {
            // Keeping the larger table is always correct.
        }
    }

    Slots slots_;
    std::size_t mask_ = 0;
    unsigned shift_ = 64;
    std::size_t size_ = 0;
};

}  // namespace gpudiag::detail
