// SPDX-License-Identifier: Apache-2.0
// The report of one process made of the reports of several of its files (a trace and a memory
// snapshot of it): a Report -> Report step, like the job view.
#pragma once

#include <gpudiag/report.hpp>

#include <vector>

namespace gpudiag::detail {

/// Combines `parts` (reports of one process, at least one) into one report. The first part that
/// is not a memory snapshot is the base: its source, sections and findings. A snapshot adds what
/// the base lacks and, where both give one, its own memory section and its own findings take the
/// place of the base's: a snapshot states the allocator's state exactly, where a trace samples it.
/// Counts add up; notes are kept, each prefixed with its file when there are several.
Report merge_process_reports(std::vector<Report> parts);

/// True for reports of torch memory snapshots (their producer).
bool is_snapshot_report(const Report& r) noexcept;
/// True for reports of a Flight Recorder dump (their producer).
bool is_flight_recorder_report(const Report& r) noexcept;
/// A snapshot or a Flight Recorder dump: an input that joins the process of its rank rather
/// than being one (it is never the base of a merge when the process has a trace).
bool is_side_report(const Report& r) noexcept;

}  // namespace gpudiag::detail
