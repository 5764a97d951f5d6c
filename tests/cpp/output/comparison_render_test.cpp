// SPDX-License-Identifier: Apache-2.0
// The text and JSON comparison renderers against golden files, on the comparison the library
// makes of a real pair (ResNet-50 with DataLoader num_workers 0, then 4). Golden files hold the
// output with the corpus folder written as <corpus> and the version as <version>;
// GPUDIAG_UPDATE_GOLDEN=1 rewrites them (review the diff like any other golden change).
#include <gpudiag/compare.hpp>
#include <gpudiag/version.hpp>

#include "corpus_reports.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace gpudiag {
namespace {

const char* const kNw4 =
    "kineto_traces/kineto_resnet50_num_workers_4_worker0.1623212756351.pt.trace.json.gz";

void replace_all(std::string& s, const std::string& from, const std::string& to) {
    for (auto at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
        s.replace(at, from.size(), to);
    }
}

// What depends on the machine that ran it: where the corpus is, and the library's version.
std::string normalised(std::string out) {
    replace_all(out, GPUDIAG_CORPUS_DIR, "<corpus>");
    replace_all(out, std::string("\"gpudiag_version\": \"") + version() + "\"",
                "\"gpudiag_version\": \"<version>\"");
    return out;
}

void expect_golden(const std::string& name, const std::string& actual) {
    const std::string path = std::string(GPUDIAG_SOURCE_DIR) + "/tests/golden/" + name;
    if (std::getenv("GPUDIAG_UPDATE_GOLDEN") != nullptr) {
        std::ofstream(path, std::ios::binary) << actual;
        return;
    }
    std::ifstream in(path, std::ios::binary);
    ASSERT_TRUE(in) << path << " is missing: run with GPUDIAG_UPDATE_GOLDEN=1";
    std::stringstream expected;
    expected << in.rdbuf();
    EXPECT_EQ(actual, expected.str()) << name << " differs (GPUDIAG_UPDATE_GOLDEN=1 rewrites it)";
}

Comparison resnet_pair() {
    const Report& before = testing::corpus_report({testing::kStarvedTrace});
    const Report& after = testing::corpus_report({kNw4});
    auto c = compare_reports(before, after);
    EXPECT_TRUE(c.is_ok()) << c.status().to_string();
    return c.is_ok() ? *c : Comparison{};
}

TEST(ComparisonRender, TextMatchesGolden) {
    GPUDIAG_REQUIRE_CORPUS(testing::kStarvedTrace, kNw4);
    expect_golden("comparison_resnet50_nw0_nw4.txt",
                  normalised(render_comparison_text(resnet_pair())));
}

TEST(ComparisonRender, JsonMatchesGoldenAndCompactIsOneLine) {
    GPUDIAG_REQUIRE_CORPUS(testing::kStarvedTrace, kNw4);
    const Comparison c = resnet_pair();
    expect_golden("comparison_resnet50_nw0_nw4.json", normalised(render_comparison_json(c)));
    const std::string compact = render_comparison_json(c, true);
    EXPECT_EQ(compact.find('\n'), std::string::npos);
    EXPECT_NE(compact.find("\"verdict\":\"improvement\""), std::string::npos);
    EXPECT_NE(compact.find("\"comparable\":true"), std::string::npos);
}

}  // namespace
}  // namespace gpudiag
