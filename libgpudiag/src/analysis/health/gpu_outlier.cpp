// SPDX-License-Identifier: Apache-2.0
// HealthAnalyzer: one GPU against its peers. In data-parallel training every step waits for the
// slowest GPU, so one GPU that clocks lower, runs hotter or throttles more than the others sets
// the pace of the whole job, while each GPU alone may look acceptable. Compared only among GPUs
// that were busy (kOutlierMinBusySamples each) and only with kOutlierMinPeers or more of them,
// so that "the others" is a majority. A GPU is an outlier when, against the median of the GPUs
// compared (the thresholds are in the findings catalog):
// * its SM clock under load is kClockDeficit lower (a tenth of every step, for the whole job);
// * its highest temperature is kHotterCelsius higher (cooling: fans, airflow, a blocked slot);
// * its throttled share of busy samples is kThrottleExcess higher.
#include "analysis/health/health_analyzer.hpp"

#include "analysis/findings/finding_catalog.hpp"
#include "support/format.hpp"
#include "support/statistics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

namespace gpudiag::detail {

void HealthAnalyzer::add_outlier_findings(Report& report) const {
    struct Peer {
        std::uint16_t device;
        double clock, temperature, throttled;
    };
    std::vector<Peer> peers;
    for (const auto& [device, d] : devices_) {
        if (d.active_samples < kOutlierMinBusySamples || d.busy_clock.count == 0) continue;
        const double busy = static_cast<double>(d.active_samples);
        peers.push_back({device, d.busy_clock.mean(), d.temperature.max,
                         static_cast<double>(std::max(d.thermal_samples, d.power_samples)) / busy});
    }
    if (peers.size() < kOutlierMinPeers) return;
    std::vector<double> clocks, temperatures, throttled;
    for (const Peer& p : peers) {
        clocks.push_back(p.clock);
        temperatures.push_back(p.temperature);
        throttled.push_back(p.throttled);
    }
    const double clock = median(clocks);
    const double temperature = median(temperatures);
    const double throttle = median(throttled);
    for (const Peer& p : peers) {
        std::vector<std::string> how;
        if (clock > 0 && p.clock <= (1 - kClockDeficit) * clock) {
            how.push_back("its SM clock under load is " + format_number(p.clock, 0) + " MHz, " +
                          format_percent(1 - p.clock / clock) + " below the others' " +
                          format_number(clock, 0) + " MHz");
        }
        if (p.temperature >= temperature + kHotterCelsius) {
            how.push_back("it reached " + format_number(p.temperature, 0) + " C, the others " +
                          format_number(temperature, 0) + " C");
        }
        if (p.throttled >= throttle + kThrottleExcess) {
            how.push_back("it was throttled in " + format_percent(p.throttled) +
                          " of busy samples, the others in " + format_percent(throttle));
        }
        if (how.empty()) continue;
        const std::string gpu = fmt::format("GPU {}", p.device);
        Finding f;
        f.id = finding_name(FindingId::kGpuOutlier);
        f.device = static_cast<int>(p.device);
        f.severity = Severity::kWarning;
        f.title =
            fmt::format("{} is slower or hotter than the other {} GPUs", gpu, peers.size() - 1);
        f.summary = fmt::format(
            "{} stands out among the {} busy GPUs of this machine: {}. In data-parallel work every "
            "step waits for the slowest GPU, so this one sets the pace of the whole job.",
            gpu, peers.size(), how.front());
        f.evidence = how;
        f.figures.push_back(
            {"sm_clock_under_load_mhz", p.clock, Unit::kMegahertz, "mean SM clock while busy"});
        f.figures.push_back(
            {"peers_sm_clock_under_load_mhz", clock, Unit::kMegahertz, "the other GPUs' median"});
        f.figures.push_back(
            {"max_temperature_c", p.temperature, Unit::kCelsius, "max temperature"});
        f.figures.push_back(
            {"peers_max_temperature_c", temperature, Unit::kCelsius, "the other GPUs' median"});
        f.advice.push_back(
            "Have the operators check this GPU's cooling and power (nvidia-smi -q -d "
            "PERFORMANCE,TEMPERATURE,POWER) against its neighbours, or move the job off it.");
        report.findings.push_back(std::move(f));
    }
}

}  // namespace gpudiag::detail
