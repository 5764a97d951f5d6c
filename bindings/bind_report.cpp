// SPDX-License-Identifier: Apache-2.0
// Reports, findings and what a source was: plain data, bound field by field.
#include <gpudiag/report.hpp>
#include <gpudiag/source_info.hpp>

#include <pybind11/stl.h>

#include "bindings.hpp"
#include "status_to_python.hpp"
#include "unit_caster.hpp"

namespace gpudiag::python {

namespace py = pybind11;

void bind_report(py::module_& m) {
    bind_enum<Severity>(m, "Severity");
    bind_enum<FigureKind>(m, "FigureKind");
    bind_enum<TableKind>(m, "TableKind");
    bind_enum<Evidence>(m, "Evidence");
    m.def("severity_name", &severity_name);
    m.def("evidence_label", &evidence_label, py::arg("evidence"));

    py::class_<DeviceInfo>(m, "DeviceInfo")
        .def(py::init<>())
        .def_readwrite("ordinal", &DeviceInfo::ordinal)
        .def_readwrite("name", &DeviceInfo::name)
        .def_readwrite("total_memory_bytes", &DeviceInfo::total_memory_bytes)
        .def_readwrite("uuid", &DeviceInfo::uuid)
        .def_readwrite("pci_bus_id", &DeviceInfo::pci_bus_id)
        .def_readwrite("parent_uuid", &DeviceInfo::parent_uuid)
        .def_readwrite("gpu_instance", &DeviceInfo::gpu_instance)
        .def_readwrite("compute_instance", &DeviceInfo::compute_instance);

    py::class_<SourceInfo>(m, "SourceInfo")
        .def(py::init<>())
        .def_readwrite("producer", &SourceInfo::producer)
        .def_readwrite("description", &SourceInfo::description)
        .def_readwrite("simulated", &SourceInfo::simulated)
        .def_readwrite("rank", &SourceInfo::rank)
        .def_readwrite("world_size", &SourceInfo::world_size)
        .def_readwrite("pid", &SourceInfo::pid)
        .def_readwrite("hostname", &SourceInfo::hostname)
        .def_readwrite("wall_clock_offset_ns", &SourceInfo::wall_clock_offset_ns)
        .def_readwrite("devices", &SourceInfo::devices)
        .def_readwrite("properties", &SourceInfo::properties)
        .def("property", &SourceInfo::property, py::arg("key"), py::arg("fallback") = "");

    py::class_<SourceSummary>(m, "SourceSummary")
        .def(py::init<>())
        .def_readwrite("events", &SourceSummary::events)
        .def_readwrite("dropped", &SourceSummary::dropped)
        .def_readwrite("truncated", &SourceSummary::truncated)
        .def_readwrite("notes", &SourceSummary::notes)
        .def_readwrite("damaged", &SourceSummary::damaged)
        .def_readwrite("missing", &SourceSummary::missing);

    py::class_<InputCoverage>(m, "InputCoverage")
        .def(py::init<>())
        .def_readwrite("complete", &InputCoverage::complete)
        .def_readwrite("events", &InputCoverage::events)
        .def_readwrite("first_ns", &InputCoverage::first_ns)
        .def_readwrite("last_ns", &InputCoverage::last_ns)
        .def_readwrite("missing", &InputCoverage::missing);

    py::class_<Figure>(m, "Figure")
        .def(py::init<>())
        .def_readwrite("key", &Figure::key)
        .def_readwrite("value", &Figure::value)
        .def_readwrite("unit", &Figure::unit)
        .def_readwrite("label", &Figure::label)
        .def_readwrite("kind", &Figure::kind);

    py::class_<CallSite>(m, "CallSite")
        .def(py::init<>())
        .def_readwrite("location", &CallSite::location)
        .def_readwrite("value", &CallSite::value)
        .def_readwrite("share", &CallSite::share)
        .def_readwrite("detail", &CallSite::detail);

    py::class_<Finding>(m, "Finding")
        .def(py::init<>())
        .def_readwrite("id", &Finding::id)
        .def_readwrite("severity", &Finding::severity)
        .def_readwrite("title", &Finding::title)
        .def_readwrite("summary", &Finding::summary)
        .def_readwrite("confidence", &Finding::confidence)
        .def_readwrite("figures", &Finding::figures)
        .def_readwrite("site_unit", &Finding::site_unit)
        .def_readwrite("sites", &Finding::sites)
        .def_readwrite("evidence", &Finding::evidence)
        .def_readwrite("advice", &Finding::advice)
        .def_readwrite("rank", &Finding::rank)
        .def_readwrite("device", &Finding::device)
        .def_readwrite("predicted_saving", &Finding::predicted_saving)
        .def_readwrite("saving_shared_with", &Finding::saving_shared_with);

    py::class_<Table>(m, "Table")
        .def(py::init<>())
        .def_readwrite("id", &Table::id)
        .def_readwrite("title", &Table::title)
        .def_readwrite("columns", &Table::columns)
        .def_readwrite("rows", &Table::rows)
        .def_readwrite("units", &Table::units)
        .def_readwrite("kind", &Table::kind);

    py::class_<Series>(m, "Series")
        .def(py::init<>())
        .def_readwrite("id", &Series::id)
        .def_readwrite("title", &Series::title)
        .def_readwrite("unit", &Series::unit)
        .def_readwrite("points", &Series::points)
        .def_readwrite("x_unit", &Series::x_unit);

    py::class_<Section>(m, "Section")
        .def(py::init<>())
        .def_readwrite("id", &Section::id)
        .def_readwrite("title", &Section::title)
        .def_readwrite("figures", &Section::figures)
        .def_readwrite("tables", &Section::tables)
        .def_readwrite("series", &Section::series);

    py::class_<Report>(m, "Report")
        .def(py::init<>())
        .def_readwrite("schema_version", &Report::schema_version)
        .def_readwrite("source", &Report::source)
        .def_readwrite("capture", &Report::capture)
        .def_readwrite("input", &Report::input)
        .def_readwrite("findings", &Report::findings)
        .def_readwrite("sections", &Report::sections)
        .def_readwrite("notes", &Report::notes)
        .def_readwrite("fix_all_saving", &Report::fix_all_saving)
        .def_readwrite("observed", &Report::observed)
        .def_readwrite("observed_known", &Report::observed_known)
        .def_readwrite("ranks", &Report::ranks);

    m.def("render_text", &render_text, py::arg("report"));
    m.def("headline", &headline, py::arg("report"),
          "The report's first line: what it found, and what its input could not show.");
    m.def("render_json", &render_json, py::arg("report"), py::arg("compact") = false);
    m.def("render_json_line", &render_json_line, py::arg("report"), py::arg("max_bytes"),
          "The compact JSON report in at most max_bytes, trimmed (never cut), saying what went.");
    m.def(
        "parse_report_json", [](std::string_view json) { return unwrap(parse_report_json(json)); },
        py::arg("json"), "Reads a report that render_json wrote.");
    // hostname / Hostname: dcgm-exporter's host label since 4.8.3 / before (PrometheusOptions).
    m.def(
        "render_prometheus",
        [](const Report& r, bool hostname, bool legacy_hostname) {
            return render_prometheus(r, PrometheusOptions{hostname, legacy_hostname});
        },
        py::arg("report"), py::kw_only(), py::arg("hostname_label") = true,
        py::arg("legacy_hostname_label") = true);
    m.def(
        "render_prometheus",
        [](const std::vector<Report>& r, bool hostname, bool legacy_hostname) {
            return render_prometheus(r, PrometheusOptions{hostname, legacy_hostname});
        },
        py::arg("reports"), py::kw_only(), py::arg("hostname_label") = true,
        py::arg("legacy_hostname_label") = true);
    m.def("format_figure", py::overload_cast<double, std::string_view>(&format_figure),
          py::arg("value"), py::arg("unit"),
          "A number as reports print it, by its unit: format_figure(2.5e6, 'ns') == '2.5 ms'.");
    m.def("column_heading", py::overload_cast<std::string_view, std::string_view>(&column_heading),
          py::arg("key"), py::arg("unit"),
          "A table column's key as reports head it: column_heading('step_time_ns', 'ns') == "
          "'step time'.");
    m.def("figure_row", &figure_row, py::arg("figure"),
          "A figure as reports list it: (label, value in words); an enum figure shows its word.");
    m.def("describe_device", &describe_device, py::arg("device"),
          "A device as reports name it: 'NVIDIA H200, 141.0 GiB', never blank.");
    m.def("describe_shared_saving", &describe_shared_saving, py::arg("shared_with"),
          "The sentence saying a finding's saving overlaps others' ('' when it shares none).");
    m.def("describe_fix_all", &describe_fix_all, py::arg("fix_all_saving"),
          "What fixing every cause found together is worth, as the reports say it.");
    m.def("describe_saving", &describe_saving, py::arg("predicted_saving"),
          "What fixing a finding is worth, as the reports say it ('' when not predicted).");
}

}  // namespace gpudiag::python
