// SPDX-License-Identifier: Apache-2.0
// InputCoverage: how much of its input a report covers, built once from what the source said
// (its summary) and what the analyses saw, for one input and for a job of several.
#pragma once

#include <gpudiag/report.hpp>
#include <gpudiag/source_info.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace gpudiag::detail {

/// The coverage of a report over one source that delivered `events` events spanning
/// [first_ns, last_ns], as its `summary` describes it: incomplete when the source was truncated
/// or lost events to damage, with what is missing in plain language.
InputCoverage input_coverage(const SourceSummary& summary, std::uint64_t events,
                             std::uint64_t first_ns, std::uint64_t last_ns);

/// Adds the coverage of another input of the same process (a snapshot beside its trace) to
/// `into`; `prefix` names that input in what it misses.
void add_coverage(InputCoverage& into, const InputCoverage& part, const std::string& prefix);

/// A job's coverage: complete only when every rank's is and no rank of `world_size` is absent
/// (`ranks[i].source.rank` names each; -1 ranks count as present but unnamed).
InputCoverage job_coverage(const std::vector<Report>& ranks, std::int32_t world_size);

/// The ranks of [0, world_size) that no report in `ranks` holds, at most `limit` of them.
std::vector<std::int32_t> absent_ranks(const std::vector<Report>& ranks, std::int32_t world_size,
                                       std::size_t limit);

}  // namespace gpudiag::detail
