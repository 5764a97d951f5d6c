// SPDX-License-Identifier: Apache-2.0
// Every title follows from its figures, on every real input gpudiag has: each quantity a title
// states is one of the finding's figures as reports print it, and each comparison a title makes
// ("Highly input-bound", "mostly waiting for the host", "Launch-bound") holds for those figures.
// A title that contradicts its numbers (a "launch-bound" whose idle time was CPU work) fails here.
#include <gpudiag/analyze.hpp>
#include <gpudiag/report.hpp>

#include "analysis/findings/finding_catalog.hpp"
#include "corpus.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace gpudiag {
namespace {

namespace fs = std::filesystem;

struct Input {
    std::string name;
    std::vector<std::string> paths;
};

// Every trace, snapshot, Nsight export and archive of the corpus, the two-rank job, the demo
// recording and the sick node's recording.
std::vector<Input> every_input() {
    std::vector<Input> out;
    for (const char* folder : {"kineto_traces", "memory_snapshots", "nsight_sqlite"}) {
        const fs::path dir = testing::corpus_path(folder);
        if (!fs::exists(dir)) continue;
        for (const auto& e : fs::directory_iterator(dir)) {
            const std::string name = e.path().filename().string();
            if (name.find("memory_timeline") != std::string::npos || e.path().extension() == ".csv")
                continue;
            out.push_back({name, {e.path().string()}});
        }
    }
    const std::string r0 = testing::corpus_kineto_trace("hta_sampled_rank-0.json.gz");
    const std::string r1 = testing::corpus_kineto_trace("hta_sampled_rank-1.json.gz");
    if (fs::exists(r0) && fs::exists(r1)) out.push_back({"two-rank job", {r0, r1}});
    const fs::path data = GPUDIAG_TEST_DATA_DIR;  // <checkout>/tests/data
    for (const fs::path& path :
         {data.parent_path().parent_path() / "python/gpudiag/data/demo.gpudiag",
          data / "sick_node.gpudiag"}) {
        if (fs::exists(path)) out.push_back({path.filename().string(), {path.string()}});
    }
    return out;
}

// The quantities a title states: a number and the unit words reports print after it.
std::vector<std::string> quantities(const std::string& title) {
    // A bound ("< 1 %") is a threshold, not a figure; longer units first ("GiB/s" before "GiB").
    static const std::regex kQuantity(
        R"((< ?)?([0-9][0-9.,]*) ?(%|GiB/s|MiB/s|KiB/s|B/s|ns|us|µs|ms|min|s|h|TiB|GiB|MiB|KiB|B)(?![A-Za-z/]))");
    std::vector<std::string> out;
    for (std::sregex_iterator it(title.begin(), title.end(), kQuantity), end; it != end; ++it) {
        if ((*it)[1].matched) continue;
        out.push_back((*it)[2].str() + " " + (*it)[3].str());
    }
    return out;
}

// Every figure of the finding as reports print it; a rate's amount also alone, for titles that
// spell the rate out ("8.0 MiB per step").
std::set<std::string> printed_figures(const Finding& f) {
    std::set<std::string> out;
    for (const auto* figures : {&f.figures, &f.predicted_saving}) {
        for (const auto& fig : *figures) {
            out.insert(format_figure(fig.value, fig.unit));
            if (std::string(enum_name(fig.unit)).rfind("bytes/", 0) == 0)
                out.insert(format_figure(fig.value, Unit::kBytes));
        }
    }
    return out;
}

double value(const std::vector<Figure>& figures, const std::string& key, double missing = -1) {
    for (const auto& f : figures) {
        if (f.key == key) return f.value;
    }
    return missing;
}

bool has(const std::string& title, const char* words) {
    return title.find(words) != std::string::npos;
}

// The comparison each title makes, checked against the finding's own figures.
using Rule = std::function<void(const Finding&)>;
const std::map<std::string, Rule>& comparison_rules() {
    static const std::map<std::string, Rule> rules = {
        {"input_bound",
         [](const Finding& f) {
             const double share = value(f.figures, "share");
             EXPECT_EQ(has(f.title, "Highly"), share >= 0.20) << share;
             EXPECT_EQ(has(f.title, "Moderately"), share >= 0.05 && share < 0.20) << share;
         }},
        {"gpu_idle",
         [](const Finding& f) {
             const double host = value(f.figures, "host_wait_share");
             EXPECT_EQ(has(f.title, "mostly waiting for the host"), host >= 0.5) << host;
             if (host < 0.5) return;
             // The cause the title names is the largest share of the idle time.
             std::string top;
             double most = -1;
             for (const auto& fig : f.figures) {
                 if (fig.key.rfind("idle_", 0) == 0 && fig.value > most) {
                     most = fig.value;
                     top = fig.label;
                 }
             }
             EXPECT_NE(f.title.find(top), std::string::npos) << top;
         }},
        {"launch_bound",
         [](const Finding& f) {
             EXPECT_GE(value(f.figures, "launch_share_of_idle"), 0.5);
             EXPECT_TRUE(has(f.title, "launching"));
         }},
        {"host_sync_stall",
         [](const Finding& f) {
             const double saving = value(f.predicted_saving, "share");
             if (has(f.title, "not worth fixing first")) {
                 EXPECT_LT(saving, 0.01);
             }
             if (has(f.title, "hold the host back")) {
                 EXPECT_GE(saving, 0.05);
                 EXPECT_LT(value(f.figures, "share"), 0.05);
             }
             if (has(f.title, ": removing them saves")) {
                 EXPECT_GE(saving, 0.01);
             }
             if (has(f.title, "stall the GPU")) {
                 EXPECT_GE(value(f.figures, "share"), 0.05);
             }
         }},
        {"comm_bound", [](const Finding& f) { EXPECT_GE(value(f.figures, "share"), 0.10); }},
    };
    return rules;
}

void check(const Finding& f, const std::string& where) {
    SCOPED_TRACE(where + ": " + f.id + ": " + f.title);
    const auto printed = printed_figures(f);
    for (const auto& q : quantities(f.title)) {
        EXPECT_TRUE(printed.count(q) > 0) << "\"" << q << "\" is none of the finding's figures";
    }
    auto rule = comparison_rules().find(f.id);
    if (rule != comparison_rules().end()) rule->second(f);
}

void check_all(const Report& r, const std::string& where) {
    for (const auto& f : r.findings) check(f, where);
    for (const auto& rank : r.ranks)
        check_all(rank, where + " rank " + std::to_string(rank.source.rank));
}

// Every input's report, analysed once for the tests below.
const std::vector<std::pair<std::string, Report>>& every_report() {
    static const std::vector<std::pair<std::string, Report>> all = [] {
        std::vector<std::pair<std::string, Report>> out;
        for (const auto& in : every_input()) {
            auto r = analyze_files(in.paths);
            EXPECT_TRUE(r.is_ok()) << in.name << ": " << r.status().to_string();
            if (r) out.emplace_back(in.name, std::move(*r));
        }
        return out;
    }();
    return all;
}

TEST(FindingTitles, FollowFromTheirFiguresOnEveryInput) {
    const auto& reports = every_report();
    if (reports.size() < 10) GTEST_SKIP() << "corpus absent under " << GPUDIAG_CORPUS_DIR;
    std::size_t findings = 0;
    std::set<std::string> ids;
    for (const auto& [name, r] : reports) {
        check_all(r, name);
        for (const auto& f : r.findings) ids.insert(f.id);
        findings += r.findings.size();
    }
    // The rules were exercised: each finding they cover was raised on some real input.
    for (const auto& [id, rule] : comparison_rules()) EXPECT_TRUE(ids.count(id) > 0) << id;
    EXPECT_GE(findings, 50u);
}

// Savings that can be added: removing every cause together saves at least what the largest single
// fix does and never more than the step, and on the demo recording, whose input wait, syncs and
// idle GPU are one and the same time, the three findings list each other.
void check_fix_all(const Report& r, const std::string& where) {
    SCOPED_TRACE(where);
    double largest = 0;
    for (const auto& f : r.findings)
        largest = std::max(largest, value(f.predicted_saving, "share", 0));
    // A job's findings quote their worst rank's savings; what fixing all of them is worth is
    // each rank's own (its report's fix_all_saving), checked below.
    if (r.fix_all_saving.empty() && r.ranks.empty()) {
        for (const auto& f : r.findings) EXPECT_TRUE(f.predicted_saving.empty()) << f.id;
    } else if (!r.fix_all_saving.empty()) {
        const double all = value(r.fix_all_saving, "share");
        EXPECT_GE(all, largest - 1e-9);
        EXPECT_LE(all, 1.0);
    }
    for (const auto& f : r.findings) {
        for (const auto& other : f.saving_shared_with) {
            const Finding* o = r.finding(other);
            ASSERT_NE(o, nullptr) << f.id << " shares with " << other;
            EXPECT_NE(std::find(o->saving_shared_with.begin(), o->saving_shared_with.end(), f.id),
                      o->saving_shared_with.end())
                << other << " does not list " << f.id;
        }
    }
    for (const auto& rank : r.ranks)
        check_fix_all(rank, where + " rank " + std::to_string(rank.source.rank));
}

TEST(FindingSavings, AllTogetherBoundsEachAndOverlapsAreMutual) {
    const auto& reports = every_report();
    if (reports.size() < 10) GTEST_SKIP() << "corpus absent under " << GPUDIAG_CORPUS_DIR;
    bool demo = false;
    for (const auto& [name, r] : reports) {
        check_fix_all(r, name);
        if (name != "demo.gpudiag") continue;
        demo = true;
        for (const char* id : {"input_bound", "gpu_idle", "host_sync_stall"}) {
            const Finding* f = r.finding(id);
            ASSERT_NE(f, nullptr) << id;
            EXPECT_EQ(f->saving_shared_with.size(), 2u) << id;
        }
    }
    EXPECT_TRUE(demo) << "the bundled demo recording was not among the inputs";
}

// Every finding raised on a real input, a job's own included, is in the findings catalog (so
// docs/findings.md lists it), and so is every finding it shares a saving with.
void check_catalogued(const Report& r, const std::string& where, std::set<std::string>& seen) {
    for (const auto& f : r.findings) {
        EXPECT_TRUE(detail::finding_id(f.id).has_value()) << where << ": " << f.id;
        for (const auto& other : f.saving_shared_with) {
            EXPECT_TRUE(detail::finding_id(other).has_value()) << where << ": " << other;
        }
        seen.insert(f.id);
    }
    for (const auto& rank : r.ranks)
        check_catalogued(rank, where + " rank " + std::to_string(rank.source.rank), seen);
}

TEST(FindingCatalog, HoldsEveryFindingRaisedOnEveryInput) {
    const auto& reports = every_report();
    if (reports.size() < 10) GTEST_SKIP() << "corpus absent under " << GPUDIAG_CORPUS_DIR;
    std::set<std::string> seen;
    for (const auto& [name, r] : reports) check_catalogued(r, name, seen);
    // Each area's analyses raised something, so the check above saw their ids.
    for (auto id : {detail::FindingId::kInputBound, detail::FindingId::kRankStraggler,
                    detail::FindingId::kMemoryLeak, detail::FindingId::kThermalThrottle}) {
        EXPECT_TRUE(seen.count(std::string(detail::finding_name(id))) > 0)
            << detail::finding_name(id);
    }
}

}  // namespace
}  // namespace gpudiag
