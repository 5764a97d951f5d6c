// SPDX-License-Identifier: Apache-2.0
// Names of enumerators, written once. Every public enum that has names declares, next to its
// definition, a specialization of enum_names<E>(); one table per enum in the library
// (src/core/names.cpp, checked at compile time against the enum's declared enumerators) defines
// it. The *_name() functions, the Python bindings, python/gpudiag/_core.pyi and the tables in the
// docs all come from those tables (tools/gen_names.py checks the last two; tools/lint.sh runs it).
#pragma once

#include <gpudiag/export.hpp>

#include <cstddef>
#include <string_view>

namespace gpudiag {

/// One enumerator and its stable name: snake_case for every enum but Unit, whose names are the
/// unit spellings of the JSON report ("bytes", "ns", "bytes/step").
template <typename E>
struct EnumName {
    E value;
    const char* name;
};

/// Every enumerator of E with its name, in increasing value order.
template <typename E>
struct EnumNames {
    const EnumName<E>* entries = nullptr;
    std::size_t count = 0;

    [[nodiscard]] const EnumName<E>* begin() const noexcept { return entries; }
    [[nodiscard]] const EnumName<E>* end() const noexcept { return entries + count; }
    [[nodiscard]] std::size_t size() const noexcept { return count; }
};

/// The name table of E. Declared (and defined by the library) only for the enums that have names;
/// each such enum's header declares its specialization.
/// Thread-safety: safe. Callback-safe: yes. Errors: none.
template <typename E>
EnumNames<E> enum_names() noexcept;

/// The name of `value`, or "unknown" for a value that E does not declare.
template <typename E>
const char* enum_name(E value) noexcept {
    for (const auto& entry : enum_names<E>()) {
        if (entry.value == value) return entry.name;
    }
    return "unknown";
}

/// Sets `out` to the enumerator named `name` and returns true; false (and `out` unchanged) when
/// no enumerator has that name.
template <typename E>
bool enum_from_name(std::string_view name, E& out) noexcept {
    for (const auto& entry : enum_names<E>()) {
        if (name == entry.name) {
            out = entry.value;
            return true;
        }
    }
    return false;
}

}  // namespace gpudiag
