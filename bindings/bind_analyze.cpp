// SPDX-License-Identifier: Apache-2.0
// Offline analysis: files in, Report out.
#include <gpudiag/analyze.hpp>
#include <gpudiag/job.hpp>
#include <gpudiag/trace_export.hpp>

#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>

#include "bindings.hpp"
#include "status_to_python.hpp"

namespace gpudiag::python {

namespace py = pybind11;

namespace {

// A Python progress callable made safe to call from C++ with the GIL released. The first
// exception it raises (Ctrl-C included) stays set and silences later calls, so the analysis
// finishes and the caller re-raises it.
struct ProgressForwarder {
    py::object callable;
    bool failed = false;

    void operator()(std::uint64_t done, std::uint64_t total) {
        py::gil_scoped_acquire gil;
        if (failed) return;
        try {
            callable(done, total);
        } catch (py::error_already_set& e) {
            e.restore();
            failed = true;
        }
    }
};

// Runs `fn(options)` without the GIL, `progress` (a Python callable or None) forwarded.
template <typename Fn>
auto with_progress(AnalysisOptions options, py::object progress, Fn&& fn) {
    auto forwarder = std::make_shared<ProgressForwarder>();
    if (!progress.is_none()) {
        forwarder->callable = std::move(progress);
        options.progress = [forwarder](std::uint64_t done, std::uint64_t total) {
            (*forwarder)(done, total);
        };
    }
    auto result = without_gil([&] { return fn(options); });
    options.progress = nullptr;
    if (forwarder->failed) throw py::error_already_set();
    return unwrap(std::move(result));
}

}  // namespace

void bind_analyze(py::module_& m) {
    bind_enum<AnalysisWindow>(m, "AnalysisWindow");

    py::class_<AnalysisOptions>(m, "AnalysisOptions")
        .def(py::init<>())
        .def_readwrite("window", &AnalysisOptions::window)
        .def_readwrite("rank", &AnalysisOptions::rank)
        .def_readwrite("for_job", &AnalysisOptions::for_job);

    bind_enum<InputFormat>(m, "InputFormat");
    m.def("input_format_name", &input_format_name);

    m.def(
        "detect_format", [](const std::string& path) { return unwrap(detect_format(path)); },
        py::arg("path"));
    m.def(
        "analyze_files",
        [](const std::vector<std::string>& paths, const AnalysisOptions& options,
           py::object progress) {
            return with_progress(options, std::move(progress),
                                 [&](const AnalysisOptions& o) { return analyze_files(paths, o); });
        },
        py::arg("paths"), py::arg("options") = AnalysisOptions{}, py::arg("progress") = py::none(),
        "Analyses recordings, Kineto traces or torch snapshots of one job; progress is called "
        "with (bytes read, total bytes) on the calling thread.");
    m.def(
        "export_chrome_trace",
        [](const std::vector<std::string>& paths, const std::string& out_path,
           const AnalysisOptions& options) {
            check(without_gil([&] { return export_chrome_trace(paths, out_path, options); }));
        },
        py::arg("paths"), py::arg("out_path"), py::arg("options") = AnalysisOptions{},
        "Writes the inputs' timeline as a Chrome/Perfetto trace (JSON).");
    py::class_<JobInput>(m, "JobInput")
        .def_readwrite("path", &JobInput::path)
        .def_readwrite("member", &JobInput::member)
        .def("name", &JobInput::name)
        .def("__repr__", [](const JobInput& i) { return "<gpudiag.JobInput " + i.name() + ">"; });
    m.def(
        "expand_job_inputs",
        [](const std::vector<std::string>& paths) {
            return unwrap(without_gil([&] { return expand_job_inputs(paths); }));
        },
        py::arg("paths"), "The files, folder contents, archive members and glob matches of a job.");
    m.def(
        "analyze_input",
        [](const std::string& path, const std::string& member, const AnalysisOptions& options) {
            return unwrap(without_gil([&] {
                return analyze_input(JobInput{path, member}, options);
            }));
        },
        py::arg("path"), py::arg("member") = "", py::arg("options") = AnalysisOptions{},
        "Analyses one input of a job on its own: a file, or a member of the archive at path.");
    m.def(
        "combine_input_reports",
        [](std::vector<Report> reports, const std::vector<JobInput>& inputs,
           const AnalysisOptions& options) {
            return unwrap(without_gil(
                [&] { return combine_input_reports(std::move(reports), inputs, options); }));
        },
        py::arg("reports"), py::arg("inputs"), py::arg("options") = AnalysisOptions{},
        "The job report from one report per input (files of one process combine).");
    m.def(
        "analyze_job",
        [](std::vector<Report> ranks, const AnalysisOptions& options) {
            return unwrap(analyze_job(std::move(ranks), options));
        },
        py::arg("ranks"), py::arg("options") = AnalysisOptions{},
        "Combines per-rank reports (e.g. gathered over torch.distributed) into a job report.");
}

}  // namespace gpudiag::python
