// SPDX-License-Identifier: Apache-2.0
// format_figure: the one formatter of report numbers, by their declared unit, and figure_row, a
// figure as the reports list it (text report, HTML report and the Python layer all print through
// them).
#include <gpudiag/report.hpp>

#include "support/format.hpp"

#include <exception>
#include <string>
#include <utility>

namespace gpudiag {
namespace {

using detail::format_bytes;
using detail::format_duration_ns;
using detail::format_number;

std::string format_by_unit(double value, Unit unit) {
    switch (unit) {
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
    return format_number(value, 2);
}

// An "enum" figure's label reads "name: 0 first, 1 second, ..."; the row shows the name and the
// word the value stands for instead of the code.
std::pair<std::string, std::string> enum_row(const Figure& f) {
    auto colon = f.label.find(':');
    if (colon == std::string::npos) return {f.label, format_number(f.value, 0)};
    std::string name = f.label.substr(0, colon);
    std::string code = format_number(f.value, 0) + " ";
    std::size_t pos = colon + 1;
    while (pos < f.label.size()) {
        std::size_t comma = f.label.find(',', pos);
        std::string item =
            f.label.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        item.erase(0, item.find_first_not_of(' '));
        if (item.rfind(code, 0) == 0) return {name, item.substr(code.size())};
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    return {name, format_number(f.value, 0)};
}

}  // namespace

std::pair<std::string, std::string> figure_row(const Figure& figure) noexcept {
    try {
        if (figure.unit == Unit::kCode) return enum_row(figure);
        return {figure.label.empty() ? figure.key : figure.label,
                format_by_unit(figure.value, figure.unit)};
    } catch (...) {  // only std::bad_alloc can get here
        return {};
    }
}

std::string format_figure(double value, Unit unit) noexcept {
    try {
        return format_by_unit(value, unit);
    } catch (...) {  // only std::bad_alloc can get here
        return {};
    }
}

std::string format_figure(double value, std::string_view unit) noexcept {
    try {
        const Unit known = unit_from_name(unit);
        // A spelling no unit has keeps it after the number, so a caller sees what it passed.
        if (known == Unit::kUnknown && unit != enum_name(Unit::kUnknown)) {
            return format_number(value, 2) + " " + std::string(unit);
        }
        return format_by_unit(value, known);
    } catch (...) {  // only std::bad_alloc can get here
        return {};
    }
}

}  // namespace gpudiag
