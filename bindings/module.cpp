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

    gpudiag::python::bind_enum<gpudiag::StatusCode>(m, "StatusCode");
    m.def("status_code_name", &gpudiag::status_code_name);

    gpudiag::python::bind_report(m);
    gpudiag::python::bind_analyze(m);
    gpudiag::python::bind_capture(m);
    gpudiag::python::bind_event(m);
    gpudiag::python::bind_memory(m);
    gpudiag::python::bind_session(m);
    gpudiag::python::bind_whatif(m);
    gpudiag::python::bind_compare(m);
}
