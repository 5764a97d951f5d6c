// SPDX-License-Identifier: Apache-2.0
#include "recording/window_state.hpp"

#include <algorithm>
#include <array>
#include <utility>

namespace gpudiag::detail {
namespace {

// Each allocating kind with the kind that releases what it made.
constexpr std::array<std::pair<EventKind, EventKind>, 7> kFamilies{{
    {EventKind::kDeviceAlloc, EventKind::kDeviceFree},
    {EventKind::kPoolAlloc, EventKind::kPoolFree},
    {EventKind::kVmMap, EventKind::kVmUnmap},
    {EventKind::kSegmentAlloc, EventKind::kSegmentFree},
    {EventKind::kBlockAlloc, EventKind::kBlockFree},
    {EventKind::kHostAlloc, EventKind::kHostFree},
    {EventKind::kManagedAlloc, EventKind::kManagedFree},
}};
constexpr std::uint8_t kNotMemory = 0xFF;

// The family of a memory event and whether it allocates.
std::pair<std::uint8_t, bool> family_of(EventKind kind) {
    for (std::size_t i = 0; i < kFamilies.size(); ++i) {
        if (kFamilies[i].first == kind) return {static_cast<std::uint8_t>(i), true};
        if (kFamilies[i].second == kind) return {static_cast<std::uint8_t>(i), false};
    }
    return {kNotMemory, false};
}

// Device memory the process holds by itself: driver allocations, mappings and a framework's
// segments (its blocks live inside the segments; pools are counted by their resizes).
bool holds_device_memory(EventKind kind) {
    return kind == EventKind::kDeviceAlloc || kind == EventKind::kVmMap ||
           kind == EventKind::kSegmentAlloc;
}

// Levels that are keyed by kind rather than by counter: a pool's reserved size.
constexpr std::uint16_t kPoolLevel = 0x8000;

std::uint64_t time_of(const Event& e) {
    return e.start_ns != 0 ? e.start_ns : e.end_ns;
}

}  // namespace

std::size_t WindowState::LiveKeyHash::operator()(const LiveKey& k) const noexcept {
    std::uint64_t h = k.address * 0x9E3779B97F4A7C15ull;
    h ^= (std::uint64_t{k.family} << 16 | k.device) + 0x632BE59BD9B4E019ull + (h << 6) + (h >> 2);
    return static_cast<std::size_t>(h);
}

void WindowState::observe(std::span<const Event> events) {
    for (const Event& e : events) {
        if (e.kind == EventKind::kCounter || e.kind == EventKind::kPoolResize) {
            sampled(e);
            continue;
        }
        const auto [family, allocates] = family_of(e.kind);
        if (family == kNotMemory) continue;
        if (allocates) {
            allocated(e, family);
        } else {
            freed(e, family);
        }
    }
}

void WindowState::allocated(const Event& e, std::uint8_t family) {
    if (e.memory.address == 0) {
        ++unaddressed_;  // a framework that gives no address: its frees cannot be matched
        return;
    }
    const LiveKey key{family, e.device, e.memory.address};
    if (auto it = live_.find(key); it != live_.end()) {
        it->second = e;  // an address reused without a free we saw: the newest holds it
        return;
    }
    if (live_.size() < kMaxLiveAllocations) {
        live_.emplace(key, e);
        return;
    }
    ++summed_;
    auto [it, fresh] = sums_.try_emplace(SumKey{family, e.device, e.memory.site}, e);
    if (fresh) {
        it->second.memory.address = 0;
        it->second.memory.aux = 0;
        it->second.flags = static_cast<std::uint8_t>(e.flags | kEventFlagSynthetic);
        return;
    }
    it->second.memory.bytes += e.memory.bytes;
}

void WindowState::freed(const Event& e, std::uint8_t family) {
    // A block the program freed stays the allocator's until its streams catch up.
    if ((e.flags & kEventFlagPendingFree) != 0 && e.kind == EventKind::kBlockFree) return;
    if (live_.erase(LiveKey{family, e.device, e.memory.address}) > 0 || sums_.empty()) return;
    auto it = sums_.find(SumKey{family, e.device, e.memory.site});
    if (it == sums_.end()) return;
    Event& sum = it->second;
    sum.memory.bytes -= std::min(sum.memory.bytes, e.memory.bytes);
    if (sum.memory.bytes == 0) sums_.erase(it);
}

void WindowState::sampled(const Event& e) {
    if (e.kind == EventKind::kCounter && e.counter.counter == CounterKind::kXidError) {
        xids_.push_back(e);
        if (xids_.size() > kMaxXids) xids_.pop_front();
        return;
    }
    const bool per_process =
        e.kind == EventKind::kCounter && e.counter.counter == CounterKind::kOtherProcessMemoryBytes;
    const LevelKey key{e.device,
                       e.kind == EventKind::kPoolResize
                           ? kPoolLevel
                           : static_cast<std::uint16_t>(e.counter.counter),
                       per_process ? e.process : 0u};
    if (auto it = levels_.find(key); it != levels_.end()) {
        it->second = e;
    } else if (levels_.size() < kMaxLevels) {
        levels_.emplace(key, e);
    }
}

std::vector<Event> WindowState::events() const {
    std::vector<Event> out;
    out.reserve(live_.size() + sums_.size() + levels_.size() + xids_.size());
    for (const auto& [key, e] : live_) out.push_back(e);
    for (const auto& [key, e] : sums_) out.push_back(e);
    for (const auto& [key, e] : levels_) out.push_back(e);
    out.insert(out.end(), xids_.begin(), xids_.end());
    std::stable_sort(out.begin(), out.end(),
                     [](const Event& a, const Event& b) { return time_of(a) < time_of(b); });
    return out;
}

WindowState::Totals WindowState::totals() const {
    Totals t;
    t.allocations = live_.size();
    for (const auto& [key, e] : live_) {
        if (holds_device_memory(e.kind)) t.bytes += e.memory.bytes;
    }
    for (const auto& [key, e] : sums_) {
        if (holds_device_memory(e.kind)) t.bytes += e.memory.bytes;
    }
    t.summed = summed_;
    t.levels = levels_.size() + xids_.size();
    t.unaddressed = unaddressed_;
    return t;
}

}  // namespace gpudiag::detail
