// SPDX-License-Identifier: Apache-2.0
// A job's files as the user has them: files, directories of rank files, tar archives (.tar,
// .tar.gz) and glob patterns, expanded into the inputs gpudiag reads, and each input opened as an
// EventSource (archive members stream out of the archive).
#pragma once

#include "core/event_source.hpp"

#include <gpudiag/analyze.hpp>
#include <gpudiag/job.hpp>
#include <gpudiag/status.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gpudiag::detail {

/// An input as the front door found it: where it is, and its format, told once from its content.
struct FoundInput {
    JobInput input;
    InputFormat format = InputFormat::kUnknown;
};

/// The front door: expands `paths` (see gpudiag::expand_job_inputs) and tells the format of each
/// input once, as it finds it; nothing after it sniffs again. Errors: kNotFound (a path or
/// pattern that names nothing), kInvalidArgument (nothing readable in a directory or archive),
/// kUnsupported (a single file of another format), kIoError.
Result<std::vector<FoundInput>> find_inputs(const std::vector<std::string>& paths);
/// The same, for one input named by the caller (a file, or an archive's member).
Result<FoundInput> find_input(const JobInput& input);
/// find_inputs() without the formats (the public expand_job_inputs).
Result<std::vector<JobInput>> expand_inputs(const std::vector<std::string>& paths);

/// Opens a found input for analysis by the format the door told: a file by path, an archive
/// member as a stream out of its archive.
Result<std::unique_ptr<EventSource>> open_found_input(const FoundInput& found,
                                                      const AnalysisOptions& options);

/// The rank a file's name gives: "rank3", "rank-3", "rank_3", "worker3" in the file's name or
/// its folder's; -1 when none.
std::int32_t rank_from_name(const JobInput& input);

}  // namespace gpudiag::detail
