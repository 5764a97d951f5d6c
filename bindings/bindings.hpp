// SPDX-License-Identifier: Apache-2.0
// The pieces of gpudiag._core, one function per binding file.
#pragma once

#include <gpudiag/names.hpp>

#include <pybind11/pybind11.h>

namespace gpudiag::python {

void bind_report(pybind11::module_& m);
void bind_analyze(pybind11::module_& m);
void bind_capture(pybind11::module_& m);
void bind_event(pybind11::module_& m);
void bind_memory(pybind11::module_& m);
void bind_session(pybind11::module_& m);
void bind_whatif(pybind11::module_& m);
void bind_compare(pybind11::module_& m);

/// Binds enum E under `name` with the names of its table (gpudiag/names.hpp): the one place an
/// enum's Python members come from.
template <typename E>
pybind11::enum_<E> bind_enum(pybind11::module_& m, const char* name) {
    pybind11::enum_<E> e(m, name);
    for (const auto& entry : enum_names<E>()) e.value(entry.name, entry.value);
    return e;
}

/// Runs `fn` with the GIL released (for blocking C++ calls) and returns what it returns; the
/// caller turns a failed Status into an exception after the GIL is back.
template <typename Fn>
auto without_gil(Fn&& fn) {
    pybind11::gil_scoped_release release;
    return fn();
}

}  // namespace gpudiag::python
