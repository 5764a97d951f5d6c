// SPDX-License-Identifier: Apache-2.0
// What a live session cost the program it runs in, as the "cost" section of its report: CPU time
// of gpudiag's threads and of its work on the program's threads, against the process' CPU time,
// the wall time and the step time; the memory it holds; the events it handled and dropped.
// Always-on tools lead with their cost; a service's change review asks for it first.
#pragma once

#include "support/own_cpu.hpp"

#include <gpudiag/report.hpp>

#include <cstdint>

namespace gpudiag::detail {

struct SessionCost {
    OwnCpu cpu_at_start;
    OwnCpu cpu_now;
    std::uint64_t process_cpu_at_start_ns = 0;
    std::uint64_t process_cpu_now_ns = 0;
    std::uint64_t wall_ns = 0;            ///< since start()
    std::uint64_t events = 0;             ///< handed over
    std::uint64_t dropped = 0;            ///< lost to full buffers
    std::uint64_t queue_bytes = 0;        ///< the hand-off's slots
    std::uint64_t names_bytes = 0;        ///< the name table's text
    std::uint64_t window_disk_bytes = 0;  ///< the window's files (0: no window)
};

/// The "cost" section; the step share is read from the report's timeline (when it has steps).
Section cost_section(const SessionCost& cost, const Report& report);
/// One sentence for the report's notes: the CPU share and, with steps, the share of a step.
std::string cost_note(const Section& cost);

}  // namespace gpudiag::detail
