// SPDX-License-Identifier: Apache-2.0
// The offline pipeline: source -> analyzers -> Report. The live session uses the same analyzers.
#include <gpudiag/analyze.hpp>
#include <gpudiag/job.hpp>

#include "analysis/registry.hpp"
#include "importers/open_source.hpp"

#include <zlib.h>

#include <algorithm>
#include <exception>
#include <new>

namespace gpudiag {
namespace {

// Runs every analyzer over one source and collects what they conclude.
class AnalysisRun final : public EventSink {
public:
    explicit AnalysisRun(const AnalysisOptions& options)
        : analyzers_(detail::make_analyzers(options)) {}

    void begin(const SourceInfo& info, const StringTable& strings) override {
        began_ = true;
        info_ = info;
        for (auto& a : analyzers_) a->begin(info, strings);
    }
    void consume(std::span<const Event> events) override {
        delivered_ += events.size();
        for (auto& a : analyzers_) a->consume(events);
    }
    void end(const SourceSummary& summary) override {
        ended_ = true;
        summary_ = summary;
        for (auto& a : analyzers_) a->end(summary);
    }

    [[nodiscard]] bool delivered_anything() const { return began_ && delivered_ > 0; }

    Report finish() {
        if (began_ && !ended_) {
            SourceSummary s;
            s.events = delivered_;
            s.truncated = true;
            end(s);
        }
        Report report;
        report.source = info_;
        report.capture = summary_;
        for (auto& a : analyzers_) a->contribute(report);
        if (report.source.simulated) {
            report.notes.insert(report.notes.begin(),
                                "SIMULATED: these events were generated, not recorded on a GPU.");
        }
        if (report.capture.truncated) {
            report.notes.emplace_back(
                "The input ended early; figures cover the part that could be read.");
        }
        // Most severe first; stable so analyses keep their own order within a severity.
        std::stable_sort(report.findings.begin(), report.findings.end(),
                         [](const Finding& a, const Finding& b) { return a.severity > b.severity; });
        return report;
    }

private:
    std::vector<std::unique_ptr<detail::Analyzer>> analyzers_;
    SourceInfo info_;
    SourceSummary summary_;
    std::uint64_t delivered_ = 0;
    bool began_ = false;
    bool ended_ = false;
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

Result<Report> analyze_one(const std::string& path, const AnalysisOptions& options) {
    auto format = detect_format(path);
    if (!format) return format.status();
    if (*format == InputFormat::kReportJson) return read_report(path);
    auto source = detail::open_event_source(path, options);
    if (!source) return source.status();
    StringTable strings;
    AnalysisRun run(options);
    Status status = (*source)->run(run, strings);
    // A source that failed before delivering anything is an error; one that failed midway still
    // gives a report of what it read, with the reason attached.
    if (!status.is_ok() && !run.delivered_anything()) return status;
    Report report = run.finish();
    if (!status.is_ok()) {
        report.capture.truncated = true;
        report.notes.push_back("Stopped early: " + status.to_string());
    }
    return report;
}

Result<Report> analyze_all(const std::vector<std::string>& paths, const AnalysisOptions& options) {
    if (paths.empty()) return invalid_argument("no input files given");
    if (paths.size() == 1) return analyze_one(paths.front(), options);

    std::vector<Report> ranks;
    for (const auto& path : paths) {
        auto one = analyze_one(path, options);
        if (!one) return Status(one.status().code(), path + ": " + one.status().message());
        if (options.rank >= 0 && one->source.rank >= 0 && one->source.rank != options.rank) {
            continue;
        }
        ranks.push_back(std::move(*one));
    }
    if (ranks.empty()) {
        return not_found("no input file holds rank " + std::to_string(options.rank));
    }
    const std::size_t files = ranks.size();
    auto job = analyze_job(std::move(ranks), options);
    if (job && files > 1) job->source.description = std::to_string(files) + " files";
    return job;
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
                              const StringTable& strings,
                              const AnalysisOptions& options) noexcept {
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

}  // namespace gpudiag
