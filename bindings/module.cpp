// SPDX-License-Identifier: Apache-2.0
// gpudiag._core: the C++ library seen from Python. Importing it touches no CUDA state.
#include <gpudiag/status.hpp>
#include <gpudiag/version.hpp>

#include "bindings.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_core, m) {
    m.doc() = "gpudiag's C++ core (thin bindings; use the gpudiag package instead)";
    m.attr("__version__") = GPUDIAG_PYTHON_VERSION_INFO;
    m.def("version", &gpudiag::version, "The version of the library in use.");

    py::enum_<gpudiag::StatusCode>(m, "StatusCode")
        .value("ok", gpudiag::StatusCode::kOk)
        .value("invalid_argument", gpudiag::StatusCode::kInvalidArgument)
        .value("not_found", gpudiag::StatusCode::kNotFound)
        .value("unavailable", gpudiag::StatusCode::kUnavailable)
        .value("corrupt_data", gpudiag::StatusCode::kCorruptData)
        .value("unsupported", gpudiag::StatusCode::kUnsupported)
        .value("io_error", gpudiag::StatusCode::kIoError)
        .value("resource_exhausted", gpudiag::StatusCode::kResourceExhausted)
        .value("failed_precondition", gpudiag::StatusCode::kFailedPrecondition)
        .value("internal", gpudiag::StatusCode::kInternal);
    m.def("status_code_name", &gpudiag::status_code_name);

    gpudiag::python::bind_report(m);
    gpudiag::python::bind_analyze(m);
    gpudiag::python::bind_capture(m);
    gpudiag::python::bind_event(m);
    gpudiag::python::bind_memory(m);
    gpudiag::python::bind_session(m);
}
