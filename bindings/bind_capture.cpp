// SPDX-License-Identifier: Apache-2.0
// What live capture can do here (probe_capture never touches a CUDA context).
#include <gpudiag/capture.hpp>

#include <pybind11/stl.h>

#include "bindings.hpp"

namespace gpudiag::python {

namespace py = pybind11;

void bind_capture(py::module_& m) {
    bind_enum<CaptureLevel>(m, "CaptureLevel");

    py::class_<FrameworkInfo>(m, "FrameworkInfo")
        .def(py::init<>())
        .def_readwrite("name", &FrameworkInfo::name)
        .def_readwrite("version", &FrameworkInfo::version)
        .def_readwrite("cuda_version", &FrameworkInfo::cuda_version)
        .def_readwrite("cudnn_version", &FrameworkInfo::cudnn_version)
        .def_readwrite("cuda_wheels_dir", &FrameworkInfo::cuda_wheels_dir)
        .def_readwrite("cupti_in_wheels", &FrameworkInfo::cupti_in_wheels);

    py::class_<SoftwareStack>(m, "SoftwareStack")
        .def(py::init<>())
        .def_readwrite("driver_version", &SoftwareStack::driver_version)
        .def_readwrite("driver_cuda", &SoftwareStack::driver_cuda)
        .def_readwrite("framework", &SoftwareStack::framework)
        .def_readwrite("cupti", &SoftwareStack::cupti)
        .def_readwrite("cupti_cuda", &SoftwareStack::cupti_cuda)
        .def_readwrite("cupti_library", &SoftwareStack::cupti_library)
        .def_readwrite("cupti_mapped", &SoftwareStack::cupti_mapped);

    py::class_<StackIssue>(m, "StackIssue")
        .def(py::init<>())
        .def_readwrite("id", &StackIssue::id)
        .def_readwrite("title", &StackIssue::title)
        .def_readwrite("problem", &StackIssue::problem)
        .def_readwrite("fix", &StackIssue::fix);

    py::class_<CaptureStatus>(m, "CaptureStatus")
        .def(py::init<>())
        .def_readwrite("level", &CaptureStatus::level)
        .def_readwrite("available", &CaptureStatus::available)
        .def_readwrite("reasons", &CaptureStatus::reasons)
        .def_readwrite("capturing", &CaptureStatus::capturing)
        .def_readwrite("paused", &CaptureStatus::paused)
        .def_readwrite("paused_reason", &CaptureStatus::paused_reason)
        .def_readwrite("events", &CaptureStatus::events)
        .def_readwrite("dropped", &CaptureStatus::dropped)
        .def_readwrite("kernels_without_timing", &CaptureStatus::kernels_without_timing)
        .def_readwrite("cupti_library", &CaptureStatus::cupti_library)
        .def_readwrite("cupti_version", &CaptureStatus::cupti_version)
        .def_readwrite("driver_version", &CaptureStatus::driver_version)
        .def_readwrite("device_count", &CaptureStatus::device_count)
        .def_readwrite("stack", &CaptureStatus::stack)
        .def_readwrite("stack_issues", &CaptureStatus::stack_issues);

    m.def("capture_level_name", &capture_level_name);
    m.def(
        "add_library_search_dir",
        [](const std::string& directory) { add_library_search_dir(directory); },
        "Adds a directory where live capture looks for libcupti.so.13/.12 before the system's.");
    m.def("set_framework_info", &set_framework_info,
          "Tells live capture which framework runs here (the stack verdict's input).");
    m.def("probe_capture", &probe_capture, py::call_guard<py::gil_scoped_release>(),
          "Probes the machine without starting capture or creating a CUDA context.");
}

}  // namespace gpudiag::python
