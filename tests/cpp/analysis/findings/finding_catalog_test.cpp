// SPDX-License-Identifier: Apache-2.0
// The findings catalog: names and areas round-trip, every rule is formatted with the thresholds
// the code compares against, the analyses spell no finding id by hand, and the stack findings
// (raised only in live reports, so on no corpus input) are catalog ids with the severities the
// docs state. That every finding raised on a real input is in the catalog is checked in
// finding_titles_test.cpp, on every input of the corpus.
#include <gpudiag/report.hpp>

#include "analysis/findings/finding_catalog.hpp"
#include "analysis/health/stack_analyzer.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace gpudiag::detail {
namespace {

namespace fs = std::filesystem;

// How the catalog prints a number ("5" for 5 %, "0.1" for 0.1 %): %g, as iostreams do.
std::string g(double v) {
    std::ostringstream out;
    out << v;
    return out.str();
}

const FindingDoc& doc_of(const std::vector<FindingDoc>& docs, FindingId id) {
    for (const auto& d : docs) {
        if (d.id == id) return d;
    }
    static const FindingDoc none{};
    ADD_FAILURE() << "no doc for " << finding_name(id);
    return none;
}

TEST(FindingCatalog, NamesAndAreasRoundTrip) {
    const auto docs = finding_docs();
    ASSERT_EQ(docs.size(), static_cast<std::size_t>(FindingId::kCuptiMissingFromWheels) + 1);
    std::set<std::string_view> names;
    for (const auto& d : docs) {
        EXPECT_EQ(finding_name(d.id), d.name);
        EXPECT_EQ(finding_id(d.name), d.id) << d.name;
        EXPECT_EQ(finding_area(d.id), d.area) << d.name;
        EXPECT_EQ(finding_area_from_name(finding_area_name(d.area)), d.area) << d.name;
        EXPECT_TRUE(names.insert(d.name).second) << d.name;
    }
    EXPECT_EQ(finding_id("no_such_finding"), std::nullopt);
    EXPECT_EQ(finding_area_from_name("no_such_area"), std::nullopt);
    EXPECT_EQ(finding_name(FindingId::kInputBound), "input_bound");
    EXPECT_EQ(finding_area_name(FindingArea::kHealth), "health");
}

TEST(FindingCatalog, EveryRuleIsFormattedWithItsThresholds) {
    const auto docs = finding_docs();
    for (const auto& d : docs) {
        SCOPED_TRACE(std::string(d.name));
        EXPECT_FALSE(d.raised_when.empty());
        EXPECT_FALSE(d.severity.empty());
        for (const std::string* text : {&d.raised_when, &d.severity}) {
            EXPECT_EQ(text->find_first_of("{}"), std::string::npos) << *text;
            EXPECT_EQ(text->find("cannot format"), std::string::npos) << *text;
        }
    }
    // The values are the constants the analyses compare against, as the docs print them.
    EXPECT_NE(doc_of(docs, FindingId::kInputBound)
                  .raised_when.find("≥ " + g(kInputModerate * 100) + " %"),
              std::string::npos);
    EXPECT_EQ(doc_of(docs, FindingId::kInputBound).severity,
              "critical from " + g(kInputHigh * 100) + " % (\"highly\")");
    EXPECT_EQ(doc_of(docs, FindingId::kNearOom).severity,
              "critical from " + g(kNearOomCriticalShare * 100) + " %");
    EXPECT_NE(doc_of(docs, FindingId::kPageableMemcpy).raised_when.find("≥ 1 MiB copied"),
              std::string::npos);
    EXPECT_NE(doc_of(docs, FindingId::kMemoryLeak)
                  .raised_when.find("max(16 MiB, 2 % of the level, 0.1 % of capacity)"),
              std::string::npos);
    EXPECT_NE(doc_of(docs, FindingId::kMemoryLeak).raised_when.find("spanning ≥ 1 min"),
              std::string::npos);
    EXPECT_NE(doc_of(docs, FindingId::kXidError).severity.find("(13, 31, 43, 45)"),
              std::string::npos);
    EXPECT_NE(doc_of(docs, FindingId::kGpuOutlier).raised_when.find("≥ 20 points above it"),
              std::string::npos);
    EXPECT_NE(finding_area_note(FindingArea::kTimeline).find(g(kWorthFixing * 100) + " %"),
              std::string::npos);
    EXPECT_EQ(finding_area_note(FindingArea::kMemory), "");
}

// Every source file of libgpudiag/src/analysis but the catalog's own.
std::vector<fs::path> analysis_sources() {
    const fs::path root = fs::path(GPUDIAG_TEST_DATA_DIR).parent_path().parent_path();
    const fs::path analysis = root / "libgpudiag/src/analysis";
    std::vector<fs::path> out;
    if (!fs::exists(analysis)) return out;
    for (const auto& e : fs::recursive_directory_iterator(analysis)) {
        const auto ext = e.path().extension();
        if (e.path().parent_path().filename() == "findings") continue;
        if (ext == ".cpp" || ext == ".hpp") out.push_back(e.path());
    }
    return out;
}

// A finding's id written as a literal drifts from the catalog unseen: the analyses set and
// compare ids through finding_name(FindingId::k...).
TEST(FindingCatalog, AnalysesSpellNoFindingIdByHand) {
    const auto sources = analysis_sources();
    ASSERT_GT(sources.size(), 20u)
        << "libgpudiag/src/analysis not found from " << GPUDIAG_TEST_DATA_DIR;
    const auto docs = finding_docs();
    // A finding (named f, as in every add_<finding>()) given an id no catalog entry spells.
    static const std::regex kLiteralFindingId(R"((^|[^A-Za-z0-9_])f\.id = ")");
    for (const auto& path : sources) {
        std::ifstream in(path);
        int n = 0;
        for (std::string line; std::getline(in, line);) {
            ++n;
            const std::string code = line.substr(0, line.find("//"));
            const std::string where = path.filename().string() + ":" + std::to_string(n) + ": ";
            EXPECT_FALSE(std::regex_search(code, kLiteralFindingId))
                << where << line << "\n  (a new finding: add it to the findings catalog)";
            for (const auto& d : docs) {
                EXPECT_EQ(code.find("\"" + std::string(d.name) + "\""), std::string::npos)
                    << where << line << "\n  (write finding_name(FindingId::...))";
            }
        }
    }
}

// The stack's checks, run by the analyzer a live report runs, on stacks that break each of them.
std::vector<Finding> stack_findings(std::vector<std::pair<std::string, std::string>> properties) {
    Report report;
    report.source.properties = std::move(properties);
    StackAnalyzer analyzer;
    analyzer.contribute(report);
    return report.findings;
}

TEST(FindingCatalog, StackFindingsAreCatalogIdsWithTheirSeverity) {
    const std::vector<std::pair<std::vector<std::pair<std::string, std::string>>, FindingId>>
        cases = {
            {{{"stack.driver_cuda", "11.8"}, {"stack.framework_cuda", "12.4"}},
             FindingId::kDriverTooOldForFramework},
            {{{"stack.driver_cuda", "12.2"}, {"stack.framework_cuda", "12.4"}},
             FindingId::kDriverOlderThanFramework},
            {{{"stack.driver_cuda", "12.2"}, {"stack.cupti_cuda", "12.6"}},
             FindingId::kCuptiNewerThanDriver},
            {{{"stack.cupti_mapped", "/opt/a/libcupti.so.12;/opt/b/libcupti.so.12"}},
             FindingId::kSecondCupti},
            {{{"stack.framework_cuda", "12.4"},
              {"stack.cuda_wheels", "/venv/site-packages/nvidia"},
              {"stack.cupti_in_wheels", "false"}},
             FindingId::kCuptiMissingFromWheels},
        };
    const auto docs = finding_docs();
    for (const auto& [properties, expected] : cases) {
        SCOPED_TRACE(std::string(finding_name(expected)));
        const auto findings = stack_findings(properties);
        ASSERT_EQ(findings.size(), 1u);
        EXPECT_EQ(finding_id(findings[0].id), expected);
        EXPECT_EQ(finding_area(expected), FindingArea::kStack);
        // The docs' severity rule for a stack finding is its severity's name.
        EXPECT_EQ(doc_of(docs, expected).severity, severity_name(findings[0].severity));
    }
}

}  // namespace
}  // namespace gpudiag::detail
