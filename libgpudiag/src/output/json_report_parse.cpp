// SPDX-License-Identifier: Apache-2.0
// parse_report_json: the inverse of render_json, so a saved report (gpudiag run --json, the
// Python layer's Report.load, the reports other ranks send) becomes a Report again. Fields are
// only ever added to the schema: a missing one keeps its default (an older writer), an unknown
// one is ignored (a newer writer). A field of the wrong type is an error naming where it is.
#include <gpudiag/report.hpp>

#include "core/input_coverage.hpp"

#include <fmt/format.h>
#include <simdjson.h>

#include <cmath>
#include <cstdint>
#include <exception>
#include <limits>
#include <new>
#include <string>
#include <type_traits>

namespace gpudiag {
namespace {

namespace dom = simdjson::dom;

// Reads one document; the first type error is kept (with its path) and ends the read.
class ReportReader {
public:
    [[nodiscard]] const std::string& error() const { return error_; }

    bool report(dom::element e, const std::string& path, Report& r) {
        dom::object o;
        if (!object(e, path, o)) return false;
        std::uint64_t version = 0;
        if (o["schema_version"].get(version) != simdjson::SUCCESS || version < 1 ||
            version > std::numeric_limits<std::uint32_t>::max()) {
            return fail(path, "no schema_version: not a gpudiag report");
        }
        r.schema_version = static_cast<std::uint32_t>(version);
        dom::element child;
        if (o["source"].get(child) == simdjson::SUCCESS &&
            !source(child, path + ".source", r.source)) {
            return false;
        }
        if (o["capture"].get(child) == simdjson::SUCCESS &&
            !capture(child, path + ".capture", r.capture)) {
            return false;
        }
        if (o["input"].get(child) == simdjson::SUCCESS) {
            if (!input(child, path + ".input", r.input)) return false;
        } else {
            // Written before reports said what they covered: the capture summary tells.
            r.input = detail::input_coverage(r.capture, r.capture.events, 0, 0);
        }
        return evidence(o, path, r) && figures(o, path, r.fix_all_saving, "fix_all_saving") &&
               list(o, "findings", path, r.findings, &ReportReader::finding) &&
               list(o, "sections", path, r.sections, &ReportReader::section) &&
               strings(o, "notes", path, r.notes) &&
               list(o, "ranks", path, r.ranks, &ReportReader::report);
    }

private:
    bool fail(const std::string& path, const std::string& what) {
        if (error_.empty()) error_ = path + ": " + what;
        return false;
    }

    bool object(dom::element e, const std::string& path, dom::object& out) {
        if (e.get(out) != simdjson::SUCCESS) return fail(path, "expected an object");
        return true;
    }

    // Optional fields: absent is fine, present with another type is an error.
    bool text(dom::object o, const char* key, const std::string& path, std::string& out) {
        dom::element e;
        if (o[key].get(e) != simdjson::SUCCESS) return true;
        std::string_view v;
        if (e.get(v) != simdjson::SUCCESS) return fail(path + "." + key, "expected a string");
        out.assign(v);
        return true;
    }
    // JSON has no NaN: render_json writes a non-finite number as null, and it reads back as NaN.
    bool number(dom::element e, const std::string& path, double& out) {
        if (e.is_null()) {
            out = std::numeric_limits<double>::quiet_NaN();
            return true;
        }
        if (e.get(out) != simdjson::SUCCESS) return fail(path, "expected a number");
        return true;
    }
    bool number(dom::object o, const char* key, const std::string& path, double& out) {
        dom::element e;
        if (o[key].get(e) != simdjson::SUCCESS) return true;
        return number(e, path + "." + key, out);
    }
    // Integers are read as integers (a double would round counts above 2^53).
    template <typename Int>
    bool integer(dom::object o, const char* key, const std::string& path, Int& out) {
        dom::element e;
        if (o[key].get(e) != simdjson::SUCCESS) return true;
        using Wide = std::conditional_t<std::is_signed_v<Int>, std::int64_t, std::uint64_t>;
        Wide v = 0;
        if (e.get(v) != simdjson::SUCCESS) return fail(path + "." + key, "expected an integer");
        if (v < static_cast<Wide>(std::numeric_limits<Int>::lowest()) ||
            v > static_cast<Wide>(std::numeric_limits<Int>::max())) {
            return fail(path + "." + key, "out of range");
        }
        out = static_cast<Int>(v);
        return true;
    }
    bool boolean(dom::object o, const char* key, const std::string& path, bool& out) {
        dom::element e;
        if (o[key].get(e) != simdjson::SUCCESS) return true;
        if (e.get(out) != simdjson::SUCCESS)
            return fail(path + "." + key, "expected true or false");
        return true;
    }
    template <typename E>
    bool named(dom::object o, const char* key, const std::string& path, E& out) {
        std::string name;
        if (!text(o, key, path, name)) return false;
        if (!name.empty() && !enum_from_name(name, out)) {
            return fail(path + "." + key, "unknown value \"" + name + "\"");
        }
        return true;
    }

