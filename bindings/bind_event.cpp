// SPDX-License-Identifier: Apache-2.0
// The 64-byte Event, for framework integrations that record their own observations
// (torch allocator counters, OOMs, annotations) through Session.record.
#include <gpudiag/event.hpp>

#include "bindings.hpp"

namespace gpudiag::python {

namespace py = pybind11;

void bind_event(py::module_& m) {
    py::enum_<EventKind>(m, "EventKind")
        .value("invalid", EventKind::kInvalid)
        .value("device_alloc", EventKind::kDeviceAlloc)
        .value("device_free", EventKind::kDeviceFree)
        .value("pool_alloc", EventKind::kPoolAlloc)
        .value("pool_free", EventKind::kPoolFree)
        .value("pool_resize", EventKind::kPoolResize)
        .value("vm_map", EventKind::kVmMap)
        .value("vm_unmap", EventKind::kVmUnmap)
        .value("segment_alloc", EventKind::kSegmentAlloc)
        .value("segment_free", EventKind::kSegmentFree)
        .value("block_alloc", EventKind::kBlockAlloc)
        .value("block_free", EventKind::kBlockFree)
        .value("kernel", EventKind::kKernel)
        .value("memcpy", EventKind::kMemcpy)
        .value("memset", EventKind::kMemset)
        .value("sync", EventKind::kSync)
        .value("api_call", EventKind::kApiCall)
        .value("range_begin", EventKind::kRangeBegin)
        .value("range_end", EventKind::kRangeEnd)
        .value("range", EventKind::kRange)
        .value("step_begin", EventKind::kStepBegin)
        .value("step_end", EventKind::kStepEnd)
        .value("out_of_memory", EventKind::kOutOfMemory)
        .value("annotation", EventKind::kAnnotation)
        .value("counter", EventKind::kCounter);
    m.def("event_kind_name", &event_kind_name);

    py::enum_<RangeCategory>(m, "RangeCategory")
        .value("generic", RangeCategory::kGeneric)
        .value("phase", RangeCategory::kPhase)
        .value("input_wait", RangeCategory::kInputWait)
        .value("cpu_op", RangeCategory::kCpuOp)
        .value("step", RangeCategory::kStep)
        .value("communication", RangeCategory::kCommunication)
        .value("user_annotation", RangeCategory::kUserAnnotation)
        .value("os_runtime", RangeCategory::kOsRuntime);

    py::enum_<CounterKind>(m, "CounterKind")
        .value("unknown", CounterKind::kUnknown)
        .value("gpu_utilization_percent", CounterKind::kGpuUtilizationPercent)
        .value("memory_utilization_percent", CounterKind::kMemoryUtilizationPercent)
        .value("device_memory_used_bytes", CounterKind::kDeviceMemoryUsedBytes)
        .value("device_memory_total_bytes", CounterKind::kDeviceMemoryTotalBytes)
        .value("process_memory_used_bytes", CounterKind::kProcessMemoryUsedBytes)
        .value("foreign_process_memory_bytes", CounterKind::kForeignProcessMemoryBytes)
        .value("sm_clock_mhz", CounterKind::kSmClockMhz)
        .value("sm_clock_max_mhz", CounterKind::kSmClockMaxMhz)
        .value("temperature_c", CounterKind::kTemperatureC)
        .value("power_watts", CounterKind::kPowerWatts)
        .value("power_limit_watts", CounterKind::kPowerLimitWatts)
        .value("throttle_reasons", CounterKind::kThrottleReasons)
        .value("ecc_corrected_errors", CounterKind::kEccCorrectedErrors)
        .value("ecc_uncorrected_errors", CounterKind::kEccUncorrectedErrors)
        .value("framework_allocated_bytes", CounterKind::kFrameworkAllocatedBytes)
        .value("framework_reserved_bytes", CounterKind::kFrameworkReservedBytes)
        .value("framework_alloc_retries", CounterKind::kFrameworkAllocRetries)
        .value("framework_ooms", CounterKind::kFrameworkOoms)
        .value("framework_inactive_split_bytes", CounterKind::kFrameworkInactiveSplitBytes)
        .value("dropped_records", CounterKind::kDroppedRecords);

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
