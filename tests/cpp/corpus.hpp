// SPDX-License-Identifier: Apache-2.0
// The shared corpus of real inputs (../shared/corpus, at GPUDIAG_CORPUS_DIR): tests read its files
// in place and, where one is absent, skip and name it.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <initializer_list>
#include <string>

namespace gpudiag::testing {

/// A corpus file by its path below the corpus, e.g. "kineto_traces/rank-0.json.gz".
inline std::string corpus_path(const std::string& relative) {
    return std::string(GPUDIAG_CORPUS_DIR) + "/" + relative;
}
inline std::string corpus_kineto_trace(const std::string& name) {
    return corpus_path("kineto_traces/" + name);
}
inline std::string corpus_snapshot(const std::string& name) {
    return corpus_path("memory_snapshots/" + name);
}
inline std::string corpus_nsight_export(const std::string& name) {
    return corpus_path("nsight_sqlite/" + name);
}

/// The first of `paths` that does not exist, or "" when all do.
inline std::string first_missing(std::initializer_list<std::string> paths) {
    for (const auto& p : paths) {
        if (!std::filesystem::exists(p)) return p;
    }
    return {};
}

}  // namespace gpudiag::testing

/// Skips the test, naming the file, unless every one of these paths exists.
#define GPUDIAG_REQUIRE_FILES(...)                                                                 \
    do {                                                                                           \
        const std::string gpudiag_missing_ = ::gpudiag::testing::first_missing({__VA_ARGS__});     \
        if (!gpudiag_missing_.empty()) GTEST_SKIP() << "corpus file absent: " << gpudiag_missing_; \
    } while (false)