    // Every spelling a gpudiag report has carried is in the Unit table; one that is not can only
    // come from a newer writer's unit. Its number is kept as Unit::kUnknown (printed plain, never
    // exported) and the spelling dropped: the model holds units, not free text beside them.
    bool unit(dom::object o, const char* key, const std::string& path, Unit& out) {
        dom::element e;
        if (o[key].get(e) != simdjson::SUCCESS) return true;
        std::string_view v;
        if (e.get(v) != simdjson::SUCCESS) return fail(path + "." + key, "expected a string");
        out = unit_from_name(v);
        return true;
    }
    bool units(dom::object o, const char* key, const std::string& path, std::vector<Unit>& out) {
        std::vector<std::string> spellings;
        if (!strings(o, key, path, spellings)) return false;
        for (const auto& s : spellings) out.push_back(unit_from_name(s));
        return true;
    }

    bool strings(dom::object o, const char* key, const std::string& path,
                 std::vector<std::string>& out) {
        dom::element e;
        if (o[key].get(e) != simdjson::SUCCESS) return true;
        dom::array a;
        if (e.get(a) != simdjson::SUCCESS) return fail(path + "." + key, "expected an array");
        for (dom::element item : a) {
            std::string_view v;
            if (item.get(v) != simdjson::SUCCESS) {
                return fail(path + "." + key, "expected an array of strings");
            }
            out.emplace_back(v);
        }
        return true;
    }

    template <typename T>
    bool list(dom::object o, const char* key, const std::string& path, std::vector<T>& out,
              bool (ReportReader::*one)(dom::element, const std::string&, T&)) {
        dom::element e;
        if (o[key].get(e) != simdjson::SUCCESS) return true;
        dom::array a;
        if (e.get(a) != simdjson::SUCCESS) return fail(path + "." + key, "expected an array");
        for (dom::element item : a) {
            T value{};
            if (!(this->*one)(item, fmt::format("{}.{}[{}]", path, key, out.size()), value)) {
                return false;
            }
            out.push_back(std::move(value));
        }
        return true;
    }

    // The evidence the report's input had; a report written before reports said so leaves it
    // unknown, and a kind a newer writer added is not one this reader can name, so it is left out.
    bool evidence(dom::object o, const std::string& path, Report& r) {
        dom::element e;
        if (o["observed"].get(e) != simdjson::SUCCESS) {
            r.observed_known = false;
            return true;
        }
        std::vector<std::string> names;
        if (!strings(o, "observed", path, names)) return false;
        for (const auto& name : names) {
            Evidence kind{};
            if (enum_from_name(name, kind)) r.observe(kind);
        }
        return true;
    }

    bool device(dom::element e, const std::string& path, DeviceInfo& d) {
        dom::object o;
        return object(e, path, o) && integer(o, "ordinal", path, d.ordinal) &&
               text(o, "name", path, d.name) &&
               integer(o, "total_memory_bytes", path, d.total_memory_bytes) &&
               text(o, "uuid", path, d.uuid) && text(o, "pci_bus_id", path, d.pci_bus_id) &&
               text(o, "parent_uuid", path, d.parent_uuid) &&
               integer(o, "gpu_instance", path, d.gpu_instance) &&
               integer(o, "compute_instance", path, d.compute_instance);
    }

    bool source(dom::element e, const std::string& path, SourceInfo& s) {
        dom::object o;
        if (!(object(e, path, o) && text(o, "producer", path, s.producer) &&
              text(o, "description", path, s.description) &&
              boolean(o, "simulated", path, s.simulated) && integer(o, "rank", path, s.rank) &&
              integer(o, "world_size", path, s.world_size) && integer(o, "pid", path, s.pid) &&
              text(o, "hostname", path, s.hostname) &&
              list(o, "devices", path, s.devices, &ReportReader::device))) {
            return false;
        }
        dom::element props;
        if (o["properties"].get(props) != simdjson::SUCCESS) return true;
        dom::object p;
        if (!object(props, path + ".properties", p)) return false;
        for (auto field : p) {
            std::string_view v;
            if (field.value.get(v) != simdjson::SUCCESS) {
                return fail(path + ".properties." + std::string(field.key), "expected a string");
            }
            s.properties.emplace_back(std::string(field.key), std::string(v));
        }
        return true;
    }

    bool capture(dom::element e, const std::string& path, SourceSummary& c) {
        dom::object o;
        return object(e, path, o) && integer(o, "events", path, c.events) &&
               integer(o, "dropped", path, c.dropped) &&
               boolean(o, "truncated", path, c.truncated) && strings(o, "notes", path, c.notes) &&
               integer(o, "damaged", path, c.damaged) && strings(o, "missing", path, c.missing);
    }

    bool input(dom::element e, const std::string& path, InputCoverage& c) {
        dom::object o;
        return object(e, path, o) && boolean(o, "complete", path, c.complete) &&
               integer(o, "events", path, c.events) && integer(o, "first_ns", path, c.first_ns) &&
               integer(o, "last_ns", path, c.last_ns) && strings(o, "missing", path, c.missing);
    }

