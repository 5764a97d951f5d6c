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

// PCIe readings ten seconds apart, each after a utilization sample of `util` percent.
std::vector<Event> link_readings(int n, double util, unsigned gen, unsigned width,
                                 double replays_per_reading = 0) {
    std::vector<Event> ev;
    for (int i = 0; i < n; ++i) {
        const std::uint64_t t = 10'000'000'000ULL * (i + 1);
        ev.push_back(counter(t, 0, CounterKind::kGpuUtilizationPercent, util));
        ev.push_back(counter(t, 0, CounterKind::kPcieLinkGeneration, gen));
        ev.push_back(counter(t, 0, CounterKind::kPcieLinkGenerationMax, 5));
        ev.push_back(counter(t, 0, CounterKind::kPcieLinkWidth, width));
        ev.push_back(counter(t, 0, CounterKind::kPcieLinkWidthMax, 16));
        ev.push_back(counter(t, 0, CounterKind::kPcieReplays, replays_per_reading * i));
    }
    return ev;
}

// An idle GPU lowers its link's generation to save power: not a degraded link. Busy, it is.
TEST(HealthAnalyzerTest, ALowerPcieGenerationCountsOnlyWhileBusy) {
    EXPECT_EQ(analyze(link_readings(6, 0, 1, 16)).finding("pcie_link_degraded"), nullptr);
    Report busy = analyze(link_readings(6, 90, 3, 16));
    const Finding* f = busy.finding("pcie_link_degraded");
    ASSERT_NE(f, nullptr);
    EXPECT_NE(f->title.find("Gen 3 x16 of Gen 5 x16"), std::string::npos) << f->title;
    // One busy reading is not enough to call it.
    EXPECT_EQ(analyze(link_readings(1, 90, 3, 16)).finding("pcie_link_degraded"), nullptr);
}

// The width does not drop to save power: fewer lanes is degraded, busy or not.
TEST(HealthAnalyzerTest, ANarrowPcieLinkIsDegradedEvenWhenIdle) {
    EXPECT_NE(analyze(link_readings(3, 0, 5, 8)).finding("pcie_link_degraded"), nullptr);
    EXPECT_EQ(analyze(link_readings(3, 0, 5, 16)).finding("pcie_link_degraded"), nullptr);
}

// Replays are link errors: 100 or more during the run are reported, a few are not.
TEST(HealthAnalyzerTest, PcieReplaysDuringTheRunAreLinkErrors) {
    EXPECT_EQ(analyze(link_readings(5, 90, 5, 16, 10)).finding("pcie_link_degraded"), nullptr);
    Report r = analyze(link_readings(5, 90, 5, 16, 40));  // 160 in the run
    const Finding* f = r.finding("pcie_link_degraded");
    ASSERT_NE(f, nullptr);
    EXPECT_NE(f->title.find("retransmitted 160 times"), std::string::npos) << f->title;
}

// Memory set aside before the run, nothing pending: information; a failed remap: critical.
TEST(HealthAnalyzerTest, RetiredMemorySeverityFollowsWhatItNeeds) {
    std::vector<Event> before{counter(1, 0, CounterKind::kRemappedRowsCorrectable, 4),
                              counter(1, 0, CounterKind::kRemappedRowsUncorrectable, 0),
                              counter(1, 0, CounterKind::kRowRemapPending, 0),
                              counter(1, 0, CounterKind::kRowRemapFailed, 0)};
    Report info = analyze(before);
    ASSERT_NE(info.finding("ecc_pages_retired"), nullptr);
    EXPECT_EQ(info.finding("ecc_pages_retired")->severity, Severity::kInfo);
    before.push_back(counter(2, 0, CounterKind::kRowRemapFailed, 1));
    Report failed = analyze(before);
    ASSERT_NE(failed.finding("ecc_pages_retired"), nullptr);
    EXPECT_EQ(failed.finding("ecc_pages_retired")->severity, Severity::kCritical);
    // Pre-Ampere pages that grew during the run: a warning.
    Report grew = analyze({counter(1, 0, CounterKind::kRetiredPagesSingleBit, 1),
                           counter(1, 0, CounterKind::kRetiredPagesDoubleBit, 0),
                           counter(2, 0, CounterKind::kRetiredPagesSingleBit, 2),
                           counter(2, 0, CounterKind::kRetiredPagesDoubleBit, 0)});
    ASSERT_NE(grew.finding("ecc_pages_retired"), nullptr);
    EXPECT_EQ(grew.finding("ecc_pages_retired")->severity, Severity::kWarning);
    EXPECT_NE(grew.finding("ecc_pages_retired")->title.find("2 memory pages retired"),
              std::string::npos);
}

