// SPDX-License-Identifier: Apache-2.0
// Session::record_flight_recorder: a running process's own Flight Recorder dump, taken again and
// again (every second or so), as the kCollective events that are new since the last one: a call
// first seen, or seen further along (completed). Completion is what the importer takes it to be
// (a retired gloo entry, the "completed" state, or the group's pg_status counter past it), and a
// call in flight that a later dump no longer holds (an `onlyActive` dump, or the ring moved on)
// is completed too. Bounded: at most kMaxTracked calls in flight are remembered.
#pragma once

#include <gpudiag/event.hpp>
#include <gpudiag/status.hpp>
#include <gpudiag/string_table.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string_view>
#include <utility>
#include <vector>

namespace gpudiag::detail {

class FlightRecorderFeed {
public:
    static constexpr std::size_t kMaxTracked = 1024;

    /// The events `dump` adds to what earlier dumps gave, stamped `now_ns` (the recorder's own
    /// times are wall-clock times of the host, not the session's clock). Errors: those of
    /// parse_flight_recorder.
    Result<std::vector<Event>> take(std::string_view dump, StringTable& strings,
                                    std::uint64_t now_ns);

private:
    using Key = std::pair<StringId, std::uint64_t>;  // (group, seq): collectives only
    struct Tracked {
        Event event;        // as last handed over
        bool seen = false;  // in the dump being read
    };
    std::map<Key, Tracked> in_flight_;
    std::map<StringId, std::uint64_t> completed_;  // per group: the highest seq handed over done
};

}  // namespace gpudiag::detail
