// SPDX-License-Identifier: Apache-2.0
// ChromeTraceSink: renders one input's events as Chrome / Perfetto trace events through a
// ChromeTraceWriter: GPU work per device and stream, idle gaps named and coloured by cause (it
// feeds the timeline analysis for them), memory and counter tracks, and the host's tracks
// (HostTracks). Exporting files (opening the inputs, the output) is api/trace_export.cpp's.
#pragma once

#include "analysis/timeline/timeline_analyzer.hpp"
#include "output/chrome_host_tracks.hpp"
#include "output/chrome_trace_writer.hpp"
#include "support/json_writer.hpp"

#include <gpudiag/analyze.hpp>
#include <gpudiag/sink.hpp>
#include <gpudiag/status.hpp>

#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>

namespace gpudiag::detail {

/// Tallies the input's events by kind, to say what an input held when it gave nothing to draw.
class ChromeTraceSink final : public EventSink {
public:
    /// `input_index`: which input of the export this is (its GPU tracks get their own pids).
    ChromeTraceSink(ChromeTraceWriter& writer, std::size_t input_index,
                    const AnalysisOptions& options, HostTracks::Counts& counts);

    void begin(const SourceInfo& info, const StringTable& strings) override;
    void consume(std::span<const Event> events) override;
    void end(const SourceSummary& summary) override;

    [[nodiscard]] const Status& status() const { return status_; }
    /// Whether the input gave the trace a slice or a counter sample.
    [[nodiscard]] bool drew() const { return writer_.drawn() > drawn_before_; }
    /// What the input held, for an input that drew nothing.
    [[nodiscard]] std::string held() const;

private:
    std::uint64_t gpu_pid(std::uint16_t device) const { return gpu_pid_base_ + (device & 1023); }
    void write(const Event& e);

    ChromeTraceWriter& writer_;
    TimelineAnalyzer analyzer_;
    HostTracks host_;
    std::uint64_t gpu_pid_base_;
    std::uint64_t drawn_before_;
    const StringTable* strings_ = nullptr;
    std::int32_t rank_ = -1;
    std::set<std::uint16_t> devices_;         // GPUs with a track (work, counters, memory)
    std::set<std::uint16_t> active_devices_;  // of them, those with work (and idle gaps)
    std::set<std::pair<std::uint16_t, std::uint32_t>> streams_;
    std::map<std::uint16_t, std::int64_t> block_bytes_;
    std::array<std::uint64_t, 256> kinds_{};
    std::uint64_t lost_ = 0;
    Status status_;
};

/// How the begin/end markers paired (the trace's otherData), so a reader can tell a slice that
/// is missing (a marker lost, a cap reached) from one that never happened.
void write_marker_counts(JsonWriter& json, const HostTracks::Counts& counts);

}  // namespace gpudiag::detail