// An Xid no table names is reported as the hardware's (critical), never dropped.
TEST(HealthAnalyzerTest, AnUnknownXidIsReportedAsCritical) {
    Report r = analyze({counter(5, 0, CounterKind::kXidError, 154)});
    const Finding* f = r.finding("xid_error");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::kCritical);
    EXPECT_NE(f->evidence[0].find("see NVIDIA's Xid catalog"), std::string::npos);
}

// Busy samples of `gpus` GPUs, GPU `slow` clocking at `slow_mhz` (the others at 1980 MHz).
std::vector<Event> node(int gpus, int slow, double slow_mhz, double slow_celsius = 70) {
    std::vector<Event> ev;
    for (int i = 0; i < 10; ++i) {
        const std::uint64_t t = 1'000'000'000ULL * (i + 1);
        for (int g = 0; g < gpus; ++g) {
            const auto dev = static_cast<std::uint16_t>(g);
            ev.push_back(counter(t, dev, CounterKind::kGpuUtilizationPercent, 95));
            ev.push_back(counter(t, dev, CounterKind::kSmClockMhz, g == slow ? slow_mhz : 1980));
            ev.push_back(
                counter(t, dev, CounterKind::kTemperatureC, g == slow ? slow_celsius : 70));
            ev.push_back(counter(t, dev, CounterKind::kThrottleReasons, 0));
        }
    }
    return ev;
}

// One GPU of eight clocks 20 % lower under load: it sets the pace of the job.
TEST(HealthAnalyzerTest, OneSlowGpuAmongItsPeersIsAnOutlier) {
    Report r = analyze(node(8, 3, 1584));
    std::vector<const Finding*> found;
    for (const auto& f : r.findings) {
        if (f.id == "gpu_outlier") found.push_back(&f);
    }
    ASSERT_EQ(found.size(), 1u);
    EXPECT_EQ(found[0]->device, 3);
    EXPECT_NE(found[0]->summary.find("20 % below"), std::string::npos) << found[0]->summary;
    // Hotter by 12 C, same clock: an outlier too.
    EXPECT_NE(analyze(node(4, 1, 1980, 82)).finding("gpu_outlier"), nullptr);
}

// Peers within a few percent, or too few to call a majority: no outlier.
TEST(HealthAnalyzerTest, NoOutlierAmongEqualsOrWithTwoGpus) {
    EXPECT_EQ(analyze(node(8, 3, 1900)).finding("gpu_outlier"), nullptr);  // 4 % lower
    EXPECT_EQ(analyze(node(2, 1, 1200)).finding("gpu_outlier"), nullptr);
}

// NVLink counters of one GPU at two readings.
std::vector<Event> nvlink(double links_then, double links_now, double recoveries_now,
                          double errors_now) {
    std::vector<Event> ev;
    for (int i = 0; i < 2; ++i) {
        const std::uint64_t t = 10'000'000'000ULL * (i + 1);
        ev.push_back(
            counter(t, 0, CounterKind::kNvlinkLinksActive, i == 0 ? links_then : links_now));
        ev.push_back(counter(t, 0, CounterKind::kNvlinkReplayErrors, i == 0 ? 0 : errors_now));
        ev.push_back(
            counter(t, 0, CounterKind::kNvlinkRecoveryErrors, i == 0 ? 0 : recoveries_now));
        ev.push_back(counter(t, 0, CounterKind::kNvlinkCrcErrors, 0));
    }
    return ev;
}

TEST(HealthAnalyzerTest, NvlinkRecoveriesErrorsAndLostLinksAreFindings) {
    EXPECT_EQ(analyze(nvlink(18, 18, 0, 10)).finding("nvlink_errors"), nullptr);  // a few
    const Report retrained = analyze(nvlink(18, 18, 2, 0));
    ASSERT_NE(retrained.finding("nvlink_errors"), nullptr);
    EXPECT_NE(retrained.finding("nvlink_errors")->title.find("retrained 2 times"),
              std::string::npos);
    EXPECT_NE(analyze(nvlink(18, 18, 0, 150)).finding("nvlink_errors"), nullptr);
    const Report lost = analyze(nvlink(18, 17, 0, 0));
    ASSERT_NE(lost.finding("nvlink_errors"), nullptr);
    EXPECT_NE(lost.finding("nvlink_errors")->title.find("17 of 18 up"), std::string::npos);
}

// Throttled at a limit an operator lowered: the finding says so, with the default to restore.
TEST(HealthAnalyzerTest, APowerLimitBelowTheDefaultIsNamed) {
    auto ev = samples(40, [](int) { return clock_event_reason::kSwPowerCap; });
    for (auto& e : ev) {
        if (e.counter.counter == CounterKind::kPowerLimitWatts) e.counter.value = 500;
    }
    ev.push_back(counter(1, 0, CounterKind::kPowerLimitDefaultWatts, 700));
    const Report r = analyze(ev);
    const Finding* f = r.finding("power_throttle");
    ASSERT_NE(f, nullptr);
    ASSERT_FALSE(f->advice.empty());
    EXPECT_NE(f->advice[0].find("nvidia-smi -pl 700"), std::string::npos) << f->advice[0];
}

