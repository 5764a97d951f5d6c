// SPDX-License-Identifier: Apache-2.0
// Cross-rank analysis of a multi-rank job: a per-rank table of the headline figures, the job's
// communication figures, the slowest rank (rank_straggler) and uneven collective time
// (comm_imbalance).
#include "analysis/job/job_analysis.hpp"

#include "analysis/collectives/collective_verdict.hpp"
#include "analysis/findings/figure_keys.hpp"
#include "analysis/findings/finding_catalog.hpp"
#include "analysis/timeline/critical_path.hpp"
#include "support/format.hpp"
#include "support/statistics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

namespace gpudiag::detail {
namespace {

namespace tk = timeline_keys;

double figure_of(const Report& r, const char* section, const char* key, double fallback = 0) {
    const Section* s = r.section(section);
    const Figure* f = s != nullptr ? s->figure(key) : nullptr;
    return f != nullptr ? f->value : fallback;
}

struct RankFigures {
    std::int32_t rank = -1;
    double step_ns = 0;  // host step time, or the GPU window without steps
    double span_ns = 0;
    double idle_share = 0;
    double compute_share = 0;
    double comm_share = 0;
    double overlap_share = 0;
    double comm_ns = 0;
    double exposed_comm_ns = 0;
    double work_ns = 0;  // step time not spent in exposed communication
};

void add_rank_table(Report& job, Section& s) {
    // Columns: every figure of every section that all ranks report.
    std::map<std::string, std::pair<Unit, int>> common;  // key -> (unit, ranks having it)
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
    t.units.push_back(Unit::kRank);
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

// ---- HTA's straggler view: which ranks start the dominant collective last, step by step ------

// HTA's filter: collectives shorter than this share of the mean step are too short to hold a
// rank back.
constexpr double kSignificantCollective = 0.01;
// HTA flags the two latest ranks of each step.
constexpr std::size_t kLateRanksPerStep = 2;

struct Launch {
    double start_us;
    double duration_ns;
};
struct CollectiveId {
    double stream;
    std::string kernel;
    auto operator<=>(const CollectiveId&) const = default;
};
// rank -> step -> collective -> chain (in time order; see TimelineAnalyzer::collectives_)
using Chains =
    std::map<std::int32_t, std::map<std::int64_t, std::map<CollectiveId, std::vector<Launch>>>>;

const Table* table_of(const Report& r, const char* section, const char* id) {
    const Section* s = r.section(section);
    if (s == nullptr) return nullptr;
    for (const auto& t : s->tables) {
        if (t.id == id) return &t;
    }
    return nullptr;
}

double number_at(const std::vector<Cell>& row, std::size_t i) {
    return i < row.size() && std::holds_alternative<double>(row[i]) ? std::get<double>(row[i])
                                                                    : 0.0;
}

// The steps of the job view (HTA leaves out step 0 and unnumbered work, and in its window the
// last step), and the mean step as HTA measures it: from the first event of those steps to the
// last, over all ranks, divided by their number. 0 without steps.
double mean_step_ns(const Report& job, bool drop_last, std::set<std::int64_t>& steps) {
    std::vector<std::vector<double>> rows;  // step, start_us, end_us
    for (const auto& r : job.ranks) {
        const Table* t = table_of(r, tk::kSection, tk::kJobStepsTable);
        if (t == nullptr) continue;
        for (const auto& row : t->rows) {
            if (number_at(row, 0) <= 0) continue;
            steps.insert(static_cast<std::int64_t>(number_at(row, 0)));
            rows.push_back({number_at(row, 0), number_at(row, 1), number_at(row, 2)});
        }
    }
    if (drop_last && steps.size() >= 2) steps.erase(std::prev(steps.end()));
    double first = 0, last = 0;
    bool any = false;
    for (const auto& row : rows) {
        if (steps.count(static_cast<std::int64_t>(row[0])) == 0) continue;
        first = any ? std::min(first, row[1]) : row[1];
        last = any ? std::max(last, row[2]) : row[2];
        any = true;
    }
    return any ? (last - first) * 1000.0 / static_cast<double>(steps.size()) : 0.0;
}

Chains read_chains(const Report& job) {
    Chains out;
    for (const auto& r : job.ranks) {
        const Table* t = table_of(r, tk::kSection, tk::kCollectivesTable);
        if (t == nullptr) continue;
        for (const auto& row : t->rows) {
            if (row.size() < 5 || !std::holds_alternative<std::string>(row[2])) continue;
            out[r.source.rank][static_cast<std::int64_t>(number_at(row, 0))]
               [CollectiveId{number_at(row, 1), std::get<std::string>(row[2])}]
                   .push_back(Launch{number_at(row, 3), number_at(row, 4)});
        }
    }
    return out;
}

// The last kernel of a chain at least `min_ns` long, or null.
const Launch* last_at_least(const std::vector<Launch>& chain, double min_ns) {
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
        if (it->duration_ns >= min_ns) return &*it;
    }
    return nullptr;
}

double sample_stddev(const std::vector<double>& v) {
    if (v.size() < 2) return std::nan("");
    double mean = 0;
    for (double x : v) mean += x;
    mean /= static_cast<double>(v.size());
    double ss = 0;
    for (double x : v) ss += (x - mean) * (x - mean);
    return std::sqrt(ss / static_cast<double>(v.size() - 1));
}

// HTA picks the collective whose (normalized) duration differs most across ranks, on average
// over the steps: a collective that everyone reaches together ends together and says nothing.
bool dominant_collective(const Chains& chains, const std::set<std::int64_t>& steps, double min_ns,
                         CollectiveId& out) {
    std::map<CollectiveId, std::pair<double, int>> spread;  // sum of stddevs, steps counted
    std::set<CollectiveId> ids;
    for (const auto& [rank, by_step] : chains) {
        for (const auto& [step, by_id] : by_step) {
            for (const auto& [id, chain] : by_id) ids.insert(id);
        }
    }
    for (const auto& id : ids) {
        for (std::int64_t step : steps) {
            std::vector<double> durations;
            for (const auto& [rank, by_step] : chains) {
                auto s = by_step.find(step);
                if (s == by_step.end()) continue;
                auto c = s->second.find(id);
                if (c == s->second.end()) continue;
                if (const Launch* l = last_at_least(c->second, min_ns))
                    durations.push_back(l->duration_ns);
            }
            double sd = sample_stddev(durations);
            if (!std::isnan(sd)) {
                spread[id].first += sd;
                ++spread[id].second;
            }
        }
    }
    double best = -1;
    for (const auto& [id, sum] : spread) {
        double mean = sum.first / sum.second;
        if (mean > best) {
            best = mean;
            out = id;
        }
    }
    return best >= 0;
}

void add_late_collectives(Report& job, Section& s, const AnalysisOptions& options) {
    std::set<std::int64_t> steps;
    const double step_ns = mean_step_ns(job, options.window == AnalysisWindow::kHta, steps);
    const Chains chains = read_chains(job);
    CollectiveId id;
    if (step_ns <= 0 || chains.size() < 2 ||
        !dominant_collective(chains, steps, kSignificantCollective * step_ns, id)) {
        return;
    }
    Table t;
    t.id = "late_collectives";
    t.title = "When each rank started " + id.kernel + " (stream " + format_number(id.stream, 0) +
              "), step by step: the latest two of each step are flagged (HTA's straggler view)";
    t.columns = {"step", "rank", "start_offset_ns", "duration_ns", "late"};
    t.units = {Unit::kStep, Unit::kRank, Unit::kNanoseconds, Unit::kNanoseconds, Unit::kCount};
    std::map<std::int32_t, int> late_count;
    std::map<std::int32_t, double> lateness;
    for (std::int64_t step : steps) {
        std::vector<std::pair<std::int32_t, Launch>> starts;
        for (const auto& [rank, by_step] : chains) {
            auto st = by_step.find(step);
            if (st == by_step.end()) continue;
            auto c = st->second.find(id);
            if (c == st->second.end()) continue;
            if (const Launch* l = last_at_least(c->second, kSignificantCollective * step_ns))
                starts.emplace_back(rank, *l);
        }
        if (starts.empty()) continue;
        std::vector<double> sorted;
        sorted.reserve(starts.size());
        for (const auto& [rank, l] : starts) sorted.push_back(l.start_us);
        std::sort(sorted.rbegin(), sorted.rend());
        const double cut = sorted[std::min(kLateRanksPerStep, sorted.size()) - 1];
        const double earliest = sorted.back();
        for (const auto& [rank, l] : starts) {
            const bool late = l.start_us >= cut;
            late_count[rank] += late ? 1 : 0;
            lateness[rank] += l.start_us - earliest;
            t.rows.push_back({static_cast<double>(step), static_cast<double>(rank),
                              (l.start_us - earliest) * 1000.0, l.duration_ns, late ? 1.0 : 0.0});
        }
    }
    if (t.rows.empty()) return;
    std::vector<std::int32_t> order;
    order.reserve(late_count.size());
    for (const auto& [rank, n] : late_count) order.push_back(rank);
    std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
        if (late_count[a] != late_count[b]) return late_count[a] > late_count[b];
        return lateness[a] > lateness[b];
    });
    s.figures.push_back({"late_start_rank", static_cast<double>(order[0]), Unit::kRank,
                         "rank most often among the last two to start the dominant collective"});
    if (order.size() > 1) {
        s.figures.push_back({"late_start_rank_2", static_cast<double>(order[1]), Unit::kRank,
                             "the rank next most often among them"});
    }
    s.tables.push_back(std::move(t));
}

