// SPDX-License-Identifier: Apache-2.0
// Plain-text rendering of a Report for terminals and service logs: findings first, most severe
// first, each with its numbers, evidence and advice; then the figures of each analysis.
#include <gpudiag/report.hpp>
#include <gpudiag/version.hpp>

#include "core/producers.hpp"
#include "support/format.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace gpudiag {
namespace {

const char* severity_tag(Severity s) {
    switch (s) {
        case Severity::kCritical: return "[CRITICAL]";
        case Severity::kWarning: return "[WARNING] ";
        case Severity::kInfo: return "[INFO]    ";
    }
    return "";
}

// A number prints by its column's declared unit; a table that declares none prints plain numbers.
std::string render_cell(const Cell& cell, Unit unit) {
    if (const auto* d = std::get_if<double>(&cell)) {
        return unit == Unit::kNumber ? detail::format_number(*d, 2) : format_figure(*d, unit);
    }
    return std::get<std::string>(cell);
}

void render_table(std::string& out, const Table& t, std::size_t max_rows) {
    std::vector<std::vector<std::string>> cells;
    std::vector<std::string> headings;
    for (std::size_t i = 0; i < t.columns.size(); ++i)
        headings.push_back(
            column_heading(t.columns[i], i < t.units.size() ? t.units[i] : Unit::kNumber));
    cells.push_back(std::move(headings));
    for (std::size_t r = 0; r < t.rows.size() && r < max_rows; ++r) {
        std::vector<std::string> row;
        for (std::size_t i = 0; i < t.rows[r].size(); ++i) {
            std::string s =
                render_cell(t.rows[r][i], i < t.units.size() ? t.units[i] : Unit::kNumber);
            if (s.size() > 60) s = s.substr(0, 57) + "...";
            row.push_back(std::move(s));
        }
        cells.push_back(std::move(row));
    }
    std::vector<std::size_t> width;
    for (const auto& row : cells) {
        if (width.size() < row.size()) width.resize(row.size(), 0);
        for (std::size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
    }
    out += "    " + t.title + "\n";
    for (std::size_t r = 0; r < cells.size(); ++r) {
        out += "      ";
        for (std::size_t i = 0; i < cells[r].size(); ++i) {
            out += cells[r][i];
            if (i + 1 < cells[r].size()) out.append(width[i] - cells[r][i].size() + 2, ' ');
        }
        out += '\n';
    }
    if (t.rows.size() > max_rows) {
        out += fmt::format("      ... {} more rows\n", t.rows.size() - max_rows);
    }
}

void render_saving(std::string& out, const Finding& f) {
    const std::string saving = describe_saving(f.predicted_saving);
    if (saving.empty()) return;
    const std::string shared = describe_shared_saving(f.saving_shared_with);
    out += "      " + saving + (shared.empty() ? "" : ". " + shared) + "\n";
}

void render_finding(std::string& out, const Finding& f) {
    out += "  " + std::string(severity_tag(f.severity)) + " " + f.id;
    if (f.rank >= 0) out += fmt::format(" (rank {})", f.rank);
    out += ": " + f.title + "\n";
    if (!f.summary.empty()) out += "      " + f.summary + "\n";
    render_saving(out, f);
    for (const auto& fig : f.figures) {
        out += "      - " + (fig.label.empty() ? fig.key : fig.label) + ": " +
               format_figure(fig.value, fig.unit) + "\n";
    }
    if (!f.sites.empty()) {
        out += "      Where:\n";
        std::size_t shown = std::min<std::size_t>(f.sites.size(), 5);
        for (std::size_t i = 0; i < shown; ++i) {
            const auto& s = f.sites[i];
            out += "        " + format_figure(s.value, f.site_unit);
            if (s.share > 0) out += " (" + detail::format_percent(s.share) + ")";
            out += "  " + s.location;
            if (!s.detail.empty()) out += "  [" + s.detail + "]";
            out += "\n";
        }
        if (f.sites.size() > shown) {
            out += fmt::format("        ... {} more\n", f.sites.size() - shown);
        }
    }
    if (!f.evidence.empty()) {
        out += "      Evidence:\n";
        for (const auto& e : f.evidence) out += "        * " + e + "\n";
    }
    if (!f.advice.empty()) {
        out += "      Advice:\n";
        for (const auto& a : f.advice) out += "        > " + a + "\n";
    }
    out += "\n";
}

void render_section(std::string& out, const Section& s) {
    out += "  " + s.title + "\n";
    std::vector<std::pair<std::string, std::string>> rows;
    rows.reserve(s.figures.size());
    for (const auto& f : s.figures) rows.push_back(figure_row(f));
    std::size_t w = 0;
    for (const auto& [name, value] : rows) w = std::max(w, name.size());
    for (const auto& [name, value] : rows) {
        out += "    " + name + std::string(w - name.size() + 2, ' ') + value + "\n";
    }
    for (const auto& t : s.tables) {
        if (t.kind != TableKind::kData) render_table(out, t, 15);
    }
    out += "\n";
}

// Partial input comes first: what was read, then what is missing, before any finding.
void render_input(std::string& out, const InputCoverage& in) {
    if (in.complete) return;
    out +=
        "PARTIAL INPUT: only part of the input could be read; everything below covers that "
        "part alone.\n";
    out += fmt::format("  Read: {} events", in.events);
    if (in.events > 0) {
        out += " over " + detail::format_duration_ns(static_cast<double>(in.span_ns())) +
               " of the input's time";
    }
    out += ".\n";
    for (const auto& m : in.missing) out += "  Missing: " + m + "\n";
    out += "\n";
}

void render_report(std::string& out, const Report& r, bool nested) {
    if (!nested) {
        out += "gpudiag " + std::string(version()) + " diagnosis";
        if (!r.source.description.empty()) out += " of " + r.source.description;
        if (!r.source.producer.empty()) out += " (" + r.source.producer + ")";
        out += "\n";
        if (r.source.simulated) {
            out +=
                "*** SIMULATED DATA: generated to demonstrate gpudiag, not recorded on a GPU ***\n";
        }
        for (const auto& d : r.source.devices) {
            out += fmt::format("  device {}: {}\n", d.ordinal, describe_device(d));
        }
        out += "\n";
    } else {
        out += fmt::format("== rank {} ({})\n", r.source.rank, r.source.description);
    }
    render_input(out, r.input);
    out += headline(r) + "\n\n";
    if (!r.findings.empty()) {
        out += fmt::format("Findings ({}, what to fix first on top):\n", r.findings.size());
        std::vector<Finding> ranked = r.findings;
        rank_findings(ranked);
        for (const auto& f : ranked) render_finding(out, f);
        const std::string all = describe_fix_all(r.fix_all_saving);
        if (!all.empty()) out += "  " + all + ".\n\n";
    }
    for (const auto& s : r.sections) render_section(out, s);
    for (const auto& rank : r.ranks) render_report(out, rank, true);
    if (!r.notes.empty() || !r.capture.notes.empty() || r.capture.dropped > 0) {
        out += "Notes:\n";
        for (const auto& n : r.notes) out += "  - " + n + "\n";
        for (const auto& n : r.capture.notes) out += "  - " + n + "\n";
        if (r.capture.dropped > 0) {
            // Only live capture has buffers to fill; an importer's skipped events are its own.
            out += fmt::format("  - {} events {}; figures may be incomplete.\n", r.capture.dropped,
                               r.source.producer == detail::kProducerCapture
                                   ? "were dropped by full capture buffers"
                                   : "of the input could not be used");
        }
    }
}

}  // namespace

std::string render_text(const Report& report) noexcept {
    try {
        std::string out;
        render_report(out, report, false);
        return out;
    } catch (...) {
        return {};
    }
}

}  // namespace gpudiag