    // Figures are an object keyed by figure key, in the order the analysis wrote them.
    // `shared_with`: where a predicted saving's list of the findings it overlaps goes (it sits
    // beside the figures); without one, such a list is an error like any non-figure.
    bool figures(dom::object parent, const std::string& path, std::vector<Figure>& out,
                 const char* key = "figures", std::vector<std::string>* shared_with = nullptr) {
        dom::element e;
        if (parent[key].get(e) != simdjson::SUCCESS) return true;
        dom::object all;
        if (!object(e, path + "." + key, all)) return false;
        for (auto field : all) {
            if (shared_with != nullptr && field.key == "shared_with") {
                if (!strings(all, "shared_with", path + "." + key, *shared_with)) return false;
                continue;
            }
            Figure f;
            f.key.assign(field.key);
            std::string where = path + "." + key + "." + f.key;
            dom::object o;
            if (!(object(field.value, where, o) && number(o, "value", where, f.value) &&
                  unit(o, "unit", where, f.unit) && text(o, "label", where, f.label) &&
                  named(o, "kind", where, f.kind))) {
                return false;
            }
            out.push_back(std::move(f));
        }
        return true;
    }

    bool site(dom::element e, const std::string& path, CallSite& s) {
        dom::object o;
        return object(e, path, o) && text(o, "location", path, s.location) &&
               number(o, "value", path, s.value) && number(o, "share", path, s.share) &&
               text(o, "detail", path, s.detail);
    }

    bool finding(dom::element e, const std::string& path, Finding& f) {
        dom::object o;
        return object(e, path, o) && text(o, "id", path, f.id) &&
               named(o, "severity", path, f.severity) && text(o, "title", path, f.title) &&
               text(o, "summary", path, f.summary) && number(o, "confidence", path, f.confidence) &&
               integer(o, "rank", path, f.rank) && integer(o, "device", path, f.device) &&
               figures(o, path, f.figures) &&
               figures(o, path, f.predicted_saving, "predicted_saving", &f.saving_shared_with) &&
               unit(o, "site_unit", path, f.site_unit) &&
               list(o, "sites", path, f.sites, &ReportReader::site) &&
               strings(o, "evidence", path, f.evidence) && strings(o, "advice", path, f.advice);
    }

    bool row(dom::element e, const std::string& path, std::vector<Cell>& cells) {
        dom::array a;
        if (e.get(a) != simdjson::SUCCESS) return fail(path, "expected an array of cells");
        for (dom::element cell : a) {
            std::string_view v;
            if (cell.get(v) == simdjson::SUCCESS) {
                cells.emplace_back(std::string(v));
                continue;
            }
            double d = 0;
            if (!number(cell, path, d)) return false;
            cells.emplace_back(d);
        }
        return true;
    }

    bool table(dom::element e, const std::string& path, Table& t) {
        dom::object o;
        return object(e, path, o) && text(o, "id", path, t.id) && text(o, "title", path, t.title) &&
               strings(o, "columns", path, t.columns) &&
               list(o, "rows", path, t.rows, &ReportReader::row) &&
               units(o, "units", path, t.units) && named(o, "kind", path, t.kind);
    }

    bool point(dom::element e, const std::string& path, std::pair<double, double>& p) {
        dom::array a;
        if (e.get(a) != simdjson::SUCCESS || a.size() != 2) return fail(path, "expected [x, y]");
        return number(a.at(0).value_unsafe(), path, p.first) &&
               number(a.at(1).value_unsafe(), path, p.second);
    }

    bool series(dom::element e, const std::string& path, Series& s) {
        dom::object o;
        return object(e, path, o) && text(o, "id", path, s.id) && text(o, "title", path, s.title) &&
               unit(o, "unit", path, s.unit) && unit(o, "x_unit", path, s.x_unit) &&
               list(o, "points", path, s.points, &ReportReader::point);
    }

    bool section(dom::element e, const std::string& path, Section& s) {
        dom::object o;
        return object(e, path, o) && text(o, "id", path, s.id) && text(o, "title", path, s.title) &&
               figures(o, path, s.figures) &&
               list(o, "tables", path, s.tables, &ReportReader::table) &&
               list(o, "series", path, s.series, &ReportReader::series);
    }

    std::string error_;
};

}  // namespace

Result<Report> parse_report_json(std::string_view json) noexcept {
    try {
        dom::parser parser;
        dom::element root;
        if (auto error = parser.parse(json.data(), json.size()).get(root); error) {
            return corrupt_data(std::string("not JSON: ") + simdjson::error_message(error));
        }
        Report report;
        ReportReader reader;
        if (!reader.report(root, "report", report)) return corrupt_data(reader.error());
        return report;
    } catch (const std::bad_alloc&) {
        return resource_exhausted("out of memory while reading a report");
    } catch (const std::exception& e) {
        return internal_error(std::string("reading a report failed: ") + e.what());
    }
}

}  // namespace gpudiag
