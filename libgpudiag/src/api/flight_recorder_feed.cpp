// SPDX-License-Identifier: Apache-2.0
#include "api/flight_recorder_feed.hpp"

#include "importers/flight_recorder/flight_recorder_dump.hpp"
#include "importers/flight_recorder/flight_recorder_source.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>

namespace gpudiag::detail {
namespace {

// pg_status's completed counter per group name, as the importer reads it (gloo's can lag its own
// entries; the later of the two is used).
std::map<std::string, std::int64_t> completed_by_status(const FlightRecorderDump& d) {
    std::map<std::string, std::int64_t> by_id;
    for (const auto& s : d.status) by_id[s.pg_id] = s.last_completed;
    std::map<std::string, std::int64_t> by_group;
    for (const auto& e : d.entries) {
        auto it = by_id.find(fmt::format("{}", e.pg_id));
        if (it != by_id.end()) by_group[e.group] = it->second;
    }
    return by_group;
}

}  // namespace

Result<std::vector<Event>> FlightRecorderFeed::take(std::string_view dump, StringTable& strings,
                                                    std::uint64_t now_ns) {
    auto parsed = parse_flight_recorder(dump, "the process's Flight Recorder");
    if (!parsed) return parsed.status();
    const auto status_done = completed_by_status(*parsed);
    FlightRecorderEvents from = flight_recorder_events(*parsed, "flight recorder", strings);
    for (auto& [key, t] : in_flight_) t.seen = false;
    std::vector<Event> out;
    for (std::size_t i = 0; i < from.events.size(); ++i) {
        Event e = from.events[i];
        e.start_ns = e.end_ns = now_ns;
        if ((e.flags & kEventFlagP2p) != 0) continue;  // not aligned on a group: not watched
        CollectivePayload& c = e.collective;
        const auto by_status = status_done.find(std::string(strings.lookup(c.group)));
        if (by_status != status_done.end() && by_status->second >= 0 &&
            c.seq <= static_cast<std::uint64_t>(by_status->second))
            c.state = collective_state::kCompleted;
        auto done = completed_.find(c.group);
        if (done != completed_.end() && c.seq <= done->second) continue;  // handed over already
        const Key key{c.group, c.seq};
        auto it = in_flight_.find(key);
        if (c.state == collective_state::kCompleted) {
            if (it != in_flight_.end()) in_flight_.erase(it);
            auto& high = completed_[c.group];
            high = std::max(high, c.seq);
            out.push_back(e);
            continue;
        }
        if (it != in_flight_.end()) {
            it->second.seen = true;
            if (it->second.event.collective.state == c.state) continue;
            it->second.event = e;
            out.push_back(e);
        } else if (in_flight_.size() < kMaxTracked) {
            in_flight_.emplace(key, Tracked{e, true});
            out.push_back(e);
        }
    }
    // Gone from the recorder's dump: over (an onlyActive dump holds the calls in flight only).
    for (auto it = in_flight_.begin(); it != in_flight_.end();) {
        if (it->second.seen) {
            ++it;
            continue;
        }
        Event e = it->second.event;
        e.start_ns = e.end_ns = now_ns;
        e.collective.state = collective_state::kCompleted;
        auto& done = completed_[e.collective.group];
        done = std::max(done, e.collective.seq);
        out.push_back(e);
        it = in_flight_.erase(it);
    }
    return out;
}

}  // namespace gpudiag::detail
