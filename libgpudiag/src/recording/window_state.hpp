// SPDX-License-Identifier: Apache-2.0
// WindowState: what a session knows at any moment about the time before it — the allocations
// still live and the latest level of every sampled metric — so that a window of recent events
// (or a dump of it) can begin with that state instead of pretending memory was empty.
//
// A window that starts with only its own events says "149 MiB held" on a device with 24 GiB in
// use; replayed first, the live allocations (their own events, at their own times) give the
// window the level, the leak's rate and site, and the time until full of the whole session.
//
// Bounded whatever the run: at most kMaxLiveAllocations are kept one by one; past that, new
// allocations are summed per kind, device and site (one synthetic event each) and a free that
// matches no kept allocation takes its bytes from its sum. Levels: the latest sample of each
// counter per device (and per process for the per-process ones), and the last kMaxXids Xid
// events, which are evidence, not levels.
#pragma once

#include <gpudiag/event.hpp>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <span>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace gpudiag::detail {

class WindowState {
public:
    static constexpr std::size_t kMaxLiveAllocations = std::size_t{1} << 17;  // ~8 MiB of events
    static constexpr std::size_t kMaxLevels = 4096;
    static constexpr std::size_t kMaxXids = 64;

    /// Takes in every event of the session, in order.
    void observe(std::span<const Event> events);

    /// The state now, as events in time order: the live allocations, the sums past the bound,
    /// the latest levels and the recent Xid events.
    [[nodiscard]] std::vector<Event> events() const;

    struct Totals {
        std::uint64_t allocations = 0;  ///< live allocations kept one by one
        std::uint64_t bytes = 0;        ///< their bytes and the sums' (device memory kinds only)
        std::uint64_t summed = 0;       ///< allocations only counted in a per-site sum
        std::uint64_t levels = 0;       ///< latest samples kept
        std::uint64_t unaddressed = 0;  ///< allocations with no address: not trackable
    };
    [[nodiscard]] Totals totals() const;

private:
    struct LiveKey {
        std::uint8_t family;
        std::uint16_t device;
        std::uint64_t address;
        bool operator==(const LiveKey&) const = default;
    };
    struct LiveKeyHash {
        std::size_t operator()(const LiveKey& k) const noexcept;
    };
    using SumKey = std::tuple<std::uint8_t, std::uint16_t, StringId>;  // family, device, site
    using LevelKey = std::tuple<std::uint16_t, std::uint16_t, std::uint32_t>;  // device, what, pid

    void allocated(const Event& e, std::uint8_t family);
    void freed(const Event& e, std::uint8_t family);
    void sampled(const Event& e);

    std::unordered_map<LiveKey, Event, LiveKeyHash> live_;
    std::map<SumKey, Event> sums_;
    std::map<LevelKey, Event> levels_;
    std::deque<Event> xids_;
    std::uint64_t summed_ = 0;
    std::uint64_t unaddressed_ = 0;
};

}  // namespace gpudiag::detail
