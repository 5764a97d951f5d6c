// SPDX-License-Identifier: Apache-2.0
// Prometheus exposition of reports the analyses produce, checked the way a Prometheus server
// reads it: every sample's family has HELP and TYPE, names are valid with their base unit,
// counters end in _total, no series appears twice, labels only identify (never a unit or key).
#include <gpudiag/report.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "output/corpus_reports.hpp"

namespace gpudiag {
namespace {

using testing::corpus_report;

struct Sample {
    std::string name;
    std::map<std::string, std::string> labels;
    double value = 0;
};

struct Exposition {
    std::map<std::string, std::string> type;  // family -> gauge|counter
    std::vector<Sample> samples;

    [[nodiscard]] std::vector<Sample> find(
        const std::string& name, const std::map<std::string, std::string>& with = {}) const {
        std::vector<Sample> out;
        for (const auto& s : samples) {
            bool match = s.name == name;
            for (const auto& [k, v] : with) {
                auto it = s.labels.find(k);
                match = match && it != s.labels.end() && it->second == v;
            }
            if (match) out.push_back(s);
        }
        return out;
    }
    [[nodiscard]] bool has_prefix(const std::string& prefix) const {
        for (const auto& s : samples) {
            if (s.name.rfind(prefix, 0) == 0) return true;
        }
        return false;
    }
};

// Parses text format 0.0.4 as written by render_prometheus, failing the test on anything a
// Prometheus server would refuse.
Exposition parse(const std::string& text) {
    static const std::regex kName("^[a-zA-Z_:][a-zA-Z0-9_:]*$");
    static const std::regex kSample(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$)");
    static const std::regex kLabel(R"re(([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?)re");
    static const std::set<std::string> kIdentity = {
        "hostname",   "Hostname",  "rank", "source",   "gpu", "UUID",
        "pci_bus_id", "modelName", "id",   "severity", "kind"};
    Exposition out;
    std::set<std::string> helped;
    std::set<std::string> series;
    std::set<std::string> closed;  // families whose block ended: a family is one block
    std::string current;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("# HELP ", 0) == 0) {
            std::string name = line.substr(7, line.find(' ', 7) - 7);
            EXPECT_TRUE(std::regex_match(name, kName)) << line;
            EXPECT_TRUE(helped.insert(name).second) << "HELP twice: " << line;
            if (!current.empty()) closed.insert(current);
            current = name;
            continue;
        }
        if (line.rfind("# TYPE ", 0) == 0) {
            std::istringstream t(line.substr(7));
            std::string name;
            std::string type;
            t >> name >> type;
            EXPECT_EQ(name, current) << line;
            EXPECT_TRUE(type == "gauge" || type == "counter") << line;
            EXPECT_EQ(type == "counter",
                      name.size() > 6 && name.substr(name.size() - 6) == "_total")
                << "counters and only counters end in _total: " << line;
            out.type[name] = type;
            continue;
        }
        std::smatch m;
        if (!std::regex_match(line, m, kSample)) {
            ADD_FAILURE() << "not a sample: " << line;
            continue;
        }
        Sample s;
        s.name = m[1];
        EXPECT_EQ(s.name, current) << "sample outside its family's block: " << line;
        EXPECT_FALSE(closed.count(s.name)) << line;
        std::string labels = m[3];
        for (std::sregex_iterator it(labels.begin(), labels.end(), kLabel), end; it != end; ++it) {
            EXPECT_TRUE(kIdentity.count((*it)[1])) << "label that does not identify: " << line;
            s.labels[(*it)[1]] = (*it)[2];
        }
        EXPECT_TRUE(series.insert(s.name + "{" + labels + "}").second) << "duplicate: " << line;
        s.value = std::stod(m[4]);
        EXPECT_FALSE(std::isnan(s.value)) << line;
        out.samples.push_back(std::move(s));
    }
    return out;
}

double figure(const Report& r, const char* section, const char* key) {
    const Section* s = r.section(section);
    const Figure* f = s != nullptr ? s->figure(key) : nullptr;
    return f != nullptr ? f->value : std::nan("");
}

