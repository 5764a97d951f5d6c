// SPDX-License-Identifier: Apache-2.0
// HealthAnalyzer, what the SMs did (NVML GPM, Hopper and newer): SM activity, occupancy, tensor
// and DRAM activity, and the finding gpu_busy_not_computing. The rule, and why (the thresholds
// are in the findings catalog):
// * NVML's utilization is the share of time at least one kernel ran, however few SMs it used: a
//   single one-block kernel at a time reads as 100 %. SM activity is the share of SMs with work,
//   averaged over the window. In readings where utilization was kLooksBusyPercent (the GPU looked
//   busy to anyone watching nvidia-smi), a mean SM activity under kFewSmsActivePercent means that
//   most of the GPU sat unused while it looked busy. At least kMinBusyReadings such readings
//   (GPM windows are 100 ms or longer), so that one odd window decides nothing.
#include "analysis/health/health_analyzer.hpp"

#include "analysis/findings/finding_catalog.hpp"
#include "support/format.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

namespace gpudiag::detail {
namespace {

std::string percent(double v) {
    return format_number(v, 0) + " %";
}

// "1-7", "1, 3, 5-6": ordinals, ascending, runs folded.
std::string ordinal_ranges(const std::vector<std::uint16_t>& ordinals) {
    std::string out;
    for (std::size_t i = 0; i < ordinals.size();) {
        std::size_t j = i;
        while (j + 1 < ordinals.size() && ordinals[j + 1] == ordinals[j] + 1) ++j;
        if (!out.empty()) out += ", ";
        out += j > i ? fmt::format("{}-{}", ordinals[i], ordinals[j]) : fmt::to_string(ordinals[i]);
        i = j + 1;
    }
    return out;
}

}  // namespace

bool HealthAnalyzer::is_activity_counter(CounterKind kind) noexcept {
    switch (kind) {
        case CounterKind::kSmActivePercent:
        case CounterKind::kSmOccupancyPercent:
        case CounterKind::kTensorActivePercent:
        case CounterKind::kDramActivePercent:
        case CounterKind::kFanSpeedPercent: return true;
        default: return false;
    }
}

// A GPM reading's metrics arrive together, SM activity first, just after the utilization of the
// same round: the reading is judged busy or not by that utilization.
void HealthAnalyzer::on_activity_counter(const Event& e, DeviceHealth& d) {
    const double v = e.counter.value;
    Activity& a = d.activity;
    switch (e.counter.counter) {
        case CounterKind::kSmActivePercent:
            a.sm_active.add(v);
            a.reading_busy = d.util.count > 0 && d.util.last >= kLooksBusyPercent;
            if (a.reading_busy) {
                a.busy_util.add(d.util.last);
                a.busy_sm_active.add(v);
            }
            break;
        case CounterKind::kSmOccupancyPercent:
            a.occupancy.add(v);
            if (a.reading_busy) a.busy_occupancy.add(v);
            break;
        case CounterKind::kTensorActivePercent:
            a.tensor.add(v);
            if (a.reading_busy) a.busy_tensor.add(v);
            break;
        case CounterKind::kDramActivePercent:
            a.dram.add(v);
            if (a.reading_busy) a.busy_dram.add(v);
            break;
        case CounterKind::kFanSpeedPercent: a.fan.add(v); break;
        default: break;
    }
}

void HealthAnalyzer::add_busy_not_computing_finding(Report& report, std::uint16_t device,
                                                    const DeviceHealth& d) {
    const Activity& a = d.activity;
    if (a.busy_sm_active.count < kMinBusyReadings ||
        a.busy_sm_active.mean() >= kFewSmsActivePercent) {
        return;
    }
    const std::string gpu = device_label(device);
    Finding f;
    f.id = finding_name(FindingId::kGpuBusyNotComputing);
    f.device = device == kNoDevice ? -1 : static_cast<int>(device);
    f.severity = Severity::kWarning;
    f.title = gpu + " looked busy (" + percent(a.busy_util.mean()) + " utilization) but only " +
              percent(a.busy_sm_active.mean()) + " of its SMs had work";
    f.summary = fmt::format(
        "NVML's utilization counts the time at least one kernel ran, however few SMs it used. In "
        "the {} readings where {} was at least {} utilized, on average {} of its SMs had work: "
        "the GPU was occupied, not computing. Kernels too small to fill it, launched one after "
        "another, or kernels that mostly wait look like this.",
        a.busy_sm_active.count, gpu, percent(kLooksBusyPercent), percent(a.busy_sm_active.mean()));
    const bool memory_bound =
        a.busy_dram.count > 0 && a.busy_dram.mean() >= kMemoryBoundDramPercent;
    f.figures.push_back(
        {"busy_utilization_percent", a.busy_util.mean(), Unit::kPercent, "NVML utilization"});
    f.figures.push_back(
        {"busy_sm_active_percent", a.busy_sm_active.mean(), Unit::kPercent, "SMs with work"});
    if (a.busy_occupancy.count > 0) {
        f.figures.push_back({"busy_sm_occupancy_percent", a.busy_occupancy.mean(), Unit::kPercent,
                             "warps resident of the SMs' maximum"});
    }
    if (a.busy_tensor.count > 0) {
        f.figures.push_back({"busy_tensor_active_percent", a.busy_tensor.mean(), Unit::kPercent,
                             "tensor pipes busy"});
    }
    if (a.busy_dram.count > 0) {
        f.figures.push_back({"busy_dram_active_percent", a.busy_dram.mean(), Unit::kPercent,
                             "DRAM bandwidth of the peak"});
    }
    f.figures.push_back({"busy_readings", static_cast<double>(a.busy_sm_active.count), Unit::kCount,
                         "GPM readings while utilization >= " + percent(kLooksBusyPercent)});
    f.evidence.push_back("NVML GPM over the readings while " + gpu + " looked busy: SM active " +
                         percent(a.busy_sm_active.mean()) + ", occupancy " +
                         percent(a.busy_occupancy.mean()) + ", tensor pipes " +
                         percent(a.busy_tensor.mean()) + ", DRAM bandwidth " +
                         percent(a.busy_dram.mean()));
    if (memory_bound) {
        f.advice.push_back(
            "The few active SMs keep DRAM " + percent(a.busy_dram.mean()) +
            " busy: the kernels are memory-bound. Fuse element-wise kernels (torch.compile) so "
            "data is read once, and use lower-precision activations where accuracy allows.");
    } else {
        f.advice.push_back(
            "Give each kernel more work: larger batches, fused kernels (torch.compile), or CUDA "
            "graphs for runs of small launches; the kernel table shows which kernels take the "
            "time.");
        f.advice.push_back(
            "If communication kernels (NCCL) run much of the time, they hold a few SMs while "
            "they wait for peers: see the communication and straggler findings.");
    }
    f.advice.push_back(
        "Profile one step with Nsight Compute: its launch statistics compare each kernel's grid "
        "with the GPU's SM count, and its occupancy section says what limits resident warps.");
    report.findings.push_back(std::move(f));
}

// Mean SM, tensor and DRAM activity over the GPUs that have GPM, when any has.
void HealthAnalyzer::add_activity_figures(Section& s) const {
    Stat sm, tensor, dram;
    for (const auto& [device, d] : devices_) {
        if (d.activity.sm_active.count > 0) sm.add(d.activity.sm_active.mean());
        if (d.activity.tensor.count > 0) tensor.add(d.activity.tensor.mean());
        if (d.activity.dram.count > 0) dram.add(d.activity.dram.mean());
    }
    if (sm.count == 0) return;
    s.figures.push_back({"mean_sm_active_percent", sm.mean(), Unit::kPercent,
                         "mean SM activity (GPM: SMs with work)"});
    if (tensor.count > 0) {
        s.figures.push_back({"mean_tensor_active_percent", tensor.mean(), Unit::kPercent,
                             "mean tensor-pipe activity"});
    }
    if (dram.count > 0) {
        s.figures.push_back({"mean_dram_active_percent", dram.mean(), Unit::kPercent,
                             "mean DRAM bandwidth of the peak"});
    }
}

// A node's GPUs are listed whether the program used them or not (Nsight's TARGET_INFO_GPU,
// Kineto's deviceProperties): one that no event names did no work gpudiag could read. It is
// neither idle nor starved here, and saying nothing would let the device list read as GPUs
// analysed.
void HealthAnalyzer::add_unused_devices_note(Report& report) const {
    std::vector<std::uint16_t> unused;
    for (std::uint16_t d : listed_) {
        if (d < with_events_.size() && !with_events_[d]) unused.push_back(d);
    }
    if (unused.empty()) return;
    const bool one = unused.size() == 1;
    const std::string which = unused.size() < listed_.size()
                                  ? fmt::format("{} of the {} GPUs", unused.size(), listed_.size())
                              : one ? std::string("The one GPU")
                                    : fmt::format("All {} GPUs", unused.size());
    report.notes.push_back(fmt::format(
        "{} the input lists ({} {}) {} no event gpudiag could read (no kernel, copy, memory or "
        "health record): listed without work in this capture, not analysed; no idle, starvation "
        "or health figure covers {}.",
        which, one ? "device" : "devices", ordinal_ranges(unused), one ? "has" : "have",
        one ? "it" : "them"));
}

}  // namespace gpudiag::detail
