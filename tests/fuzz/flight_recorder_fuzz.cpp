// SPDX-License-Identifier: Apache-2.0
// Fuzzes the Flight Recorder reader end to end: the bytes as a dump (pickle through the safe
// pickle VM, or JSON), its events through the collective analysis, and two ranks of it (the
// second told to be another rank) through the job's verdict. Nothing may crash, hang or grow
// past the limits, whatever the bytes.
#include "analysis/collectives/collective_analyzer.hpp"
#include "analysis/collectives/collective_verdict.hpp"
#include "importers/flight_recorder/flight_recorder_dump.hpp"
#include "importers/flight_recorder/flight_recorder_source.hpp"

#include <gpudiag/report.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace gpudiag;
    using namespace gpudiag::detail;
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    auto dump = parse_flight_recorder(bytes, "fuzz");
    if (!dump) return 0;
    StringTable strings(1u << 20);
    const FlightRecorderEvents events = flight_recorder_events(*dump, "fuzz", strings);
    Report job;
    for (std::int32_t rank = 0; rank < 2; ++rank) {
        CollectiveAnalyzer analyzer;
        analyzer.begin(events.info, strings);
        analyzer.consume(events.events);
        analyzer.end(events.summary);
        Report r;
        r.source = events.info;
        r.source.rank = rank;
        analyzer.contribute(r);
        job.ranks.push_back(std::move(r));
    }
    job.source.world_size = events.info.world_size % 64;
    Section section;
    add_collective_verdicts(job, section);
    (void)render_json(job);
    return 0;
}
