// SPDX-License-Identifier: Apache-2.0
// Findings and reports: what the analyses conclude, in a form the text, JSON, HTML and Prometheus
// renderers all share.
#pragma once

#include <gpudiag/export.hpp>
#include <gpudiag/source_info.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace gpudiag {

enum class Severity : std::uint8_t { kInfo = 0, kWarning = 1, kCritical = 2 };
GPUDIAG_API const char* severity_name(Severity s) noexcept;  ///< "info", "warning", "critical"

/// A named number with its unit ("bytes", "ns", "percent", "count", "bytes/step", ...).
struct Figure {
    std::string key;    ///< stable snake_case name, e.g. "input_wait_share"
    double value = 0;
    std::string unit;
    std::string label;  ///< human label, e.g. "time waiting for input"
};

/// A place in the program that a finding points at (an allocation site, a kernel, a range).
struct CallSite {
    std::string location;  ///< "train.py:42 forward" or a kernel name
    double value = 0;      ///< bytes, ns or count: the unit is the finding's `site_unit`
    double share = 0;      ///< fraction of the finding's total, 0..1
    std::string detail;
};

/// One diagnosis. `id` is stable across versions ("input_bound", "memory_leak", ...).
struct Finding {
    std::string id;
    Severity severity = Severity::kInfo;
    std::string title;               ///< one line: "Input-bound: 39 % of step time waiting"
    std::string summary;             ///< a paragraph with the numbers
    double confidence = 1.0;         ///< 0..1
    std::vector<Figure> figures;
    std::string site_unit;           ///< unit of CallSite::value
    std::vector<CallSite> sites;
    std::vector<std::string> evidence;  ///< concrete observations backing the verdict
    std::vector<std::string> advice;    ///< what to change, most effective first
    std::int32_t rank = -1;
    std::int32_t device = -1;
};

using Cell = std::variant<double, std::string>;

struct Table {
    std::string id;
    std::string title;
    std::vector<std::string> columns;
    std::vector<std::vector<Cell>> rows;
};

/// A bounded time series for plots: (seconds from the start, value).
struct Series {
    std::string id;
    std::string title;
    std::string unit;
    std::vector<std::pair<double, double>> points;
};

/// One analysis' figures (memory, timeline, health ...).
struct Section {
    std::string id;
    std::string title;
    std::vector<Figure> figures;
    std::vector<Table> tables;
    std::vector<Series> series;

    [[nodiscard]] const Figure* figure(const std::string& key) const {
        for (const auto& f : figures) {
            if (f.key == key) return &f;
        }
        return nullptr;
    }
};

struct Report {
    std::uint32_t schema_version = 1;
    SourceInfo source;
    SourceSummary capture;
    std::vector<Finding> findings;
    std::vector<Section> sections;
    std::vector<std::string> notes;
    /// For a multi-rank job: one report per rank (findings there carry their rank); the job's
    /// own findings (stragglers, imbalance) stay at the top level.
    std::vector<Report> ranks;

    [[nodiscard]] const Finding* finding(const std::string& id) const {
        for (const auto& f : findings) {
            if (f.id == id) return &f;
        }
        return nullptr;
    }
    [[nodiscard]] const Section* section(const std::string& id) const {
        for (const auto& s : sections) {
            if (s.id == id) return &s;
        }
        return nullptr;
    }
};

/// Plain-text rendering for terminals and logs. Errors: none (never throws; returns "" on OOM).
GPUDIAG_API std::string render_text(const Report& report) noexcept;
/// JSON rendering; the schema is documented in README.md ("JSON report").
GPUDIAG_API std::string render_json(const Report& report) noexcept;

}  // namespace gpudiag