// ---- Stragglers by the GPU: who reaches each collective last
// -------------------------------------
//
// A collective kernel ends at about the same moment on every rank (it completes once the last rank
// has joined), so its start on each rank's GPU is when that rank arrived: the rank that starts it
// last holds everyone else inside it. Wall time per step says nothing here (every rank waits for
// the last, so all steps are equally long); the GPU's own clock does. Ranks' clocks are aligned on
// the collectives' common end (the median, per rank, of its end minus the median end), so ranks
// on machines whose clocks disagree still compare.

// A rank's compute before a collective is "slower" beyond a tenth over the median rank's: kernel
// times of the same work vary by a few percent from run to run.
constexpr double kSlowerCompute = 1.10;

struct ArrivalAt {
    double start_us;
    double end_us;
    double compute_ns;
};
// (step, kernel, occurrence within the step) -> rank -> arrival
using ArrivalKey = std::tuple<std::int64_t, std::string, std::int64_t>;
using Arrivals = std::map<ArrivalKey, std::map<std::int32_t, ArrivalAt>>;

Arrivals read_arrivals(const Report& job) {
    Arrivals out;
    for (const auto& r : job.ranks) {
        const Table* t = table_of(r, tk::kSection, tk::kCollectiveArrivalsTable);
        if (t == nullptr) continue;
        for (const auto& row : t->rows) {
            if (row.size() < 7 || !std::holds_alternative<std::string>(row[2])) continue;
            ArrivalKey key{static_cast<std::int64_t>(number_at(row, 0)),
                           std::get<std::string>(row[2]),
                           static_cast<std::int64_t>(number_at(row, 1))};
            out[key][r.source.rank] =
                ArrivalAt{number_at(row, 4), number_at(row, 5), number_at(row, 6)};
        }
    }
    // A collective seen on one rank only cannot say who was late.
    for (auto it = out.begin(); it != out.end();)
        it = it->second.size() < 2 ? out.erase(it) : std::next(it);
    return out;
}