TEST(Prometheus, OneMetricPerFigureInBaseUnits) {
    GPUDIAG_REQUIRE_CORPUS(testing::kStarvedTrace);
    const Report& r = corpus_report({testing::kStarvedTrace});
    Exposition e = parse(render_prometheus(r));

    auto wait = e.find("gpudiag_timeline_input_wait_ratio");
    ASSERT_EQ(wait.size(), 1u);
    EXPECT_DOUBLE_EQ(wait[0].value, figure(r, "timeline", "input_wait_share"));
    EXPECT_GT(wait[0].value, 0.2) << "the starvation case waits for input";
    auto step = e.find("gpudiag_timeline_step_time_seconds");
    ASSERT_EQ(step.size(), 1u);
    EXPECT_DOUBLE_EQ(step[0].value, figure(r, "timeline", "step_time_ns") * 1e-9);
    // "idle share of the window" and "host wait share of idle time" are separate metrics.
    EXPECT_EQ(e.find("gpudiag_timeline_idle_ratio").size(), 1u);
    EXPECT_EQ(e.find("gpudiag_timeline_host_wait_ratio").size(), 1u);
    EXPECT_EQ(e.find("gpudiag_timeline_busy_seconds").size(), 1u);
    EXPECT_TRUE(e.find("gpudiag_timeline_device").empty()) << "a device ordinal is a label";
    EXPECT_TRUE(e.find("gpudiag_timeline_window").empty()) << "a code is not a quantity";
    EXPECT_TRUE(e.find("gpudiag_figure").empty()) << "no generic figure gauge";
    EXPECT_EQ(e.type["gpudiag_capture_events_total"], "counter");
}

TEST(Prometheus, FindingsBySeverityAndId) {
    GPUDIAG_REQUIRE_CORPUS(testing::kStarvedTrace);
    const Report& r = corpus_report({testing::kStarvedTrace});
    Exposition e = parse(render_prometheus(r));
    double total = 0;
    for (const char* severity : {"info", "warning", "critical"}) {
        auto n = e.find("gpudiag_findings", {{"severity", severity}});
        ASSERT_EQ(n.size(), 1u) << severity;
        total += n[0].value;
    }
    EXPECT_EQ(total, static_cast<double>(r.findings.size()));
    const Finding* input_bound = r.finding("input_bound");
    ASSERT_NE(input_bound, nullptr);
    auto present = e.find("gpudiag_finding", {{"id", "input_bound"}});
    ASSERT_EQ(present.size(), 1u);
    EXPECT_EQ(present[0].labels["severity"], severity_name(input_bound->severity));
    EXPECT_TRUE(e.has_prefix("gpudiag_finding_input_bound_"));
}

// A dashboard tells "no finding" from "not observed": one series per kind of evidence, and the
// fix-all saving beside the findings' own.
TEST(Prometheus, EvidenceObservedAndTheFixAllSaving) {
    GPUDIAG_REQUIRE_CORPUS(testing::kStarvedTrace);
    const Report& r = corpus_report({testing::kStarvedTrace});
    Exposition e = parse(render_prometheus(r));
    for (const auto& kind : enum_names<Evidence>()) {
        auto v = e.find("gpudiag_evidence_observed", {{"kind", kind.name}});
        ASSERT_EQ(v.size(), 1u) << kind.name;
        EXPECT_EQ(v[0].value, r.saw(kind.value) ? 1.0 : 0.0) << kind.name;
    }
    ASSERT_FALSE(r.fix_all_saving.empty());
    auto all = e.find("gpudiag_fix_all_saving_seconds");
    ASSERT_EQ(all.size(), 1u);
    EXPECT_NEAR(all[0].value, r.fix_all_saving.front().value / 1e9, 1e-12);
}

TEST(Prometheus, GpuLabelsWhereTheSourceKnowsTheDevice) {
    GPUDIAG_REQUIRE_CORPUS(testing::kStarvedTrace);
    const Report& r = corpus_report({testing::kStarvedTrace});
    Exposition e = parse(render_prometheus(r));
    auto idle = e.find("gpudiag_timeline_idle_ratio");
    ASSERT_EQ(idle.size(), 1u);
    const double device = figure(r, "timeline", "device");
    ASSERT_FALSE(std::isnan(device));
    EXPECT_EQ(idle[0].labels["gpu"], std::to_string(static_cast<int>(device)));
    for (const auto& d : r.source.devices) {
        if (d.ordinal == device && !d.name.empty()) {
            EXPECT_EQ(idle[0].labels["modelName"], d.name);
        }
    }
    EXPECT_EQ(idle[0].labels.count("rank"), r.source.rank >= 0 ? 1u : 0u);
}

