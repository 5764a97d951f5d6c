// SPDX-License-Identifier: Apache-2.0
// The keys one part of the library writes and another reads back from a Report: the "timeline"
// section's figures and tables that the job view and the session's cost section read, and a
// finding's lead figure. Writer and readers spell them here, once; the keys themselves are stable
// (JSON reports, metrics and Python read them too). A predicted saving's keys are public:
// gpudiag::saving_keys in <gpudiag/report.hpp>.
#pragma once

namespace gpudiag::detail {

/// The "timeline" section (TimelineAnalyzer).
namespace timeline_keys {
inline constexpr const char* kSection = "timeline";
// Figures.
inline constexpr const char* kGpuActivities = "gpu_activities";
inline constexpr const char* kWindowSpanNs = "window_span_ns";
inline constexpr const char* kSteps = "steps";
inline constexpr const char* kStepTimeNs = "step_time_ns";
inline constexpr const char* kIdleShare = "idle_share";
inline constexpr const char* kComputeShare = "compute_share";
inline constexpr const char* kCommunicationShare = "communication_share";
inline constexpr const char* kCommOverlapShare = "comm_overlap_share";
inline constexpr const char* kCommExposedShare = "comm_exposed_share";
inline constexpr const char* kCriticalPathSteps = "critical_path_steps";
// Tables (read by their columns' positions: see where each is written).
inline constexpr const char* kJobStepsTable = "job_steps";
inline constexpr const char* kCollectivesTable = "collectives";
inline constexpr const char* kCollectiveArrivalsTable = "collective_arrivals";
inline constexpr const char* kWhatIfTable = "what_if";  ///< rows keyed by what_if_key()
}  // namespace timeline_keys

/// A finding's lead figure, when it has one: the share of the step (or window) its cause takes.
/// The job view ranks the ranks of a finding by it.
inline constexpr const char* kFindingShareKey = "share";
/// The window a timeline finding's figures describe, and (in its predicted saving) the window the
/// saving was replayed over, in ns in all: the two are one window, which a test checks.
inline constexpr const char* kFindingWindowKey = "window_ns";

}  // namespace gpudiag::detail