struct LateRank {
    int last = 0;                  // collectives it reached last
    double wait_ns = 0;            // what the others waited for it there (last minus second last)
    double compute_ns = 0;         // its compute before those collectives
    double median_compute_ns = 0;  // the median rank's compute before the same collectives
    double offset_ns = 0;          // its clock against the others'
};

struct GpuArrivals {
    std::size_t matched = 0;
    std::set<std::int64_t> steps;
    std::map<std::int32_t, LateRank> ranks;
    Table table;
};

GpuArrivals gpu_arrivals(const Report& job) {
    GpuArrivals out;
    const Arrivals arrivals = read_arrivals(job);
    if (arrivals.empty()) return out;
    std::map<std::int32_t, std::vector<double>> skew;  // rank -> end minus the median end (ns)
    for (const auto& [key, by_rank] : arrivals) {
        std::vector<double> ends;
        for (const auto& [rank, a] : by_rank) ends.push_back(a.end_us);
        const double mid = median(ends);
        for (const auto& [rank, a] : by_rank) skew[rank].push_back((a.end_us - mid) * 1000.0);
    }
    for (auto& [rank, v] : skew) out.ranks[rank].offset_ns = median(v);
    out.table.id = "collective_arrivals";
    out.table.title =
        "Who reached each collective last on the GPU (clocks aligned on the collectives' end)";
    out.table.columns = {"step",    "kernel",          "occurrence",       "last_rank",
                         "wait_ns", "last_compute_ns", "median_compute_ns"};
    out.table.units = {Unit::kStep,        Unit::kNumber,      Unit::kCount,      Unit::kRank,
                       Unit::kNanoseconds, Unit::kNanoseconds, Unit::kNanoseconds};
    constexpr std::size_t kRows = 256;
    for (const auto& [key, by_rank] : arrivals) {
        std::vector<std::pair<double, std::int32_t>> at;  // aligned start (ns), rank
        std::vector<double> compute;
        for (const auto& [rank, a] : by_rank) {
            at.emplace_back(a.start_us * 1000.0 - out.ranks[rank].offset_ns, rank);
            compute.push_back(a.compute_ns);
        }
        std::sort(at.rbegin(), at.rend());
        const std::int32_t last = at[0].second;
        const double wait = at[0].first - at[1].first;
        const double mid_compute = median(compute);
        LateRank& lr = out.ranks[last];
        ++lr.last;
        lr.wait_ns += wait;
        lr.compute_ns += by_rank.at(last).compute_ns;
        lr.median_compute_ns += mid_compute;
        ++out.matched;
        out.steps.insert(std::get<0>(key));
        if (out.table.rows.size() < kRows) {
            out.table.rows.push_back({static_cast<double>(std::get<0>(key)), std::get<1>(key),
                                      static_cast<double>(std::get<2>(key)),
                                      static_cast<double>(last), wait, by_rank.at(last).compute_ns,
                                      mid_compute});
        }
    }
    return out;
}

