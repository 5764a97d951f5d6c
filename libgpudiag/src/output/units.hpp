// SPDX-License-Identifier: Apache-2.0
// What the renderers know about each Unit: whether it measures a quantity, and the Prometheus
// base unit it converts to. One row per Unit, in the enum's order (checked at compile time); the
// units' names are in core/names.cpp.
#pragma once

#include <gpudiag/report.hpp>

#include <array>
#include <string_view>

namespace gpudiag::detail {

enum class UnitClass : std::uint8_t {
    kQuantity,  ///< a measure: formatted, plotted, exported
    kIdentity,  ///< names something (a device, a rank, a step): never exported as a value
    kCode,      ///< a code whose meanings the figure's label lists
    kOpaque,    ///< a unit gpudiag does not know: printed with its spelling, never exported
};

struct UnitTraits {
    Unit unit;
    UnitClass kind;
    double to_base;                ///< multiply a value by this for the base unit
    std::string_view base_suffix;  ///< the Prometheus metric name's unit suffix ("_seconds")
    /// Endings of figure keys that repeat the unit ("busy_ns"): dropped before the base suffix
    /// is added, so the metric reads gpudiag_timeline_busy_seconds.
    std::array<std::string_view, 3> key_endings;
};

const UnitTraits& unit_traits(Unit unit) noexcept;

}  // namespace gpudiag::detail
