// SPDX-License-Identifier: Apache-2.0
// The job view of Flight Recorder dumps: each process group's collectives aligned across the
// ranks by sequence id, and a verdict per group: the last id every rank completed, the
// collective each rank is in or missing, the ranks that never arrived, called another op or
// other sizes (desync), or are ahead; collective_hang and collective_desync name the culprit.
#pragma once

#include <gpudiag/report.hpp>

#include <cstdint>
#include <vector>

namespace gpudiag::detail {

/// Adds the verdict tables to `section` (the job's) and the findings to `job`, from the
/// "collectives" sections of `job.ranks`. Ranks with no dump are named where a group lists them
/// as members, never counted as healthy. Nothing is added when no rank holds a dump.
/// Returns the member ranks that have no dump among the job's ranks, sorted.
std::vector<std::int32_t> add_collective_verdicts(Report& job, Section& section);

}  // namespace gpudiag::detail
