// SPDX-License-Identifier: Apache-2.0
// format_figure: the one formatter of report numbers, by their declared unit (text report, HTML
// report and the Python layer all print through it).
#include <gpudiag/report.hpp>

#include "support/format.hpp"

#include <exception>

namespace gpudiag {
namespace {

using detail::format_bytes;
using detail::format_duration_ns;
using detail::format_number;

std::string format_by_unit(double value, std::string_view spelling) {
    switch (unit_from_name(spelling)) {
        case Unit::kNumber: return format_number(value, 3);
        case Unit::kCount:
        case Unit::kStep:
        case Unit::kCode:
        case Unit::kDevice:
        case Unit::kRank: return format_number(value, 0);
        case Unit::kBytes: return format_bytes(value);
        case Unit::kNanoseconds: return format_duration_ns(value);
        case Unit::kMicroseconds: return format_duration_ns(value * 1e3);
        case Unit::kMilliseconds: return format_duration_ns(value * 1e6);
        case Unit::kSeconds: return format_duration_ns(value * 1e9);
        case Unit::kFraction: return detail::format_percent(value);
        case Unit::kPercent: return detail::format_percent(value / 100.0);
        case Unit::kBytesPerStep: return format_bytes(value) + "/step";
        case Unit::kBytesPerSecond: return format_bytes(value) + "/s";
        case Unit::kBytesPerHour: return format_bytes(value) + "/hour";
        case Unit::kCelsius: return format_number(value, 1) + " °C";
        case Unit::kWatts: return format_number(value, 1) + " W";
        case Unit::kMegahertz: return format_number(value, 0) + " MHz";
        case Unit::kUnknown: break;
    }
    return format_number(value, 2) + " " + std::string(spelling);
}

}  // namespace

std::string format_figure(double value, std::string_view unit) noexcept {
    try {
        return format_by_unit(value, unit);
    } catch (...) {  // only std::bad_alloc can get here
        return {};
    }
}

}  // namespace gpudiag
