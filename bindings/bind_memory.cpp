// SPDX-License-Identifier: Apache-2.0
// Memory vocabulary (metrics, OOM causes) and the allocation-site rule, for the Python layer.
#include <gpudiag/memory.hpp>

#include <pybind11/stl.h>

#include "bindings.hpp"

namespace gpudiag::python {

namespace py = pybind11;

void bind_memory(py::module_& m) {
    bind_enum<MemoryMetric>(m, "MemoryMetric");
    bind_enum<OomCause>(m, "OomCause");

    py::class_<StackFrame>(m, "StackFrame")
        .def(py::init([](std::string filename, std::string name, std::int64_t line) {
                 return StackFrame{std::move(filename), std::move(name), line};
             }),
             py::arg("filename") = "", py::arg("name") = "", py::arg("line") = 0)
        .def_readwrite("filename", &StackFrame::filename)
        .def_readwrite("name", &StackFrame::name)
        .def_readwrite("line", &StackFrame::line);
    m.def("allocation_site", &allocation_site, py::arg("frames"),
          "Where an allocation came from, from its frames innermost first ('dir/file.py:42 fn').");
}

}  // namespace gpudiag::python
