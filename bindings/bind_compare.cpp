// SPDX-License-Identifier: Apache-2.0
// Comparing two runs: options in, a comparison out, bound field by field (read-only: a
// comparison is the library's verdict, not something Python edits).
#include <gpudiag/compare.hpp>

#include <pybind11/stl.h>

#include "bindings.hpp"
#include "status_to_python.hpp"
#include "unit_caster.hpp"

namespace gpudiag::python {

namespace py = pybind11;

namespace {

void bind_compare_parts(py::module_& m) {
    py::class_<CompareDelta>(m, "CompareDelta")
        .def(py::init<>())
        .def_readonly("key", &CompareDelta::key)
        .def_readonly("label", &CompareDelta::label)
        .def_readonly("unit", &CompareDelta::unit)
        .def_readonly("area", &CompareDelta::area)
        .def_readonly("rank", &CompareDelta::rank)
        .def_readonly("before", &CompareDelta::before)
        .def_readonly("after", &CompareDelta::after)
        .def_readonly("change", &CompareDelta::change)
        .def_readonly("relative_change", &CompareDelta::relative_change)
        .def_readonly("noise", &CompareDelta::noise)
        .def_readonly("noise_basis", &CompareDelta::noise_basis)
        .def_readonly("lower_is_better", &CompareDelta::lower_is_better)
        .def_readonly("judgement", &CompareDelta::judgement)
        .def_readonly("outcome", &CompareDelta::outcome)
        .def_readonly("deciding", &CompareDelta::deciding);

    py::class_<FindingChange>(m, "FindingChange")
        .def(py::init<>())
        .def_readonly("id", &FindingChange::id)
        .def_readonly("change", &FindingChange::change)
        .def_readonly("rank", &FindingChange::rank)
        .def_readonly("severity_before", &FindingChange::severity_before)
        .def_readonly("severity_after", &FindingChange::severity_after)
        .def_readonly("title_before", &FindingChange::title_before)
        .def_readonly("title_after", &FindingChange::title_after)
        .def_readonly("saving_before_ns", &FindingChange::saving_before_ns)
        .def_readonly("saving_after_ns", &FindingChange::saving_after_ns);

    py::class_<CompareReason>(m, "CompareReason")
        .def(py::init<>())
        .def_readonly("id", &CompareReason::id)
        .def_readonly("text", &CompareReason::text)
        .def_readonly("explains", &CompareReason::explains);

    py::class_<CompareSide>(m, "CompareSide")
        .def(py::init<>())
        .def_readonly("description", &CompareSide::description)
        .def_readonly("producer", &CompareSide::producer)
        .def_readonly("headline", &CompareSide::headline)
        .def_readonly("observed", &CompareSide::observed)
        .def_readonly("observed_known", &CompareSide::observed_known)
        .def_readonly("devices", &CompareSide::devices)
        .def_readonly("steps", &CompareSide::steps)
        .def_readonly("ranks", &CompareSide::ranks)
        .def_readonly("software", &CompareSide::software);
}

}  // namespace

void bind_compare(py::module_& m) {
    bind_enum<CompareVerdict>(m, "CompareVerdict");
    bind_enum<CompareArea>(m, "CompareArea");
    bind_enum<DeltaJudgement>(m, "DeltaJudgement");
    bind_enum<FindingChangeKind>(m, "FindingChangeKind");
    m.def("compare_verdict_name", &compare_verdict_name, py::arg("verdict"));

    bind_compare_parts(m);

    py::class_<CompareOptions>(m, "CompareOptions")
        .def(py::init<>())
        .def_readwrite("noise_multiplier", &CompareOptions::noise_multiplier)
        .def_readwrite("min_steps", &CompareOptions::min_steps)
        .def_readwrite("min_relative_change", &CompareOptions::min_relative_change);

    py::class_<Comparison>(m, "Comparison")
        .def(py::init<>())
        .def_readonly("verdict", &Comparison::verdict)
        .def_readonly("comparable", &Comparison::comparable)
        .def_readonly("reasons", &Comparison::reasons)
        .def_readonly("headline", &Comparison::headline)
        .def_readonly("before", &Comparison::before)
        .def_readonly("after", &Comparison::after)
        .def_readonly("compared", &Comparison::compared)
        .def_readonly("not_compared", &Comparison::not_compared)
        .def_readonly("deltas", &Comparison::deltas)
        .def_readonly("findings", &Comparison::findings)
        .def_readonly("notes", &Comparison::notes);

    m.def(
        "compare_reports",
        [](const Report& before, const Report& after, const CompareOptions& options) {
            return unwrap(without_gil([&] { return compare_reports(before, after, options); }));
        },
        py::arg("before"), py::arg("after"), py::arg("options") = CompareOptions{},
        "Compares two reports: one verdict, the deltas that decided it, and why the runs cannot "
        "be compared where they cannot.");
    m.def("render_comparison_text", &render_comparison_text, py::arg("comparison"));
    m.def("render_comparison_json", &render_comparison_json, py::arg("comparison"),
          py::arg("compact") = false);
}

}  // namespace gpudiag::python
