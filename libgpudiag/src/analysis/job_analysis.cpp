// SPDX-License-Identifier: Apache-2.0
// Cross-rank analysis of a multi-rank job: a per-rank table of the headline figures, so that the
// slow or unbalanced rank stands out.
#include "core/analyzer.hpp"

#include <map>
#include <string>

namespace gpudiag::detail {

void analyze_job(Report& job, const AnalysisOptions& /*options*/) {
    // Columns: every figure of every section that all ranks report.
    std::map<std::string, std::pair<std::string, int>> common;  // key -> (unit, ranks having it)
    for (const auto& r : job.ranks) {
        for (const auto& s : r.sections) {
            for (const auto& f : s.figures) {
                auto& entry = common[s.id + "." + f.key];
                entry.first = f.unit;
                ++entry.second;
            }
        }
    }
    Table t;
    t.id = "ranks";
    t.title = "Per-rank figures";
    t.columns.push_back("rank");
    std::vector<std::string> keys;
    for (const auto& [key, info] : common) {
        if (info.second == static_cast<int>(job.ranks.size())) {
            keys.push_back(key);
            t.columns.push_back(key);
        }
    }
    for (const auto& r : job.ranks) {
        std::vector<Cell> row;
        row.emplace_back(static_cast<double>(r.source.rank));
        for (const auto& key : keys) {
            auto dot = key.find('.');
            const Section* s = r.section(key.substr(0, dot));
            const Figure* f = s ? s->figure(key.substr(dot + 1)) : nullptr;
            row.emplace_back(f ? f->value : 0.0);
        }
        t.rows.push_back(std::move(row));
    }
    Section s;
    s.id = "job";
    s.title = "Job of " + std::to_string(job.ranks.size()) + " ranks";
    s.figures.push_back({"ranks", static_cast<double>(job.ranks.size()), "count", "ranks"});
    s.tables.push_back(std::move(t));
    job.sections.push_back(std::move(s));
}

}  // namespace gpudiag::detail