// Steps of `normal` seconds, `throttled` seconds for steps [from, to), sampled twice a step;
// the samples inside the slow steps report a software thermal slowdown.
std::vector<Event> throttled_steps(int steps, int from, int to, double normal, double slow) {
    std::vector<Event> ev;
    std::uint64_t t = 1'000'000'000;
    for (int s = 0; s < steps; ++s) {
        const bool hot = s >= from && s < to;
        const auto len = static_cast<std::uint64_t>((hot ? slow : normal) * 1e9);
        Event begin;
        begin.kind = EventKind::kStepBegin;
        begin.start_ns = begin.end_ns = t;
        begin.range.id = static_cast<std::uint64_t>(s);
        ev.push_back(begin);
        for (std::uint64_t at : {t + len / 4, t + 3 * len / 4}) {
            ev.push_back(counter(at, 0, CounterKind::kGpuUtilizationPercent, 95));
            ev.push_back(counter(at, 0, CounterKind::kTemperatureC, hot ? 84 : 70));
            ev.push_back(counter(at, 0, CounterKind::kThrottleReasons,
                                 hot ? static_cast<double>(clock_event_reason::kSwThermal) : 0));
        }
        Event end = begin;
        end.kind = EventKind::kStepEnd;
        end.start_ns = end.end_ns = t + len;
        ev.push_back(end);
        t += len;
    }
    return ev;
}

const Figure* figure(const Finding& f, const std::string& key) {
    for (const Figure& x : f.figures) {
        if (x.key == key) return &x;
    }
    return nullptr;
}

// 10 of 40 one-second steps ran hot and took 1.3 s: the throttle finding says what it cost,
// (1.3 - 1.0) s for each of the 10 steps.
TEST(HealthAnalyzerTest, ThrottleSaysWhatItCostTheSteps) {
    StringTable strings;
    auto ev = throttled_steps(40, 10, 20, 1.0, 1.3);
    auto r = analyze_events(ev, SourceInfo{}, strings);
    ASSERT_TRUE(r.is_ok());
    const Finding* f = r->finding("thermal_throttle");
    ASSERT_NE(f, nullptr);
    ASSERT_NE(figure(*f, "throttled_step_slowdown"), nullptr);
    EXPECT_NEAR(figure(*f, "throttled_step_slowdown")->value, 0.3, 1e-6);
    EXPECT_NEAR(figure(*f, "throttled_step_median_s")->value, 1.3, 1e-6);
    EXPECT_NEAR(figure(*f, "unthrottled_step_median_s")->value, 1.0, 1e-6);
    EXPECT_NEAR(figure(*f, "step_time_lost_s")->value, 3.0, 1e-6);
    bool said = false;
    for (const std::string& e : f->evidence) {
        said = said || e.find("10 ran while throttled") != std::string::npos;
    }
    EXPECT_TRUE(said);
}

// Throttled steps that take no longer: said, with no time lost claimed.
TEST(HealthAnalyzerTest, ThrottleThatCostTheStepsNothingIsSaidSo) {
    StringTable strings;
    auto ev = throttled_steps(40, 10, 20, 1.0, 1.0);
    auto r = analyze_events(ev, SourceInfo{}, strings);
    ASSERT_TRUE(r.is_ok());
    const Finding* f = r->finding("thermal_throttle");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(figure(*f, "step_time_lost_s"), nullptr);
    ASSERT_NE(figure(*f, "throttled_step_median_s"), nullptr);
    bool said = false;
    for (const std::string& e : f->evidence)
        said = said || e.find("no slower") != std::string::npos;
    EXPECT_TRUE(said);
}

// Without steps, or with too few throttled ones seen, nothing is said about steps.
TEST(HealthAnalyzerTest, ThrottleWithoutStepsSaysNothingAboutSteps) {
    auto ev = samples(
        40, [](int i) -> std::uint64_t { return i < 10 ? clock_event_reason::kSwThermal : 0; });
    Report r = analyze(ev);
    const Finding* f = r.finding("thermal_throttle");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(figure(*f, "throttled_step_median_s"), nullptr);
    StringTable strings;
    auto two = throttled_steps(40, 10, 12, 1.0, 1.3);  // 2 throttled steps: too few
    auto r2 = analyze_events(two, SourceInfo{}, strings);
    ASSERT_TRUE(r2.is_ok());
    ASSERT_NE(r2->finding("thermal_throttle"), nullptr);
    EXPECT_EQ(figure(*r2->finding("thermal_throttle"), "throttled_step_median_s"), nullptr);
}

}  // namespace
}  // namespace gpudiag
