// SPDX-License-Identifier: Apache-2.0
// The headline over every input of the shared corpus: no report opens with a bare "No problems
// found." unless its input had every kind of evidence, and each kind of input lists what it holds.
#include <gpudiag/analyze.hpp>
#include <gpudiag/report.hpp>

#include "corpus.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace gpudiag {
namespace {

namespace fs = std::filesystem;

struct Analysed {
    std::string name;
    Report report;
};

// Every trace, snapshot, Nsight export and archive of the corpus that gpudiag reads (the memory
// timeline export and Pipit's CSV files are not inputs it takes).
const std::vector<Analysed>& every_corpus_report() {
    static const std::vector<Analysed> all = [] {
        std::vector<Analysed> out;
        for (const char* folder : {"kineto_traces", "memory_snapshots", "nsight_sqlite"}) {
            const fs::path dir = testing::corpus_path(folder);
            if (!fs::exists(dir)) continue;
            for (const auto& e : fs::directory_iterator(dir)) {
                const std::string name = e.path().filename().string();
                if (name.find("memory_timeline") != std::string::npos ||
                    e.path().extension() == ".csv") {
                    continue;
                }
                auto r = analyze_files({e.path().string()});
                EXPECT_TRUE(r.is_ok()) << name << ": " << r.status().to_string();
                if (r) out.push_back({name, std::move(*r)});
            }
        }
        return out;
    }();
    return all;
}

// A job's own findings aggregate its ranks' ("On 8 of 8 ranks"); without any, its ranks'.
std::size_t findings_in(const Report& r) {
    std::size_t n = r.findings.size();
    if (n > 0) return n;
    for (const auto& rank : r.ranks) n += findings_in(rank);
    return n;
}

TEST(Headline, NoCorpusReportClearsWhatItsInputCouldNotShow) {
    const auto& all = every_corpus_report();
    if (all.empty()) GTEST_SKIP() << "corpus absent under " << GPUDIAG_CORPUS_DIR;
    EXPECT_GE(all.size(), 30u);
    for (const auto& [name, r] : all) {
        SCOPED_TRACE(name);
        const std::string line = headline(r);
        ASSERT_FALSE(line.empty());
        if (line.rfind("No problems found.", 0) == 0) {
            EXPECT_EQ(r.observed.size(), kEvidenceKinds) << line;
        }
        if (r.observed.size() < kEvidenceKinds) {
            EXPECT_NE(line.find("not observed"), std::string::npos) << line;
        }
        if (findings_in(r) > 0) {
            EXPECT_EQ(line.rfind(std::to_string(findings_in(r)) + " problem", 0), 0u) << line;
        }
        // It opens the report: right after the header (and the partial-input box), before any
        // finding or figure.
        const std::string text = render_text(r);
        const auto at = text.find("\n" + line + "\n");
        ASSERT_NE(at, std::string::npos) << text.substr(0, 600);
        for (const char* later : {"[CRITICAL]", "[WARNING]", "[INFO]", "Input overview"}) {
            const auto l = text.find(later);
            if (l != std::string::npos) {
                EXPECT_LT(at, l) << later;
            }
        }
        EXPECT_NE(render_json(r, true).find("\"headline\":"), std::string::npos);
    }
}

// What each kind of input holds, as the report lists it.
TEST(Headline, EachKindOfInputListsItsEvidence) {
    const auto& all = every_corpus_report();
    if (all.empty()) GTEST_SKIP() << "corpus absent under " << GPUDIAG_CORPUS_DIR;
    for (const auto& [name, r] : all) {
        SCOPED_TRACE(name);
        if (name.size() > 7 && name.substr(name.size() - 7) == ".pickle") {
            // A snapshot: memory and nothing of the timeline (decomfl's annotates its fetches).
            EXPECT_TRUE(r.saw(Evidence::kDeviceMemory));
            EXPECT_FALSE(r.saw(Evidence::kGpuActivity));
            EXPECT_FALSE(r.saw(Evidence::kSteps));
        }
        // No trace or export carries NVML samples of the card.
        EXPECT_FALSE(r.saw(Evidence::kDeviceHealth));
    }
    for (const char* traced :
         {"kineto_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz",
          "extrap_con_kernel.sqlite"}) {
        for (const auto& [name, r] : all) {
            if (name == traced) {
                EXPECT_TRUE(r.saw(Evidence::kGpuActivity)) << name;
            }
        }
    }
    for (const auto& [name, r] : all) {
        if (name.find("kineto_resnet50_num_workers_0") == std::string::npos) continue;
        EXPECT_TRUE(r.saw(Evidence::kSteps));
        EXPECT_TRUE(r.saw(Evidence::kInputWaits));
        EXPECT_TRUE(r.saw(Evidence::kDeviceMemory));
    }
}

// The evidence reads back from JSON; a report saved before reports listed it claims nothing.
TEST(Headline, EvidenceSurvivesJsonAndOldReportsClaimNothing) {
    const auto& all = every_corpus_report();
    if (all.empty()) GTEST_SKIP() << "corpus absent under " << GPUDIAG_CORPUS_DIR;
    for (const auto& [name, r] : all) {
        SCOPED_TRACE(name);
        auto back = parse_report_json(render_json(r, true));
        ASSERT_TRUE(back.is_ok()) << back.status().to_string();
        EXPECT_EQ(back->observed, r.observed);
        EXPECT_TRUE(back->observed_known);
        EXPECT_EQ(headline(*back), headline(r));
    }
    const Report& r = all.front().report;
    std::string json = render_json(r, true);
    const auto from = json.find("\"observed\":");
    ASSERT_NE(from, std::string::npos);
    json.erase(from, json.find(']', from) + 2 - from);  // the field and its comma
    auto old = parse_report_json(json);
    ASSERT_TRUE(old.is_ok()) << old.status().to_string() << json.substr(0, 300);
    EXPECT_FALSE(old->observed_known);
    EXPECT_EQ(headline(*old).find("not observed"), std::string::npos) << headline(*old);
}

TEST(Headline, AnInputOfNoEventsIsNoAllClear) {
    auto r = analyze_events({}, SourceInfo{}, StringTable{});
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_TRUE(r->observed.empty());
    EXPECT_EQ(headline(*r).rfind("Nothing was observed", 0), 0u) << headline(*r);
    EXPECT_EQ(render_text(*r).find("No problems found"), std::string::npos);
}

}  // namespace
}  // namespace gpudiag
