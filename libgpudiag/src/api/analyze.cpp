// SPDX-License-Identifier: Apache-2.0
// The offline pipeline: source -> analyzers -> Report. The live session uses the same analyzers.
#include <gpudiag/analyze.hpp>
#include <gpudiag/job.hpp>

#include "analysis/registry.hpp"
#include "core/input_coverage.hpp"
#include "importers/archive.hpp"
#include "importers/job_inputs.hpp"
#include "importers/open_source.hpp"

#include <zlib.h>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <limits>
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
        for (const Event& e : events) {
            first_ns_ = std::min(first_ns_, e.start_ns);
            last_ns_ = std::max(last_ns_, std::max(e.start_ns, e.end_ns));
        }
        for (auto& a : analyzers_) a->consume(events);
    }
    void end(const SourceSummary& summary) override {
        ended_ = true;
        summary_ = summary;
        for (auto& a : analyzers_) a->end(summary);
    }

    [[nodiscard]] bool delivered_anything() const { return began_ && delivered_ > 0; }

    /// `stopped`: why the source stopped before its end (OK when it did not).
    Report finish(const Status& stopped = Status::ok()) {
        if (began_ && !ended_) {
            SourceSummary s;
            s.events = delivered_;
            s.truncated = true;
            end(s);
        }
        if (!stopped.is_ok()) {
            summary_.truncated = true;
            summary_.missing.push_back("reading stopped early (" + stopped.to_string() +
                                       "): whatever followed is missing");
        }
        Report report;
        report.source = info_;
        report.capture = summary_;
        report.input =
            detail::input_coverage(summary_, delivered_, delivered_ > 0 ? first_ns_ : 0, last_ns_);
        for (auto& a : analyzers_) a->contribute(report);
        if (report.source.simulated) {
            report.notes.insert(report.notes.begin(),
                                "SIMULATED: these events were generated, not recorded on a GPU.");
        }
        // What to act on first (see rank_findings); stable so analyses keep their own order.
        rank_findings(report.findings);
        return report;
    }

private:
    std::vector<std::unique_ptr<detail::Analyzer>> analyzers_;
    SourceInfo info_;
    SourceSummary summary_;
    std::uint64_t delivered_ = 0;
    std::uint64_t first_ns_ = std::numeric_limits<std::uint64_t>::max();
    std::uint64_t last_ns_ = 0;
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
Result<Report> analyze_one_input(const JobInput& input, const AnalysisOptions& options) {
    if (input.member.empty()) {
        auto format = detect_format(input.path);
        if (format && *format == InputFormat::kReportJson) return read_report(input.path);
    }
    return analyze_source(detail::open_input_source(input, options), options);
}

// A single file as it is, the way gpudiag always read one (archives and folders are expanded).
bool single_plain_file(const std::vector<std::string>& paths) {
    if (paths.size() != 1) return false;
    auto format = detect_format(paths.front());
    if (format) return true;
    if (format.status().code() == StatusCode::kNotFound) {
        return paths.front().find_first_of("*?[") == std::string::npos;  // not a pattern
    }
    auto tar = detail::is_tar_archive(paths.front());
    return !(tar && *tar) && !std::filesystem::is_directory(paths.front());
}

Result<Report> analyze_all(const std::vector<std::string>& paths, const AnalysisOptions& options) {
    if (paths.empty()) return invalid_argument("no input files given");
    if (single_plain_file(paths)) {
        return analyze_one_input(JobInput{paths.front(), {}}, options);
    }
    auto inputs = detail::expand_inputs(paths);
    if (!inputs) return inputs.status();
    AnalysisOptions each = options;
    each.for_job = each.for_job || inputs->size() > 1;
    std::vector<Report> reports;
    reports.reserve(inputs->size());
    for (const auto& input : *inputs) {
        auto one = analyze_one_input(input, each);
        if (!one) {
            const std::string& m = one.status().message();
            const std::string name = input.name();
            return Status(one.status().code(), m.rfind(name, 0) == 0 ? m : name + ": " + m);
        }
        reports.push_back(std::move(*one));
    }
    return combine_input_reports(std::move(reports), *inputs, options);
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
        return analyze_one_input(input, options);
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
