// SPDX-License-Identifier: Apache-2.0
// Reports the analyses produce from files of the shared corpus (../shared/corpus), analysed once
// per test program; renderer tests run on these rather than on hand-made reports.
#pragma once

#include <gpudiag/analyze.hpp>

#include "corpus.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace gpudiag::testing {

// Starvation case (DataLoader num_workers=0): steps, input waits, kernels, one V100.
inline constexpr const char* kStarvedTrace =
    "kineto_traces/kineto_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz";
// Two ranks of one NCCL job.
inline constexpr const char* kRank0Trace = "kineto_traces/hta_sampled_rank-0.json.gz";
inline constexpr const char* kRank1Trace = "kineto_traces/hta_sampled_rank-1.json.gz";
// A torch memory snapshot: memory only, no timeline.
inline constexpr const char* kSnapshot = "memory_snapshots/silmont2000_cs336a2_mem_snapshot.pickle";

inline bool corpus_has(const std::vector<std::string>& names) {
    for (const auto& n : names) {
        if (!std::filesystem::exists(corpus_path(n))) return false;
    }
    return true;
}

/// The report analyze_files gives for these corpus files (cached).
inline const Report& corpus_report(const std::vector<std::string>& names) {
    static std::map<std::vector<std::string>, Report> cache;
    auto it = cache.find(names);
    if (it == cache.end()) {
        std::vector<std::string> paths;
        for (const auto& n : names) paths.push_back(corpus_path(n));
        auto r = analyze_files(paths);
        EXPECT_TRUE(r.is_ok()) << r.status().to_string();
        it = cache.emplace(names, r.is_ok() ? *r : Report{}).first;
    }
    return it->second;
}

}  // namespace gpudiag::testing

#define GPUDIAG_REQUIRE_CORPUS(...)                                         \
    if (!::gpudiag::testing::corpus_has({__VA_ARGS__})) {                   \
        GTEST_SKIP() << "corpus files absent under " << GPUDIAG_CORPUS_DIR; \
    }
