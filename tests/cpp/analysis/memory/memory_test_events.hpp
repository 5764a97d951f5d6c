// SPDX-License-Identifier: Apache-2.0
// Event builders and a tiny caching-allocator model for the memory tests.
#pragma once

#include <gpudiag/event.hpp>

#include <cstdint>
#include <map>
#include <vector>

namespace gpudiag::testing {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

inline Event mem(EventKind kind, std::uint64_t t, std::uint64_t addr, std::uint64_t bytes,
                 StringId site = kNoString, std::uint16_t device = 0, std::uint8_t flags = 0) {
    Event e;
    e.kind = kind;
    e.device = device;
    e.start_ns = e.end_ns = t;
    e.flags = flags;
    e.memory.address = addr;
    e.memory.bytes = bytes;
    e.memory.site = site;
    return e;
}

inline Event step(EventKind kind, std::uint64_t t, std::uint64_t id) {
    Event e;
    e.kind = kind;
    e.start_ns = e.end_ns = t;
    e.range.id = id;
    e.range.category = RangeCategory::kStep;
    return e;
}

/// Segments are created on demand for each size and never released, and a free block is reused
/// only by a request of the same size: like torch's large pool for fixed tensor shapes.
class CachingModel {
public:
    explicit CachingModel(std::vector<Event>& out) : out_(out) {}

    std::uint64_t alloc(std::uint64_t t, std::uint64_t bytes, StringId site) {
        auto& free_list = free_[bytes];
        std::uint64_t addr;
        if (!free_list.empty()) {
            addr = free_list.back();
            free_list.pop_back();
        } else {
            addr = next_;
            next_ += (bytes + 2 * kMiB - 1) / (2 * kMiB) * (2 * kMiB);
            out_.push_back(mem(EventKind::kSegmentAlloc, t, addr, next_ - addr));
        }
        Event e = mem(EventKind::kBlockAlloc, t, addr, bytes, site);
        e.memory.aux = bytes;
        out_.push_back(e);
        sizes_[addr] = bytes;
        return addr;
    }
    void free(std::uint64_t t, std::uint64_t addr) {
        out_.push_back(mem(EventKind::kBlockFree, t, addr, sizes_[addr]));
        free_[sizes_[addr]].push_back(addr);
    }

private:
    std::vector<Event>& out_;
    std::uint64_t next_ = 0x7f0000000000;
    std::map<std::uint64_t, std::vector<std::uint64_t>> free_;
    std::map<std::uint64_t, std::uint64_t> sizes_;
};

}  // namespace gpudiag::testing
