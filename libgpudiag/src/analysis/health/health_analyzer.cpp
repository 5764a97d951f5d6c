// SPDX-License-Identifier: Apache-2.0
// HealthAnalyzer. The rules, and why (the thresholds are in the findings catalog):
// * Throttling counts only samples where the GPU was busy (the GpuIdle reason not set): an
//   idle GPU drops its clocks on purpose. A cause active in kThrottleShare of busy samples is
//   reported. Thermal: SW/HW thermal slowdown. Power: SW power cap (the board sits at its power
//   limit; info, since busy H100/H200-class GPUs often do) and HW power brake (an external
//   signal from the chassis or PSU; warning). NVML's plain "HW slowdown" bit means temperature,
//   power brake or power draw; it counts as thermal when a thermal bit accompanies it or the GPU
//   is at kHotCelsius, else as power.
// * ECC: any volatile (since driver load) uncorrected error is critical: the data of some
//   kernel was wrong and the GPU needs a reset before it can be trusted. Corrected errors that
//   grow during the run are a warning: memory that needs correcting is wearing out.
// * Foreign memory: other processes holding kForeignBytes or kForeignShare of the GPU's memory
//   take that much from this program's headroom and usually its compute time too.
#include "analysis/health/health_analyzer.hpp"

#include "analysis/findings/finding_catalog.hpp"
#include "support/format.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace gpudiag::detail {
namespace {

constexpr std::size_t kMaxOtherProcesses = 64;

constexpr std::uint64_t kThermalBits =
    clock_event_reason::kSwThermal | clock_event_reason::kHwThermal;
constexpr std::uint64_t kPowerBits =
    clock_event_reason::kSwPowerCap | clock_event_reason::kHwPowerBrake;

}  // namespace

std::string device_label(std::uint16_t device) {
    return device == kNoDevice ? std::string("GPU ?") : fmt::format("GPU {}", device);
}

void HealthAnalyzer::Stat::add(double v) {
    if (count == 0) {
        first = v;
        max = v;
    }
    sum += v;
    max = std::max(max, v);
    last = v;
    ++count;
}

void HealthAnalyzer::begin(const SourceInfo& info, const StringTable& /*strings*/) {
    listed_.clear();
    for (const DeviceInfo& d : info.devices) listed_.push_back(d.ordinal);
    std::sort(listed_.begin(), listed_.end());
    listed_.erase(std::unique(listed_.begin(), listed_.end()), listed_.end());
    with_events_.assign(listed_.empty() ? 0 : std::size_t{kNoDevice}, false);
}

void HealthAnalyzer::consume(std::span<const Event> events) {
    for (const Event& e : events) {
        if (e.device < with_events_.size()) with_events_[e.device] = true;
        if (e.kind == EventKind::kCounter) on_counter(e);
    }
}

