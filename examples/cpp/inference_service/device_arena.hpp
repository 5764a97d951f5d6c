// SPDX-License-Identifier: Apache-2.0
// DeviceArena: the kind of caching allocator inference services keep: one large cudaMalloc'd
// segment (DeviceMemory: simulated without a GPU) carved first-fit into blocks. It reports its
// segment and blocks to gpudiag through Session::record, so gpudiag sees the framework-level view
// (blocks, free holes, failed requests) exactly as it sees PyTorch's caching allocator.
#pragma once

#include "device_memory.hpp"

#include <gpudiag/session.hpp>

#include <cstdint>
#include <iterator>
#include <map>

class DeviceArena {
public:
    DeviceArena(gpudiag::Session& session, DeviceMemory& memory, std::size_t bytes)
        : session_(session), memory_(memory) {
        base_ = memory_.reserve(bytes);
        if (base_ == nullptr) return;
        size_ = bytes;
        free_[address(0)] = bytes;
        emit(gpudiag::EventKind::kSegmentAlloc, address(0), bytes, bytes,
             "DeviceArena::DeviceArena");
        memory_.report(base_, bytes, "DeviceArena::DeviceArena");
    }
    ~DeviceArena() {
        if (base_ != nullptr) {
            emit(gpudiag::EventKind::kSegmentFree, address(0), size_, size_,
                 "DeviceArena::~DeviceArena");
            memory_.release(base_);
        }
    }
    DeviceArena(const DeviceArena&) = delete;
    DeviceArena& operator=(const DeviceArena&) = delete;

    [[nodiscard]] bool ok() const { return base_ != nullptr; }

    /// First fit, rounded to 2 MiB like large blocks in PyTorch. nullptr (and an out-of-memory
    /// event for gpudiag) when no hole is large enough.
    void* allocate(std::size_t requested, const char* site) {
        std::size_t bytes = (requested + kAlign - 1) / kAlign * kAlign;
        for (auto it = free_.begin(); it != free_.end(); ++it) {
            if (it->second < bytes) continue;
            std::uint64_t at = it->first;
            std::size_t left = it->second - bytes;
            free_.erase(it);
            if (left > 0) free_[at + bytes] = left;
            used_[at] = bytes;
            emit(gpudiag::EventKind::kBlockAlloc, at, bytes, requested, site);
            return reinterpret_cast<void*>(at);
        }
        gpudiag::Event oom;
        oom.kind = gpudiag::EventKind::kOutOfMemory;
        oom.device = 0;
        oom.oom.requested_bytes = bytes;
        oom.oom.free_bytes = free_bytes();
        oom.oom.total_bytes = size_;
        oom.oom.site = session_.intern(site);
        session_.record(oom);
        return nullptr;
    }

    void release(void* p, const char* site) {
        auto it = used_.find(reinterpret_cast<std::uint64_t>(p));
        if (it == used_.end()) return;
        std::uint64_t at = it->first;
        std::size_t bytes = it->second;
        used_.erase(it);
        emit(gpudiag::EventKind::kBlockFree, at, bytes, bytes, site);
        // Coalesce with the neighbouring holes.
        auto next = free_.lower_bound(at);
        if (next != free_.end() && next->first == at + bytes) {
            bytes += next->second;
            next = free_.erase(next);
        }
        if (next != free_.begin()) {
            auto prev = std::prev(next);
            if (prev->first + prev->second == at) {
                prev->second += bytes;
                return;
            }
        }
        free_[at] = bytes;
    }

    [[nodiscard]] std::size_t free_bytes() const {
        std::size_t total = 0;
        for (const auto& [at, bytes] : free_) total += bytes;
        return total;
    }

private:
    static constexpr std::size_t kAlign = std::size_t{2} << 20;

    std::uint64_t address(std::size_t offset) const {
        return reinterpret_cast<std::uint64_t>(base_) + offset;
    }

    void emit(gpudiag::EventKind kind, std::uint64_t at, std::size_t bytes, std::size_t requested,
              const char* site) {
        gpudiag::Event e;
        e.kind = kind;
        e.device = 0;
        e.flags = static_cast<std::uint8_t>(gpudiag::MemoryKind::kDevice);
        e.memory.address = at;
        e.memory.bytes = bytes;
        e.memory.aux = requested;
        e.memory.site = session_.intern(site);
        session_.record(e);
    }

    gpudiag::Session& session_;
    DeviceMemory& memory_;
    void* base_ = nullptr;
    std::size_t size_ = 0;
    std::map<std::uint64_t, std::size_t> free_;  // address -> bytes
    std::map<std::uint64_t, std::size_t> used_;
};
