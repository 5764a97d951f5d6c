// SPDX-License-Identifier: Apache-2.0
// A comparison as JSON: the schema docs/compare.md ("The JSON comparison") documents. Names come
// from the enums' tables; a number that does not exist (a relative change from 0) is null.
#include <gpudiag/compare.hpp>
#include <gpudiag/version.hpp>

#include "support/json_writer.hpp"

#include <exception>
#include <string>

namespace gpudiag {
namespace {

using detail::JsonWriter;

void evidence_list(JsonWriter& w, const std::vector<Evidence>& evidence) {
    w.begin_array();
    for (Evidence e : evidence) w.value(enum_name(e));
    w.end_array();
}

void strings(JsonWriter& w, const std::vector<std::string>& list) {
    w.begin_array();
    for (const auto& s : list) w.value(s);
    w.end_array();
}

void side_json(JsonWriter& w, const CompareSide& s) {
    w.begin_object();
    w.field("description", s.description);
    w.field("producer", s.producer);
    w.field("headline", s.headline);
    w.key("observed");
    if (s.observed_known) {
        evidence_list(w, s.observed);
    } else {
        w.null();
    }
    w.key("devices");
    strings(w, s.devices);
    w.field("steps", s.steps);
    w.field("ranks", s.ranks);
    w.key("software").begin_object();
    for (const auto& [k, v] : s.software) w.field(k, v);
    w.end_object();
    w.end_object();
}

void reason_json(JsonWriter& w, const CompareReason& r) {
    w.begin_object();
    w.field("id", r.id);
    w.field("text", r.text);
    w.key("explains").begin_array();
    for (CompareArea a : r.explains) w.value(enum_name(a));
    w.end_array();
    w.end_object();
}

void delta_json(JsonWriter& w, const CompareDelta& d) {
    w.begin_object();
    w.field("key", d.key);
    w.field("label", d.label);
    w.field("area", enum_name(d.area));
    w.field("unit", enum_name(d.unit));
    w.field("rank", d.rank);
    w.field("before", d.before);
    w.field("after", d.after);
    w.field("change", d.change);
    w.field("relative_change", d.relative_change);
    w.field("noise", d.noise);
    w.field("noise_basis", d.noise_basis);
    w.field("lower_is_better", d.lower_is_better);
    w.field("judgement", enum_name(d.judgement));
    w.field("outcome", d.outcome);
    w.field("deciding", d.deciding);
    w.end_object();
}

void saving(JsonWriter& w, std::string_view key, double ns) {
    w.key(key);
    if (ns >= 0) {
        w.value(ns);
    } else {
        w.null();
    }
}

void finding_json(JsonWriter& w, const FindingChange& f) {
    w.begin_object();
    w.field("id", f.id);
    w.field("change", enum_name(f.change));
    w.field("rank", f.rank);
    const bool had_before = f.change != FindingChangeKind::kAppeared;
    const bool has_after = f.change != FindingChangeKind::kResolved;
    w.key("severity_before");
    had_before ? w.value(severity_name(f.severity_before)) : w.null();
    w.key("severity_after");
    has_after ? w.value(severity_name(f.severity_after)) : w.null();
    w.field("title_before", f.title_before);
    w.field("title_after", f.title_after);
    saving(w, "saving_before_ns", f.saving_before_ns);
    saving(w, "saving_after_ns", f.saving_after_ns);
    w.end_object();
}

void body(JsonWriter& w, const Comparison& c) {
    w.field("schema", "gpudiag.comparison");
    w.field("schema_version", 1);
    w.field("gpudiag_version", version());
    w.field("verdict", enum_name(c.verdict));
    w.field("comparable", c.comparable);
    w.field("headline", c.headline);
    w.key("reasons").begin_array();
    for (const auto& r : c.reasons) reason_json(w, r);
    w.end_array();
    w.key("deciding").begin_array();
    for (const auto& d : c.deltas) {
        if (d.deciding) w.value(d.key);
    }
    w.end_array();
    w.key("before");
    side_json(w, c.before);
    w.key("after");
    side_json(w, c.after);
    w.key("compared");
    evidence_list(w, c.compared);
    w.key("not_compared");
    strings(w, c.not_compared);
    w.key("deltas").begin_array();
    for (const auto& d : c.deltas) delta_json(w, d);
    w.end_array();
    w.key("findings").begin_array();
    for (const auto& f : c.findings) finding_json(w, f);
    w.end_array();
    w.key("notes");
    strings(w, c.notes);
}

}  // namespace

std::string render_comparison_json(const Comparison& comparison, bool compact) noexcept {
    try {
        std::string out;
        JsonWriter w(out, !compact);
        w.begin_object();
        body(w, comparison);
        w.end_object();
        if (!compact) out += '\n';
        return out;
    } catch (const std::exception&) {
        return {};
    }
}

}  // namespace gpudiag