void HealthAnalyzer::on_counter(const Event& e) {
    double v = e.counter.value;
    if (!std::isfinite(v)) return;
    if (is_card_counter(e.counter.counter)) {
        note_time(e);
        on_card_counter(e, devices_[e.device]);
        return;
    }
    if (is_activity_counter(e.counter.counter)) {
        note_time(e);
        on_activity_counter(e, devices_[e.device]);
        return;
    }
    switch (e.counter.counter) {
        case CounterKind::kGpuUtilizationPercent:
        case CounterKind::kTemperatureC:
        case CounterKind::kPowerWatts:
        case CounterKind::kPowerLimitWatts:
        case CounterKind::kSmClockMhz:
        case CounterKind::kSmClockMaxMhz:
        case CounterKind::kThrottleReasons:
        case CounterKind::kEccCorrectedErrors:
        case CounterKind::kEccUncorrectedErrors:
        case CounterKind::kForeignProcessMemoryBytes:
        case CounterKind::kOtherProcessMemoryBytes:
        case CounterKind::kForeignProcessSmPercent:
        case CounterKind::kDeviceMemoryTotalBytes:
        case CounterKind::kProcessMemoryUsedBytes: break;
        default: return;
    }
    note_time(e);
    DeviceHealth& d = devices_[e.device];
    switch (e.counter.counter) {
        case CounterKind::kGpuUtilizationPercent: d.util.add(v); break;
        case CounterKind::kTemperatureC:
            d.temperature.add(v);
            d.temperature_series.add(e.start_ns, v);
            break;
        case CounterKind::kPowerWatts:
            d.power.add(v);
            d.power_series.add(e.start_ns, v);
            break;
        case CounterKind::kPowerLimitWatts: d.power_limit.add(v); break;
        case CounterKind::kSmClockMhz:
            d.sm_clock.add(v);
            d.clock_series.add(e.start_ns, v);
            break;
        case CounterKind::kSmClockMaxMhz: d.sm_clock_max.add(v); break;
        case CounterKind::kEccCorrectedErrors: d.ecc_corrected.add(v); break;
        case CounterKind::kEccUncorrectedErrors: d.ecc_uncorrected.add(v); break;
        case CounterKind::kForeignProcessMemoryBytes: d.foreign.add(v); break;
        case CounterKind::kOtherProcessMemoryBytes: {
            auto it = d.other_processes.find(e.process);
            if (it != d.other_processes.end()) {
                it->second = std::max(it->second, v);
            } else if (d.other_processes.size() < kMaxOtherProcesses) {
                d.other_processes.emplace(e.process, v);
            }
            break;
        }
        case CounterKind::kForeignProcessSmPercent: d.foreign_sm.add(v); break;
        case CounterKind::kDeviceMemoryTotalBytes: d.total_memory.add(v); break;
        case CounterKind::kProcessMemoryUsedBytes: d.process_memory.add(v); break;
        case CounterKind::kThrottleReasons: {
            auto bits = static_cast<std::uint64_t>(v);
            ++d.reason_samples;
            d.reasons_seen |= bits;
            if ((bits & clock_event_reason::kGpuIdle) != 0) break;
            ++d.active_samples;
            if (d.sm_clock.count > 0) d.busy_clock.add(d.sm_clock.last);  // read just before
            bool hot = (bits & kThermalBits) != 0 ||
                       (d.temperature.count > 0 && d.temperature.last >= kHotCelsius);
            bool thermal = (bits & kThermalBits) != 0 ||
                           ((bits & clock_event_reason::kHwSlowdown) != 0 && hot);
            bool power =
                (bits & kPowerBits) != 0 || ((bits & clock_event_reason::kHwSlowdown) != 0 && !hot);
            if (thermal) ++d.thermal_samples;
            if (power) ++d.power_samples;
            d.busy_marks.add(e.start_ns, static_cast<std::uint8_t>((thermal ? kMarkThermal : 0) |
                                                                   (power ? kMarkPower : 0)));
            if ((bits & clock_event_reason::kHwThermal) != 0 ||
                ((bits & clock_event_reason::kHwSlowdown) != 0 && hot)) {
                ++d.hw_thermal_samples;
            }
            if ((bits & clock_event_reason::kHwPowerBrake) != 0 ||
                ((bits & clock_event_reason::kHwSlowdown) != 0 && !hot)) {
                ++d.power_brake_samples;
            }
            break;
        }
        default: break;
    }
}

// "PID 4242 held 12.0 GiB, PID 5151 3.0 GiB": the largest other processes, by the PIDs NVML
// lists (the host's: inside a container, `nvidia-smi` on the host names them).
std::string HealthAnalyzer::largest_others(const DeviceHealth& d) {
    std::vector<std::pair<double, std::uint32_t>> by_size;
    for (const auto& [pid, bytes] : d.other_processes) by_size.emplace_back(bytes, pid);
    std::sort(by_size.rbegin(), by_size.rend());
    std::string out = "largest other processes (PIDs as NVML lists them): ";
    for (std::size_t i = 0; i < by_size.size() && i < kOtherProcessesNamed; ++i) {
        out += fmt::format("{}PID {} {}", i > 0 ? ", " : "", by_size[i].second,
                           format_bytes(by_size[i].first));
    }
    if (by_size.size() > kOtherProcessesNamed) {
        out += fmt::format(" and {} more", by_size.size() - kOtherProcessesNamed);
    }
    return out;
}

