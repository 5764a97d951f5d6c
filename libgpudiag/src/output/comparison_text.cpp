// SPDX-License-Identifier: Apache-2.0
// A comparison as plain text: the verdict first, then why the runs are not comparable where they
// are not, the deciding deltas, every delta by area, the findings that changed, and what could
// not be compared.
#include <gpudiag/compare.hpp>
#include <gpudiag/report.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <string>
#include <vector>

namespace gpudiag {
namespace {

using Row = std::vector<std::string>;

void render_rows(std::string& out, const std::vector<Row>& rows, const char* indent) {
    std::vector<std::size_t> width;
    for (const auto& row : rows) {
        width.resize(std::max(width.size(), row.size()), 0);
        for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
    }
    for (const auto& row : rows) {
        std::string line = indent;
        for (std::size_t c = 0; c < row.size(); ++c) {
            line += row[c];
            if (c + 1 < row.size()) line.append(width[c] - row[c].size() + 2, ' ');
        }
        while (!line.empty() && line.back() == ' ') line.pop_back();
        out += line + '\n';
    }
}

std::string change_text(const CompareDelta& d) {
    // A share changes by points, not by a share of itself.
    if (d.unit == Unit::kFraction) return fmt::format("{:+.1f} points", d.change * 100.0);
    std::string s = (d.change > 0   ? "+"
                     : d.change < 0 ? "-"
                                    : "") +
                    format_figure(std::fabs(d.change), d.unit);
    if (std::isfinite(d.relative_change) && d.unit != Unit::kFraction) {
        s += fmt::format(" ({:+.1f} %)", d.relative_change * 100.0);
    }
    return s;
}

std::string noise_text(const CompareDelta& d) {
    if (d.unit == Unit::kFraction) return fmt::format("{:.1f} points", d.noise * 100.0);
    return format_figure(d.noise, d.unit);
}

Row delta_row(const CompareDelta& d) {
    return {d.label,        format_figure(d.before, d.unit), format_figure(d.after, d.unit),
            change_text(d), enum_name(d.judgement),          noise_text(d)};
}

void render_side(std::string& out, const char* name, const CompareSide& s) {
    out += fmt::format("  {} {} ({})\n", name, s.description, s.producer);
    std::string facts = s.steps > 0 ? fmt::format("{} steps", s.steps) : "no complete steps";
    if (s.ranks > 0) facts += fmt::format(", {} ranks", s.ranks);
    if (!s.devices.empty()) {
        facts += ", " + s.devices.front();
        if (s.devices.size() > 1) facts += fmt::format(" (x{})", s.devices.size());
    }
    for (const auto& [k, v] : s.software) facts += fmt::format(", {} {}", k, v);
    out += "         " + facts + '\n';
}

void render_area(std::string& out, const Comparison& c, CompareArea area, const char* title) {
    std::vector<Row> rows;
    for (const auto& d : c.deltas) {
        if (d.area == area && d.rank < 0) rows.push_back(delta_row(d));
    }
    if (rows.empty()) return;
    rows.insert(rows.begin(), Row{"figure", "before", "after", "change", "judgement", "noise"});
    out += fmt::format("\n  {}\n", title);
    render_rows(out, rows, "    ");
}

void render_ranks(std::string& out, const Comparison& c) {
    std::vector<Row> rows;
    for (const auto& d : c.deltas) {
        if (d.rank >= 0) rows.push_back(delta_row(d));
    }
    if (rows.empty()) return;
    rows.insert(rows.begin(), Row{"figure", "before", "after", "change", "judgement", "noise"});
    out += "\n  Per rank\n";
    render_rows(out, rows, "    ");
}

std::string saving_text(double ns) {
    return ns >= 0 ? format_figure(ns, Unit::kNanoseconds) : "-";
}

void render_findings(std::string& out, const Comparison& c) {
    if (c.findings.empty()) return;
    std::vector<Row> rows{{"change", "finding", "severity", "saving before", "saving after"}};
    for (const auto& f : c.findings) {
        const bool before = f.change != FindingChangeKind::kAppeared;
        const bool after = f.change != FindingChangeKind::kResolved;
        std::string severity = before ? severity_name(f.severity_before) : "";
        if (after) {
            const std::string s = severity_name(f.severity_after);
            severity = before && severity != s ? severity + " -> " + s : s;
        }
        std::string id = f.rank >= 0 ? fmt::format("{} (rank {})", f.id, f.rank) : f.id;
        rows.push_back({enum_name(f.change), id, severity, saving_text(f.saving_before_ns),
                        saving_text(f.saving_after_ns)});
    }
    out += "\nFindings (predicted saving per step, or over the window without steps)\n";
    render_rows(out, rows, "  ");
}

void render_list(std::string& out, const char* title, const std::vector<std::string>& items) {
    if (items.empty()) return;
    out += fmt::format("\n{}\n", title);
    for (const auto& i : items) out += "  - " + i + '\n';
}

void render_deciding(std::string& out, const Comparison& c) {
    std::vector<Row> rows;
    for (const auto& d : c.deltas) {
        if (d.deciding) rows.push_back(delta_row(d));
    }
    if (rows.empty()) return;
    rows.insert(rows.begin(), Row{"figure", "before", "after", "change", "judgement", "noise"});
    out += "\nDecided by\n";
    render_rows(out, rows, "  ");
}

void render_noise(std::string& out, const Comparison& c) {
    std::vector<std::string> bases;
    for (const auto& d : c.deltas) {
        if (std::find(bases.begin(), bases.end(), d.noise_basis) == bases.end()) {
            bases.push_back(d.noise_basis);
        }
    }
    render_list(out, "Noise: a change counts when it exceeds the noise column, which is", bases);
}

void render(std::string& out, const Comparison& c) {
    out += "gpudiag comparison\n";
    render_side(out, "before:", c.before);
    render_side(out, "after: ", c.after);
    out += fmt::format("\n{}\n", c.headline);
    std::vector<std::string> reasons;
    for (const auto& r : c.reasons) reasons.push_back(r.text + " [" + r.id + "]");
    render_list(out, "Not comparable in every respect:", reasons);
    render_deciding(out, c);
    if (!c.deltas.empty()) out += "\nWhat changed\n";
    render_area(out, c, CompareArea::kTime, "Step time");
    render_area(out, c, CompareArea::kGpu, "GPU busy and idle");
    render_area(out, c, CompareArea::kMemory, "Device memory");
    render_area(out, c, CompareArea::kHealth, "Card health");
    render_ranks(out, c);
    render_findings(out, c);
    render_list(out, "Not compared:", c.not_compared);
    render_list(out, "Notes:", c.notes);
    render_noise(out, c);
}

}  // namespace

std::string render_comparison_text(const Comparison& comparison) noexcept {
    try {
        std::string out;
        render(out, comparison);
        return out;
    } catch (const std::exception&) {
        return {};
    }
}

}  // namespace gpudiag
