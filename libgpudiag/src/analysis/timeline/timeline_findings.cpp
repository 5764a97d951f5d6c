// SPDX-License-Identifier: Apache-2.0
// Timeline findings. Their thresholds, and where each comes from, are in the findings catalog.
#include "analysis/findings/figure_keys.hpp"
#include "analysis/findings/finding_catalog.hpp"
#include "analysis/timeline/serving_remedy.hpp"
#include "analysis/timeline/timeline_summary.hpp"
#include "support/format.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace gpudiag::detail {
namespace {

double ratio(double a, double b) {
    return b > 0 ? a / b : 0.0;
}

std::string pct(double f) {
    return format_percent(f);
}
std::string dur(double ns) {
    return format_duration_ns(ns);
}

const char* cause_advice(HostCause c) {
    switch (c) {
        case HostCause::kInput:
            return "Feed the GPU from background workers: DataLoader(num_workers>0, "
                   "pin_memory=True, "
                   "prefetch_factor=4, persistent_workers=True).";
        case HostCause::kSync:
            return "Remove host synchronizations from the loop (.item(), .cpu(), .tolist(), "
                   "printing "
                   "tensors, torch.cuda.synchronize()); find them with "
                   "torch.cuda.set_sync_debug_mode(\"warn\").";
        case HostCause::kCopy:
            return "Copy from pinned memory with .to(device, non_blocking=True) (DataLoader "
                   "pin_memory=True) so copies do not block the host.";
        case HostCause::kLaunch:
            return "Cut per-kernel host overhead: torch.compile (fuses small ops), CUDA graphs "
                   "(torch.compile(mode=\"reduce-overhead\") or torch.cuda.graphs), fused "
                   "optimizers "
                   "(fused=True / foreach=True), or a bigger batch per step.";
        case HostCause::kCpu:
            return "Find what the host computes between launches (py-spy, or torch.profiler with "
                   "CPU activities and with_stack=True): Python and framework work in the loop, "
                   "logging, metrics or data preparation. Move what is not the model's out of "
                   "the loop or onto another thread; torch.compile and CUDA graphs remove the "
                   "framework's per-operator work.";
    }
    return "";
}

constexpr const char* kCompileAdvice =
    "Compile once, not in the measured loop: warm up (run each input shape once) before "
    "profiling, keep compiled kernels across runs (TORCHINDUCTOR_CACHE_DIR / "
    "TORCHINDUCTOR_FX_GRAPH_CACHE=1 and TRITON_CACHE_DIR for torch.compile; for nvFuser, reuse "
    "one FusionDefinition so its FusionCache serves later calls), and avoid recompiles from "
    "changing shapes or guards (mark_dynamic, TORCH_LOGS=recompiles).";

// The step time the what-ifs are measured against: the mean step, or the window without steps.
double replay_base(const TimelineSummary& s) {
    const CriticalPathSummary& cp = s.critical_path;
    return cp.per_step && s.step_time_mean_ns > 0 ? static_cast<double>(s.step_time_mean_ns)
                                                  : cp.measured_ns;
}

// The replayed saving of `w`, 0..base; < 0 when no replay was possible.
double saving_of(const TimelineSummary& s, WhatIf w) {
    const CriticalPathSummary& cp = s.critical_path;
    if (!cp.available) return -1;
    return std::clamp(cp.saving_ns[static_cast<std::size_t>(w)], 0.0, replay_base(s));
}

// What gpu_idle's saving replays: removing the host-side cause that dominates the idle time
// (so the finding about that cause, which names the fix, ranks with it), or every host cause when
// the idle time sits between queued kernels (no one host-side fix).
WhatIf gpu_idle_fix(const TimelineSummary& s) {
    const GpuTimeStats& g = s.gpu;
    std::size_t top = 0;
    for (std::size_t c = 1; c < kHostCauses; ++c) {
        if (g.cause_ns[c] > g.cause_ns[top]) top = c;
    }
    if (static_cast<double>(g.idle_by_kind[0]) < kHostWaitMostly * static_cast<double>(g.idle_ns)) {
        return WhatIf::kHostNeverLate;
    }
    static constexpr WhatIf kFixOf[kHostCauses] = {WhatIf::kNoInputWait, WhatIf::kNoSync,
                                                   WhatIf::kPinnedCopies, WhatIf::kCudaGraph,
                                                   WhatIf::kCudaGraph};
    return kFixOf[top];
}

// The what-if each timeline finding's predicted saving replays: its cause removed.
WhatIf fix_of(const std::string& id, const TimelineSummary& s) {
    static constexpr std::pair<FindingId, WhatIf> kFixes[] = {
        {FindingId::kInputBound, WhatIf::kNoInputWait},
        {FindingId::kHostSyncStall, WhatIf::kNoSync},
        {FindingId::kPageableMemcpy, WhatIf::kPinnedCopies},
        {FindingId::kLaunchBound, WhatIf::kCudaGraph},
        {FindingId::kCommBound, WhatIf::kNoCommunication},
    };
    for (const auto& [finding, fix] : kFixes) {
        if (id == finding_name(finding)) return fix;
    }
    return gpu_idle_fix(s);
}

// Attaches what removing the finding's cause is worth (the critical path replayed without it)
// and says so in the summary; a saving under kWorthFixing makes the finding informational.
// `lower_bound`: the replay leaves out part of the fix's effect, so a small saving proves nothing.
// The window every timeline finding's figures describe (see TimelineSummary::window_ns).
void add_window_figure(Finding& f, const TimelineSummary& s) {
    f.figures.push_back({kFindingWindowKey, static_cast<double>(s.window_ns), Unit::kNanoseconds,
                         "the window: " + s.window_name});
}

void attach_saving(Finding& f, const TimelineSummary& s, const std::string& fix,
                   bool lower_bound = false) {
    add_window_figure(f, s);
    const CriticalPathSummary& cp = s.critical_path;
    const double saving = saving_of(s, fix_of(f.id, s));
    if (saving < 0) return;
    const bool per_step = cp.per_step;
    const double base = replay_base(s);
    const double share = ratio(saving, base);
    const std::string per = per_step ? " per step" : " over the window";
    f.predicted_saving = {
        {saving_keys::kSavingNs, saving, Unit::kNanoseconds, fmt::format("time saved{}", per)},
        {saving_keys::kShare, share, Unit::kFraction,
         per_step ? "share of the step time" : "share of the window"},
        {saving_keys::kStepTimeNs, base - saving, Unit::kNanoseconds,
         per_step ? "predicted step time" : "predicted window"},
        {kFindingWindowKey, cp.window_ns, Unit::kNanoseconds,
         "the window the saving was replayed over"}};
    f.summary += fmt::format(" Figures and saving are {}: {}.", s.window_name, dur(cp.window_ns));
    // The number itself is describe_saving's line under the summary: the summary says only how
    // far to trust it.
    if (lower_bound) {
        f.summary += " " + fix +
                     ": the saving below replays the critical path without the host waiting for "
                     "them, the copies at their measured speed; pinned ones are faster, so it is "
                     "a lower bound.";
    } else if (share < kWorthFixing) {
        f.severity = Severity::kInfo;
        f.summary += " " + fix + " would barely shorten the " + (per_step ? "step" : "window") +
                     " (the critical path replayed without it): it is off the critical path, so "
                     "other findings are worth fixing first.";
    } else {
        f.summary += " " + fix + ": the saving below is the critical path replayed without it.";
    }
}

std::string setting(std::int64_t v, bool flag = false) {
    if (v < 0) return "?";
    if (flag) return v != 0 ? "True" : "False";
    return fmt::to_string(v);
}

// Whether more DataLoader workers would help, from the loader's own settings: each batch costs
// the workers `fetch` of work, so keeping up with a loop that needs `compute` per step takes
// fetch / compute workers, which the CPU cores must be able to run.
// Returns whether it judged the worker count (then its advice replaces the generic "add
// workers", which would contradict it when more workers cannot help).
bool add_loader_verdict(const TimelineSummary& s, double wait_per_step, Finding& f) {
    const LoaderSettings* l = s.loader_known ? &s.loader : nullptr;
    const std::int64_t workers = l != nullptr ? l->num_workers : (s.single_process_loader ? 0 : -1);
    const std::int64_t cores = l != nullptr ? l->cpu_cores : -1;
    if (l != nullptr) {
        f.evidence.push_back(fmt::format(
            "DataLoader settings (read live): num_workers={}, pin_memory={}, prefetch_factor={}, "
            "persistent_workers={}, batch_size={}{}",
            setting(l->num_workers), setting(l->pin_memory, true),
            l->prefetch_factor < 0 ? std::string("None") : setting(l->prefetch_factor),
            setting(l->persistent_workers, true), setting(l->batch_size),
            cores > 0 ? fmt::format(", on {} CPU cores", cores) : std::string()));
        f.figures.push_back({"num_workers", static_cast<double>(l->num_workers), Unit::kCount,
                             "DataLoader workers"});
    }
    const double step = replay_base(s);
    const double input_saving = saving_of(s, WhatIf::kNoInputWait);
    const double compute = input_saving >= 0 ? step - input_saving : step - wait_per_step;
    if (workers < 0 || compute <= 0) return false;
    // With no workers the loop fetches each batch itself; with N workers that cannot keep up,
    // each worker delivers one batch every N steps.
    const double fetch = workers == 0 ? wait_per_step : static_cast<double>(workers) * step;
    const auto needed = static_cast<std::int64_t>(std::ceil(fetch / compute));
    f.figures.push_back(
        {"workers_needed", static_cast<double>(needed), Unit::kCount,
         "workers that would keep up (batch fetch time / step time without input wait)"});
    const std::string basis = fmt::format(
        "a batch takes about {} of worker time{} and the step without input wait {}", dur(fetch),
        workers > 0
            ? fmt::format(" ({0} workers, one batch each per {0} steps of {1})", workers, dur(step))
            : std::string(),
        dur(compute));
    if (cores > 0 && workers > 0 && workers + 1 >= cores) {
        f.evidence.push_back(fmt::format(
            "More workers would not help: the {} workers and the training loop already occupy "
            "the {} CPU cores; the source (decoding, augmentation or disk) is the limit: {}.",
            workers, cores, basis));
        f.advice.insert(
            f.advice.begin(),
            "The data source is the limit, not the worker count: make each "
            "sample cheaper (decode once and cache, smaller or pre-resized inputs, GPU decoding "
            "such as DALI or torchvision.io.decode_jpeg on the GPU) or read from faster storage.");
    } else if (cores > 0 && needed + 1 > cores) {
        f.evidence.push_back(fmt::format(
            "About {} workers would keep up ({}), more than the {} CPU cores can run: more "
            "workers help up to {}, then the source is the limit.",
            needed, basis, cores, cores - 1));
        f.advice.insert(f.advice.begin(),
                        fmt::format("Raise num_workers to {}, then make each sample cheaper: the "
                                    "CPU cannot run the {} workers this loop needs.",
                                    std::max<std::int64_t>(1, cores - 1), needed));
    } else if (needed > workers) {
        f.evidence.push_back(fmt::format(
            "More workers would help: about {} keep up ({}){}.", needed, basis,
            cores > 0 ? fmt::format(", and the {} CPU cores can run them", cores) : std::string()));
        f.advice.insert(f.advice.begin(),
                        fmt::format("DataLoader(num_workers={}){}", needed,
                                    workers == 0 ? " moves the fetch out of the training loop."
                                                 : " keeps up with the loop."));
    } else {
        f.evidence.push_back(fmt::format(
            "The {} workers keep up on average (about {} would: {}): the waits come in bursts, "
            "from batches of uneven cost or the workers' start, which more batches in flight "
            "absorb.",
            workers, needed, basis));
    }
    if (l != nullptr && l->pin_memory == 0) {
        f.advice.push_back("pin_memory=True: this loader copies batches from pageable memory.");
    }
    if (l != nullptr && workers > 0 && l->persistent_workers == 0) {
        f.advice.push_back("persistent_workers=True: the workers are restarted at every epoch.");
    }
    return true;
}

void add_input_bound(const TimelineSummary& s, Report& report) {
    double share = ratio(static_cast<double>(s.input_wait_ns), static_cast<double>(s.host_time_ns));
    if (share < kInputModerate || s.input_waits == 0) return;
    // Without steps the share is of the whole host time: one fetch in it (a program that stopped
    // before its loop began) is no loop waiting for its input.
    if (s.steps == 0 && s.input_waits < kMinFetchesWithoutSteps) return;
    Finding f;
    f.id = finding_name(FindingId::kInputBound);
    f.severity = share >= kInputHigh ? Severity::kCritical : Severity::kWarning;
    f.rank = s.rank;
    f.device = s.device;
    f.title = std::string(share >= kInputHigh ? "Highly" : "Moderately") +
              " input-bound: " + pct(share) + " of step time waiting for the next batch";
    double steps = s.steps > 0 ? static_cast<double>(s.steps) : 1.0;
    double per_step = static_cast<double>(s.input_wait_ns) / steps;
    f.summary = fmt::format(
        "The training loop waited {} of {} for batches ({} fetches, {}{}, longest {}). "
        "TensorFlow's input-pipeline analyzer calls 5 % moderately and 20 % highly input-bound.",
        dur(static_cast<double>(s.input_wait_ns)), dur(static_cast<double>(s.host_time_ns)),
        s.input_waits, dur(per_step), s.steps > 0 ? " per step" : " per trace",
        dur(static_cast<double>(s.longest_input_wait_ns)));
    f.figures = {{kFindingShareKey, share, Unit::kFraction, "share of step time waiting for input"},
                 {"input_wait_per_step_ns", per_step, Unit::kNanoseconds, "waiting per step"},
                 {"input_wait_max_ns", static_cast<double>(s.longest_input_wait_ns),
                  Unit::kNanoseconds, "longest wait"}};
    // The waits are host time: measured without GPU activity. What they cost the GPU is not.
    if (s.has_gpu_activity) {
        double idle_input =
            ratio(static_cast<double>(s.gpu.cause_ns[0]), static_cast<double>(s.gpu.idle_ns));
        f.summary += " " + pct(idle_input) + " of the GPU's idle time falls inside these waits.";
        f.figures.push_back(
            {"idle_input_share", idle_input, Unit::kFraction, "GPU idle time inside input waits"});
    } else {
        f.evidence.push_back(
            "GPU activity was not observed (no CUPTI records): how much GPU idle "
            "time these waits cause is not known");
    }
    f.evidence.push_back(fmt::format("{} DataLoader fetches took {} in total, the longest {}",
                                     s.input_waits, dur(static_cast<double>(s.input_wait_ns)),
                                     dur(static_cast<double>(s.longest_input_wait_ns))));
    if (s.single_process_loader) {
        f.evidence.push_back(
            "the fetches run in the training process "
            "(_SingleProcessDataLoaderIter: num_workers=0)");
    }
    f.advice.push_back(
        "Keep more batches in flight: prefetch_factor=4 and persistent_workers=True "
        "(num_workers > 0).");
    f.advice.push_back(
        "pin_memory=True and .to(device, non_blocking=True) so the copy overlaps "
        "compute.");
    f.advice.push_back(
        "Move decoding and augmentation off the critical path (pre-process once, "
        "or augment on the GPU).");
    if (!add_loader_verdict(s, per_step, f)) {
        f.advice.insert(f.advice.begin(),
                        s.single_process_loader
                            ? "Load batches in background processes: DataLoader(num_workers=N), "
                              "starting with the number of CPU cores per GPU."
                            : "Add DataLoader workers (num_workers) until fetches stop blocking; "
                              "check that the workers are not CPU-starved.");
    }
    attach_saving(f, s, "Having each batch ready when the loop asks");
    report.findings.push_back(std::move(f));
}

// host_sync_stall's title and summary. Raised by the replay's saving alone, the syncs cost no GPU
// idle of their own: they hold the host back, so what it does next (often the next batch) cannot
// overlap the GPU's work.
void word_host_sync_stall(const TimelineSummary& s, double share, double saving_share,
                          double sync_idle, Finding& f) {
    const double per_step =
        s.steps > 0 ? static_cast<double>(s.sync_calls) / static_cast<double>(s.steps) : 0;
    const bool holds_host_back = share < kCauseNotable && saving_share >= kCauseNotable;
    f.title = holds_host_back ? "Host synchronizations hold the host back: removing them saves " +
                                    pct(saving_share) + " of the " +
                                    (s.critical_path.per_step ? "step time" : "window")
                              : "Host synchronizations stall the GPU: " + pct(share) +
                                    " of the window idle after syncs";
    // The replayed saving itself (saving_share is 0 below kMinSavingToRaiseNs): a title that
    // says what removing the syncs is worth states that figure.
    const double saving = saving_of(s, WhatIf::kNoSync);
    const double replayed_share = saving >= 0 ? ratio(saving, replay_base(s)) : 0.0;
    // Without steps there is no per-step count to give: the calls in the window are the figure.
    const char* calls = s.sync_calls == 1 ? "sync" : "syncs";
    const std::string count = s.steps == 0 ? fmt::format("{} {} in the window", s.sync_calls, calls)
                              : per_step >= 1
                                  ? format_number(per_step, 0) + " syncs per step"
                                  : fmt::format("{} {} in {} steps", s.sync_calls, calls, s.steps);
    if (saving >= 0 && replayed_share < kWorthFixing) {
        f.title = count + (s.sync_calls == 1 ? ", but it costs" : ", but they cost") +
                  " < 1 % of the " + (s.critical_path.per_step ? "step time" : "window") +
                  ": not worth fixing first";
    } else if (saving >= 0 && !holds_host_back && share < kCauseNotable) {
        f.title = count + ": removing them saves " + pct(replayed_share) + " of the " +
                  (s.critical_path.per_step ? "step time" : "window");
    }
    f.summary = fmt::format("{} {} blocked the host for {}.", s.sync_calls,
                            s.sync_calls == 1 ? "synchronizing call" : "synchronizing calls",
                            dur(static_cast<double>(s.sync_ns)));
    if (sync_idle > 0) {
        f.summary +=
            " The GPU ran out of work right as the host returned from a synchronization, then "
            "waited " +
            dur(sync_idle) + " in all for the host to launch again.";
    }
    if (holds_host_back) {
        f.summary +=
            " Each call held the host until the GPU reached it, so the host work after it "
            "(launches, the next batch) could not overlap the GPU's work before it.";
    }
}

void add_host_sync_stall(const TimelineSummary& s, Report& report) {
    double span = static_cast<double>(s.gpu.span_ns());
    double sync_idle =
        static_cast<double>(s.gpu.cause_ns[static_cast<std::size_t>(HostCause::kSync)]);
    double share = ratio(sync_idle, span);
    // Raised when syncs idle the GPU, when replaying without them saves time, or when there are
    // so many per step that the user will wonder (then to say what they cost).
    const double saving = saving_of(s, WhatIf::kNoSync);
    const double saving_share = saving >= kMinSavingToRaiseNs ? ratio(saving, replay_base(s)) : 0.0;
    const double per_step =
        s.steps > 0 ? static_cast<double>(s.sync_calls) / static_cast<double>(s.steps) : 0;
    const bool many = per_step >= kManySyncsPerStep && saving_of(s, WhatIf::kNoSync) >= 0;
    if (share < kCauseNotable && saving_share < kCauseNotable && !many) return;
    Finding f;
    f.id = finding_name(FindingId::kHostSyncStall);
    f.severity =
        std::max(share, saving_share) >= kCauseSevere ? Severity::kCritical : Severity::kWarning;
    f.rank = s.rank;
    f.device = s.device;
    word_host_sync_stall(s, share, saving_share, sync_idle, f);
    f.figures = {
        {kFindingShareKey, share, Unit::kFraction,
         "share of the window idle after synchronizations"},
        {"sync_idle_ns", sync_idle, Unit::kNanoseconds, "GPU idle after synchronizations"},
        {"sync_calls", static_cast<double>(s.sync_calls), Unit::kCount, "synchronizing calls"},
        {"sync_ns", static_cast<double>(s.sync_ns), Unit::kNanoseconds, "host blocked"}};
    f.site_unit = Unit::kNanoseconds;
    for (std::size_t i = 0; i < s.sync_by_name.size() && i < 5; ++i) {
        const auto& [name, cn] = s.sync_by_name[i];
        f.sites.push_back(
            CallSite{name, static_cast<double>(cn.second),
                     ratio(static_cast<double>(cn.second), static_cast<double>(s.sync_ns)),
                     fmt::format("{} calls", cn.first)});
        f.evidence.push_back(
            fmt::format("{}: {} calls, {}", name, cn.first, dur(static_cast<double>(cn.second))));
    }
    f.advice.push_back(
        "Keep values on the GPU inside the loop: no .item(), .cpu(), .tolist(), "
        "print(tensor) or Python `if tensor:`; log metrics every N steps instead.");
    f.advice.push_back("Find the calls with torch.cuda.set_sync_debug_mode(\"warn\").");
    f.advice.push_back(
        "Use non_blocking=True copies from pinned memory; avoid torch.cuda.synchronize() "
        "except for timing.");
    attach_saving(f, s, "Removing these synchronizations");
    report.findings.push_back(std::move(f));
}

void add_pageable_memcpy(const TimelineSummary& s, Report& report) {
    const GpuTimeStats& g = s.gpu;
    if (g.pageable_copies == 0 || static_cast<double>(g.pageable_bytes) < kPageableMinBytes) return;
    double span = static_cast<double>(g.span_ns());
    double cost = static_cast<double>(g.pageable_ns) +
                  static_cast<double>(g.cause_ns[static_cast<std::size_t>(HostCause::kCopy)]);
    double share = ratio(cost, span);
    double bandwidth =
        ratio(static_cast<double>(g.pageable_bytes), static_cast<double>(g.pageable_ns) / 1e9);
    Finding f;
    f.id = finding_name(FindingId::kPageableMemcpy);
    f.severity = share >= kCauseNotable ? Severity::kWarning : Severity::kInfo;
    f.rank = s.rank;
    f.device = s.device;
    f.title =
        fmt::format("{} copies from pageable memory ({}, {}/s)", g.pageable_copies,
                    format_bytes(static_cast<double>(g.pageable_bytes)), format_bytes(bandwidth));
    f.summary = fmt::format(
        "Copies between pageable host memory and the GPU are staged through a driver buffer and "
        "block the host: {} such copies ({}{}) took {} at {}/s, {} of the window with the host "
        "time spent in them.",
        g.pageable_copies, format_bytes(static_cast<double>(g.pageable_bytes)),
        s.top_pageable_direction.empty() ? "" : ", mostly " + s.top_pageable_direction,
        dur(static_cast<double>(g.pageable_ns)), format_bytes(bandwidth), pct(share));
    f.figures = {{kFindingShareKey, share, Unit::kFraction, "share of the window"},
                 {"bytes", static_cast<double>(g.pageable_bytes), Unit::kBytes, "bytes copied"},
                 {"count", static_cast<double>(g.pageable_copies), Unit::kCount, "copies"},
                 {"bandwidth", bandwidth, Unit::kBytesPerSecond, "achieved bandwidth"}};
    f.evidence.push_back(fmt::format("Memcpy activities with a Pageable source or destination: {}",
                                     g.pageable_copies));
    f.advice.push_back(
        "DataLoader(pin_memory=True), or tensor.pin_memory() for buffers you copy "
        "every step.");
    f.advice.push_back(
        "Then copy with .to(device, non_blocking=True) so the copy overlaps compute.");
    f.advice.push_back("Keep tensors that are reused across steps on the GPU.");
    attach_saving(f, s, "Copying from pinned memory without blocking the host", true);
    report.findings.push_back(std::move(f));
}

// Launch-bound: the GPU idles mostly waiting for the host, and the host spends most of that wait
// launching (inside launch calls, or the latency from a launch to its kernel): kernels finish
// before the next one can be queued. Host wait spent in other CPU work (Python, the framework,
// logging) is gpu_idle's, with advice of its own: CUDA graphs would not be the first fix.
void add_launch_bound(const TimelineSummary& s, Report& report) {
    const GpuTimeStats& g = s.gpu;
    const double span = static_cast<double>(g.span_ns());
    const double idle = static_cast<double>(g.idle_ns);
    const double idle_share = ratio(idle, span);
    const double host_wait = static_cast<double>(g.idle_by_kind[0]);
    const double launching =
        static_cast<double>(g.cause_ns[static_cast<std::size_t>(HostCause::kLaunch)]);
    if (idle_share < kIdleWorthExplaining || host_wait < kHostWaitMostly * idle ||
        launching < kLaunchingMostly * host_wait || s.launch_median_ns <= 0) {
        return;
    }
    const double launch_share = ratio(launching, idle);
    Finding f;
    f.id = finding_name(FindingId::kLaunchBound);
    f.severity = idle_share >= kIdleSevere ? Severity::kCritical : Severity::kWarning;
    f.rank = s.rank;
    f.device = s.device;
    f.title = "Launch-bound: the host spent " + pct(launch_share) +
              " of the GPU's idle time launching kernels (median kernel " +
              dur(s.kernel_median_ns) + ", median launch call " + dur(s.launch_median_ns) + ")";
    f.summary = fmt::format(
        "The GPU idled {} of the window; for {} of that idle time the host was inside launch "
        "calls or waiting out a launch's latency, so kernels ran out before the next one was "
        "queued. {} kernels ran a median {}; a launch call took a median {} of host time.",
        pct(idle_share), pct(launch_share), g.kernels, dur(s.kernel_median_ns),
        dur(s.launch_median_ns));
    f.figures = {
        {kFindingShareKey, ratio(launching, span), Unit::kFraction,
         "share of the window idle launching"},
        {"launch_share_of_idle", launch_share, Unit::kFraction, "idle time spent launching"},
        {"kernels", static_cast<double>(g.kernels), Unit::kCount, "kernels"},
        {"kernel_median_ns", s.kernel_median_ns, Unit::kNanoseconds, "median kernel"},
        {"launch_median_ns", s.launch_median_ns, Unit::kNanoseconds, "median launch call"}};
    f.evidence.push_back(
        fmt::format("{} launch calls, median {}", s.launch_calls, dur(s.launch_median_ns)));
    f.evidence.push_back("median kernel " + dur(s.kernel_median_ns));
    f.advice.push_back(
        "Capture the step in a CUDA graph: torch.compile(mode=\"reduce-overhead\") "
        "or torch.cuda.graphs.");
    f.advice.push_back("torch.compile fuses small elementwise kernels into fewer, larger ones.");
    f.advice.push_back(
        "A bigger batch per step makes each kernel longer for the same launch cost.");
    f.advice.push_back(
        "Fused optimizers (fused=True / foreach=True) replace per-parameter launches.");
    add_serving_remedy(s, f);  // a serving engine's own CUDA-graph switch comes first
    attach_saving(f, s, "Launching the kernels as one CUDA graph (no per-kernel host work)");
    report.findings.push_back(std::move(f));
}

void add_comm_bound(const TimelineSummary& s, Report& report) {
    const GpuTimeStats& g = s.gpu;
    double span = static_cast<double>(g.span_ns());
    double comm = static_cast<double>(g.class_ns[1]);
    double overlap = static_cast<double>(g.comm_overlap_ns());
    double exposed = std::max(0.0, comm - overlap);
    double share = ratio(exposed, span);
    if (share < kCommNotable) return;
    Finding f;
    f.id = finding_name(FindingId::kCommBound);
    f.severity = share >= kCommSevere ? Severity::kCritical : Severity::kWarning;
    f.rank = s.rank;
    f.device = s.device;
    f.title = "Communication-bound: " + pct(share) +
              " of the window in collectives not hidden by compute";
    f.summary = "Collective kernels ran " + dur(comm) + " (" + pct(ratio(comm, span)) +
                " of the window); only " + pct(ratio(overlap, comm)) +
                " of that overlapped computation, leaving " + dur(exposed) + " exposed.";
    f.figures = {
        {kFindingShareKey, share, Unit::kFraction, "exposed communication, share of the window"},
        {"communication_share", ratio(comm, span), Unit::kFraction, "communication kernels"},
        {"comm_overlap_share", ratio(overlap, comm), Unit::kFraction, "overlapped with compute"},
        {"exposed_ns", exposed, Unit::kNanoseconds, "communication not overlapped"}};
    f.evidence.push_back("NCCL kernel time " + dur(comm) + ", overlapped " + dur(overlap));
    f.advice.push_back(
        "Overlap gradients' all-reduce with backward: DDP buckets (bucket_cap_mb), "
        "gradient_as_bucket_view=True; FSDP backward_prefetch/forward_prefetch.");
    f.advice.push_back(
        "Communicate less often: no_sync() during gradient accumulation, a bigger "
        "batch per rank.");
    f.advice.push_back(
        "Collectives also wait for the slowest rank: compare ranks (gpudiag analyze "
        "with every rank's trace) before tuning the network.");
    attach_saving(f, s, "Hiding the collectives behind compute");
    report.findings.push_back(std::move(f));
}

void add_gpu_idle(const TimelineSummary& s, Report& report) {
    const GpuTimeStats& g = s.gpu;
    double span = static_cast<double>(g.span_ns());
    double idle_share = ratio(static_cast<double>(g.idle_ns), span);
    if (idle_share < kIdleWorthExplaining) return;
    std::size_t top = 0;
    for (std::size_t c = 1; c < kHostCauses; ++c) {
        if (g.cause_ns[c] > g.cause_ns[top]) top = c;
    }
    double idle = static_cast<double>(g.idle_ns);
    double host_wait = static_cast<double>(g.idle_by_kind[0]);
    Finding f;
    f.id = finding_name(FindingId::kGpuIdle);
    f.severity = idle_share >= kIdleSevere ? Severity::kWarning : Severity::kInfo;
    f.rank = s.rank;
    f.device = s.device;
    bool host_dominated = host_wait >= kHostWaitMostly * idle;
    // CPU work that is mostly inside a compiler's ranges is compilation, with remedies of its own.
    const double cpu = static_cast<double>(g.cause_ns[static_cast<std::size_t>(HostCause::kCpu)]);
    const bool compiling = top == static_cast<std::size_t>(HostCause::kCpu) && cpu > 0 &&
                           static_cast<double>(g.compile_ns) >= kCompileMostly * cpu;
    const std::string top_name =
        std::string(host_cause_label(static_cast<HostCause>(top))) +
        (compiling ? ", most of it JIT compilation (inside a compiler's ranges)" : "");
    f.title = "GPU idle " + pct(idle_share) + " of the window" +
              (host_dominated ? ", mostly waiting for the host: " + top_name
                              : std::string(", mostly between queued kernels"));
    std::string causes;
    for (std::size_t c = 0; c < kHostCauses; ++c) {
        if (g.cause_ns[c] == 0) continue;
        causes += (causes.empty() ? "" : ", ") +
                  pct(ratio(static_cast<double>(g.cause_ns[c]), idle)) + " " +
                  host_cause_label(static_cast<HostCause>(c));
    }
    f.summary = "The GPU was idle " + dur(idle) + " of " + dur(span) + ": " +
                pct(ratio(host_wait, idle)) +
                " host wait (the next kernel was launched after the "
                "GPU ran dry), " +
                pct(ratio(static_cast<double>(g.idle_by_kind[1]), idle)) +
                " kernel wait (gaps under 30 µs between queued kernels), " +
                pct(ratio(static_cast<double>(g.idle_by_kind[2]), idle)) + " other." +
                (causes.empty() ? "" : " During host waits the host was: " + causes + ".");
    f.figures = {{kFindingShareKey, idle_share, Unit::kFraction, "GPU idle share of the window"},
                 {"host_wait_share", ratio(host_wait, idle), Unit::kFraction, "idle: host wait"}};
    for (std::size_t c = 0; c < kHostCauses; ++c) {
        const auto cause = static_cast<HostCause>(c);
        f.figures.push_back(Figure{fmt::format("idle_{}_share", host_cause_key(cause)),
                                   ratio(static_cast<double>(g.cause_ns[c]), idle), Unit::kFraction,
                                   host_cause_label(cause)});
    }
    // Part of the CPU work above, not a cause of its own: shown only when a compiler ran.
    if (g.compile_ns > 0) {
        f.figures.push_back({"idle_compile_share", ratio(static_cast<double>(g.compile_ns), idle),
                             Unit::kFraction, "of it compiling (inside compiler ranges)"});
    }
    f.evidence.push_back(fmt::format("{} idle gaps, the longest {}", g.gaps,
                                     dur(static_cast<double>(g.longest_gap_ns))));
    // Compilation short of most of the CPU work is still worth its own remedy when it costs a
    // fifth of the idle time.
    const bool some_compiling =
        !compiling && static_cast<double>(g.compile_ns) >= kCauseSevere * idle;
    if (compiling || some_compiling) {
        f.evidence.push_back(fmt::format(
            "{} of the GPU's idle time ({}) the host was compiling, inside a compiler's ranges",
            pct(ratio(static_cast<double>(g.compile_ns), idle)),
            dur(static_cast<double>(g.compile_ns))));
    }
    if (host_dominated && compiling) {
        f.advice.push_back(kCompileAdvice);
    } else if (host_dominated) {
        f.advice.push_back(cause_advice(static_cast<HostCause>(top)));
        // Per-kernel host work in a serving engine: its own CUDA-graph switch removes it (the
        // Python between eager launches too; with graphs running, CPU work is the engine's own).
        if (top == static_cast<std::size_t>(HostCause::kLaunch) ||
            (top == static_cast<std::size_t>(HostCause::kCpu) && s.serving.graph_launches == 0)) {
            add_serving_remedy(s, f);
        }
    } else {
        f.advice.push_back(
            "The host keeps up; the gaps sit between queued kernels (dependencies, "
            "events, stream waits). Look at the streams table and at cross-stream "
            "waits.");
    }
    if (some_compiling) f.advice.push_back(kCompileAdvice);
    attach_saving(f, s,
                  host_dominated ? "Removing that cause (" + top_name + ")"
                                 : "Feeding the GPU as fast as it runs (no input waits, syncs, "
                                   "pageable copies or per-kernel launches)",
                  host_dominated && top == static_cast<std::size_t>(HostCause::kCopy));
    report.findings.push_back(std::move(f));
}

// Savings that cannot be added: two findings whose fixes replay the same what-if remove the same
// time, and two whose savings sum to more than removing every cause together saves cannot both
// be had in full. Each lists the other (savings under kWorthFixing share nothing worth saying).
void link_shared_savings(const TimelineSummary& s, std::vector<Finding*>& savers) {
    const double every = saving_of(s, WhatIf::kEveryCause);
    const double tolerance = kWorthFixing * replay_base(s);
    for (std::size_t i = 0; i < savers.size(); ++i) {
        for (std::size_t j = i + 1; j < savers.size(); ++j) {
            Finding& a = *savers[i];
            Finding& b = *savers[j];
            if (a.saving_ns() < tolerance || b.saving_ns() < tolerance) continue;
            const bool same_fix = fix_of(a.id, s) == fix_of(b.id, s);
            if (!same_fix && a.saving_ns() + b.saving_ns() <= every + tolerance) continue;
            a.saving_shared_with.push_back(b.id);
            b.saving_shared_with.push_back(a.id);
        }
    }
}

// The report's fix-all saving: every cause replayed away at once, what fixing all the findings
// buys whatever their own savings say.
void add_fix_all_saving(const TimelineSummary& s, Report& report) {
    const double every = saving_of(s, WhatIf::kEveryCause);
    if (every < 0) return;
    const bool per_step = s.critical_path.per_step;
    const double base = replay_base(s);
    const std::string per = per_step ? " per step" : " over the window";
    report.fix_all_saving = {{saving_keys::kSavingNs, every, Unit::kNanoseconds,
                              fmt::format("time saved{} with every cause removed together", per)},
                             {saving_keys::kShare, ratio(every, base), Unit::kFraction,
                              per_step ? "share of the step time" : "share of the window"},
                             {saving_keys::kStepTimeNs, base - every, Unit::kNanoseconds,
                              per_step ? "predicted step time" : "predicted window"}};
}

void add_savings_together(const TimelineSummary& s, std::size_t first, Report& report) {
    std::vector<Finding*> savers;
    for (std::size_t i = first; i < report.findings.size(); ++i) {
        if (report.findings[i].saving_ns() >= 0) savers.push_back(&report.findings[i]);
    }
    if (savers.empty()) return;
    link_shared_savings(s, savers);
    add_fix_all_saving(s, report);
}

const char* stall_advice(StallActivity a) {
    switch (a) {
        case StallActivity::kCompile: return kCompileAdvice;
        case StallActivity::kLibrary:
            return "Create library handles and plans once, before the measured loop (one warm-up "
                   "call of each op); with torch.backends.cudnn.benchmark=True the first call of "
                   "each shape also benchmarks algorithms.";
        case StallActivity::kAllocator:
            return "A cold caching allocator calls cudaMalloc for each new size: run a warm-up "
                   "iteration first, or reserve up front (PYTORCH_CUDA_ALLOC_CONF="
                   "expandable_segments:True keeps growing segments instead of new ones).";
        case StallActivity::kModuleLoad:
            return "The first launch of each kernel loads its module (CUDA lazy loading, the "
                   "default since CUDA 11.7): run one warm-up iteration before profiling, or set "
                   "CUDA_MODULE_LOADING=EAGER to pay it at start-up instead.";
        case StallActivity::kInput:
            return "The first batch waits for DataLoader workers to start: "
                   "persistent_workers=True, and start the profile after the first batches.";
        case StallActivity::kCheckpoint:
            return "Save checkpoints asynchronously (torch.distributed.checkpoint.async_save) or "
                   "less often, and leave them out of the profiled steps.";
        case StallActivity::kUnnamed: break;
    }
    return "Find what the host does in this stretch (torch.profiler with CPU activities and "
           "with_stack=True, or py-spy).";
}

// one_off_stall: one stretch of host time holding most of the GPU's idle time happens once; it is
// named by what filled it and kept out of the other findings' window (see OneOffStall).
void add_one_off_stall(const TimelineSummary& s, Report& report) {
    const OneOffStall& st = s.stall;
    if (!st.found) return;
    const double len = static_cast<double>(st.length_ns());
    const bool warm = st.steps_before >= kWarmSteps;
    Finding f;
    f.id = finding_name(FindingId::kOneOffStall);
    f.severity = warm ? Severity::kInfo : Severity::kWarning;
    f.rank = s.rank;
    f.device = s.device;
    const std::string where = st.before_gpu ? "before the first GPU work" : "in one idle gap";
    f.title = fmt::format("One-off stall of {} {}: {}", dur(len), where,
                          stall_activity_label(st.activity.top));
    f.summary = fmt::format(
        "The host spent {} {}, {} of all the time the GPU waited and {} of the window with it. "
        "It happens once, so it is no per-step overhead: the other timeline findings describe "
        "and replay the window without it ({}, {}).",
        dur(len), where, pct(ratio(len, static_cast<double>(st.idle_with_stall_ns))),
        pct(ratio(len, static_cast<double>(st.span_with_stall_ns))), s.window_name,
        dur(static_cast<double>(s.window_ns)));
    if (!warm) {
        f.summary += st.steps_before == 0 && s.steps == 0
                         ? " The trace has no repeated steps before it: it was profiled without "
                           "warm-up, so it shows start-up costs, not the loop's."
                         : fmt::format(
                               " Only {} steps completed before it: the profile has no "
                               "warm-up.",
                               st.steps_before);
    }
    f.figures = {{"stall_ns", len, Unit::kNanoseconds, "the stall"},
                 {kFindingShareKey, ratio(len, static_cast<double>(st.span_with_stall_ns)),
                  Unit::kFraction, "share of the window with the stall"},
                 {"idle_share", ratio(len, static_cast<double>(st.idle_with_stall_ns)),
                  Unit::kFraction, "share of the GPU's idle time with the stall"},
                 {"steps_before", static_cast<double>(st.steps_before), Unit::kCount,
                  "steps completed before it"}};
    for (std::size_t i = 0; i < kStallActivities; ++i) {
        if (st.activity.ns[i] == 0) continue;
        const auto a = static_cast<StallActivity>(i);
        f.figures.push_back({fmt::format("{}_ns", stall_activity_key(a)),
                             static_cast<double>(st.activity.ns[i]), Unit::kNanoseconds,
                             stall_activity_label(a)});
    }
    if (!st.activity.named.empty()) {
        std::string names;
        for (const auto& n : st.activity.named) names += (names.empty() ? "" : ", ") + n;
        f.evidence.push_back("Inside it: " + names);
    }
    if (s.gpu.cold_launches > 0) {
        f.evidence.push_back(fmt::format(
            "Besides it, {} first launches of kernels kept the idle GPU waiting {} (module "
            "loading, once per kernel): also one-off, also left out of the window.",
            s.gpu.cold_launches, dur(static_cast<double>(s.gpu.cold_launch_ns))));
    }
    // A caching allocator calls cudaMalloc once per new block size and then reuses: many calls
    // in one capture are a cold allocator warming up, another cost a warm-up run leaves out.
    if (st.allocator_calls >= kColdAllocatorCalls) {
        f.evidence.push_back(fmt::format(
            "The input holds {} cudaMalloc / cudaFree calls ({} of host time): a cold caching "
            "allocator growing, which a warmed-up loop does not repeat.",
            st.allocator_calls, dur(static_cast<double>(st.allocator_ns))));
    }
    if (!st.activity.complete) {
        f.evidence.push_back(
            "The log of host calls had dropped part of this stretch: what it names is partial.");
    }
    if (!warm) {
        f.advice.push_back(
            "Profile after warm-up: torch.profiler.profile(schedule=torch.profiler.schedule("
            "wait=1, warmup=1, active=3)) with prof.step() each iteration, so first-call costs "
            "fall before the recorded steps.");
    }
    f.advice.push_back(stall_advice(st.activity.top));
    report.findings.push_back(std::move(f));
}

void add_gpu_findings(const TimelineSummary& s, Report& report) {
    add_host_sync_stall(s, report);
    add_pageable_memcpy(s, report);
    add_launch_bound(s, report);
    add_comm_bound(s, report);
    add_gpu_idle(s, report);
    add_one_off_stall(s, report);
}

}  // namespace

void add_timeline_findings(const TimelineSummary& s, Report& report) {
    const std::size_t first = report.findings.size();
    add_input_bound(s, report);  // host time: needs no GPU activity
    if (s.has_gpu_activity && s.gpu.span_ns() > 0) add_gpu_findings(s, report);
    add_savings_together(s, first, report);
}

}  // namespace gpudiag::detail
