// SPDX-License-Identifier: Apache-2.0
// HealthAnalyzer, the card's own health: Xid events, retired memory and the PCIe link. The
// rules, and why (the thresholds are in the findings catalog):
// * Xid: every Xid is reported. Most mean the GPU, its memory or its link failed (critical);
//   a few (kProgramFaultXids) are most often the program's own fault (an illegal address, a
//   killed kernel): still reported, as a warning that says so.
// * Retired memory: a failed row remap is critical (the GPU has no spare rows left where it
//   needs them); a pending retirement or remap is a warning (it takes effect at the next reset,
//   and until then the bad memory can be used); counts that grew during the run are a warning;
//   counts from before the run are information for the operator.
// * PCIe: a link narrower than both ends support, in kPcieDegradedShare of the readings, is
//   degraded (the width does not change to save power). The generation does drop when the GPU
//   idles, so a lower generation counts only in readings taken while the GPU was busy
//   (kPcieBusyUtilPercent), in kPcieDegradedShare of them, with at least kMinBusyLinkSamples
//   such readings. kPcieReplaysDuringRun replays during the run (retransmitted packets) mean
//   link errors, whatever its speed.
// * NVLink: any recovery during the run (the link retrained), kNvlinkErrorsDuringRun replay and
//   CRC errors during it, or fewer links up at the end than during the run.
#include "analysis/health/health_analyzer.hpp"

#include "analysis/findings/finding_catalog.hpp"
#include "support/format.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <string>