void HealthAnalyzer::add_findings(Report& report, std::uint16_t device, const DeviceHealth& d) {
    const std::string gpu = device_label(device);
    const int dev = device == kNoDevice ? -1 : static_cast<int>(device);
    double busy = static_cast<double>(d.active_samples);
    std::string clocks;
    if (d.sm_clock.count > 0 && d.sm_clock_max.count > 0 && d.sm_clock_max.max > 0) {
        clocks = "mean SM clock " + format_number(d.sm_clock.mean(), 0) + " MHz of " +
                 format_number(d.sm_clock_max.max, 0) + " MHz maximum";
    }

    if (d.active_samples >= kThrottleMinBusySamples && d.thermal_samples / busy >= kThrottleShare) {
        double share = d.thermal_samples / busy;
        Finding f;
        f.id = finding_name(FindingId::kThermalThrottle);
        f.device = dev;
        f.severity = d.hw_thermal_samples > 0 ? Severity::kCritical : Severity::kWarning;
        f.title =
            gpu + " throttled for temperature in " + format_percent(share) + " of busy samples";
        f.summary = "The driver lowered " + gpu + "'s clocks because it ran hot (max " +
                    format_number(d.temperature.max, 0) + " C)" +
                    (clocks.empty() ? std::string(".") : "; " + clocks + ".") +
                    (d.hw_thermal_samples > 0
                         ? " Hardware slowdown engaged: clocks were cut by half or more."
                         : "");
        f.confidence = d.active_samples >= 20 ? 0.9 : 0.6;
        f.figures.push_back(
            {"thermal_throttle_share", share, Unit::kFraction, "busy samples throttled"});
        f.figures.push_back(
            {"max_temperature_c", d.temperature.max, Unit::kCelsius, "max temperature"});
        if (d.sm_clock.count > 0) {
            f.figures.push_back(
                {"mean_sm_clock_mhz", d.sm_clock.mean(), Unit::kMegahertz, "mean SM clock"});
        }
        f.evidence.push_back(
            fmt::format("{} of {} busy NVML samples report a thermal clock-event reason",
                        d.thermal_samples, d.active_samples));
        add_step_slowdown(f, d, kMarkThermal);
        f.advice.push_back(
            "Check the cooling of this GPU (fans, airflow, inlet temperature); "
            "compare with its neighbours in the same chassis.");
        f.advice.push_back(
            "If a whole node runs hot, report it to the cluster operators: "
            "throttled GPUs also slow every rank that waits for this one.");
        report.findings.push_back(std::move(f));
    }

    if (d.active_samples >= kThrottleMinBusySamples && d.power_samples / busy >= kThrottleShare) {
        double share = d.power_samples / busy;
        Finding f;
        f.id = finding_name(FindingId::kPowerThrottle);
        f.device = dev;
        bool brake = d.power_brake_samples > 0;
        f.severity = brake ? Severity::kWarning : Severity::kInfo;
        f.title = gpu + " limited by power in " + format_percent(share) + " of busy samples";
        f.summary = brake
                        ? "An external power brake (chassis or power supply signal) slowed " + gpu +
                              "; " + (clocks.empty() ? std::string("clocks dropped") : clocks) + "."
                        : gpu + " ran at its power limit (" + format_number(d.power_limit.last, 0) +
                              " W enforced, mean draw " + format_number(d.power.mean(), 0) +
                              " W), so the driver capped its clocks" +
                              (clocks.empty() ? std::string(".") : ": " + clocks + ".");
        f.confidence = d.active_samples >= 20 ? 0.85 : 0.6;
        f.figures.push_back(
            {"power_throttle_share", share, Unit::kFraction, "busy samples power-limited"});
        if (d.power.count > 0)
            f.figures.push_back({"mean_power_w", d.power.mean(), Unit::kWatts, "mean power"});
        if (d.power_limit.count > 0) {
            f.figures.push_back(
                {"power_limit_w", d.power_limit.last, Unit::kWatts, "enforced power limit"});
        }
        f.evidence.push_back(
            fmt::format("{} of {} busy NVML samples report a power clock-event reason",
                        d.power_samples, d.active_samples));
        add_step_slowdown(f, d, kMarkPower);
        if (brake) {
            f.advice.push_back(
                "Report the power brake to the operators: it comes from outside "
                "the GPU (power supply, chassis management).");
        } else if (d.power_default.count > 0 && d.power_limit.count > 0 &&
                   d.power_limit.last < 0.95 * d.power_default.last) {
            f.evidence.push_back("the enforced power limit, " +
                                 format_number(d.power_limit.last, 0) +
                                 " W, is below the board's " +
                                 format_number(d.power_default.last, 0) + " W default");
            f.advice.push_back("Restore the default power limit (nvidia-smi -pl " +
                               format_number(d.power_default.last, 0) +
                               ") unless it was lowered on purpose: every kernel runs slower "
                               "under the lower cap.");
        } else {
            f.advice.push_back(
                "Check the enforced power limit (nvidia-smi -q -d POWER): a limit "
                "set below the board default slows every kernel.");
            f.advice.push_back(
                "At the default limit this is how the GPU trades clocks for "
                "power under heavy load; nothing to fix in the program.");
        }
        report.findings.push_back(std::move(f));
    }

    bool uncorrected = d.ecc_uncorrected.count > 0 && d.ecc_uncorrected.max > 0;
    double corrected_growth =
        d.ecc_corrected.count > 0 ? d.ecc_corrected.last - d.ecc_corrected.first : 0;
    if (uncorrected || corrected_growth > 0) {
        Finding f;
        f.id = finding_name(FindingId::kEccErrors);
        f.device = dev;
        f.severity = uncorrected ? Severity::kCritical : Severity::kWarning;
        f.title = uncorrected ? gpu + " has " + format_number(d.ecc_uncorrected.max, 0) +
                                    " uncorrected ECC errors"
                              : gpu + " corrected " + format_number(corrected_growth, 0) +
                                    " ECC errors during the run";
        f.summary = uncorrected
                        ? "Uncorrectable memory errors since the driver loaded: results computed "
                          "on this GPU may be wrong, and the driver retires the affected memory "
                          "only after a reset."
                        : "The GPU's memory needed error correction while the program ran; a "
                          "growing count points at failing memory.";
        f.figures.push_back({"ecc_uncorrected", d.ecc_uncorrected.max, Unit::kCount,
                             "uncorrected ECC errors (volatile)"});
        f.figures.push_back({"ecc_corrected_during_run", corrected_growth, Unit::kCount,
                             "corrected ECC errors during the run"});
        f.evidence.push_back("NVML volatile ECC counters: corrected " +
                             format_number(d.ecc_corrected.last, 0) + ", uncorrected " +
                             format_number(d.ecc_uncorrected.last, 0));
        if (uncorrected) {
            f.advice.push_back(
                "Drain this GPU and reset it (nvidia-smi -r) before trusting its "
                "results; ask the operators to check retired pages/remapped rows.");
        } else {
            f.advice.push_back(
                "Watch the corrected count across runs; report the GPU if it keeps "
                "rising.");
        }
        report.findings.push_back(std::move(f));
    }

    double capacity = d.total_memory.count > 0 ? d.total_memory.last : 0;
    double foreign = d.foreign.count > 0 ? d.foreign.max : 0;
    if (foreign >= kForeignBytes || (capacity > 0 && foreign >= kForeignShare * capacity)) {
        Finding f;
        f.id = finding_name(FindingId::kForeignProcessMemory);
        f.device = dev;
        f.severity = capacity > 0 && foreign >= kForeignCriticalShare * capacity
                         ? Severity::kCritical
                         : Severity::kWarning;
        f.title = "Other processes hold " + format_bytes(foreign) + " on " + gpu;
        f.summary = "Processes other than this one used up to " + format_bytes(foreign) +
                    (capacity > 0 ? " (" + format_percent(foreign / capacity) + " of " +
                                        format_bytes(capacity) + ")"
                                  : std::string()) +
                    " of " + gpu +
                    "'s memory while the program ran: less headroom before an "
                    "out-of-memory error, and shared compute time.";
        f.figures.push_back(
            {"foreign_memory_bytes", foreign, Unit::kBytes, "other processes' memory (max)"});
        if (capacity > 0) {
            f.figures.push_back({"foreign_memory_share", foreign / capacity, Unit::kFraction,
                                 "share of device memory"});
        }
        f.evidence.push_back("NVML's compute-process list for " + gpu +
                             " shows memory held by other PIDs");
        if (!d.other_processes.empty()) f.evidence.push_back(largest_others(d));
        if (d.foreign_sm.count > 0) {
            f.figures.push_back({"foreign_sm_percent_mean", d.foreign_sm.mean(), Unit::kPercent,
                                 "SM time other processes used (mean)"});
            f.figures.push_back({"foreign_sm_percent_max", d.foreign_sm.max, Unit::kPercent,
                                 "SM time other processes used (max)"});
            f.evidence.push_back("NVML's per-process utilization: other processes used " +
                                 format_number(d.foreign_sm.mean(), 0) + " % of " + gpu +
                                 "'s SM time on average, " + format_number(d.foreign_sm.max, 0) +
                                 " % at most");
        }
        f.advice.push_back(
            "Find them with nvidia-smi; stop stale jobs or notebooks holding the GPU.");
        f.advice.push_back(
            "On shared machines, request exclusive GPUs (exclusive-process compute "
            "mode or a scheduler constraint).");
        report.findings.push_back(std::move(f));
    }
}

