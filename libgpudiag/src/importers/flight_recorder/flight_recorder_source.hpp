// SPDX-License-Identifier: Apache-2.0
// A Flight Recorder dump as events: one kCollective event per recorded call, and what the dump
// says of its process groups (members, counters) as source properties the collective analysis
// reads (the keys below).
#pragma once

#include "importers/flight_recorder/flight_recorder_dump.hpp"

#include <gpudiag/event.hpp>
#include <gpudiag/source_info.hpp>
#include <gpudiag/string_table.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace gpudiag::detail {

/// Source properties of a dump: "<prefix><group>" per process group.
namespace flight_recorder_keys {
inline constexpr std::string_view kProducer = "flight-recorder";
inline constexpr std::string_view kVersion = "flight_recorder.version";
/// The group's description ("default_pg").
inline constexpr std::string_view kGroupDesc = "flight_recorder.desc.";
/// Its member ranks, "0,1,2,3" (absent when the dump does not say).
inline constexpr std::string_view kGroupRanks = "flight_recorder.ranks.";
/// Its counters as pg_status gives them: "enqueued,started,completed" (-1: not said).
inline constexpr std::string_view kGroupStatus = "flight_recorder.status.";
}  // namespace flight_recorder_keys

struct FlightRecorderEvents {
    SourceInfo info;
    std::vector<Event> events;  ///< in record order
    SourceSummary summary;
};

/// The events and source description of `dump`, read from `name`; strings go to `strings`.
FlightRecorderEvents flight_recorder_events(const FlightRecorderDump& dump, const std::string& name,
                                            StringTable& strings);

}  // namespace gpudiag::detail
