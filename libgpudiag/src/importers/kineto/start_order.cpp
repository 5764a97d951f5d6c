// SPDX-License-Identifier: Apache-2.0
// A trace holds one time-ordered run per thread and per stream, written one after another, so its
// events are far from sorted (the corpus' largest trace has some 22k descending steps in 216k
// events) yet span a short time. Each event's start, relative to the earliest, and its index are
// packed into one 64-bit key; a least-significant-digit radix sort over the start bits alone is
// stable by construction, and the sorted keys then say which event goes where.
#include "importers/kineto/start_order.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>

namespace gpudiag::detail {
namespace {

constexpr unsigned kMaxDigitBits = 12;  // 4096 counters of 4 bytes: 16 KiB, cache resident

// Stable LSD radix sort of `keys` on bits [low, low + width), using `scratch` (same size), in as
// few passes as digits of at most kMaxDigitBits allow.
void radix_sort(std::vector<std::uint64_t>& keys, std::vector<std::uint64_t>& scratch, unsigned low,
                unsigned width) {
    const unsigned passes = (width + kMaxDigitBits - 1) / kMaxDigitBits;
    const unsigned digit_bits = (width + passes - 1) / passes;
    const std::size_t buckets = std::size_t{1} << digit_bits;
    const std::uint64_t digit_mask = buckets - 1;
    std::vector<std::uint32_t> counts(passes * buckets, 0);
    for (std::uint64_t k : keys) {
        for (unsigned p = 0; p < passes; ++p) {
            ++counts[p * buckets + ((k >> (low + p * digit_bits)) & digit_mask)];
        }
    }
    const auto n = static_cast<std::uint32_t>(keys.size());
    for (unsigned p = 0; p < passes; ++p) {
        std::uint32_t* c = counts.data() + p * buckets;
        // A digit every key shares moves nothing.
        if (std::find(c, c + buckets, n) != c + buckets) continue;
        std::uint32_t sum = 0;
        for (std::size_t b = 0; b < buckets; ++b) {
            std::uint32_t here = c[b];
            c[b] = sum;
            sum += here;
        }
        const unsigned shift = low + p * digit_bits;
        for (std::uint64_t k : keys) scratch[c[(k >> shift) & digit_mask]++] = k;
        keys.swap(scratch);
    }
}

}  // namespace

std::vector<std::uint64_t> start_order(std::span<const Event> events) {
    const std::size_t n = events.size();
    if (n < 2) return {};
    bool in_order = true;
    std::uint64_t lo = events[0].start_ns;
    std::uint64_t hi = lo;
    for (std::size_t i = 1; i < n; ++i) {
        std::uint64_t s = events[i].start_ns;
        in_order = in_order && s >= events[i - 1].start_ns;
        lo = std::min(lo, s);
        hi = std::max(hi, s);
    }
    if (in_order) return {};

    const auto index_bits = static_cast<unsigned>(std::bit_width(n - 1));
    const auto start_bits = static_cast<unsigned>(std::bit_width(hi - lo));
    const std::uint64_t index_mask = (std::uint64_t{1} << index_bits) - 1;
    std::vector<std::uint64_t> keys(n);
    if (index_bits + start_bits <= 64 && n <= UINT32_MAX) {  // (counts are 32-bit)
        for (std::size_t i = 0; i < n; ++i) keys[i] = ((events[i].start_ns - lo) << index_bits) | i;
        std::vector<std::uint64_t> scratch(n);
        radix_sort(keys, scratch, index_bits, start_bits);
        for (auto& k : keys) k &= index_mask;
    } else {
        // Starts too far apart to pack (a stray timestamp): sort (start, index) pairs.
        std::vector<std::pair<std::uint64_t, std::uint64_t>> pairs(n);
        for (std::size_t i = 0; i < n; ++i) pairs[i] = {events[i].start_ns, i};
        std::sort(pairs.begin(), pairs.end());  // ties broken by index: stable
        for (std::size_t i = 0; i < n; ++i) keys[i] = pairs[i].second;
    }
    return keys;
}

void sort_by_start(std::vector<Event>& events) {
    std::vector<std::uint64_t> order = start_order(events);
    if (order.empty()) return;
    // Gathering into a new vector beats following permutation cycles in place: its loads are
    // independent, so their cache misses overlap instead of queueing one behind the other.
    std::vector<Event> sorted;
    sorted.reserve(events.size());
    for (std::uint64_t k : order) sorted.push_back(events[static_cast<std::size_t>(k)]);
    events.swap(sorted);
}

}  // namespace gpudiag::detail
