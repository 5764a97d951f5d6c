// SPDX-License-Identifier: Apache-2.0
// JSON rendering of a Report. The schema (documented in docs/api.md) is versioned by
// Report::schema_version; fields are only ever added.
#include <gpudiag/report.hpp>
#include <gpudiag/version.hpp>

#include "support/json_writer.hpp"

namespace gpudiag {
namespace {

using detail::JsonWriter;

// `shared_with`: for a predicted saving, the findings whose savings it overlaps (a list beside
// the figures, written only when there are some).
void write_figures(JsonWriter& w, const std::vector<Figure>& figures, const char* key = "figures",
                   const std::vector<std::string>* shared_with = nullptr) {
    w.key(key).begin_object();
    for (const auto& f : figures) {
        w.key(f.key).begin_object();
        w.field("value", f.value).field("unit", enum_name(f.unit)).field("label", f.label);
        w.field("kind", enum_name(f.kind));
        w.end_object();
    }
    if (shared_with != nullptr && !shared_with->empty()) {
        w.key("shared_with").begin_array();
        for (const auto& id : *shared_with) w.value(id);
        w.end_array();
    }
    w.end_object();
}

void write_source(JsonWriter& w, const SourceInfo& s) {
    w.key("source").begin_object();
    w.field("producer", s.producer).field("description", s.description);
    w.field("simulated", s.simulated).field("rank", s.rank).field("world_size", s.world_size);
    w.field("pid", s.pid).field("hostname", s.hostname);
    w.key("devices").begin_array();
    for (const auto& d : s.devices) {
        w.begin_object();
        w.field("ordinal", static_cast<unsigned>(d.ordinal)).field("name", d.name);
        w.field("total_memory_bytes", d.total_memory_bytes).field("uuid", d.uuid);
        w.field("pci_bus_id", d.pci_bus_id);
        if (!d.parent_uuid.empty()) {  // a MIG instance
            w.field("parent_uuid", d.parent_uuid);
            w.field("gpu_instance", d.gpu_instance).field("compute_instance", d.compute_instance);
        }
        w.end_object();
    }
    w.end_array();
    w.key("properties").begin_object();
    for (const auto& [k, v] : s.properties) w.field(k, v);
    w.end_object();
    w.end_object();
}

void write_input(JsonWriter& w, const InputCoverage& c) {
    w.key("input").begin_object();
    w.field("complete", c.complete).field("events", c.events);
    w.field("first_ns", c.first_ns).field("last_ns", c.last_ns);
    w.key("missing").begin_array();
    for (const auto& m : c.missing) w.value(m);
    w.end_array();
    w.end_object();
}

void write_finding(JsonWriter& w, const Finding& f) {
    w.begin_object();
    w.field("id", f.id).field("severity", severity_name(f.severity));
    w.field("title", f.title).field("summary", f.summary).field("confidence", f.confidence);
    w.field("rank", f.rank).field("device", f.device);
    write_figures(w, f.figures);
    if (!f.predicted_saving.empty()) {
        write_figures(w, f.predicted_saving, "predicted_saving", &f.saving_shared_with);
    }
    w.field("site_unit", enum_name(f.site_unit));
    w.key("sites").begin_array();
    for (const auto& s : f.sites) {
        w.begin_object();
        w.field("location", s.location).field("value", s.value).field("share", s.share);
        w.field("detail", s.detail);
        w.end_object();
    }
    w.end_array();
    w.key("evidence").begin_array();
    for (const auto& e : f.evidence) w.value(e);
    w.end_array();
    w.key("advice").begin_array();
    for (const auto& a : f.advice) w.value(a);
    w.end_array();
    w.end_object();
}

void write_section(JsonWriter& w, const Section& s) {
    w.begin_object();
    w.field("id", s.id).field("title", s.title);
    write_figures(w, s.figures);
    w.key("tables").begin_array();
    for (const auto& t : s.tables) {
        w.begin_object();
        w.field("id", t.id).field("title", t.title);
        w.key("columns").begin_array();
        for (const auto& c : t.columns) w.value(c);
        w.end_array();
        w.key("rows").begin_array();
        for (const auto& row : t.rows) {
            w.begin_array();
            for (const auto& cell : row) {
                if (const auto* d = std::get_if<double>(&cell)) {
                    w.value(*d);
                } else {
                    w.value(std::get<std::string>(cell));
                }
            }
            w.end_array();
        }
        w.end_array();
        w.key("units").begin_array();
        for (Unit u : t.units) w.value(enum_name(u));
        w.end_array();
        w.field("kind", enum_name(t.kind));
        w.end_object();
    }
    w.end_array();
    w.key("series").begin_array();
    for (const auto& series : s.series) {
        w.begin_object();
        w.field("id", series.id).field("title", series.title);
        w.field("unit", enum_name(series.unit)).field("x_unit", enum_name(series.x_unit));
        w.key("points").begin_array();
        for (const auto& [x, y] : series.points) {
            w.begin_array().value(x).value(y).end_array();
        }
        w.end_array();
        w.end_object();
    }
    w.end_array();
    w.end_object();
}

void write_report(JsonWriter& w, const Report& r) {
    w.begin_object();
    w.field("schema_version", r.schema_version);
    w.field("gpudiag_version", ::gpudiag::version());
    write_source(w, r.source);
    w.key("capture").begin_object();
    w.field("events", r.capture.events).field("dropped", r.capture.dropped);
    w.field("truncated", r.capture.truncated);
    w.key("notes").begin_array();
    for (const auto& n : r.capture.notes) w.value(n);
    w.end_array();
    w.field("damaged", r.capture.damaged);
    w.key("missing").begin_array();
    for (const auto& m : r.capture.missing) w.value(m);
    w.end_array();
    w.end_object();
    write_input(w, r.input);
    // What the input could show (absent when a report read back did not say), and the first
    // line every renderer opens with.
    if (r.observed_known) {
        w.key("observed").begin_array();
        for (Evidence e : r.observed) w.value(enum_name(e));
        w.end_array();
    }
    w.field("headline", headline(r));
    if (!r.fix_all_saving.empty()) write_figures(w, r.fix_all_saving, "fix_all_saving");
    w.key("findings").begin_array();
    for (const auto& f : r.findings) write_finding(w, f);
    w.end_array();
    w.key("sections").begin_array();
    for (const auto& s : r.sections) write_section(w, s);
    w.end_array();
    w.key("notes").begin_array();
    for (const auto& n : r.notes) w.value(n);
    w.end_array();
    w.key("ranks").begin_array();
    for (const auto& rank : r.ranks) write_report(w, rank);
    w.end_array();
    w.end_object();
}

}  // namespace

namespace {

// One step of render_json_line's ladder: what it leaves out, and how, most detailed first.
struct LineTrim {
    const char* dropped;
    void (*apply)(Report&);
};

void drop_section_detail(Report& r) {
    for (auto& s : r.sections) {
        s.tables.clear();
        s.series.clear();
    }
}
void drop_ranks(Report& r) {
    r.ranks.clear();
}
void drop_sections(Report& r) {
    r.sections.clear();
}
void drop_finding_detail(Report& r) {
    for (auto& f : r.findings) {
        f.evidence.clear();
        f.sites.clear();
        if (f.advice.size() > 1) f.advice.resize(1);
        f.summary.clear();
    }
}
void drop_notes(Report& r) {
    r.notes.clear();
}

// The ladder: detail nobody alerts on first; findings (ranked, most important first) last.
constexpr LineTrim kLineTrims[] = {
    {"sections.tables_and_series", drop_section_detail},
    {"ranks", drop_ranks},
    {"sections", drop_sections},
    {"findings.summary_evidence_sites_and_later_advice", drop_finding_detail},
    {"notes", drop_notes},
};

// What a trimmed line left out: the full line's size, the full report's headline (the line's own
// findings may be fewer), the ladder's steps taken and the findings dropped.
struct LineMarker {
    std::size_t full_bytes = 0;
    std::string headline;
    std::vector<const char*> dropped;
    std::size_t findings_dropped = 0;
};

// render_json(r, true) with a "truncated" object closing it.
std::string compact_with_marker(const Report& r, const LineMarker& m) {
    std::string out = render_json(r, true);
    if (out.size() < 2) return {};
    out.resize(out.size() - 2);  // the closing brace and the newline
    std::string marker;
    JsonWriter w(marker, false);
    w.begin_object().key("full_bytes").value(static_cast<std::uint64_t>(m.full_bytes));
    w.key("headline").value(m.headline).key("dropped").begin_array();
    for (const char* d : m.dropped) w.value(d);
    w.end_array().key("findings_dropped").value(static_cast<std::uint64_t>(m.findings_dropped));
    w.end_object();
    out += ",\"truncated\":" + marker + "}\n";
    return out;
}

}  // namespace

std::string render_json_line(const Report& report, std::size_t max_bytes) noexcept {
    try {
        std::string full = render_json(report, true);
        if (full.empty() || full.size() <= max_bytes) return full;
        Report trimmed = report;
        LineMarker marker{full.size(), headline(report), {}, 0};
        for (const auto& trim : kLineTrims) {
            trim.apply(trimmed);
            marker.dropped.push_back(trim.dropped);
            std::string line = compact_with_marker(trimmed, marker);
            if (line.size() <= max_bytes) return line;
        }
        // Findings are ranked most important first: the least important go.
        while (!trimmed.findings.empty()) {
            trimmed.findings.pop_back();
            ++marker.findings_dropped;
            std::string line = compact_with_marker(trimmed, marker);
            if (line.size() <= max_bytes) return line;
        }
        return {};  // not even the bare report fits: no line rather than a cut one
    } catch (...) {
        return {};
    }
}

std::string render_json(const Report& report, bool compact) noexcept {
    try {
        std::string out;
        JsonWriter w(out, !compact);
        write_report(w, report);
        out += '\n';
        return out;
    } catch (...) {
        return {};
    }
}

}  // namespace gpudiag
