// SPDX-License-Identifier: Apache-2.0
// The one place a gpudiag Status becomes a Python exception. Which GpudiagError subclass a code
// maps to is decided by python/gpudiag/_errors.py (error_from_status), so the mapping is written
// once, in Python, and the CLI's exit codes follow from the same classes.
#pragma once

#include <gpudiag/status.hpp>

#include <pybind11/pybind11.h>

#include <utility>

namespace gpudiag::python {

namespace py = pybind11;

/// Raises the GpudiagError subclass for a non-OK `status` (needs the GIL).
[[noreturn]] inline void raise_status(const Status& status) {
    py::object errors = py::module_::import("gpudiag._errors");
    py::object error =
        errors.attr("error_from_status")(status_code_name(status.code()), status.message());
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
    throw py::error_already_set();
}

/// Raises when `status` is not OK.
inline void check(const Status& status) {
    if (!status.is_ok()) raise_status(status);
}

/// The value of `result`, or raises its status.
template <typename T>
T unwrap(Result<T> result) {
    if (!result.is_ok()) raise_status(result.status());
    return std::move(result).value();
}

}  // namespace gpudiag::python
