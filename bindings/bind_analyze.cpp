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
        .def_readwrite("rank", &AnalysisOptions::rank);

    bind_enum<InputFormat>(m, "InputFormat");
    m.def("input_format_name", &input_format_name);

    m.def(
        "detect_format", [](const std::string& path) { return unwrap(detect_format(path)); },
        py::arg("path"));
    m.def(
        "analyze_files",
        [](const std::vector<std::string>& paths, const AnalysisOptions& options,
           py::object progress) {
            return with_progress(options, std::move(progress), [&](const AnalysisOptions& o) {
                return analyze_files(paths, o);
            });
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
    m.def(
        "analyze_job",
        [](std::vector<Report> ranks, const AnalysisOptions& options) {
            return unwrap(analyze_job(std::move(ranks), options));
        },
        py::arg("ranks"), py::arg("options") = AnalysisOptions{},
        "Combines per-rank reports (e.g. gathered over torch.distributed) into a job report.");
}

}  // namespace gpudiag::python
