// SPDX-License-Identifier: Apache-2.0
// Offline diagnosis: turn recordings, Kineto traces and torch memory snapshots into a Report.
#pragma once

#include <gpudiag/event.hpp>
#include <gpudiag/export.hpp>
#include <gpudiag/names.hpp>
#include <gpudiag/report.hpp>
#include <gpudiag/source_info.hpp>
#include <gpudiag/status.hpp>
#include <gpudiag/string_table.hpp>

#include <cstdint>
#include <functional>
#if GPUDIAG_HAS_SPAN
#    include <span>
#endif
#include <string>
#include <vector>

namespace gpudiag {

/// Which part of a trace the timeline figures cover.
enum class AnalysisWindow : std::uint8_t {
    /// Complete steps only (first step start to last step end); the whole trace without steps.
    kSteps = 0,
    /// Holistic Trace Analysis' window: the whole trace minus GPU work launched from the start of
    /// the last ProfilerStep on, so figures compare one to one with HTA's.
    kHta = 1,
    /// Everything in the input.
    kAll = 2,
};
template <>
GPUDIAG_API EnumNames<AnalysisWindow> enum_names<AnalysisWindow>() noexcept;

struct AnalysisOptions {
    AnalysisWindow window = AnalysisWindow::kSteps;
    /// With several rank files, analyse only this rank (-1: all ranks, each reported).
    std::int32_t rank = -1;
    /// Called with (bytes read, total bytes) while importing large inputs; may be empty.
    std::function<void(std::uint64_t, std::uint64_t)> progress;
    /// The report will be combined with other ranks' (analyze_job, combine_input_reports): it
    /// then also keeps what the cross-rank view needs (when each step's collectives started).
    /// analyze_files sets it itself for files of several ranks.
    bool for_job = false;
};

/// The input formats gpudiag reads.
enum class InputFormat : std::uint8_t {
    kUnknown = 0,
    kRecording = 1,      ///< gpudiag's own .gpudiag recording
    kKinetoJson = 2,     ///< PyTorch profiler Chrome-trace JSON, plain or gzip
    kTorchSnapshot = 3,  ///< torch.cuda.memory._dump_snapshot pickle
    kReportJson = 4,     ///< a report gpudiag wrote as JSON (render_json), plain or gzip
    kNsightSqlite = 5,   ///< Nsight Systems report exported as SQLite (nsys export --type sqlite)
    /// A PyTorch Flight Recorder dump of one rank (its pickle or its JSON form), torch 2.4 on
    kFlightRecorder = 6,
};
template <>
GPUDIAG_API EnumNames<InputFormat> enum_names<InputFormat>() noexcept;
GPUDIAG_API const char* input_format_name(InputFormat f) noexcept;

/// Looks at the first bytes of `path` to tell its format. Errors: kNotFound, kIoError,
/// kUnsupported (with what the file looks like instead).
GPUDIAG_API Result<InputFormat> detect_format(const std::string& path) noexcept;

/// Analyses one or more files of one job (e.g. one Kineto file per rank) and returns one report.
/// A saved report (InputFormat::kReportJson) is read back as it is; several are combined as the
/// ranks of one job.
/// Errors: as detect_format, plus kCorruptData for malformed input (the message says where).
/// Thread-safety: safe to call concurrently on different files.
GPUDIAG_API Result<Report> analyze_files(const std::vector<std::string>& paths,
                                         const AnalysisOptions& options = {}) noexcept;

#if GPUDIAG_HAS_SPAN
/// Analyses events already in memory (tests, bindings, the live session). C++20.
GPUDIAG_API Result<Report> analyze_events(std::span<const Event> events, const SourceInfo& info,
                                          const StringTable& strings,
                                          const AnalysisOptions& options = {}) noexcept;
#endif

}  // namespace gpudiag