// What the others' wait for rank `late` can be worth per step: that wait sits inside their
// collective kernels, so removing it saves no more than hiding all their collective time, which
// each rank's replayed critical path prices (its what_if "hidden_communication"). Ranks march in
// lockstep, so the job saves no more than the rank with the least to gain. -1 when a rank has no
// per-step replay to ask.
double communication_replay_bound(const Report& job, std::int32_t late) {
    double bound = -1;
    for (const auto& r : job.ranks) {
        if (r.source.rank == late) continue;
        const Table* t = table_of(r, tk::kSection, tk::kWhatIfTable);
        if (t == nullptr || figure_of(r, tk::kSection, tk::kCriticalPathSteps) <= 0) return -1;
        double saving = -1;
        for (const auto& row : t->rows) {
            if (!row.empty() && std::holds_alternative<std::string>(row[0]) &&
                std::get<std::string>(row[0]) == what_if_key(WhatIf::kNoCommunication)) {
                saving = number_at(row, 1);
            }
        }
        if (saving < 0) return -1;
        bound = bound < 0 ? saving : std::min(bound, saving);
    }
    return bound;
}

// What removing a wait of `wait` per step inside the other ranks' collectives saves: the wait,
// at most the bound their replays allow (communication_replay_bound, for the late rank).
struct WaitSaving {
    double bound = -1;   ///< -1: not replayed
    double saving = 0;   ///< per step
    double share = 0;    ///< of the median step
    double step_ns = 0;  ///< the median step

    WaitSaving(const Report& job, std::int32_t late, double wait, double median_step_ns)
        : bound(communication_replay_bound(job, late)),
          saving(bound < 0 ? wait : std::min(wait, bound)),
          share(median_step_ns > 0 ? saving / median_step_ns : 0),
          step_ns(median_step_ns) {}

    [[nodiscard]] std::vector<Figure> figures() const {
        return {{saving_keys::kSavingNs, saving, Unit::kNanoseconds, "time saved per step"},
                {saving_keys::kShare, share, Unit::kFraction, "share of the step time"},
                {saving_keys::kStepTimeNs, std::max(0.0, step_ns - saving), Unit::kNanoseconds,
                 "predicted step time"}};
    }
    // A straggler is graded by what bringing it on time is worth now: a wait off the others'
    // critical path costs nothing until what holds their steps back is fixed.
    [[nodiscard]] Severity straggler_severity() const {
        return share >= kStragglerSevere    ? Severity::kCritical
               : share >= kStragglerNotable ? Severity::kWarning
                                            : Severity::kInfo;
    }
};

// How far the saving of a straggler finding goes, `bound` being communication_replay_bound's.
std::string straggler_saving_note(double wait, double bound) {
    if (bound < 0) {
        return "Bringing it on time removes that wait (the other ranks' critical paths were not "
               "replayed, so the saving below assumes all of it is on them).";
    }
    // A bound within 10 % of the wait keeps it (the replay's own error is of that order); under
    // a microsecond per step there is nothing to save.
    constexpr double kBoundKeepsWait = 0.9;
    constexpr double kNothingNs = 1e3;
    if (bound < wait * kBoundKeepsWait) {
        const bool none = bound < kNothingNs;
        const std::string shorten =
            none ? "do not shorten" : "shorten by " + format_duration_ns(bound) + " at most";
        const char* how_much = none               ? "None of that wait is on"
                               : bound < wait / 2 ? "Most of that wait is off"
                                                  : "Part of that wait is off";
        return std::string(how_much) +
               " the other ranks' critical path: replayed with all their collective time hidden, "
               "their steps " +
               shorten +
               ", so what holds their steps back (their own findings) comes first; once that is "
               "fixed, this rank's lateness costs the job up to the full wait.";
    }
    return "Bringing it on time removes that wait, and the other ranks' replayed critical paths "
           "keep the saving below.";
}

