// SPDX-License-Identifier: Apache-2.0
// Multi-rank jobs: one report out of the reports of each rank (e.g. gathered over
// torch.distributed).
#pragma once

#include <gpudiag/analyze.hpp>
#include <gpudiag/export.hpp>
#include <gpudiag/report.hpp>
#include <gpudiag/status.hpp>

#include <string>
#include <vector>

namespace gpudiag {

/// One file of a job: a file on disk, or a member of a tar archive.
struct JobInput {
    std::string path;    ///< the file, or the archive that holds the member
    std::string member;  ///< the member's name inside the archive; empty for a plain file

    /// How reports name it: the path, or "archive:member".
    [[nodiscard]] std::string name() const { return member.empty() ? path : path + ":" + member; }
};

/// The inputs `paths` stand for: a file as it is; a folder as the files gpudiag reads in it and
/// its subfolders (sorted by path); a tar archive (.tar, .tar.gz) as the members gpudiag reads;
/// a glob pattern ("traces/rank*.json.gz") as what it matches. Errors: kInvalidArgument (no
/// paths; a folder or archive without a file gpudiag reads), kNotFound (a path or pattern that
/// names nothing), kUnsupported (a file of another format), kIoError.
/// Thread-safety: safe.
GPUDIAG_API Result<std::vector<JobInput>> expand_job_inputs(
    const std::vector<std::string>& paths) noexcept;

/// Analyses one input on its own, as one worker of a distributed analysis does. Errors: as
/// analyze_files. Thread-safety: safe to call concurrently.
GPUDIAG_API Result<Report> analyze_input(const JobInput& input,
                                         const AnalysisOptions& options = {}) noexcept;

/// The job report out of the reports of its inputs (`reports[i]` of `inputs[i]`): the files of
/// one process (a trace and a memory snapshot of it) combine into one report, and the processes
/// into the job view as analyze_job does. A file's rank is the one its content gives
/// (distributedInfo), else the one its name gives ("rank3", "worker3"). A single process gives
/// its own report. `options.rank` >= 0 keeps that rank only. Errors: kInvalidArgument (no
/// reports, or not one per input), kNotFound (no input holds options.rank). Thread-safety: safe.
GPUDIAG_API Result<Report> combine_input_reports(std::vector<Report> reports,
                                                 const std::vector<JobInput>& inputs,
                                                 const AnalysisOptions& options = {}) noexcept;

/// Combines per-rank reports into a job report: the ranks go into `Report::ranks` (sorted by
/// rank) and the cross-rank analysis (per-rank table, stragglers, imbalance) adds the job's own
/// sections and findings, exactly as analyze_files does for one file per rank. A single report is
/// returned unchanged. Errors: kInvalidArgument when `ranks` is empty.
/// Thread-safety: safe.
GPUDIAG_API Result<Report> analyze_job(std::vector<Report> ranks,
                                       const AnalysisOptions& options = {}) noexcept;

}  // namespace gpudiag
