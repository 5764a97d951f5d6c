// SPDX-License-Identifier: Apache-2.0
// Cross-rank analysis of a multi-rank job: a per-rank table of the headline figures, the job's
// communication figures, the slowest rank (rank_straggler) and uneven collective time
// (comm_imbalance).
#include "analysis/job/job_analysis.hpp"
#include "support/format.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace gpudiag::detail {
namespace {

// Other ranks waiting 10 % of a step for one rank is worth naming; at 25 % that rank dominates
// the job's speed.
constexpr double kStragglerNotable = 0.10;
constexpr double kStragglerSevere = 0.25;
// Collective time differing by half of its mean across ranks means ranks arrive at collectives
// at very different times (or carry different loads).
constexpr double kCommImbalanceNotable = 0.5;

double figure_of(const Report& r, const char* section, const char* key, double fallback = 0) {
    const Section* s = r.section(section);
    const Figure* f = s != nullptr ? s->figure(key) : nullptr;
    return f != nullptr ? f->value : fallback;
}

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    std::size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct RankFigures {
    std::int32_t rank = -1;
    double step_ns = 0;        // host step time, or the GPU window without steps
    double span_ns = 0;
    double idle_share = 0;
    double compute_share = 0;
    double comm_share = 0;
    double overlap_share = 0;
    double comm_ns = 0;
    double exposed_comm_ns = 0;
    double work_ns = 0;        // step time not spent in exposed communication
};

void add_rank_table(Report& job, Section& s) {
    // Columns: every figure of every section that all ranks report.
    std::map<std::string, std::pair<std::string, int>> common;  // key -> (unit, ranks having it)
    for (const auto& r : job.ranks) {
        for (const auto& sec : r.sections) {
            for (const auto& f : sec.figures) {
                auto& entry = common[sec.id + "." + f.key];
                entry.first = f.unit;
                ++entry.second;
            }
        }
    }
    Table t;
    t.id = "ranks";
    t.title = "Per-rank figures";
    t.columns.push_back("rank");
    t.units.push_back("rank");
    std::vector<std::string> keys;
    for (const auto& [key, info] : common) {
        if (info.second == static_cast<int>(job.ranks.size())) {
            keys.push_back(key);
            t.columns.push_back(key);
            t.units.push_back(info.first);
        }
    }
    for (const auto& r : job.ranks) {
        std::vector<Cell> row;
        row.emplace_back(static_cast<double>(r.source.rank));
        for (const auto& key : keys) {
            auto dot = key.find('.');
            const Section* sec = r.section(key.substr(0, dot));
            const Figure* f = sec ? sec->figure(key.substr(dot + 1)) : nullptr;
            row.emplace_back(f ? f->value : 0.0);
        }
        t.rows.push_back(std::move(row));
    }
    s.tables.push_back(std::move(t));
}

}  // namespace

