// SPDX-License-Identifier: Apache-2.0
// The renderers' table of units (see units.hpp).
#include "output/units.hpp"

#include "core/enum_check.hpp"

#include <cstddef>

namespace gpudiag::detail {
namespace {

using K = UnitClass;

// Prometheus base units: seconds, bytes, ratios (0..1), watts, hertz, celsius.
constexpr UnitTraits kUnits[] = {
    {Unit::kUnknown, K::kOpaque, 1, "", {}},
    {Unit::kNumber, K::kQuantity, 1, "", {}},
    {Unit::kCount, K::kQuantity, 1, "", {}},
    {Unit::kBytes, K::kQuantity, 1, "_bytes", {"_bytes"}},
    {Unit::kNanoseconds, K::kQuantity, 1e-9, "_seconds", {"_ns"}},
    {Unit::kMicroseconds, K::kQuantity, 1e-6, "_seconds", {"_us"}},
    {Unit::kMilliseconds, K::kQuantity, 1e-3, "_seconds", {"_ms"}},
    {Unit::kSeconds, K::kQuantity, 1, "_seconds", {"_seconds", "_s"}},
    {Unit::kFraction, K::kQuantity, 1, "_ratio", {"_share", "_fraction", "_ratio"}},
    {Unit::kPercent, K::kQuantity, 0.01, "_ratio", {"_percent"}},
    {Unit::kBytesPerStep, K::kQuantity, 1, "_bytes_per_step", {"_bytes_per_step", "_per_step"}},
    {Unit::kBytesPerSecond,
     K::kQuantity,
     1,
     "_bytes_per_second",
     {"_bytes_per_second", "_bytes_per_s", "_per_s"}},
    {Unit::kBytesPerHour,
     K::kQuantity,
     1.0 / 3600.0,
     "_bytes_per_second",
     {"_bytes_per_hour", "_per_hour"}},
    {Unit::kCelsius, K::kQuantity, 1, "_celsius", {"_celsius", "_c"}},
    {Unit::kWatts, K::kQuantity, 1, "_watts", {"_watts", "_w"}},
    {Unit::kMegahertz, K::kQuantity, 1e6, "_hertz", {"_mhz"}},
    {Unit::kStep, K::kIdentity, 1, "", {}},
    {Unit::kCode, K::kCode, 1, "", {}},
    {Unit::kDevice, K::kIdentity, 1, "", {}},
    {Unit::kRank, K::kIdentity, 1, "", {}},
};

static_assert(one_row_per_enumerator<Unit>(kUnits, [](const UnitTraits& t) { return t.unit; }),
              "kUnits: one row per Unit, in the enum's order");
static_assert(static_cast<int>(Unit::kUnknown) == 0 && static_cast<int>(Unit::kNumber) == 1,
              "unit_traits() indexes kUnits by value: rows must be dense from 0");

}  // namespace

const UnitTraits& unit_traits(Unit unit) noexcept {
    auto i = static_cast<std::size_t>(unit);
    return i < std::size(kUnits) ? kUnits[i] : kUnits[0];
}

}  // namespace gpudiag::detail