// Persistence and MIG mode, when NVML said: figures an operator checks first.
void HealthAnalyzer::add_mode_figures(Section& s) const {
    double seen = 0, without_persistence = 0, mig_seen = 0, in_mig = 0;
    for (const auto& [device, d] : devices_) {
        if (d.persistence.count > 0) {
            ++seen;
            if (d.persistence.last == 0) ++without_persistence;
        }
        if (d.mig.count > 0) {
            ++mig_seen;
            if (d.mig.last != 0) ++in_mig;
        }
    }
    if (seen > 0) {
        s.figures.push_back({"gpus_without_persistence_mode", without_persistence, Unit::kCount,
                             "GPUs with persistence mode off (the driver reloads per job)"});
    }
    if (mig_seen > 0) {
        s.figures.push_back(
            {"gpus_in_mig_mode", in_mig, Unit::kCount, "GPUs split into MIG instances"});
    }
}

void HealthAnalyzer::contribute(Report& report) {
    add_unused_devices_note(report);
    if (devices_.empty()) return;
    report.observe(Evidence::kDeviceHealth);
    Section s;
    s.id = "health";
    s.title = "GPU health (NVML)";
    Table t;
    t.id = "devices";
    t.title = "Health by device";
    t.columns = {"device",
                 "mean_util_percent",
                 "mean_sm_clock_mhz",
                 "max_sm_clock_mhz",
                 "max_temperature_c",
                 "mean_power_w",
                 "power_limit_w",
                 "thermal_throttle_share",
                 "power_throttle_share",
                 "max_foreign_memory_bytes",
                 "ecc_corrected",
                 "ecc_uncorrected"};
    t.units = {Unit::kNumber,   Unit::kPercent, Unit::kMegahertz, Unit::kMegahertz,
               Unit::kCelsius,  Unit::kWatts,   Unit::kWatts,     Unit::kFraction,
               Unit::kFraction, Unit::kBytes,   Unit::kCount,     Unit::kCount};
    double max_temp = 0;
    double max_foreign = 0;
    double worst_thermal = 0;
    double worst_power = 0;
    double util_sum = 0;
    std::uint64_t util_count = 0;
    std::uint64_t samples = 0;
    for (const auto& [device, d] : devices_) {
        double busy = static_cast<double>(std::max<std::uint64_t>(d.active_samples, 1));
        double thermal = d.thermal_samples / busy;
        double power = d.power_samples / busy;
        t.rows.push_back({device_label(device), d.util.mean(), d.sm_clock.mean(),
                          d.sm_clock_max.max, d.temperature.max, d.power.mean(), d.power_limit.last,
                          thermal, power, d.foreign.max, d.ecc_corrected.last,
                          d.ecc_uncorrected.last});
        max_temp = std::max(max_temp, d.temperature.max);
        max_foreign = std::max(max_foreign, d.foreign.max);
        worst_thermal = std::max(worst_thermal, thermal);
        worst_power = std::max(worst_power, power);
        util_sum += d.util.sum;
        util_count += d.util.count;
        samples = std::max(samples, d.reason_samples);
        // A structured binding cannot be captured before C++20 compilers caught up (clang 14
        // refuses it), so the lambda captures a plain copy of the ordinal.
        const auto ordinal = device;
        auto to_series = [&, ordinal](const Series& src, const char* id, const char* title,
                                      Unit unit) {
            if (src.points.empty()) return;
            gpudiag::Series out;
            out.id = fmt::format("{}_gpu{}", id, ordinal);
            out.title = device_label(ordinal) + " " + title;
            out.unit = unit;
            for (const auto& [ts, v] : src.points) {
                double secs = ts >= first_ns_ ? static_cast<double>(ts - first_ns_) / 1e9 : 0;
                out.points.emplace_back(secs, v);
            }
            s.series.push_back(std::move(out));
        };
        to_series(d.temperature_series, "temperature", "temperature", Unit::kCelsius);
        to_series(d.power_series, "power", "power", Unit::kWatts);
        to_series(d.clock_series, "sm_clock", "SM clock", Unit::kMegahertz);
        add_findings(report, device, d);
        add_card_findings(report, device, d);
        add_busy_not_computing_finding(report, device, d);
    }
    add_outlier_findings(report);
    add_mode_figures(s);
    add_activity_figures(s);
    s.figures.push_back(
        {"devices", static_cast<double>(devices_.size()), Unit::kCount, "GPUs sampled"});
    s.figures.push_back(
        {"samples", static_cast<double>(samples), Unit::kCount, "NVML samples per GPU"});
    if (util_count > 0) {
        s.figures.push_back({"mean_gpu_utilization_percent",
                             util_sum / static_cast<double>(util_count), Unit::kPercent,
                             "mean GPU utilization (time a kernel ran)"});
    }
    s.figures.push_back({"max_temperature_c", max_temp, Unit::kCelsius, "max temperature"});
    s.figures.push_back({"thermal_throttle_share", worst_thermal, Unit::kFraction,
                         "busy samples thermally throttled (worst GPU)"});
    s.figures.push_back({"power_throttle_share", worst_power, Unit::kFraction,
                         "busy samples power-limited (worst GPU)"});
    s.figures.push_back(
        {"max_foreign_memory_bytes", max_foreign, Unit::kBytes, "other processes' memory (max)"});
    s.tables.push_back(std::move(t));
    report.sections.push_back(std::move(s));
}

}  // namespace gpudiag::detail
