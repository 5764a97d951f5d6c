// SPDX-License-Identifier: Apache-2.0
// HealthAnalyzer on synthetic NVML counter streams.
#include "analysis/health/health_analyzer.hpp"

#include <gpudiag/analyze.hpp>

#include <gtest/gtest.h>

#include <vector>

namespace gpudiag {
namespace {

Event counter(std::uint64_t t, std::uint16_t device, CounterKind kind, double value) {
    Event e;
    e.kind = EventKind::kCounter;
    e.device = device;
    e.start_ns = e.end_ns = t;
    e.counter.counter = kind;
    e.counter.value = value;
    return e;
}

// `n` samples one second apart; `reasons(i)` gives the clock-event reasons of sample i.
template <typename Reasons>
std::vector<Event> samples(int n, Reasons reasons, double temperature = 70,
                           std::uint16_t device = 0) {
    std::vector<Event> ev;
    for (int i = 0; i < n; ++i) {
        std::uint64_t t = 1'000'000'000ULL * (i + 1);
        ev.push_back(counter(t, device, CounterKind::kGpuUtilizationPercent, 95));
        ev.push_back(counter(t, device, CounterKind::kSmClockMhz, 1500));
        ev.push_back(counter(t, device, CounterKind::kSmClockMaxMhz, 1980));
        ev.push_back(counter(t, device, CounterKind::kTemperatureC, temperature));
        ev.push_back(counter(t, device, CounterKind::kPowerWatts, 690));
        ev.push_back(counter(t, device, CounterKind::kPowerLimitWatts, 700));
        ev.push_back(
            counter(t, device, CounterKind::kThrottleReasons, static_cast<double>(reasons(i))));
        ev.push_back(
            counter(t, device, CounterKind::kDeviceMemoryTotalBytes, 141.0 * (1ULL << 30)));
    }
    return ev;
}

Report analyze(const std::vector<Event>& ev) {
    detail::HealthAnalyzer a;
    StringTable strings;
    a.begin(SourceInfo{}, strings);
    a.consume(ev);
    a.end(SourceSummary{});
    Report r;
    a.contribute(r);
    return r;
}

TEST(HealthAnalyzerTest, ThermalThrottleAboveFivePercentOfBusySamples) {
    // 3 of 40 busy samples thermally throttled (7.5 %); 10 idle samples do not count.
    auto ev = samples(50, [](int i) -> std::uint64_t {
        if (i >= 40) return clock_event_reason::kGpuIdle;
        return i < 3 ? clock_event_reason::kSwThermal : 0;
    });
    Report r = analyze(ev);
    const Finding* f = r.finding("thermal_throttle");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::kWarning);
    EXPECT_EQ(f->device, 0);
    ASSERT_FALSE(f->figures.empty());
    EXPECT_DOUBLE_EQ(f->figures[0].value, 3.0 / 40.0);
    EXPECT_EQ(r.finding("power_throttle"), nullptr);
    const Section* s = r.section("health");
    ASSERT_NE(s, nullptr);
    ASSERT_NE(s->figure("thermal_throttle_share"), nullptr);
    EXPECT_FALSE(s->series.empty());
}

TEST(HealthAnalyzerTest, OccasionalThrottleIsNotAFinding) {
    auto ev = samples(
        100, [](int i) -> std::uint64_t { return i < 4 ? clock_event_reason::kSwThermal : 0; });
    EXPECT_EQ(analyze(ev).finding("thermal_throttle"), nullptr);  // 4 % of busy samples
}

TEST(HealthAnalyzerTest, HardwareThermalSlowdownIsCritical) {
    auto ev = samples(
        20, [](int) { return clock_event_reason::kHwSlowdown; }, 91);
    Report r = analyze(ev);
    const Finding* f = r.finding("thermal_throttle");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::kCritical);
    EXPECT_EQ(r.finding("power_throttle"), nullptr);  // hot: the slowdown is thermal
}

TEST(HealthAnalyzerTest, PowerCapIsInfoAndPowerBrakeIsAWarning) {
    Report cap = analyze(samples(20, [](int) { return clock_event_reason::kSwPowerCap; }));
    const Finding* f = cap.finding("power_throttle");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::kInfo);
    EXPECT_EQ(cap.finding("thermal_throttle"), nullptr);
    Report brake = analyze(samples(20, [](int) { return clock_event_reason::kHwPowerBrake; }));
    ASSERT_NE(brake.finding("power_throttle"), nullptr);
    EXPECT_EQ(brake.finding("power_throttle")->severity, Severity::kWarning);
}

TEST(HealthAnalyzerTest, UncorrectedEccIsCriticalAndGrowingCorrectedIsAWarning) {
    std::vector<Event> ev;
    ev.push_back(counter(1, 0, CounterKind::kEccCorrectedErrors, 5));
    ev.push_back(counter(1, 0, CounterKind::kEccUncorrectedErrors, 0));
    ev.push_back(counter(2, 0, CounterKind::kEccCorrectedErrors, 5));
    ev.push_back(counter(2, 0, CounterKind::kEccUncorrectedErrors, 0));
    EXPECT_EQ(analyze(ev).finding("ecc_errors"), nullptr);  // old corrected errors: no news
    ev.push_back(counter(3, 0, CounterKind::kEccCorrectedErrors, 9));
    ASSERT_NE(analyze(ev).finding("ecc_errors"), nullptr);
    EXPECT_EQ(analyze(ev).finding("ecc_errors")->severity, Severity::kWarning);
    ev.push_back(counter(4, 1, CounterKind::kEccUncorrectedErrors, 1));
    Report r = analyze(ev);
    bool critical = false;
    for (const auto& f : r.findings)
        critical |= f.id == "ecc_errors" && f.severity == Severity::kCritical && f.device == 1;
    EXPECT_TRUE(critical);
}

TEST(HealthAnalyzerTest, ForeignMemoryOverOneGibOrFivePercent) {
    std::vector<Event> ev;
    ev.push_back(counter(1, 0, CounterKind::kDeviceMemoryTotalBytes, 16.0 * (1ULL << 30)));
    ev.push_back(counter(1, 0, CounterKind::kForeignProcessMemoryBytes, 512.0 * (1 << 20)));
    EXPECT_EQ(analyze(ev).finding("foreign_process_memory"), nullptr);  // 3 % and < 1 GiB
    ev.push_back(counter(2, 0, CounterKind::kForeignProcessMemoryBytes, 900.0 * (1 << 20)));
    Report r = analyze(ev);
    const Finding* f = r.finding("foreign_process_memory");  // 5.5 % of 16 GiB
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::kWarning);
    ev.push_back(counter(3, 0, CounterKind::kForeignProcessMemoryBytes, 10.0 * (1ULL << 30)));
    EXPECT_EQ(analyze(ev).finding("foreign_process_memory")->severity, Severity::kCritical);
}

TEST(HealthAnalyzerTest, NoCountersNoSection) {
    Report r = analyze({});
    EXPECT_EQ(r.section("health"), nullptr);
    EXPECT_TRUE(r.findings.empty());
}

TEST(HealthAnalyzerTest, RunsInTheRegisteredPipeline) {
    auto ev = samples(
        10, [](int) { return clock_event_reason::kSwThermal | clock_event_reason::kHwThermal; });
    StringTable strings;
    auto r = analyze_events(ev, SourceInfo{}, strings);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_NE(r->finding("thermal_throttle"), nullptr);
    EXPECT_NE(r->section("health"), nullptr);
}

}  // namespace
}  // namespace gpudiag
