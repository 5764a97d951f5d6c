// SPDX-License-Identifier: Apache-2.0
// Public entry to the cross-rank analysis, for reports that were made apart (one per rank
// process) and brought together afterwards.
#include <gpudiag/job.hpp>

#include "analysis/job/job_analysis.hpp"
#include "analysis/job/process_merge.hpp"
#include "core/input_coverage.hpp"
#include "importers/job_inputs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <new>
#include <string>

namespace gpudiag {

namespace {

// The inputs of each process, as indexes into the reports: a trace (or recording) per rank, and
// the snapshots and Flight Recorder dumps of that rank with it; a snapshot that names no rank
// joins the one process there is, when there is only one.
std::vector<std::vector<std::size_t>> group_processes(const std::vector<Report>& reports) {
    struct Group {
        std::int32_t rank;
        bool has_trace;
        std::vector<std::size_t> members;
    };
    std::vector<Group> groups;
    for (std::size_t i = 0; i < reports.size(); ++i) {
        if (detail::is_side_report(reports[i])) continue;
        const std::int32_t rank = reports[i].source.rank;
        auto same = std::find_if(groups.begin(), groups.end(), [&](const Group& g) {
            return rank >= 0 && g.rank == rank && !g.has_trace;
        });
        if (same != groups.end()) {
            same->members.push_back(i);
            same->has_trace = true;
        } else {
            groups.push_back(Group{rank, true, {i}});
        }
    }
    const std::size_t processes = groups.size();
    for (std::size_t i = 0; i < reports.size(); ++i) {
        if (!detail::is_side_report(reports[i])) continue;
        const std::int32_t rank = reports[i].source.rank;
        auto same =
            std::find_if(groups.begin(), groups.begin() + static_cast<std::ptrdiff_t>(processes),
                         [&](const Group& g) { return rank >= 0 && g.rank == rank; });
        if (same != groups.begin() + static_cast<std::ptrdiff_t>(processes)) {
            same->members.push_back(i);
        } else if (rank < 0 && processes == 1) {
            groups.front().members.push_back(i);
        } else {
            groups.push_back(Group{rank, false, {i}});
        }
    }
    std::vector<std::vector<std::size_t>> out;
    out.reserve(groups.size());
    for (auto& g : groups) out.push_back(std::move(g.members));
    return out;
}

Result<Report> combine(std::vector<Report> reports, const std::vector<JobInput>& inputs,
                       const AnalysisOptions& options) {
    if (reports.empty()) return invalid_argument("no reports given");
    if (reports.size() != inputs.size()) return invalid_argument("one report per input is needed");
    if (reports.size() == 1) return std::move(reports.front());
    for (std::size_t i = 0; i < reports.size(); ++i) {
        if (reports[i].source.rank < 0) reports[i].source.rank = detail::rank_from_name(inputs[i]);
    }
    std::vector<Report> processes;
    for (const auto& group : group_processes(reports)) {
        std::vector<Report> parts;
        parts.reserve(group.size());
        for (std::size_t i : group) parts.push_back(std::move(reports[i]));
        Report merged = detail::merge_process_reports(std::move(parts));
        if (options.rank >= 0 && merged.source.rank >= 0 && merged.source.rank != options.rank)
            continue;
        processes.push_back(std::move(merged));
    }
    if (processes.empty())
        return not_found(fmt::format("no input file holds rank {}", options.rank));
    auto job = analyze_job(std::move(processes), options);
    if (job && !job->ranks.empty())
        job->source.description = fmt::format("{} files", inputs.size());
    return job;
}

}  // namespace

Result<Report> combine_input_reports(std::vector<Report> reports,
                                     const std::vector<JobInput>& inputs,
                                     const AnalysisOptions& options) noexcept {
    try {
        return combine(std::move(reports), inputs, options);
    } catch (const std::bad_alloc&) {
        return resource_exhausted("out of host memory while combining reports");
    } catch (const std::exception& e) {
        return internal_error(std::string("combining reports failed: ") + e.what());
    }
}

Result<Report> analyze_job(std::vector<Report> ranks, const AnalysisOptions& options) noexcept {
    try {
        if (ranks.empty()) return invalid_argument("analyze_job: no rank reports given");
        if (ranks.size() == 1) return std::move(ranks.front());
        Report job;
        job.ranks = std::move(ranks);
        std::stable_sort(job.ranks.begin(), job.ranks.end(), [](const Report& a, const Report& b) {
            return a.source.rank < b.source.rank;
        });
        job.source = job.ranks.front().source;
        job.source.description = fmt::format("{} ranks", job.ranks.size());
        job.source.rank = -1;
        if (job.source.world_size <= 0) {
            job.source.world_size = static_cast<std::int32_t>(job.ranks.size());
        }
        std::int32_t named_world = 0;  // the world size the ranks' own sources give
        for (const auto& r : job.ranks) {
            job.capture.events += r.capture.events;
            job.capture.dropped += r.capture.dropped;
            job.capture.damaged += r.capture.damaged;
            job.capture.truncated = job.capture.truncated || r.capture.truncated;
            named_world = std::max(named_world, r.source.world_size);
            // The job observed what any rank did; each rank's own report says what it lacked.
            for (Evidence e : r.observed) job.observe(e);
            job.observed_known = job.observed_known && r.observed_known;
        }
        // Ranks chosen with options.rank leave the others out on purpose: only a job read whole
        // can miss a rank.
        job.input = detail::job_coverage(job.ranks, options.rank >= 0 ? 0 : named_world);
        detail::analyze_job(job, options);
        return job;
    } catch (const std::bad_alloc&) {
        return resource_exhausted("out of host memory while combining rank reports");
    } catch (const std::exception& e) {
        return internal_error(std::string("job analysis failed: ") + e.what());
    } catch (...) {
        return internal_error("job analysis failed with an unknown exception");
    }
}

}  // namespace gpudiag
