// SPDX-License-Identifier: Apache-2.0
// Offline analysis: each input opened, its events through the analysis pipeline, the reports
// of several inputs combined.
#include <gpudiag/analyze.hpp>
#include <gpudiag/job.hpp>

#include "analysis/pipeline/analysis_pipeline.hpp"
#include "importers/job_inputs.hpp"

#include <zlib.h>

#include <algorithm>
#include <exception>
#include <limits>
#include <new>

namespace gpudiag {
namespace {

// One source through the analysis pipeline: what the source says of itself (its info, its
// summary, where it stopped) around the pipeline's events.
class AnalysisRun final : public EventSink {
public:
    explicit AnalysisRun(const AnalysisOptions& options) : pipeline_(options) {}

    void begin(const SourceInfo& info, const StringTable& strings) override {
        info_ = info;
        pipeline_.begin(info, strings);
    }
    void consume(std::span<const Event> events) override { pipeline_.consume(events); }
    void end(const SourceSummary& summary) override {
        summary_ = summary;
        pipeline_.end(summary);
    }

    [[nodiscard]] bool delivered_anything() const {
        return pipeline_.began() && pipeline_.delivered() > 0;
    }

    /// `stopped`: why the source stopped before its end (OK when it did not).
    Report finish(const Status& stopped = Status::ok()) {
        if (pipeline_.began() && !pipeline_.ended()) {
            SourceSummary s;
            s.events = pipeline_.delivered();
            s.truncated = true;
            end(s);
        }
        if (!stopped.is_ok()) {
            summary_.truncated = true;
            summary_.missing.push_back("reading stopped early (" + stopped.to_string() +
                                       "): whatever followed is missing");
        }
        return pipeline_.assemble(info_, summary_, pipeline_.delivered());
    }

private:
    detail::AnalysisPipeline pipeline_;
    SourceInfo info_;
    SourceSummary summary_;
};

// A report saved as JSON (plain or gzip, which gzread reads both) comes back as it was.
Result<Report> read_report(const std::string& path) {
    gzFile f = gzopen(path.c_str(), "rb");
    if (f == nullptr) return io_error(path + ": cannot open");
    std::string text;
    char buf[1 << 16];
    int n = 0;
    while ((n = gzread(f, buf, sizeof buf)) > 0) text.append(buf, static_cast<std::size_t>(n));
    bool failed = n < 0;
    gzclose(f);
    if (failed) return io_error(path + ": read error");
    auto report = parse_report_json(text);
    if (!report) return Status(report.status().code(), path + ": " + report.status().message());
    return report;
}

// One source through the analyses.
Result<Report> analyze_source(Result<std::unique_ptr<detail::EventSource>> source,
                              const AnalysisOptions& options) {
    if (!source) return source.status();
    StringTable strings;
    AnalysisRun run(options);
    Status status = (*source)->run(run, strings);
    // A source that failed before delivering anything is an error; one that failed midway still
    // gives a report of what it read, with the reason attached.
    if (!status.is_ok() && !run.delivered_anything()) return status;
    return run.finish(status);
}

// One input: a saved report comes back as it was; anything else goes through the analyses.
Result<Report> analyze_found(const detail::FoundInput& found, const AnalysisOptions& options) {
    if (found.input.member.empty() && found.format == InputFormat::kReportJson) {
        return read_report(found.input.path);
    }
    return analyze_source(detail::open_found_input(found, options), options);
}

// The inputs come through the front door, each told once; a single file given as itself is
// reported as it is, anything that stands for several (a folder, an archive, a pattern) as a job.
Result<Report> analyze_all(const std::vector<std::string>& paths, const AnalysisOptions& options) {
    auto found = detail::find_inputs(paths);
    if (!found) return found.status();
    if (paths.size() == 1 && found->size() == 1 && found->front().input.member.empty() &&
        found->front().input.path == paths.front()) {
        return analyze_found(found->front(), options);
    }
    AnalysisOptions each = options;
    each.for_job = each.for_job || found->size() > 1;
    std::vector<Report> reports;
    std::vector<JobInput> inputs;
    reports.reserve(found->size());
    inputs.reserve(found->size());
    for (const auto& input : *found) {
        auto one = analyze_found(input, each);
        if (!one) {
            const std::string& m = one.status().message();
            const std::string name = input.input.name();
            return Status(one.status().code(), m.rfind(name, 0) == 0 ? m : name + ": " + m);
        }
        reports.push_back(std::move(*one));
        inputs.push_back(input.input);
    }
    return combine_input_reports(std::move(reports), inputs, options);
}

}  // namespace

Result<Report> analyze_files(const std::vector<std::string>& paths,
                             const AnalysisOptions& options) noexcept {
    try {
        return analyze_all(paths, options);
    } catch (const std::bad_alloc&) {
        return resource_exhausted("out of host memory while analysing");
    } catch (const std::exception& e) {
        return internal_error(std::string("analysis failed: ") + e.what());
    } catch (...) {
        return internal_error("analysis failed with an unknown exception");
    }
}

Result<Report> analyze_events(std::span<const Event> events, const SourceInfo& info,
                              const StringTable& strings, const AnalysisOptions& options) noexcept {
    try {
        AnalysisRun run(options);
        run.begin(info, strings);
        constexpr std::size_t kBatch = 4096;
        for (std::size_t i = 0; i < events.size(); i += kBatch) {
            run.consume(events.subspan(i, std::min(kBatch, events.size() - i)));
        }
        SourceSummary summary;
        summary.events = events.size();
        run.end(summary);
        return run.finish();
    } catch (const std::bad_alloc&) {
        return resource_exhausted("out of host memory while analysing");
    } catch (const std::exception& e) {
        return internal_error(std::string("analysis failed: ") + e.what());
    } catch (...) {
        return internal_error("analysis failed with an unknown exception");
    }
}

Result<Report> analyze_input(const JobInput& input, const AnalysisOptions& options) noexcept {
    try {
        auto found = detail::find_input(input);
        if (!found) return found.status();
        return analyze_found(*found, options);
    } catch (const std::bad_alloc&) {
        return resource_exhausted("out of host memory while analysing");
    } catch (const std::exception& e) {
        return internal_error(std::string("analysis failed: ") + e.what());
    } catch (...) {
        return internal_error("analysis failed with an unknown exception");
    }
}

Result<std::vector<JobInput>> expand_job_inputs(const std::vector<std::string>& paths) noexcept {
    try {
        return detail::expand_inputs(paths);
    } catch (const std::bad_alloc&) {
        return resource_exhausted("out of host memory while listing the inputs");
    } catch (const std::exception& e) {
        return internal_error(std::string("listing the inputs failed: ") + e.what());
    }
}

}  // namespace gpudiag
