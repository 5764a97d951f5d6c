// SPDX-License-Identifier: Apache-2.0
// format_figure: the one formatter of report numbers (text, HTML and Python print through it).
#include <gpudiag/report.hpp>

#include <gtest/gtest.h>

#include <limits>

namespace gpudiag {
namespace {

struct Case {
    double value;
    const char* unit;
    const char* text;
};

TEST(FormatFigure, ReadableUnitsForEveryDeclaredUnit) {
    const Case cases[] = {
        {512, "bytes", "512 B"},
        {1536, "bytes", "1.5 KiB"},
        {3.0 * (1ull << 30), "bytes", "3.0 GiB"},
        {-2.0 * (1 << 20), "bytes", "-2.0 MiB"},
        {750, "ns", "750 ns"},
        {4200, "ns", "4.2 us"},
        {2.5e6, "ns", "2.5 ms"},  // Python once said "2.50 ms"
        {62.34e6, "ns", "62.3 ms"},
        {2.25e9, "ns", "2.25 s"},
        {90e9, "ns", "90 s"},  // Python once said "1.5 min"
        {900e9, "ns", "15 min"},
        {3 * 3600e9, "ns", "3 h"},  // Python once said "180.0 min"
        {2500, "us", "2.5 ms"},
        {1.5, "s", "1.5 s"},
        {0.25, "fraction", "25 %"},  // Python once said "25.0 %"
        {0.394, "fraction", "39.4 %"},
        {39.4, "percent", "39.4 %"},
        {1234, "count", "1234"},  // Python once said "1,234"
        {20.0 * (1 << 20), "bytes/step", "20.0 MiB/step"},
        {1.0 * (1 << 20), "bytes/s", "1.0 MiB/s"},
        {4.0 * (1 << 30), "bytes/hour", "4.0 GiB/hour"},
        {71.5, "celsius", "71.5 °C"},
        {250, "W", "250 W"},
        {1980, "MHz", "1980 MHz"},
        {12, "step", "12"},
        {1, "enum", "1"},
        {0, "ordinal", "0"},
        {0.12345, "", "0.123"},
        {3, "furlongs", "3 furlongs"},  // an undeclared unit keeps its spelling
    };
    for (const auto& c : cases) {
        EXPECT_EQ(format_figure(c.value, c.unit), c.text) << c.value << " " << c.unit;
    }
}

TEST(FormatFigure, NotANumberIsSaidSo) {
    EXPECT_EQ(format_figure(std::numeric_limits<double>::quiet_NaN(), "bytes"), "n/a");
    EXPECT_EQ(format_figure(std::numeric_limits<double>::infinity(), "ns"), "n/a");
}

// Keys spell their unit for JSON; the headings drop that word, as the cells print the unit.
TEST(ColumnHeading, DropsOnlyTheWordThatRestatesTheDeclaredUnit) {
    struct Heading {
        const char* key;
        const char* unit;
        const char* heading;
    };
    const Heading cases[] = {
        {"step_time_ns", "ns", "step time"},
        {"wait_ns_per_step", "ns", "wait per step"},
        {"peak_bytes", "bytes", "peak"},
        {"bytes", "bytes", "bytes"},  // nothing else to say
        {"idle_share", "fraction", "idle share"},
        {"step_time_ns", "count", "step time ns"},  // a unit it does not restate stays
        {"rank", "rank", "rank"},
        {"", "ns", ""},
        // A column named by a site or a name, not a key: its underscores are its own.
        {"cs336_basics/nn_utils.py:7 softmax", "bytes", "cs336_basics/nn_utils.py:7 softmax"},
        {"other sites", "bytes", "other sites"},
        {"timeline.step_time_ns", "ns", "timeline.step time"},  // a section's key, dotted
    };
    for (const auto& c : cases) {
        EXPECT_EQ(column_heading(c.key, c.unit), c.heading) << c.key << " " << c.unit;
    }
}

}  // namespace
}  // namespace gpudiag