// The rank the others wait for most, by GPU arrival; adds the job figures and tables and, when it
// holds the job back by kStragglerNotable of a step, the rank_straggler finding. False when the
// ranks' reports carry no collective arrivals (they were not analysed for a job).
bool add_gpu_straggler(Report& job, Section& s, double median_step_ns) {
    GpuArrivals g = gpu_arrivals(job);
    if (g.matched == 0) return false;
    const double steps = static_cast<double>(std::max<std::size_t>(1, g.steps.size()));
    auto worst = std::max_element(g.ranks.begin(), g.ranks.end(), [](const auto& a, const auto& b) {
        if (a.second.wait_ns != b.second.wait_ns) return a.second.wait_ns < b.second.wait_ns;
        return a.second.last < b.second.last;
    });
    const std::int32_t rank = worst->first;
    const LateRank& lr = worst->second;
    const double wait = lr.wait_ns / steps;
    const double excess = median_step_ns > 0 ? wait / median_step_ns : 0;
    s.figures.push_back({"collectives_matched", static_cast<double>(g.matched), Unit::kCount,
                         "collective kernels matched across ranks"});
    s.figures.push_back({"gpu_late_rank", static_cast<double>(rank), Unit::kRank,
                         "rank the others wait for most, by when its GPU reached the collectives"});
    s.figures.push_back(
        {"gpu_late_wait_ns", wait, Unit::kNanoseconds, "the others' wait for it, per step"});
    s.figures.push_back(
        {"gpu_late_share", excess, Unit::kFraction, "that wait, share of the median step"});
    Table per_rank;
    per_rank.id = "gpu_arrivals";
    per_rank.title =
        "Per rank: collectives reached last on the GPU, the wait it caused, the compute before";
    per_rank.columns = {"rank",
                        "collectives_last",
                        "wait_ns_per_step",
                        "compute_before_ns",
                        "median_compute_before_ns",
                        "clock_offset_ns"};
    per_rank.units = {Unit::kRank,        Unit::kCount,       Unit::kNanoseconds,
                      Unit::kNanoseconds, Unit::kNanoseconds, Unit::kNanoseconds};
    for (const auto& [r, x] : g.ranks) {
        per_rank.rows.push_back({static_cast<double>(r), static_cast<double>(x.last),
                                 x.wait_ns / steps, x.last > 0 ? x.compute_ns / x.last : 0.0,
                                 x.last > 0 ? x.median_compute_ns / x.last : 0.0, x.offset_ns});
    }
    s.tables.push_back(std::move(per_rank));
    s.tables.push_back(std::move(g.table));
    if (excess < kStragglerNotable) return true;
    const double own = lr.last > 0 ? lr.compute_ns / lr.last : 0;
    const double typical = lr.last > 0 ? lr.median_compute_ns / lr.last : 0;
    const WaitSaving saving(job, rank, wait, median_step_ns);
    Finding f;
    f.id = finding_name(FindingId::kRankStraggler);
    f.severity = saving.straggler_severity();
    f.rank = rank;
    f.title = fmt::format(
        "Rank {} reaches the collectives last on the GPU: the other ranks wait about {} per step "
        "({}) for it",
        rank, format_duration_ns(wait), format_percent(excess));
    f.summary = fmt::format(
        "Rank {}'s GPU started {} of the {} collective kernels matched across ranks last; the "
        "others waited inside them {} per step for it. Before those collectives its GPU computed "
        "{} each, against {} on the median rank{} Step times can be equal on every rank all the "
        "same: each rank waits for it inside the collective.",
        rank, lr.last, g.matched, format_duration_ns(wait), format_duration_ns(own),
        format_duration_ns(typical),
        own > typical * kSlowerCompute
            ? ": it is slow in the compute before them (in backward when they are the gradients' "
              "all-reduce)."
            : ": its compute is not slower, so it starts that compute late (host, input or launch "
              "delays on that rank).");
    f.figures = {
        {kFindingShareKey, excess, Unit::kFraction, "wait for this rank, share of the step"},
        {"wait_ns", wait, Unit::kNanoseconds, "the others' wait per step"},
        {"collectives_last", static_cast<double>(lr.last), Unit::kCount,
         "collectives it reached last"},
        {"compute_before_ns", own, Unit::kNanoseconds, "its compute before each of them"},
        {"median_compute_before_ns", typical, Unit::kNanoseconds,
         "the median rank's compute before them"}};
    f.predicted_saving = saving.figures();
    f.site_unit = Unit::kNanoseconds;
    double total = 0;
    for (const auto& [r, x] : g.ranks) total += x.wait_ns;
    for (const auto& [r, x] : g.ranks) {
        if (x.last == 0) continue;
        f.sites.push_back(CallSite{fmt::format("rank {}", r), x.wait_ns / steps,
                                   total > 0 ? x.wait_ns / total : 0.0,
                                   fmt::format("{} collectives reached last", x.last)});
    }
    f.evidence.push_back(fmt::format(
        "GPU start of the collectives, clocks aligned on their common end: rank {} last at {} of "
        "{}",
        rank, lr.last, g.matched));
    f.summary += " " + straggler_saving_note(wait, saving.bound);
    f.advice.push_back(
        "Look at this rank's compute before the collectives it reaches last (its "
        "kernels, its GPU's clocks and temperature): its delay is every rank's delay.");
    f.advice.push_back(
        "Balance the work: uneven shards, embedding tables or sequence lengths make "
        "one rank's backward slower.");
    f.advice.push_back(
        "Check the machine: a throttled or shared GPU, or a busy CPU, shows up as one "
        "slow rank.");
    job.findings.push_back(std::move(f));
    return true;
}

