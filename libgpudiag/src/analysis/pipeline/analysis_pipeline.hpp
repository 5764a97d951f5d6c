// SPDX-License-Identifier: Apache-2.0
// AnalysisPipeline: the one way from events to a report. Offline analysis and the live session
// feed it their events; it hands every batch to the analyses and to the sinks riding along (a
// live session's recording writer or window), keeps the span and count of what it took, and
// assembles the report from what the analyses conclude. Callers keep only what is theirs: a
// source's reading, a session's lifecycle, worker and dumps.
#pragma once

#include "analysis/registry.hpp"

#include <gpudiag/report.hpp>
#include <gpudiag/sink.hpp>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace gpudiag::detail {

class AnalysisPipeline final : public EventSink {
public:
    /// What a sink that throws does to the run.
    enum class Failures : std::uint8_t {
        kPropagate,  ///< the exception leaves consume(): a file's analysis fails as a whole
        kIsolate,    ///< that sink loses the batch, counted; the others keep theirs (live)
    };

    explicit AnalysisPipeline(const AnalysisOptions& options, const AnalyzerBounds& bounds = {},
                              Failures failures = Failures::kPropagate);

    /// A sink that receives every batch after the analyses (not owned; outlives the pipeline's
    /// use). Add before begin().
    void add_sink(EventSink* sink) { extra_.push_back(sink); }

    void begin(const SourceInfo& info, const StringTable& strings) override;
    void consume(std::span<const Event> events) override;
    void end(const SourceSummary& summary) override;

    /// The report: `source` and `capture` as given, what it covers (`events` of them, over the
    /// span taken), every analysis' findings, sections and notes, findings ranked. May be called
    /// before end() (a live report mid-run) and more than once.
    [[nodiscard]] Report assemble(const SourceInfo& source, const SourceSummary& capture,
                                  std::uint64_t events);

    /// Batches some sink could not take (Failures::kIsolate), or a caller's own failure around
    /// the pipeline (a worker's tick that threw), said as what the report is missing. Safe from
    /// any thread.
    void note_failure(std::size_t events, bool out_of_memory, const char* what) noexcept;
    void add_failure_losses(std::vector<std::string>& missing) const;

    [[nodiscard]] bool began() const noexcept { return began_; }
    [[nodiscard]] bool ended() const noexcept { return ended_; }
    [[nodiscard]] std::uint64_t delivered() const noexcept { return delivered_; }
    [[nodiscard]] MemoryLedger* memory_ledger() const noexcept { return analyses_.memory_ledger; }

private:
    void deliver(EventSink& sink, std::span<const Event> events, bool& failed, bool& oom,
                 std::string& what);
    static void keep_what(const char* text, std::string& what, bool& oom) noexcept;

    Analyses analyses_;
    std::vector<EventSink*> extra_;
    Failures failures_;
    bool began_ = false;
    bool ended_ = false;
    std::uint64_t delivered_ = 0;
    std::uint64_t first_ns_ = UINT64_MAX;
    std::uint64_t last_ns_ = 0;

    struct IntakeFailures {
        std::uint64_t batches = 0;
        std::uint64_t events = 0;  ///< events at least one sink did not take
        std::uint64_t out_of_memory = 0;
        std::string last_error;
    };
    mutable std::mutex failures_mutex_;
    IntakeFailures intake_;  // guarded by failures_mutex_
};

}  // namespace gpudiag::detail
