// SPDX-License-Identifier: Apache-2.0
// Enum names come from one table per enum (core/names.cpp): every *_name() function and
// enum_from_name() agree with it, names round-trip, and a value an enum does not declare reads
// "unknown".
#include <gpudiag/analyze.hpp>
#include <gpudiag/capture.hpp>
#include <gpudiag/event.hpp>
#include <gpudiag/memory.hpp>
#include <gpudiag/names.hpp>
#include <gpudiag/report.hpp>
#include <gpudiag/status.hpp>

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace gpudiag {
namespace {

template <typename E>
void expect_round_trip(const char* enum_label) {
    SCOPED_TRACE(enum_label);
    std::set<std::string> seen;
    ASSERT_GT(enum_names<E>().size(), 0u);
    for (const auto& entry : enum_names<E>()) {
        EXPECT_TRUE(seen.insert(entry.name).second) << "duplicate name " << entry.name;
        EXPECT_STREQ(enum_name(entry.value), entry.name);
        E back{};
        ASSERT_TRUE(enum_from_name(entry.name, back)) << entry.name;
        EXPECT_EQ(back, entry.value) << entry.name;
    }
    E untouched = enum_names<E>().begin()->value;
    EXPECT_FALSE(enum_from_name("no such name", untouched));
    EXPECT_EQ(untouched, enum_names<E>().begin()->value);
}

TEST(Names, EveryTableRoundTrips) {
    expect_round_trip<EventKind>("EventKind");
    expect_round_trip<MemoryKind>("MemoryKind");
    expect_round_trip<CopyDirection>("CopyDirection");
    expect_round_trip<SyncKind>("SyncKind");
    expect_round_trip<RangeCategory>("RangeCategory");
    expect_round_trip<ApiDomain>("ApiDomain");
    expect_round_trip<CounterKind>("CounterKind");
    expect_round_trip<StatusCode>("StatusCode");
    expect_round_trip<Severity>("Severity");
    expect_round_trip<Unit>("Unit");
    expect_round_trip<FigureKind>("FigureKind");
    expect_round_trip<TableKind>("TableKind");
    expect_round_trip<CaptureLevel>("CaptureLevel");
    expect_round_trip<AnalysisWindow>("AnalysisWindow");
    expect_round_trip<InputFormat>("InputFormat");
    expect_round_trip<MemoryMetric>("MemoryMetric");
    expect_round_trip<OomCause>("OomCause");
}

TEST(Names, NameFunctionsReadTheTables) {
    for (const auto& e : enum_names<EventKind>()) EXPECT_STREQ(event_kind_name(e.value), e.name);
    for (const auto& e : enum_names<StatusCode>()) EXPECT_STREQ(status_code_name(e.value), e.name);
    for (const auto& e : enum_names<Severity>()) EXPECT_STREQ(severity_name(e.value), e.name);
    for (const auto& e : enum_names<CaptureLevel>()) {
        EXPECT_STREQ(capture_level_name(e.value), e.name);
    }
    for (const auto& e : enum_names<InputFormat>())
        EXPECT_STREQ(input_format_name(e.value), e.name);
    for (const auto& e : enum_names<MemoryMetric>()) {
        EXPECT_STREQ(memory_metric_name(e.value), e.name);
    }
    for (const auto& e : enum_names<OomCause>()) EXPECT_STREQ(oom_cause_name(e.value), e.name);
}

TEST(Names, CounterKindIncludesCaptureOverhead) {  // once missing from the Python bindings
    EXPECT_STREQ(enum_name(CounterKind::kCaptureOverheadNs), "capture_overhead_ns");
}

TEST(Names, InputFormatNamesAreSnakeCaseLikeTheRest) {
    EXPECT_STREQ(input_format_name(InputFormat::kRecording), "recording");
    EXPECT_STREQ(input_format_name(InputFormat::kKinetoJson), "kineto_json");
    EXPECT_STREQ(input_format_name(InputFormat::kTorchSnapshot), "torch_snapshot");
    EXPECT_STREQ(input_format_name(InputFormat::kReportJson), "report_json");
}

TEST(Names, UndeclaredValuesAreUnknown) {
    EXPECT_STREQ(event_kind_name(static_cast<EventKind>(19)), "unknown");
    EXPECT_STREQ(severity_name(static_cast<Severity>(7)), "unknown");
    EXPECT_STREQ(status_code_name(static_cast<StatusCode>(-1)), "unknown");
}

TEST(Names, UnitsAreTheReportSpellings) {
    EXPECT_EQ(unit_from_name("bytes"), Unit::kBytes);
    EXPECT_EQ(unit_from_name("ns"), Unit::kNanoseconds);
    EXPECT_EQ(unit_from_name("bytes/step"), Unit::kBytesPerStep);
    EXPECT_EQ(unit_from_name(""), Unit::kNumber);
    EXPECT_EQ(unit_from_name("ordinal"), Unit::kDevice);
    EXPECT_EQ(unit_from_name("furlongs"), Unit::kUnknown);
}

}  // namespace
}  // namespace gpudiag
