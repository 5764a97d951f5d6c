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

/// Expands `paths` (see gpudiag::expand_job_inputs). Errors: kNotFound (a path or pattern that
/// names nothing), kInvalidArgument (nothing readable in a directory or archive).
Result<std::vector<JobInput>> expand_inputs(const std::vector<std::string>& paths);

/// The format of an input's content: a file's (detect_format) or an archive member's.
Result<InputFormat> input_format(const JobInput& input);

/// Opens `input` for analysis: a file by path, an archive member as a stream out of its archive.
Result<std::unique_ptr<EventSource>> open_input_source(const JobInput& input,
                                                       const AnalysisOptions& options);

/// The rank a file's name gives: "rank3", "rank-3", "rank_3", "worker3" in the file's name or
/// its folder's; -1 when none.
std::int32_t rank_from_name(const JobInput& input);

}  // namespace gpudiag::detail