namespace gpudiag::detail {
namespace {

constexpr std::size_t kMaxXidKinds = 64;

struct XidMeaning {
    std::uint32_t xid;
    const char* what;
};

// NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors), the Xids seen most in operations.
constexpr XidMeaning kXids[] = {
    {13, "graphics engine exception (often an illegal memory access in a kernel)"},
    {31, "GPU memory page fault (often an out-of-bounds access in a kernel)"},
    {43, "GPU stopped processing (a kernel was killed or hung)"},
    {45, "preemptive cleanup (a process ended with work still on the GPU)"},
    {48, "double-bit ECC error"},
    {61, "internal micro-controller breakpoint"},
    {62, "internal micro-controller halt"},
    {63, "ECC page retirement or row remapping recorded"},
    {64, "ECC page retirement or row remapping failed"},
    {74, "NVLink error"},
    {79, "GPU has fallen off the bus"},
    {92, "high single-bit ECC error rate"},
    {94, "contained ECC error"},
    {95, "uncontained ECC error"},
    {119, "GSP RPC timeout"},
    {120, "GSP error"},
};

bool program_fault(std::uint32_t xid) {
    return std::find(std::begin(kProgramFaultXids), std::end(kProgramFaultXids), xid) !=
           std::end(kProgramFaultXids);
}

const XidMeaning* meaning_of(std::uint32_t xid) {
    for (const XidMeaning& m : kXids) {
        if (m.xid == xid) return &m;
    }
    return nullptr;
}

}  // namespace

void HealthAnalyzer::on_card_counter(const Event& e, DeviceHealth& d) {
    const double v = e.counter.value;
    switch (e.counter.counter) {
        case CounterKind::kPcieLinkGeneration: d.pcie_gen.add(v); break;
        case CounterKind::kPcieLinkGenerationMax: d.pcie_gen_max.add(v); break;
        case CounterKind::kPcieLinkWidth: d.pcie_width.add(v); break;
        case CounterKind::kPcieLinkWidthMax: {
            // The last of a reading's four values: judge the reading.
            d.pcie_width_max.add(v);
            if (d.pcie_gen.count == 0 || d.pcie_gen_max.count == 0 || d.pcie_width.count == 0) {
                break;
            }
            ++d.link_samples;
            if (d.pcie_width.last < v) ++d.narrow_samples;
            if (d.util.count > 0 && d.util.last >= kPcieBusyUtilPercent) {
                ++d.busy_link_samples;
                if (d.pcie_gen.last < d.pcie_gen_max.last) ++d.slow_busy_samples;
            }
            break;
        }
        case CounterKind::kPcieReplays: d.pcie_replays.add(v); break;
        case CounterKind::kRetiredPagesSingleBit: d.retired_single.add(v); break;
        case CounterKind::kRetiredPagesDoubleBit: d.retired_double.add(v); break;
        case CounterKind::kRetiredPagesPending: d.retired_pending.add(v); break;
        case CounterKind::kRemappedRowsCorrectable: d.rows_correctable.add(v); break;
        case CounterKind::kRemappedRowsUncorrectable: d.rows_uncorrectable.add(v); break;
        case CounterKind::kRowRemapPending: d.remap_pending.add(v); break;
        case CounterKind::kRowRemapFailed: d.remap_failed.add(v); break;
        case CounterKind::kNvlinkLinksActive: d.nvlink_active.add(v); break;
        case CounterKind::kNvlinkReplayErrors: d.nvlink_replay.add(v); break;
        case CounterKind::kNvlinkRecoveryErrors: d.nvlink_recovery.add(v); break;
        case CounterKind::kNvlinkCrcErrors: d.nvlink_crc.add(v); break;
        case CounterKind::kPowerLimitDefaultWatts: d.power_default.add(v); break;
        case CounterKind::kPersistenceMode: d.persistence.add(v); break;
        case CounterKind::kMigMode: d.mig.add(v); break;
        case CounterKind::kXidError: {
            const auto xid = static_cast<std::uint32_t>(v);
            auto it = d.xids.find(xid);
            if (it != d.xids.end()) {
                ++it->second;
            } else if (d.xids.size() < kMaxXidKinds) {
                d.xids.emplace(xid, 1);
            }
            break;
        }
        default: break;
    }
}

bool HealthAnalyzer::is_card_counter(CounterKind kind) noexcept {
    switch (kind) {
        case CounterKind::kPcieLinkGeneration:
        case CounterKind::kPcieLinkGenerationMax:
        case CounterKind::kPcieLinkWidth:
        case CounterKind::kPcieLinkWidthMax:
        case CounterKind::kPcieReplays:
        case CounterKind::kRetiredPagesSingleBit:
        case CounterKind::kRetiredPagesDoubleBit:
        case CounterKind::kRetiredPagesPending:
        case CounterKind::kRemappedRowsCorrectable:
        case CounterKind::kRemappedRowsUncorrectable:
        case CounterKind::kRowRemapPending:
        case CounterKind::kRowRemapFailed:
        case CounterKind::kNvlinkLinksActive:
        case CounterKind::kNvlinkReplayErrors:
        case CounterKind::kNvlinkRecoveryErrors:
        case CounterKind::kNvlinkCrcErrors:
        case CounterKind::kPowerLimitDefaultWatts:
        case CounterKind::kPersistenceMode:
        case CounterKind::kMigMode:
        case CounterKind::kXidError: return true;
        default: return false;
    }
}

void HealthAnalyzer::add_xid_finding(Report& report, std::uint16_t device, const DeviceHealth& d) {
    if (d.xids.empty()) return;
    const std::string gpu = device_label(device);
    Finding f;
    f.id = finding_name(FindingId::kXidError);
    f.device = device == kNoDevice ? -1 : static_cast<int>(device);
    bool hardware = false;
    std::uint64_t events = 0;
    std::string listed;
    for (const auto& [xid, count] : d.xids) {
        const XidMeaning* m = meaning_of(xid);
        hardware = hardware || !program_fault(xid);
        events += count;
        listed += fmt::format("{}Xid {}", listed.empty() ? "" : ", ", xid);
        f.evidence.push_back(fmt::format("Xid {} ({}): {} {}", xid,
                                         m != nullptr ? m->what : "see NVIDIA's Xid catalog", count,
                                         count == 1 ? "event" : "events"));
    }
    f.severity = hardware ? Severity::kCritical : Severity::kWarning;
    f.title = gpu + " reported " + listed;
    f.summary = fmt::format(
        "The driver reported {} Xid {} on {} while the program ran. {}", events,
        events == 1 ? "event" : "events", gpu,
        hardware ? "At least one means the GPU, its memory or its link failed: work on it may have "
                   "been lost or be wrong."
                 : "These are most often the program's own error (an illegal memory access or a "
                   "killed kernel), not the hardware's.");
    f.figures.push_back({"xid_events", static_cast<double>(events), Unit::kCount, "Xid events"});
    if (hardware) {
        f.advice.push_back(
            "Drain the GPU and have the operators check it (nvidia-smi -q, the kernel log's "
            "NVRM: Xid lines); reset it before trusting its results.");
    } else {
        f.advice.push_back(
            "Run the program under compute-sanitizer, or with CUDA_LAUNCH_BLOCKING=1, to find "
            "the kernel that faulted.");
    }
    report.findings.push_back(std::move(f));
}

void HealthAnalyzer::add_memory_health_finding(Report& report, std::uint16_t device,
                                               const DeviceHealth& d) {
    const bool failed = d.remap_failed.max > 0;
    const bool pending = d.remap_pending.max > 0 || d.retired_pending.max > 0;
    auto grew = [](const Stat& s) { return s.count > 0 && s.last > s.first; };
    const bool growing = grew(d.retired_single) || grew(d.retired_double) ||
                         grew(d.rows_correctable) || grew(d.rows_uncorrectable);
    const double pages = d.retired_single.last + d.retired_double.last;
    const double rows = d.rows_correctable.last + d.rows_uncorrectable.last;
    if (!failed && !pending && !growing && pages <= 0 && rows <= 0) return;
    const std::string gpu = device_label(device);
    Finding f;
    f.id = finding_name(FindingId::kEccPagesRetired);
    f.device = device == kNoDevice ? -1 : static_cast<int>(device);
    f.severity = failed               ? Severity::kCritical
                 : pending || growing ? Severity::kWarning
                                      : Severity::kInfo;
    const std::string what = rows > 0 || d.rows_correctable.count > 0
                                 ? format_number(rows, 0) + " memory rows remapped"
                                 : format_number(pages, 0) + " memory pages retired";
    f.title = gpu + ": " + what +
              (failed    ? ", and a remap failed"
               : pending ? ", one waiting for a reset"
                         : "");
    f.summary = failed ? gpu +
                             " could not remap a failing memory row: it has no spare left "
                             "where it needs one, and needs service."
                : pending ? gpu +
                                " set failing memory aside, but the change takes effect only "
                                "at the next GPU reset; until then the program can use it."
                : growing ? gpu + " set more failing memory aside while the program ran."
                          : gpu +
                                " set failing memory aside before this run; it has spare "
                                "memory for it, and nothing waits for a reset.";
    if (d.rows_correctable.count > 0) {
        f.figures.push_back({"remapped_rows_correctable", d.rows_correctable.last, Unit::kCount,
                             "rows remapped for corrected errors"});
        f.figures.push_back({"remapped_rows_uncorrectable", d.rows_uncorrectable.last, Unit::kCount,
                             "rows remapped for uncorrected errors"});
    }
    if (d.retired_single.count > 0) {
        f.figures.push_back({"retired_pages_single_bit", d.retired_single.last, Unit::kCount,
                             "pages retired for repeated corrected errors"});
        f.figures.push_back({"retired_pages_double_bit", d.retired_double.last, Unit::kCount,
                             "pages retired for uncorrected errors"});
    }
    f.evidence.push_back(std::string("NVML: ") + (failed ? "remap failure reported; " : "") +
                         (pending ? "a retirement or remap is pending; " : "") + what);
    if (failed) {
        f.advice.push_back("Take the GPU out of service and have it replaced (RMA).");
    } else if (pending) {
        f.advice.push_back(
            "Reset the GPU (nvidia-smi -r, or reboot the node) when it is idle, so the "
            "failing memory is no longer used.");
    } else {
        f.advice.push_back(
            "Track the counts across runs; a GPU that keeps retiring memory is failing.");
    }
    report.findings.push_back(std::move(f));
}

void HealthAnalyzer::add_pcie_finding(Report& report, std::uint16_t device, const DeviceHealth& d) {
    const double links = static_cast<double>(d.link_samples);
    const bool narrow = d.link_samples > 0 && d.narrow_samples >= kPcieDegradedShare * links;
    const bool slow =
        d.busy_link_samples >= kMinBusyLinkSamples &&
        d.slow_busy_samples >= kPcieDegradedShare * static_cast<double>(d.busy_link_samples);
    const double replays =
        d.pcie_replays.count > 0 ? d.pcie_replays.last - d.pcie_replays.first : 0;
    const bool errors = replays >= kPcieReplaysDuringRun;
    if (!narrow && !slow && !errors) return;
    const std::string gpu = device_label(device);
    Finding f;
    f.id = finding_name(FindingId::kPcieLinkDegraded);
    f.device = device == kNoDevice ? -1 : static_cast<int>(device);
    f.severity = Severity::kWarning;
    const std::string link = "Gen " + format_number(d.pcie_gen.last, 0) + " x" +
                             format_number(d.pcie_width.last, 0) + " of Gen " +
                             format_number(d.pcie_gen_max.last, 0) + " x" +
                             format_number(d.pcie_width_max.last, 0);
    f.title =
        gpu + "'s PCIe link " +
        (narrow || slow ? "runs at " + link
                        : "retransmitted " + format_number(replays, 0) + " times during the run");
    f.summary = gpu + "'s PCIe link " +
                (narrow ? "trained to fewer lanes than both ends support"
                 : slow ? "ran below its highest generation while the GPU was busy"
                        : "needed retransmissions (replays)") +
                ": copies between host and GPU, and everything that waits for them, run slower "
                "than this machine allows." +
                (errors && (narrow || slow)
                     ? " It also retransmitted " + format_number(replays, 0) + " times."
                     : "");
    f.figures.push_back(
        {"pcie_link_width", d.pcie_width.last, Unit::kCount, "lanes the link runs on"});
    f.figures.push_back(
        {"pcie_link_width_max", d.pcie_width_max.last, Unit::kCount, "lanes both ends support"});
    f.figures.push_back(
        {"pcie_link_generation", d.pcie_gen.last, Unit::kCount, "PCIe generation now"});
    f.figures.push_back(
        {"pcie_link_generation_max", d.pcie_gen_max.last, Unit::kCount, "highest PCIe generation"});
    f.figures.push_back(
        {"pcie_replays_during_run", replays, Unit::kCount, "PCIe replays in the run"});
    f.evidence.push_back(fmt::format(
        "{} of {} PCIe readings narrower than x{}; {} of {} readings while busy below Gen {}",
        d.narrow_samples, d.link_samples, format_number(d.pcie_width_max.last, 0),
        d.slow_busy_samples, d.busy_link_samples, format_number(d.pcie_gen_max.last, 0)));
    f.advice.push_back(
        "Have the operators reseat the GPU or its riser and check the slot and BIOS link "
        "settings (nvidia-smi -q -d PCIE shows the link; lspci -vv the slot).");
    f.advice.push_back(
        "Until then, keep host-GPU copies off the critical path: pinned memory and "
        "non_blocking copies overlap them with compute.");
    report.findings.push_back(std::move(f));
}

void HealthAnalyzer::add_nvlink_finding(Report& report, std::uint16_t device,
                                        const DeviceHealth& d) {
    auto grown = [](const Stat& s) { return s.count > 0 ? s.last - s.first : 0.0; };
    const double recoveries = grown(d.nvlink_recovery);
    const double errors = grown(d.nvlink_replay) + grown(d.nvlink_crc);
    const bool link_lost = d.nvlink_active.count > 0 && d.nvlink_active.last < d.nvlink_active.max;
    if (recoveries < 1 && errors < kNvlinkErrorsDuringRun && !link_lost) return;
    const std::string gpu = device_label(device);
    Finding f;
    f.id = finding_name(FindingId::kNvlinkErrors);
    f.device = device == kNoDevice ? -1 : static_cast<int>(device);
    f.severity = Severity::kWarning;
    f.title = gpu + "'s NVLink " +
              (link_lost ? "lost a link: " + format_number(d.nvlink_active.last, 0) + " of " +
                               format_number(d.nvlink_active.max, 0) + " up"
               : recoveries >= 1 ? "retrained " + format_number(recoveries, 0) + " times"
                                 : "reported " + format_number(errors, 0) + " errors");
    f.summary = gpu + "'s NVLink links " +
                (link_lost ? "went down during the run: traffic to its peers has less bandwidth, "
                             "or goes over PCIe."
                           : "needed error recovery during the run: each recovery stalls the "
                             "link, and collectives over it slow down.");
    f.figures.push_back(
        {"nvlink_links_active", d.nvlink_active.last, Unit::kCount, "NVLink links up at the end"});
    f.figures.push_back({"nvlink_recoveries_during_run", recoveries, Unit::kCount,
                         "link recoveries during the run"});
    f.figures.push_back(
        {"nvlink_errors_during_run", errors, Unit::kCount, "replay and CRC errors during the run"});
    f.evidence.push_back("NVML NVLink counters summed over the active links: recoveries +" +
                         format_number(recoveries, 0) + ", replay and CRC errors +" +
                         format_number(errors, 0));
    f.advice.push_back(
        "Have the operators check the links (nvidia-smi nvlink -s and -e) and the NVSwitch "
        "fabric; a link that keeps recovering needs the board or its cabling serviced.");
    report.findings.push_back(std::move(f));
}

void HealthAnalyzer::add_card_findings(Report& report, std::uint16_t device,
                                       const DeviceHealth& d) {
    add_xid_finding(report, device, d);
    add_memory_health_finding(report, device, d);
    add_pcie_finding(report, device, d);
    add_nvlink_finding(report, device, d);
}

}  // namespace gpudiag::detail
