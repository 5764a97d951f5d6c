// SPDX-License-Identifier: Apache-2.0
// Writes docs/findings.md's tables from the findings catalog (libgpudiag/src/analysis/findings/),
// so the docs state each finding's rules with the thresholds the code uses. The tables sit
// between markers naming the areas they list:
//
//   <!-- findings-table: timeline job -->
//   (generated: the table of those areas' findings, then the areas' notes)
//   <!-- /findings-table -->
//
// Everything outside the markers is hand-written and kept as it is. Every area is listed by
// exactly one table.
//
//   gen_findings_doc --check docs/findings.md   exit 1 when the file differs (the ctest)
//   gen_findings_doc --write docs/findings.md   rewrite the tables
#include "analysis/findings/finding_catalog.hpp"

#include <fstream>
#include <iostream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

using gpudiag::detail::FindingArea;

constexpr std::string_view kBegin = "<!-- findings-table:";
constexpr std::string_view kEnd = "<!-- /findings-table -->";

// A table cell: '|' would end it.
std::string cell(std::string_view text) {
    std::string out;
    for (char c : text) {
        if (c == '|') out += '\\';
        out += c;
    }
    return out;
}

std::string table_of(const std::vector<FindingArea>& areas) {
    std::string out = "| id | raised when | severity |\n|---|---|---|\n";
    for (const auto& doc : gpudiag::detail::finding_docs()) {
        bool listed = false;
        for (FindingArea a : areas) listed = listed || doc.area == a;
        if (!listed) continue;
        out += "| `" + std::string(doc.name) + "` | " + cell(doc.raised_when) + " | " +
               cell(doc.severity) + " |\n";
    }
    for (FindingArea a : areas) {
        const std::string note = gpudiag::detail::finding_area_note(a);
        if (!note.empty()) out += "\n" + note + "\n";
    }
    return out;
}

// The areas a begin marker names ("<!-- findings-table: timeline job -->"); false on a name that
// is no area, or an area another table already listed.
bool parse_marker(std::string_view line, std::set<FindingArea>& seen,
                  std::vector<FindingArea>& areas, std::string& error) {
    const std::size_t close = line.rfind("-->");
    if (close == std::string_view::npos || close < kBegin.size()) {
        error = "unterminated marker: " + std::string(line);
        return false;
    }
    std::istringstream names(std::string(line.substr(kBegin.size(), close - kBegin.size())));
    for (std::string name; names >> name;) {
        auto area = gpudiag::detail::finding_area_from_name(name);
        if (!area) {
            error = "no finding area is named '" + name + "'";
            return false;
        }
        if (!seen.insert(*area).second) {
            error = "area '" + name + "' is listed by two tables";
            return false;
        }
        areas.push_back(*area);
    }
    if (areas.empty()) error = "a marker names no area: " + std::string(line);
    return !areas.empty();
}

// `text` with every marked table regenerated; "" and `error` set when the markers are wrong.
std::string regenerate(const std::string& text, std::string& error) {
    std::string out;
    std::set<FindingArea> seen;
    std::istringstream in(text);
    bool inside = false;
    for (std::string line; std::getline(in, line);) {
        if (inside) {
            if (line != kEnd) continue;  // the old table
            inside = false;
        } else if (line.rfind(kBegin, 0) == 0) {
            std::vector<FindingArea> areas;
            if (!parse_marker(line, seen, areas, error)) return {};
            out += line + "\n" + table_of(areas);
            inside = true;
            continue;
        } else if (line == kEnd) {
            error = "an end marker without its begin marker";
            return {};
        }
        out += line + "\n";
    }
    if (inside) error = "a table's end marker is missing";
    for (const auto& doc : gpudiag::detail::finding_docs()) {
        if (error.empty() && seen.count(doc.area) == 0) {
            error = "no table lists the area '" +
                    std::string(gpudiag::detail::finding_area_name(doc.area)) + "' (" +
                    std::string(doc.name) + ")";
        }
    }
    return error.empty() ? out : std::string();
}

// The first line where the two differ, for the failure message.
std::string first_difference(const std::string& a, const std::string& b) {
    std::istringstream ia(a);
    std::istringstream ib(b);
    std::string la;
    std::string lb;
    for (int n = 1;; ++n) {
        const bool more_a = static_cast<bool>(std::getline(ia, la));
        const bool more_b = static_cast<bool>(std::getline(ib, lb));
        if (!more_a && !more_b) return "";
        if (la != lb || more_a != more_b) {
            return "line " + std::to_string(n) + ":\n  file:      " + (more_a ? la : "(end)") +
                   "\n  generated: " + (more_b ? lb : "(end)");
        }
    }
}

int usage() {
    std::cerr << "usage: gen_findings_doc --check|--write docs/findings.md\n";
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) return usage();
    const std::string mode = argv[1];
    const std::string path = argv[2];
    if (mode != "--check" && mode != "--write") return usage();
    std::ifstream file(path, std::ios::binary);
    if (!file) {
        std::cerr << "gen_findings_doc: cannot read " << path << "\n";
        return 2;
    }
    const std::string text((std::istreambuf_iterator<char>(file)),
                           std::istreambuf_iterator<char>());
    file.close();
    std::string error;
    const std::string generated = regenerate(text, error);
    if (!error.empty()) {
        std::cerr << "gen_findings_doc: " << path << ": " << error << "\n";
        return 2;
    }
    if (generated == text) return 0;
    if (mode == "--check") {
        std::cerr << path
                  << " differs from the findings catalog "
                     "(libgpudiag/src/analysis/findings/finding_catalog.cpp) at "
                  << first_difference(text, generated) << "\nRegenerate it with: " << argv[0]
                  << " --write " << path << "\n";
        return 1;
    }
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << generated;
    if (!out) {
        std::cerr << "gen_findings_doc: cannot write " << path << "\n";
        return 2;
    }
    std::cout << "gen_findings_doc: wrote " << path << "\n";
    return 0;
}
