// SPDX-License-Identifier: Apache-2.0
// The 64-byte Event, for framework integrations that record their own observations
// (torch allocator counters, OOMs, annotations) through Session.record.
#include <gpudiag/event.hpp>

#include "bindings.hpp"

namespace gpudiag::python {

namespace py = pybind11;

void bind_event(py::module_& m) {
    bind_enum<EventKind>(m, "EventKind");
    bind_enum<MemoryKind>(m, "MemoryKind");
    bind_enum<MemoryCategory>(m, "MemoryCategory");
    bind_enum<CopyDirection>(m, "CopyDirection");
    bind_enum<SyncKind>(m, "SyncKind");
    bind_enum<ApiDomain>(m, "ApiDomain");
    m.def("event_kind_name", &event_kind_name);

    bind_enum<RangeCategory>(m, "RangeCategory");

    bind_enum<CounterKind>(m, "CounterKind");

    py::class_<MemoryPayload>(m, "MemoryPayload")
        .def_readwrite("address", &MemoryPayload::address)
        .def_readwrite("bytes", &MemoryPayload::bytes)
        .def_readwrite("aux", &MemoryPayload::aux)
        .def_readwrite("site", &MemoryPayload::site)
        .def_readwrite("extra", &MemoryPayload::extra);
    py::class_<RangePayload>(m, "RangePayload")
        .def_readwrite("name", &RangePayload::name)
        .def_readwrite("category", &RangePayload::category)
        .def_readwrite("id", &RangePayload::id)
        .def_readwrite("parent", &RangePayload::parent);
    py::class_<OomPayload>(m, "OomPayload")
        .def_readwrite("requested_bytes", &OomPayload::requested_bytes)
        .def_readwrite("free_bytes", &OomPayload::free_bytes)
        .def_readwrite("total_bytes", &OomPayload::total_bytes)
        .def_readwrite("site", &OomPayload::site);
    py::class_<AnnotationPayload>(m, "AnnotationPayload")
        .def_readwrite("text", &AnnotationPayload::text)
        .def_readwrite("value", &AnnotationPayload::value);
    py::class_<CounterPayload>(m, "CounterPayload")
        .def_readwrite("counter", &CounterPayload::counter)
        .def_readwrite("value", &CounterPayload::value);

    // Payload accessors return references into the event (reference_internal), so
    // `event.counter.value = 3.0` changes the event itself.
    py::class_<Event>(m, "Event")
        .def(py::init<>())
        .def_readwrite("kind", &Event::kind)
        .def_readwrite("flags", &Event::flags)
        .def_readwrite("device", &Event::device)
        .def_readwrite("stream", &Event::stream)
        .def_readwrite("process", &Event::process)
        .def_readwrite("thread", &Event::thread)
        .def_readwrite("start_ns", &Event::start_ns)
        .def_readwrite("end_ns", &Event::end_ns)
        .def_property_readonly(
            "memory", [](Event& e) -> MemoryPayload& { return e.memory; },
            py::return_value_policy::reference_internal)
        .def_property_readonly(
            "range", [](Event& e) -> RangePayload& { return e.range; },
            py::return_value_policy::reference_internal)
        .def_property_readonly(
            "oom", [](Event& e) -> OomPayload& { return e.oom; },
            py::return_value_policy::reference_internal)
        .def_property_readonly(
            "annotation", [](Event& e) -> AnnotationPayload& { return e.annotation; },
            py::return_value_policy::reference_internal)
        .def_property_readonly(
            "counter", [](Event& e) -> CounterPayload& { return e.counter; },
            py::return_value_policy::reference_internal);
    m.attr("NO_DEVICE") = kNoDevice;
}

}  // namespace gpudiag::python