TEST(Prometheus, NothingForQuantitiesTheInputNeverHad) {
    GPUDIAG_REQUIRE_CORPUS(testing::kSnapshot);
    const Report& r = corpus_report({testing::kSnapshot});
    Exposition e = parse(render_prometheus(r));
    EXPECT_FALSE(e.has_prefix("gpudiag_timeline_")) << "a snapshot has no timeline";
    auto reserved = e.find("gpudiag_memory_reserved_bytes");
    ASSERT_EQ(reserved.size(), 1u);
    EXPECT_DOUBLE_EQ(reserved[0].value, figure(r, "memory", "reserved_bytes"));
    EXPECT_TRUE(reserved[0].labels.empty() || !reserved[0].labels.count("rank"));
}

TEST(Prometheus, EveryRankOfAJobIsLabelledOnce) {
    GPUDIAG_REQUIRE_CORPUS(testing::kRank0Trace, testing::kRank1Trace);
    const Report& job = corpus_report({testing::kRank0Trace, testing::kRank1Trace});
    ASSERT_EQ(job.ranks.size(), 2u);
    Exposition e = parse(render_prometheus(job));
    for (const auto& rank : job.ranks) {
        std::string label = std::to_string(rank.source.rank);
        auto idle = e.find("gpudiag_timeline_idle_ratio", {{"rank", label}});
        ASSERT_EQ(idle.size(), 1u) << "rank " << label;
        EXPECT_DOUBLE_EQ(idle[0].value, figure(rank, "timeline", "idle_share"));
    }
    EXPECT_TRUE(e.has_prefix("gpudiag_job_"));
}

TEST(Prometheus, SeveralReportsTogetherHaveNoDuplicateSeries) {
    GPUDIAG_REQUIRE_CORPUS(testing::kStarvedTrace, testing::kSnapshot);
    const Report& a = corpus_report({testing::kStarvedTrace});
    const Report& b = corpus_report({testing::kSnapshot});
    // The same report twice (two exports of one file) and an unrelated one: parse() fails the
    // test on any duplicate series.
    Exposition e = parse(render_prometheus(std::vector<Report>{a, a, b}));
    auto events = e.find("gpudiag_capture_events_total");
    ASSERT_EQ(events.size(), 3u);
    std::set<std::string> sources;
    for (const auto& s : events) sources.insert(s.labels.at("source"));
    EXPECT_EQ(sources.size(), 3u);
    EXPECT_EQ(sources.count(a.source.description + " #1"), 1u);
    EXPECT_EQ(sources.count(b.source.description), 1u);
    // One report alone needs no source label.
    EXPECT_EQ(
        parse(render_prometheus(a)).find("gpudiag_capture_events_total")[0].labels.count("source"),
        0u);
}

TEST(Prometheus, LabelValuesAreEscaped) {
    GPUDIAG_REQUIRE_CORPUS(testing::kSnapshot);
    Report r = corpus_report({testing::kSnapshot});
    r.source.hostname = "we\"ird\\host\nname";
    std::string text = render_prometheus(r);
    EXPECT_NE(text.find("Hostname=\"we\\\"ird\\\\host\\nname\""), std::string::npos) << text;
    parse(text);
}

// dcgm-exporter renamed its host label in 4.8.3 (`Hostname` to `hostname`): by default both are
// written, so a join works against either; each can be left out.
TEST(Prometheus, HostLabelUnderBothOfDcgmExportersNames) {
    GPUDIAG_REQUIRE_CORPUS(testing::kSnapshot);
    Report r = corpus_report({testing::kSnapshot});
    r.source.hostname = "node-7";
    auto host_labels = [&](const PrometheusOptions& options) {
        Exposition e = parse(render_prometheus(r, options));
        const auto samples = e.find("gpudiag_capture_events_total");
        EXPECT_EQ(samples.size(), 1u);
        std::set<std::string> out;
        for (const auto& [key, value] : samples.at(0).labels) {
            if (key == "hostname" || key == "Hostname") out.insert(key + "=" + value);
        }
        return out;
    };
    EXPECT_EQ(host_labels({}), (std::set<std::string>{"Hostname=node-7", "hostname=node-7"}));
    EXPECT_EQ(render_prometheus(r), render_prometheus(r, PrometheusOptions{}));
    EXPECT_EQ(host_labels({true, false}), (std::set<std::string>{"hostname=node-7"}));
    EXPECT_EQ(host_labels({false, true}), (std::set<std::string>{"Hostname=node-7"}));
    EXPECT_TRUE(host_labels({false, false}).empty());
}

}  // namespace
}  // namespace gpudiag
