// SPDX-License-Identifier: Apache-2.0
// gpudiag::Unit in Python is its spelling ("bytes", "ns", "bytes/step"), as in the JSON report:
// the spellings are not Python identifiers, so Unit is not bound as an enum. Python reads a unit
// as str and may set one from str (a spelling no unit has becomes Unit::kUnknown).
#pragma once

#include <gpudiag/names.hpp>
#include <gpudiag/report.hpp>

#include <pybind11/pybind11.h>

#include <string>

namespace pybind11::detail {

template <>
struct type_caster<gpudiag::Unit> {
    PYBIND11_TYPE_CASTER(gpudiag::Unit, const_name("str"));

    bool load(handle src, bool /*convert*/) {
        if (!isinstance<str>(src)) return false;
        value = gpudiag::unit_from_name(src.cast<std::string>());
        return true;
    }
    static handle cast(gpudiag::Unit unit, return_value_policy /*policy*/, handle /*parent*/) {
        return str(gpudiag::enum_name(unit)).release();
    }
};

}  // namespace pybind11::detail
