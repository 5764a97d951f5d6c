// SPDX-License-Identifier: Apache-2.0
#include "analysis/pipeline/analysis_pipeline.hpp"

#include "core/input_coverage.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <new>

namespace gpudiag::detail {

AnalysisPipeline::AnalysisPipeline(const AnalysisOptions& options, const AnalyzerBounds& bounds,
                                   Failures failures)
    : analyses_(make_analyzers(options, bounds)), failures_(failures) {}

void AnalysisPipeline::begin(const SourceInfo& info, const StringTable& strings) {
    began_ = true;
    for (auto& a : analyses_.all) a->begin(info, strings);
    for (EventSink* s : extra_) s->begin(info, strings);
}

void AnalysisPipeline::consume(std::span<const Event> events) {
    delivered_ += events.size();
    for (const Event& e : events) {
        first_ns_ = std::min(first_ns_, e.start_ns);
        last_ns_ = std::max(last_ns_, std::max(e.start_ns, e.end_ns));
    }
    bool failed = false;
    bool out_of_memory = false;
    std::string what;  // copied: the exception's own text goes with it
    for (auto& a : analyses_.all) deliver(*a, events, failed, out_of_memory, what);
    for (EventSink* s : extra_) deliver(*s, events, failed, out_of_memory, what);
    if (failed) note_failure(events.size(), out_of_memory, what.c_str());
}

// The text of a caught exception, kept past its handler (a copy that fails is host memory
// running out, said as such).
void AnalysisPipeline::keep_what(const char* text, std::string& what, bool& oom) noexcept {
    try {
        what = text;
    } catch (...) {
        oom = true;
    }
}

// Offline, an exception ends the file's analysis (the caller says why); live, the sink that
// threw loses this batch alone and the report says how many events it missed.
void AnalysisPipeline::deliver(EventSink& sink, std::span<const Event> events, bool& failed,
                               bool& oom, std::string& what) {
    if (failures_ == Failures::kPropagate) {
        sink.consume(events);
        return;
    }
    try {
        sink.consume(events);
    } catch (const std::bad_alloc&) {
        failed = oom = true;
    } catch (const std::exception& e) {
        failed = true;
        keep_what(e.what(), what, oom);
    } catch (...) {
        failed = true;
        keep_what("an unknown error", what, oom);
    }
}

void AnalysisPipeline::end(const SourceSummary& summary) {
    ended_ = true;
    for (auto& a : analyses_.all) a->end(summary);
    for (EventSink* s : extra_) s->end(summary);
}

Report AnalysisPipeline::assemble(const SourceInfo& source, const SourceSummary& capture,
                                  std::uint64_t events) {
    Report report;
    report.source = source;
    report.capture = capture;
    report.input =
        input_coverage(capture, events, first_ns_ == UINT64_MAX ? 0 : first_ns_, last_ns_);
    for (auto& a : analyses_.all) a->contribute(report);
    if (report.source.simulated) {
        report.notes.insert(report.notes.begin(),
                            "SIMULATED: these events were generated, not recorded on a GPU.");
    }
    // What to act on first (see rank_findings); stable so analyses keep their own order.
    rank_findings(report.findings);
    return report;
}

void AnalysisPipeline::note_failure(std::size_t events, bool out_of_memory,
                                    const char* what) noexcept {
    try {
        std::lock_guard<std::mutex> lock(failures_mutex_);
        ++intake_.batches;
        intake_.events += events;
        if (out_of_memory) {
            ++intake_.out_of_memory;
        } else {
            intake_.last_error = what;
        }
    } catch (...) {
    }
}

void AnalysisPipeline::add_failure_losses(std::vector<std::string>& missing) const {
    std::lock_guard<std::mutex> lock(failures_mutex_);
    if (intake_.events == 0) return;
    const std::string why = intake_.out_of_memory > 0 ? "host memory ran out" : intake_.last_error;
    missing.push_back(fmt::format(
        "{} events in {} batches were not taken in by every analysis or the recording ({}); "
        "figures that depend on them are short",
        intake_.events, intake_.batches, why));
}

}  // namespace gpudiag::detail
