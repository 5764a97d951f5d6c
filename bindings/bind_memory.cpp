// SPDX-License-Identifier: Apache-2.0
// Memory vocabulary (metrics, OOM causes, block categories), the allocation-site rule and the one
// OOM explainer (explain_oom_state, explain_oom_in_snapshot), for the Python layer. No logic here:
// the Python layer fills an AllocatorOomState from PyTorch's OOM observer and memory_stats.
#include <gpudiag/memory.hpp>

#include <pybind11/stl.h>

#include <string>

#include "bindings.hpp"
#include "status_to_python.hpp"

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
    m.def("oom_cause_name", &oom_cause_name);

    py::class_<AllocatorOomState>(m, "AllocatorOomState")
        .def(py::init<>())
        .def_readwrite("device", &AllocatorOomState::device)
        .def_readwrite("requested_bytes", &AllocatorOomState::requested_bytes)
        .def_readwrite("segment_bytes", &AllocatorOomState::segment_bytes)
        .def_readwrite("device_free_known", &AllocatorOomState::device_free_known)
        .def_readwrite("device_free_bytes", &AllocatorOomState::device_free_bytes)
        .def_readwrite("capacity_bytes", &AllocatorOomState::capacity_bytes)
        .def_readwrite("reserved_bytes", &AllocatorOomState::reserved_bytes)
        .def_readwrite("allocated_bytes", &AllocatorOomState::allocated_bytes)
        .def_readwrite("inactive_split_bytes", &AllocatorOomState::inactive_split_bytes)
        .def_readwrite("releasable_known", &AllocatorOomState::releasable_known)
        .def_readwrite("releasable_bytes", &AllocatorOomState::releasable_bytes)
        .def_readwrite("largest_free_block_known", &AllocatorOomState::largest_free_block_known)
        .def_readwrite("largest_free_block_bytes", &AllocatorOomState::largest_free_block_bytes)
        .def_readwrite("pending_free_bytes", &AllocatorOomState::pending_free_bytes)
        .def_readwrite("outside_framework_bytes", &AllocatorOomState::outside_framework_bytes)
        .def_readwrite("other_processes_bytes", &AllocatorOomState::other_processes_bytes)
        .def_readwrite("expandable_segments", &AllocatorOomState::expandable_segments);

    py::class_<OomExplanation>(m, "OomExplanation")
        .def_readonly("cause", &OomExplanation::cause)
        .def_readonly("device", &OomExplanation::device)
        .def_readonly("requested_bytes", &OomExplanation::requested_bytes)
        .def_readonly("rounded_bytes", &OomExplanation::rounded_bytes)
        .def_readonly("segment_bytes", &OomExplanation::segment_bytes)
        .def_readonly("capacity_bytes", &OomExplanation::capacity_bytes)
        .def_readonly("device_free_known", &OomExplanation::device_free_known)
        .def_readonly("device_free_bytes", &OomExplanation::device_free_bytes)
        .def_readonly("reserved_bytes", &OomExplanation::reserved_bytes)
        .def_readonly("allocated_bytes", &OomExplanation::allocated_bytes)
        .def_readonly("free_in_segments_bytes", &OomExplanation::free_in_segments_bytes)
        .def_readonly("largest_free_block_bytes", &OomExplanation::largest_free_block_bytes)
        .def_readonly("releasable_bytes", &OomExplanation::releasable_bytes)
        .def_readonly("inactive_split_bytes", &OomExplanation::inactive_split_bytes)
        .def_readonly("outside_framework_bytes", &OomExplanation::outside_framework_bytes)
        .def_readonly("other_processes_bytes", &OomExplanation::other_processes_bytes)
        .def_readonly("expandable_segments", &OomExplanation::expandable_segments)
        .def_readonly("summary", &OomExplanation::summary)
        .def_readonly("evidence", &OomExplanation::evidence)
        .def_readonly("advice", &OomExplanation::advice)
        .def_readonly("pinning_sites", &OomExplanation::pinning_sites);

    m.def("explain_oom_state", &explain_oom_state, py::arg("state"),
          "Why an allocation failed, from the allocator's figures at the failure.");
    m.def(
        "explain_oom_in_snapshot",
        [](const std::string& path, std::uint64_t request_bytes, int device) {
            return unwrap(
                without_gil([&] { return explain_oom_in_snapshot(path, request_bytes, device); }));
        },
        py::arg("path"), py::arg("request_bytes"), py::arg("device") = 0,
        "Why a request of request_bytes would fail given a torch memory snapshot's state.");
}

}  // namespace gpudiag::python
