// SPDX-License-Identifier: Apache-2.0
// Allocator what-if: options in, result out, bound field by field.
#include <gpudiag/whatif.hpp>

#include <pybind11/stl.h>

#include "bindings.hpp"
#include "status_to_python.hpp"

namespace gpudiag::python {

namespace py = pybind11;

void bind_whatif(py::module_& m) {
    py::class_<WhatIfOptions>(m, "WhatIfOptions")
        .def(py::init<>())
        .def_readwrite("settings", &WhatIfOptions::settings)
        .def_readwrite("capacity_bytes", &WhatIfOptions::capacity_bytes)
        .def_readwrite("device_total_bytes", &WhatIfOptions::device_total_bytes)
        .def_readwrite("sweep", &WhatIfOptions::sweep)
        .def_readwrite("device", &WhatIfOptions::device)
        .def_readwrite("torch_version", &WhatIfOptions::torch_version);

    py::class_<WhatIfCaution>(m, "WhatIfCaution")
        .def(py::init<>())
        .def_readonly("change", &WhatIfCaution::change)
        .def_readonly("unsupported", &WhatIfCaution::unsupported)
        .def_readonly("reason", &WhatIfCaution::reason)
        .def_readonly("source", &WhatIfCaution::source);

    bind_enum<WhatIfStart>(m, "WhatIfStart");

    py::class_<WhatIfOutcome>(m, "WhatIfOutcome")
        .def(py::init<>())
        .def_readonly("label", &WhatIfOutcome::label)
        .def_readonly("change", &WhatIfOutcome::change)
        .def_readonly("settings", &WhatIfOutcome::settings)
        .def_readonly("start", &WhatIfOutcome::start)
        .def_readonly("replayed_to_end", &WhatIfOutcome::replayed_to_end)
        .def_readonly("peak_reserved_bytes", &WhatIfOutcome::peak_reserved_bytes)
        .def_readonly("peak_allocated_bytes", &WhatIfOutcome::peak_allocated_bytes)
        .def_readonly("peak_stranded_bytes", &WhatIfOutcome::peak_stranded_bytes)
        .def_readonly("final_reserved_bytes", &WhatIfOutcome::final_reserved_bytes)
        .def_readonly("device_mallocs", &WhatIfOutcome::device_mallocs)
        .def_readonly("device_frees", &WhatIfOutcome::device_frees)
        .def_readonly("page_maps", &WhatIfOutcome::page_maps)
        .def_readonly("page_unmaps", &WhatIfOutcome::page_unmaps)
        .def_readonly("alloc_retries", &WhatIfOutcome::alloc_retries)
        .def_readonly("oom", &WhatIfOutcome::oom)
        .def_readonly("oom_entry", &WhatIfOutcome::oom_entry)
        .def_readonly("oom_request_bytes", &WhatIfOutcome::oom_request_bytes)
        .def_readonly("recorded_ooms", &WhatIfOutcome::recorded_ooms)
        .def_readonly("recorded_ooms_avoided", &WhatIfOutcome::recorded_ooms_avoided)
        .def_readonly("cautions", &WhatIfOutcome::cautions);

    py::class_<WhatIfReproduction>(m, "WhatIfReproduction")
        .def(py::init<>())
        .def_readonly("checked", &WhatIfReproduction::checked)
        .def_readonly("exact", &WhatIfReproduction::exact)
        .def_readonly("recorded_peak_reserved_bytes",
                      &WhatIfReproduction::recorded_peak_reserved_bytes)
        .def_readonly("modelled_peak_reserved_bytes",
                      &WhatIfReproduction::modelled_peak_reserved_bytes)
        .def_readonly("recorded_segment_actions", &WhatIfReproduction::recorded_segment_actions)
        .def_readonly("modelled_segment_actions", &WhatIfReproduction::modelled_segment_actions)
        .def_readonly("matching_segment_actions", &WhatIfReproduction::matching_segment_actions)
        .def_readonly("allocations", &WhatIfReproduction::allocations)
        .def_readonly("allocations_at_recorded_address",
                      &WhatIfReproduction::allocations_at_recorded_address)
        .def_readonly("recorded_final_segments", &WhatIfReproduction::recorded_final_segments)
        .def_readonly("modelled_final_segments", &WhatIfReproduction::modelled_final_segments)
        .def_readonly("final_segments_match", &WhatIfReproduction::final_segments_match)
        .def_readonly("first_difference", &WhatIfReproduction::first_difference);

    py::class_<WhatIfResult>(m, "WhatIfResult")
        .def(py::init<>())
        .def_readonly("source", &WhatIfResult::source)
        .def_readonly("device", &WhatIfResult::device)
        .def_readonly("history_entries", &WhatIfResult::history_entries)
        .def_readonly("allocations", &WhatIfResult::allocations)
        .def_readonly("history_from_start", &WhatIfResult::history_from_start)
        .def_readonly("segments_before_history", &WhatIfResult::segments_before_history)
        .def_readonly("live_blocks_before_history", &WhatIfResult::live_blocks_before_history)
        .def_readonly("settings_recorded", &WhatIfResult::settings_recorded)
        .def_readonly("recorded_settings", &WhatIfResult::recorded_settings)
        .def_readonly("capacity_bytes", &WhatIfResult::capacity_bytes)
        .def_readonly("capacity_origin", &WhatIfResult::capacity_origin)
        .def_readonly("reproduction", &WhatIfResult::reproduction)
        .def_readonly("outcomes", &WhatIfResult::outcomes)
        .def_readonly("advice", &WhatIfResult::advice)
        .def_readonly("notes", &WhatIfResult::notes)
        .def_readonly("history_complete", &WhatIfResult::history_complete)
        .def_readonly("torch_version", &WhatIfResult::torch_version)
        .def_readonly("torch_version_origin", &WhatIfResult::torch_version_origin)
        .def_readonly("torch_version_note", &WhatIfResult::torch_version_note)
        .def(
            "text", [](const WhatIfResult& r) { return whatif_text(r); }, "Plain-text rendering.")
        .def(
            "to_json", [](const WhatIfResult& r) { return whatif_json(r); }, "JSON rendering.");

    m.def(
        "whatif_file",
        [](const std::string& path, const WhatIfOptions& options) {
            return unwrap(without_gil([&] { return whatif_file(path, options); }));
        },
        py::arg("path"), py::arg("options") = WhatIfOptions{},
        "Replays the allocation history in a torch snapshot or recording under other allocator "
        "settings.");
}

}  // namespace gpudiag::python
