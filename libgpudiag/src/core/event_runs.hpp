// SPDX-License-Identifier: Apache-2.0
// EventRuns: imported events kept compactly until they can be replayed in start order.
//
// A trace file is far from start order (Kineto writes CPU operators, then GPU activity, then
// flows), so an importer must hold every event before the first can go to the sinks. Held as
// 64-byte Events, a 1 GB trace's events take a quarter of a GB. Here each piece of the input is
// sorted on its own and encoded as a run: per event a kind byte, a mask of what differs from the
// previous event of the same kind, the start as a delta from the previous event's (small: the run
// is sorted), and every differing field as a variable-length integer (payload words as deltas).
// That takes 10-15 bytes per event instead of 64, and decodes exactly. The replay merges the runs
// by start, ties going to the earlier run, which is the stable start order of the whole input.
#pragma once

#include <gpudiag/event.hpp>
#include <gpudiag/sink.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace gpudiag::detail {

/// One encoded run: events in start order, with string ids to map when replayed.
struct EventRun {
    std::vector<std::uint8_t> bytes;
    std::uint64_t events = 0;
    /// The ids the events hold -> the ids they stand for (a piece interned into a table of its
    /// own); empty: as stored. Ids past its end replay as StringTable::kOverflowString.
    std::vector<StringId> remap;
};

/// Encodes `events` taken in the order `order` gives (indexes into `events`; empty: as they
/// are) into `out`, replacing its content. Throws std::bad_alloc.
void encode_run(std::span<const Event> events, std::span<const std::uint64_t> order, EventRun& out);

/// Decodes a whole run (string ids mapped), for tests and tools. Throws std::bad_alloc.
std::vector<Event> decode_run(const EventRun& run);

/// The string ids an event holds, mapped through `remap` (see EventRun::remap).
void remap_strings(Event& e, const std::vector<StringId>& remap) noexcept;

class EventRunSet {
public:
    /// Adds a run after those added before (it wins ties in start against none of them).
    void add(EventRun run);
    [[nodiscard]] std::uint64_t events() const noexcept { return events_; }
    [[nodiscard]] std::size_t runs() const noexcept { return runs_.size(); }
    /// Bytes held by the encoded events.
    [[nodiscard]] std::uint64_t bytes() const noexcept { return bytes_; }

    /// Maps the string ids of every run once more, through `ids` (ids past its end become
    /// StringTable::kOverflowString). Throws std::bad_alloc.
    void map_strings(const std::vector<StringId>& ids);

    /// Sends every event to `sink.consume` in batches of `batch`, merged in stable start order.
    /// Throws std::bad_alloc.
    void replay(EventSink& sink, std::size_t batch = 4096) const;

private:
    std::vector<EventRun> runs_;
    std::uint64_t events_ = 0;
    std::uint64_t bytes_ = 0;
};

}  // namespace gpudiag::detail