// The figure a finding leads with, to rank ranks by: its "share" when it has one.
const Figure* lead_figure(const Finding& f) {
    for (const auto& fig : f.figures) {
        if (fig.key == kFindingShareKey) return &fig;
    }
    return f.figures.empty() ? nullptr : &f.figures.front();
}
double lead_value(const Finding& f) {
    const Figure* fig = lead_figure(f);
    return fig != nullptr ? fig->value : 0.0;
}

// One job finding per finding id the ranks report: the job's headline then names every problem
// of every rank, with the worst rank's numbers and the list of ranks that have it.
void summarise_rank_findings(Report& job) {
    std::vector<std::string> ids;  // in the order first met, most severe ranks' first
    for (const auto& r : job.ranks) {
        for (const auto& f : r.findings) {
            if (std::find(ids.begin(), ids.end(), f.id) == ids.end()) ids.push_back(f.id);
        }
    }
    for (const auto& id : ids) {
        std::vector<std::pair<std::int32_t, const Finding*>> hits;
        for (const auto& r : job.ranks) {
            if (const Finding* f = r.finding(id)) hits.emplace_back(r.source.rank, f);
        }
        auto worst = std::max_element(hits.begin(), hits.end(), [](const auto& a, const auto& b) {
            if (a.second->severity != b.second->severity)
                return a.second->severity < b.second->severity;
            return lead_value(*a.second) < lead_value(*b.second);
        });
        const Finding& w = *worst->second;
        Finding f;
        f.id = id;
        f.severity = w.severity;
        f.confidence = w.confidence;
        f.rank = -1;
        f.device = -1;
        f.title = fmt::format(
            "On {} of {} ranks: {}{}", hits.size(), job.ranks.size(), w.title,
            hits.size() > 1 ? fmt::format(" (rank {}, the worst)", worst->first) : std::string());
        f.summary = fmt::format("Rank {}: {}", worst->first, w.summary);
        f.figures = w.figures;
        f.figures.push_back(
            {"ranks", static_cast<double>(hits.size()), Unit::kCount, "ranks with this finding"});
        f.site_unit = lead_figure(w) != nullptr ? lead_figure(w)->unit : Unit::kNumber;
        double total = 0;
        for (const auto& hit : hits) total += lead_value(*hit.second);
        for (const auto& [rank, finding] : hits) {
            const double value = lead_value(*finding);
            f.sites.push_back(
                CallSite{fmt::format("rank {}", rank), value,
                         total > 0 ? value / total : 1.0 / static_cast<double>(hits.size()),
                         finding->title});
        }
        for (const auto& e : w.evidence)
            f.evidence.push_back(fmt::format("rank {}: {}", worst->first, e));
        f.advice = w.advice;
        f.predicted_saving = w.predicted_saving;
        job.findings.push_back(std::move(f));
    }
}

}  // namespace