void analyze_job(Report& job, const AnalysisOptions& /*options*/) {
    Section s;
    s.id = "job";
    s.title = "Job of " + std::to_string(job.ranks.size()) + " ranks";
    s.figures.push_back({"ranks", static_cast<double>(job.ranks.size()), "count", "ranks"});

    std::vector<RankFigures> ranks;
    for (const auto& r : job.ranks) {
        if (r.section("timeline") == nullptr || figure_of(r, "timeline", "gpu_activities") <= 0) continue;
        RankFigures f;
        f.rank = r.source.rank;
        f.span_ns = figure_of(r, "timeline", "window_span_ns");
        double steps = figure_of(r, "timeline", "steps");
        f.step_ns = steps > 0 ? figure_of(r, "timeline", "step_time_ns") : f.span_ns;
        f.idle_share = figure_of(r, "timeline", "idle_share");
        f.compute_share = figure_of(r, "timeline", "compute_share");
        f.comm_share = figure_of(r, "timeline", "communication_share");
        f.overlap_share = figure_of(r, "timeline", "comm_overlap_share");
        f.comm_ns = f.comm_share * f.span_ns;
        f.exposed_comm_ns = figure_of(r, "timeline", "comm_exposed_share") * f.span_ns;
        if (steps > 1) {  // per step, like the step time
            f.comm_ns /= steps;
            f.exposed_comm_ns /= steps;
        }
        f.work_ns = std::max(0.0, f.step_ns - f.exposed_comm_ns);
        ranks.push_back(f);
    }

    if (!ranks.empty()) {
        double n = static_cast<double>(ranks.size());
        double comm = 0, overlap = 0, idle = 0;
        for (const auto& f : ranks) {
            comm += f.comm_share;
            overlap += f.overlap_share;
            idle += f.idle_share;
        }
        s.figures.push_back({"communication_share", comm / n, "fraction",
                             "communication kernels, mean share of the window over ranks"});
        s.figures.push_back({"comm_overlap_share", overlap / n, "fraction",
                             "communication overlapped with compute, mean over ranks"});
        s.figures.push_back({"idle_share", idle / n, "fraction", "GPU idle, mean over ranks"});

        Table t;
        t.id = "rank_balance";
        t.title = "Per-rank step time, communication and work";
        t.columns = {"rank", "step_time_ns", "idle_share", "compute_share", "communication_share",
                     "comm_overlap_share", "communication_ns", "exposed_communication_ns", "work_ns"};
        t.units = {"rank", "ns", "fraction", "fraction", "fraction", "fraction", "ns", "ns", "ns"};
        for (const auto& f : ranks) {
            t.rows.push_back({static_cast<double>(f.rank), f.step_ns, f.idle_share, f.compute_share,
                              f.comm_share, f.overlap_share, f.comm_ns, f.exposed_comm_ns, f.work_ns});
        }
        s.tables.push_back(std::move(t));
    }

    if (ranks.size() >= 2) {
        std::vector<double> comm;
        for (const auto& f : ranks) comm.push_back(f.comm_ns);
        // Time inside a collective is transfer plus waiting for the last rank to arrive, so the
        // rank with the least collective time is the one the others wait for. How long they wait
        // for it, on average, is the median collective time minus its own.
        double total_comm = 0;
        for (double c : comm) total_comm += c;
        auto slowest = std::min_element(ranks.begin(), ranks.end(),
                                        [](const RankFigures& a, const RankFigures& b) {
                                            return a.comm_ns < b.comm_ns;
                                        });
        double med_comm = median(comm);
        std::vector<double> steps;
        for (const auto& f : ranks) steps.push_back(f.step_ns);
        double med_step = median(steps);
        double wait = std::max(0.0, med_comm - slowest->comm_ns);
        double excess = med_step > 0 ? wait / med_step : 0;
        s.figures.push_back({"slowest_rank", static_cast<double>(slowest->rank), "rank",
                             "rank the others wait for in collectives"});
        s.figures.push_back({"straggler_wait_ns", wait, "ns",
                             "median rank's extra time in collectives, per step"});
        s.figures.push_back({"straggler_excess", excess, "fraction",
                             "that wait as a share of the median step time"});
        if (excess >= kStragglerNotable) {
            Finding f;
            f.id = "rank_straggler";
            f.severity = excess >= kStragglerSevere ? Severity::kCritical : Severity::kWarning;
            f.rank = slowest->rank;
            f.title = "Rank " + std::to_string(slowest->rank) + " is the straggler: the other ranks "
                      "wait about " + format_duration_ns(wait) + " per step (" +
                      format_percent(excess) + ") for it in collectives";
            f.summary = "Rank " + std::to_string(slowest->rank) + " spends " +
                        format_duration_ns(slowest->comm_ns) +
                        " per step in collective kernels against a median of " +
                        format_duration_ns(med_comm) +
                        ": it reaches each collective last, and the others wait inside the "
                        "collective for it. Its GPU is idle " +
                        format_percent(slowest->idle_share) + " of its window.";
            f.figures = {{"share", excess, "fraction", "wait for this rank, share of the step"},
                         {"wait_ns", wait, "ns", "others' extra collective time per step"},
                         {"communication_ns", slowest->comm_ns, "ns", "its collective time per step"},
                         {"median_communication_ns", med_comm, "ns", "median collective time"}};
            f.site_unit = "ns";
            for (const auto& r : ranks) {
                f.sites.push_back(CallSite{"rank " + std::to_string(r.rank), r.comm_ns,
                                           total_comm > 0 ? r.comm_ns / total_comm : 0,
                                           "collective time per step; idle " +
                                               format_percent(r.idle_share)});
            }
            f.evidence.push_back("collective time per step: rank " + std::to_string(slowest->rank) +
                                 " " + format_duration_ns(slowest->comm_ns) + ", median " +
                                 format_duration_ns(med_comm));
            f.advice.push_back("Look at this rank's own findings first (input pipeline, host "
                               "syncs, launch overhead): its delay is every rank's delay.");
            f.advice.push_back("Balance the work: uneven shards, embedding tables or sequence "
                               "lengths make one rank slower.");
            f.advice.push_back("Check the machine: a throttled or shared GPU, or a busy CPU, "
                               "shows up as one slow rank.");
            job.findings.push_back(std::move(f));
        }

        double mean_comm = 0;
        for (double c : comm) mean_comm += c;
        mean_comm /= static_cast<double>(comm.size());
        auto [lo, hi] = std::minmax_element(ranks.begin(), ranks.end(),
                                            [](const RankFigures& a, const RankFigures& b) {
                                                return a.comm_ns < b.comm_ns;
                                            });
        double spread = mean_comm > 0 ? (hi->comm_ns - lo->comm_ns) / mean_comm : 0;
        s.figures.push_back({"communication_spread", spread, "fraction",
                             "(max - min) collective time over its mean"});
        if (spread >= kCommImbalanceNotable) {
            Finding f;
            f.id = "comm_imbalance";
            f.severity = Severity::kWarning;
            f.rank = hi->rank;
            f.title = "Uneven collective time: rank " + std::to_string(hi->rank) + " " +
                      format_duration_ns(hi->comm_ns) + " vs rank " + std::to_string(lo->rank) +
                      " " + format_duration_ns(lo->comm_ns) + " per step";
            f.summary = "Collective kernels take " + format_percent(spread) +
                        " of their mean more on rank " + std::to_string(hi->rank) + " than on rank " +
                        std::to_string(lo->rank) + ". Time inside a collective includes waiting "
                        "for the last rank to arrive: rank " + std::to_string(hi->rank) +
                        " waits longest, rank " + std::to_string(lo->rank) + " arrives last.";
            f.figures = {{"share", spread, "fraction", "(max - min) over the mean"},
                         {"max_communication_ns", hi->comm_ns, "ns", "most collective time"},
                         {"min_communication_ns", lo->comm_ns, "ns", "least collective time"}};
            f.site_unit = "ns";
            for (const auto& r : ranks) {
                f.sites.push_back(CallSite{"rank " + std::to_string(r.rank), r.comm_ns,
                                           mean_comm > 0 ? r.comm_ns / (mean_comm * static_cast<double>(ranks.size())) : 0,
                                           "overlap " + format_percent(r.overlap_share)});
            }
            f.advice.push_back("Start with the rank that spends the least time in collectives: "
                               "it arrives last.");
            f.advice.push_back("If every rank does the same work, look for uneven data (shard "
                               "sizes, sequence lengths) or a slower node or link.");
            job.findings.push_back(std::move(f));
        }
    }
    add_rank_table(job, s);
    job.sections.push_back(std::move(s));
    std::stable_sort(job.findings.begin(), job.findings.end(),
                     [](const Finding& a, const Finding& b) { return a.severity > b.severity; });
}

}  // namespace gpudiag::detail