void analyze_job(Report& job, const AnalysisOptions& options) {
    Section s;
    s.id = "job";
    s.title = fmt::format("Job of {} ranks", job.ranks.size());
    s.figures.push_back({"ranks", static_cast<double>(job.ranks.size()), Unit::kCount, "ranks"});

    std::vector<RankFigures> ranks;
    for (const auto& r : job.ranks) {
        if (r.section(tk::kSection) == nullptr ||
            figure_of(r, tk::kSection, tk::kGpuActivities) <= 0)
            continue;
        RankFigures f;
        f.rank = r.source.rank;
        f.span_ns = figure_of(r, tk::kSection, tk::kWindowSpanNs);
        double steps = figure_of(r, tk::kSection, tk::kSteps);
        f.step_ns = steps > 0 ? figure_of(r, tk::kSection, tk::kStepTimeNs) : f.span_ns;
        f.idle_share = figure_of(r, tk::kSection, tk::kIdleShare);
        f.compute_share = figure_of(r, tk::kSection, tk::kComputeShare);
        f.comm_share = figure_of(r, tk::kSection, tk::kCommunicationShare);
        f.overlap_share = figure_of(r, tk::kSection, tk::kCommOverlapShare);
        f.comm_ns = f.comm_share * f.span_ns;
        f.exposed_comm_ns = figure_of(r, tk::kSection, tk::kCommExposedShare) * f.span_ns;
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
        s.figures.push_back({"communication_share", comm / n, Unit::kFraction,
                             "communication kernels, mean share of the window over ranks"});
        s.figures.push_back({"comm_overlap_share", overlap / n, Unit::kFraction,
                             "communication overlapped with compute, mean over ranks"});
        s.figures.push_back({"idle_share", idle / n, Unit::kFraction, "GPU idle, mean over ranks"});

        Table t;
        t.id = "rank_balance";
        t.title = "Per-rank step time, communication and work";
        t.columns = {"rank",
                     "step_time_ns",
                     "idle_share",
                     "compute_share",
                     "communication_share",
                     "comm_overlap_share",
                     "communication_ns",
                     "exposed_communication_ns",
                     "work_ns"};
        t.units = {Unit::kRank,        Unit::kNanoseconds, Unit::kFraction,
                   Unit::kFraction,    Unit::kFraction,    Unit::kFraction,
                   Unit::kNanoseconds, Unit::kNanoseconds, Unit::kNanoseconds};
        for (const auto& f : ranks) {
            t.rows.push_back({static_cast<double>(f.rank), f.step_ns, f.idle_share, f.compute_share,
                              f.comm_share, f.overlap_share, f.comm_ns, f.exposed_comm_ns,
                              f.work_ns});
        }
        s.tables.push_back(std::move(t));
    }

    if (ranks.size() >= 2) {
        std::vector<double> comm;
        comm.reserve(ranks.size());
        for (const auto& f : ranks) comm.push_back(f.comm_ns);
        // Time inside a collective is transfer plus waiting for the last rank to arrive, so the
        // rank with the least collective time is the one the others wait for. How long they wait
        // for it, on average, is the median collective time minus its own.
        double total_comm = 0;
        for (double c : comm) total_comm += c;
        auto slowest = std::min_element(
            ranks.begin(), ranks.end(),
            [](const RankFigures& a, const RankFigures& b) { return a.comm_ns < b.comm_ns; });
        double med_comm = median(comm);
        std::vector<double> steps;
        steps.reserve(ranks.size());
        for (const auto& f : ranks) steps.push_back(f.step_ns);
        double med_step = median(steps);
        double wait = std::max(0.0, med_comm - slowest->comm_ns);
        double excess = med_step > 0 ? wait / med_step : 0;
        s.figures.push_back({"slowest_rank", static_cast<double>(slowest->rank), Unit::kRank,
                             "rank the others wait for in collectives"});
        s.figures.push_back({"straggler_wait_ns", wait, Unit::kNanoseconds,
                             "median rank's extra time in collectives, per step"});
        s.figures.push_back({"straggler_excess", excess, Unit::kFraction,
                             "that wait as a share of the median step time"});
        // The GPU's arrival at each collective names the straggler exactly; collective time per
        // rank is the estimate for reports that lack it.
        const bool by_gpu = add_gpu_straggler(job, s, med_step);
        if (!by_gpu && excess >= kStragglerNotable) {
            const WaitSaving saving(job, slowest->rank, wait, med_step);
            Finding f;
            f.id = finding_name(FindingId::kRankStraggler);
            f.severity = saving.straggler_severity();
            f.rank = slowest->rank;
            f.title = fmt::format(
                "Rank {} is the straggler: the other ranks wait about {} per step ({}) for it in "
                "collectives",
                slowest->rank, format_duration_ns(wait), format_percent(excess));
            f.summary = fmt::format(
                "Rank {} spends {} per step in collective kernels against a median of {}: it "
                "reaches each collective last, and the others wait inside the collective for it. "
                "Its GPU is idle {} of its window. {}",
                slowest->rank, format_duration_ns(slowest->comm_ns), format_duration_ns(med_comm),
                format_percent(slowest->idle_share), straggler_saving_note(wait, saving.bound));
            f.figures = {
                {kFindingShareKey, excess, Unit::kFraction,
                 "wait for this rank, share of the step"},
                {"wait_ns", wait, Unit::kNanoseconds, "others' extra collective time per step"},
                {"communication_ns", slowest->comm_ns, Unit::kNanoseconds,
                 "its collective time per step"},
                {"median_communication_ns", med_comm, Unit::kNanoseconds,
                 "median collective time"}};
            f.predicted_saving = saving.figures();
            f.site_unit = Unit::kNanoseconds;
            for (const auto& r : ranks) {
                f.sites.push_back(
                    CallSite{fmt::format("rank {}", r.rank), r.comm_ns,
                             total_comm > 0 ? r.comm_ns / total_comm : 0,
                             "collective time per step; idle " + format_percent(r.idle_share)});
            }
            f.evidence.push_back(fmt::format("collective time per step: rank {} {}, median {}",
                                             slowest->rank, format_duration_ns(slowest->comm_ns),
                                             format_duration_ns(med_comm)));
            f.advice.push_back(
                "Look at this rank's own findings first (input pipeline, host "
                "syncs, launch overhead): its delay is every rank's delay.");
            f.advice.push_back(
                "Balance the work: uneven shards, embedding tables or sequence "
                "lengths make one rank slower.");
            f.advice.push_back(
                "Check the machine: a throttled or shared GPU, or a busy CPU, "
                "shows up as one slow rank.");
            job.findings.push_back(std::move(f));
        }

        double mean_comm = 0;
        for (double c : comm) mean_comm += c;
        mean_comm /= static_cast<double>(comm.size());
        auto [lo, hi] = std::minmax_element(
            ranks.begin(), ranks.end(),
            [](const RankFigures& a, const RankFigures& b) { return a.comm_ns < b.comm_ns; });
        double spread = mean_comm > 0 ? (hi->comm_ns - lo->comm_ns) / mean_comm : 0;
        s.figures.push_back({"communication_spread", spread, Unit::kFraction,
                             "(max - min) collective time over its mean"});
        if (spread >= kCommImbalanceNotable) {
            Finding f;
            f.id = finding_name(FindingId::kCommImbalance);
            f.severity = Severity::kWarning;
            f.rank = hi->rank;
            f.title = fmt::format("Uneven collective time: rank {} {} vs rank {} {} per step",
                                  hi->rank, format_duration_ns(hi->comm_ns), lo->rank,
                                  format_duration_ns(lo->comm_ns));
            f.summary = fmt::format(
                "Collective kernels take {} of their mean more on rank {} than on rank {}. Time "
                "inside a collective includes waiting for the last rank to arrive: rank {} waits "
                "longest, rank {} arrives last.",
                format_percent(spread), hi->rank, lo->rank, hi->rank, lo->rank);
            f.figures = {
                {kFindingShareKey, spread, Unit::kFraction, "(max - min) over the mean"},
                {"max_communication_ns", hi->comm_ns, Unit::kNanoseconds, "most collective time"},
                {"min_communication_ns", lo->comm_ns, Unit::kNanoseconds, "least collective time"}};
            // Evening it out means the rank arriving last arrives with the median one; the
            // others' shorter collectives count only as far as their critical paths let them.
            f.predicted_saving =
                WaitSaving(job, lo->rank, std::max(0.0, med_comm - lo->comm_ns), med_step)
                    .figures();
            f.site_unit = Unit::kNanoseconds;
            for (const auto& r : ranks) {
                f.sites.push_back(CallSite{
                    fmt::format("rank {}", r.rank), r.comm_ns,
                    mean_comm > 0 ? r.comm_ns / (mean_comm * static_cast<double>(ranks.size())) : 0,
                    "overlap " + format_percent(r.overlap_share)});
            }
            f.advice.push_back(
                "Start with the rank that spends the least time in collectives: "
                "it arrives last.");
            f.advice.push_back(
                "If every rank does the same work, look for uneven data (shard "
                "sizes, sequence lengths) or a slower node or link.");
            job.findings.push_back(std::move(f));
        }
    }
    add_late_collectives(job, s, options);
    add_collective_verdicts(job, s);
    add_rank_table(job, s);
    job.sections.push_back(std::move(s));
    summarise_rank_findings(job);
    rank_findings(job.findings);
}

}  // namespace gpudiag::detail
