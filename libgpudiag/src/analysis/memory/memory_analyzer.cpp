// SPDX-License-Identifier: Apache-2.0
// MemoryAnalyzer. Every threshold below says why it is where it is; none is tuned to a file.
#include "analysis/memory/memory_analyzer.hpp"

#include "analysis/memory/leak_detector.hpp"
#include "analysis/memory/oom_explainer.hpp"
#include "support/format.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace gpudiag::detail {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;

// reserved_unused: cached-but-unused memory matters when it is both large in absolute terms
// (under 1 GiB is not worth acting on for any current training GPU) and the majority of what
// the framework holds ("reserved >> allocated": at least as much cached as in use).
constexpr double kUnusedMinBytes = 1 * kGiB;
constexpr double kUnusedMinShare = 0.5;
// fragmentation: free space stranded in partly used segments (which empty_cache cannot return)
// is a problem when it is a fifth of what the framework holds, at least 256 MiB (a typical
// large activation), and broken up (the largest stranded hole is under half of it).
constexpr double kSplitMinBytes = 256 * kMiB;
constexpr double kSplitMinShare = 0.2;
constexpr double kSplitMinFragmentation = 0.5;
// near_oom: within 10 % of capacity a single large activation or a library workspace fails.
constexpr double kNearOomShare = 0.9;
constexpr double kNearOomCriticalShare = 0.97;
// memory_outside_framework: the CUDA context plus library workspaces are usually a few hundred
// MiB; beyond 512 MiB and a tenth of the memory held, the outside share deserves a look.
constexpr double kOutsideMinBytes = 512 * kMiB;
constexpr double kOutsideMinShare = 0.1;
// memory_leak: growth must reach 16 MiB, 2 % of the working level and 0.1 % of capacity over
// the analysed range: below that, steady-state noise and small caches dominate. The capacity
// share stays small because profiling windows are short (tens of steps): on a 141 GiB device a
// larger share would hide a leak of several MiB per step that fills the GPU within a day.
constexpr double kLeakMinBytes = 16 * kMiB;
constexpr double kLeakMinLevelShare = 0.02;
constexpr double kLeakMinCapacityShare = 0.001;
constexpr std::size_t kMinLeakSteps = 8;
constexpr std::size_t kMinLeakWindows = 16;

constexpr std::size_t kMaxOomExplanations = 8;
constexpr std::size_t kTopSegments = 20;
constexpr std::size_t kTopSites = 10;

std::string b(double v) { return format_bytes(v); }
std::string bu(std::uint64_t v) { return format_bytes(static_cast<double>(v)); }
double d(std::uint64_t v) { return static_cast<double>(v); }

std::string hex(std::uint64_t v) { return fmt::format("{:#x}", v); }

}  // namespace

MemoryAnalyzer::MemoryAnalyzer() = default;

void MemoryAnalyzer::begin(const SourceInfo& info, const StringTable& strings) {
    strings_ = &strings;
    expandable_ = info.property("expandable_segments") == "true";
    for (const auto& dev : info.devices) {
        if (dev.total_memory_bytes != 0) ledger_.set_capacity(dev.ordinal, dev.total_memory_bytes);
    }
}

void MemoryAnalyzer::consume(std::span<const Event> events) {
    // The ledger takes runs of events at once (it prefetches ahead within a run); a run ends at
    // each OOM, which is explained with the state at the failure, before anything after it
    // changes the books.
    std::size_t run_start = 0;
    for (std::size_t i = 0; i < events.size(); ++i) {
        const Event& e = events[i];
        if (is_memory_event(e.kind)) {
            memory_events_ = true;
            if (e.kind == EventKind::kSegmentAlloc && (e.flags & kEventFlagExpandable) != 0) {
                expandable_ = true;
            }
        }
        if (e.kind == EventKind::kOutOfMemory) {
            ledger_.apply(events.subspan(run_start, i - run_start));
            on_oom(e);
            run_start = i;  // the OOM event itself opens the next run
        }
    }
    ledger_.apply(events.subspan(run_start));
}

void MemoryAnalyzer::end(const SourceSummary& /*summary*/) {}

void MemoryAnalyzer::on_oom(const Event& e) {
    memory_events_ = true;
    if ((e.flags & kEventFlagRetrySucceeded) != 0) {
        withdraw_oom(e);
        return;
    }
    ++ooms_seen_;
    Counted counted = Counted::kDuplicate;
    auto memory = static_cast<MemoryKind>(e.flags & kMemoryKindMask);
    std::uint16_t device = e.device;
    if (device == kNoDevice && memory != MemoryKind::kPinned && memory != MemoryKind::kPageable) {
        // A marker whose device the capture could not tell: the device, if the books hold one.
        std::vector<std::uint16_t> devices = ledger_.devices();
        if (devices.size() == 1) device = devices.front();
    }
    if (memory == MemoryKind::kPinned || memory == MemoryKind::kPageable) {
        ++host_ooms_;  // host RAM ran out, not the GPU: no device explanation applies
        counted = Counted::kHost;
    } else if (device == kNoDevice) {
        ++unplaced_ooms_;
        counted = Counted::kUnplaced;
    } else {
        std::size_t before = ooms_.size();
        explain_at(e, device);
        if (ooms_.size() > before) counted = Counted::kExplained;
    }
    if ((e.flags & kEventFlagRetryable) != 0 && e.oom.correlation != 0) {
        if (retryable_.size() >= 64) retryable_.erase(retryable_.begin());
        retryable_.push_back(Retryable{e.thread, e.oom.correlation, counted});
    }
}

void MemoryAnalyzer::explain_at(const Event& e, std::uint16_t device) {
    auto since = [](std::uint64_t a, std::uint64_t b) { return a > b ? a - b : b - a; };
    OomContext ctx;
    // torch records the driver's free bytes in the oom trace entry; 0 means "not recorded"
    // only when the source says nothing else, so a genuine 0 free is kept when total is known.
    ctx.device_free_known = e.oom.free_bytes != 0 || e.oom.total_bytes != 0;
    ctx.device_free_bytes = e.oom.free_bytes;
    ctx.expandable_segments = expandable_;
    ctx.strings = strings_;
    OomSeen seen{e.start_ns, e.thread,
                 (e.flags & kEventFlagRetryable) != 0 ? e.oom.correlation : 0u};
    // Callers such as cuDNN's algorithm search catch an OOM and retry, and one failure can be
    // seen both by CUPTI and by the framework: keep one explanation per device and request
    // size per second (a marker without a size matches any), the one that knows the size.
    for (std::size_t i = 0; i < ooms_.size(); ++i) {
        OomExplanation& x = ooms_[i];
        bool same_size = x.requested_bytes == e.oom.requested_bytes || x.requested_bytes == 0 ||
                         e.oom.requested_bytes == 0;
        if (x.device != device || !same_size ||
            since(e.start_ns, oom_seen_[i].time_ns) >= 1'000'000'000ull) {
            continue;
        }
        if (x.requested_bytes == 0 && e.oom.requested_bytes != 0) {
            if (e.oom.total_bytes != 0) ledger_.set_capacity(device, e.oom.total_bytes);
            x = explain_oom(e.oom.requested_bytes, device, ledger_, ctx);
            oom_seen_[i] = seen;
        }
        return;
    }
    if (ooms_.size() >= kMaxOomExplanations) return;
    if (e.oom.total_bytes != 0) ledger_.set_capacity(device, e.oom.total_bytes);
    ooms_.push_back(explain_oom(e.oom.requested_bytes, device, ledger_, ctx));
    oom_seen_.push_back(seen);
}

void MemoryAnalyzer::withdraw_oom(const Event& e) {
    auto it = std::find_if(retryable_.begin(), retryable_.end(), [&](const Retryable& r) {
        return r.thread == e.thread && r.correlation == e.oom.correlation;
    });
    if (it == retryable_.end()) return;  // its marker came before the input began
    ++retried_ooms_;
    if (ooms_seen_ > 0) --ooms_seen_;
    switch (it->counted) {
        case Counted::kHost: --host_ooms_; break;
        case Counted::kUnplaced: --unplaced_ooms_; break;
        case Counted::kExplained:
            for (std::size_t i = 0; i < oom_seen_.size(); ++i) {
                if (oom_seen_[i].correlation == it->correlation && oom_seen_[i].thread == it->thread) {
                    ooms_.erase(ooms_.begin() + static_cast<std::ptrdiff_t>(i));
                    oom_seen_.erase(oom_seen_.begin() + static_cast<std::ptrdiff_t>(i));
                    break;
                }
            }
            break;
        case Counted::kDuplicate: break;
    }
    retryable_.erase(it);
}

std::string MemoryAnalyzer::site_name(StringId id) const {
    if (id == kNoString) return "<unknown site>";
    if (id == StringTable::kOverflowString) return "<other sites>";
    std::string_view s = strings_ != nullptr ? strings_->lookup(id) : std::string_view();
    return s.empty() ? "<unknown site>" : std::string(s);
}

void MemoryAnalyzer::contribute(Report& report) {
    if (!memory_events_) return;
    std::vector<std::uint16_t> devices = ledger_.devices();
    Section s;
    s.id = "memory";
    s.title = "Device memory";

    LedgerTotals sum;
    LedgerPeaks peak_sum;
    DeviceLayout all;
    for (std::uint16_t dev : devices) {
        LedgerTotals t = ledger_.totals(dev);
        LedgerPeaks p = ledger_.peaks(dev);
        DeviceLayout l = ledger_.layout(dev);
        sum.reserved += t.reserved;
        sum.allocated_rounded += t.allocated_rounded;
        sum.allocated_requested += t.allocated_requested;
        sum.pending_free += t.pending_free;
        sum.live_blocks += t.live_blocks;
        sum.segments += t.segments;
        sum.outside_device += t.outside();
        sum.capacity += t.capacity;
        peak_sum.allocated_rounded += p.allocated_rounded;
        peak_sum.reserved += p.reserved;
        peak_sum.used += p.used;
        peak_sum.outside += p.outside;
        all.free_in_segments += l.free_in_segments;
        all.largest_free = std::max(all.largest_free, l.largest_free);
        all.releasable += l.releasable;
        all.inactive_split += l.inactive_split;
        all.free_blocks += l.free_blocks;
    }
    auto fig = [&](const char* key, double v, const char* unit, const char* label) {
        s.figures.push_back(Figure{key, v, unit, label});
    };
    fig("reserved_bytes", d(sum.reserved), "bytes", "reserved by the framework (its segments)");
    fig("allocated_requested_bytes", d(sum.allocated_requested), "bytes",
        "allocated, requested sizes (= _memory_viz.py stats 'allocated')");
    fig("allocated_rounded_bytes", d(sum.allocated_rounded), "bytes",
        "allocated, rounded block sizes (= torch.cuda.memory_allocated())");
    fig("free_bytes", d(sum.reserved - std::min(sum.reserved, sum.allocated_requested)), "bytes",
        "reserved minus allocated (requested) (= _memory_viz.py stats 'free')");
    fig("free_in_segments_bytes", d(all.free_in_segments), "bytes",
        "free blocks inside segments (inactive)");
    fig("rounding_waste_bytes", d(sum.allocated_rounded - std::min(sum.allocated_rounded, sum.allocated_requested)),
        "bytes", "allocated rounded minus requested (_memory_viz 'internal')");
    fig("pending_free_bytes", d(sum.pending_free), "bytes", "freed, awaiting stream completion");
    fig("largest_free_block_bytes", d(all.largest_free), "bytes", "largest free block in a segment");
    fig("external_fragmentation", all.external_fragmentation(), "fraction",
        "1 - largest free block / free in segments");
    fig("inactive_split_bytes", d(all.inactive_split), "bytes",
        "free blocks in partly used segments (empty_cache cannot return them)");
    fig("releasable_bytes", d(all.releasable), "bytes",
        "free in fully free segments (empty_cache returns them)");
    fig("outside_framework_bytes", d(sum.outside_device), "bytes",
        "device memory held outside the framework's allocator");
    if (const HostMemoryTotals& h = ledger_.host_totals(); h.seen) {
        // Shown only where the input reports such allocations (CUPTI does; snapshots do not):
        // a zero from a source that cannot see them would be an all-clear for data not seen.
        fig("pinned_host_bytes", d(h.pinned), "bytes", "pinned host memory (host RAM, not GPU memory)");
        fig("peak_pinned_host_bytes", d(h.peak_pinned), "bytes", "peak pinned host memory");
        fig("managed_bytes", d(h.managed), "bytes",
            "managed memory (migrates on demand; not counted as device memory)");
        fig("peak_managed_bytes", d(h.peak_managed), "bytes", "peak managed memory");
        if (h.peak_pageable != 0) {
            fig("pageable_host_bytes", d(h.pageable), "bytes", "pageable host memory CUDA reported");
        }
    }
    if (sum.capacity != 0) fig("capacity_bytes", d(sum.capacity), "bytes", "device capacity");
    fig("peak_allocated_bytes", d(peak_sum.allocated_rounded), "bytes", "peak allocated (rounded)");
    fig("peak_reserved_bytes", d(peak_sum.reserved), "bytes", "peak reserved");
    fig("peak_used_bytes", d(peak_sum.used), "bytes", "peak reserved + outside");
    fig("segments", d(sum.segments), "count", "segments");
    fig("live_blocks", d(sum.live_blocks), "count", "live blocks");
    fig("free_blocks", d(all.free_blocks), "count", "free blocks in segments");
    if (ledger_.unmatched_frees() > 0) {
        fig("unmatched_frees", d(ledger_.unmatched_frees()), "count",
            "frees of allocations the input never showed");
    }

    // Per-device table when there are several devices.
    if (devices.size() > 1) {
        Table t;
        t.id = "devices";
        t.title = "Memory by device";
        t.columns = {"device", "reserved", "allocated", "free in segments", "largest free",
                     "outside", "peak used"};
        for (std::uint16_t dev : devices) {
            LedgerTotals x = ledger_.totals(dev);
            DeviceLayout l = ledger_.layout(dev);
            t.rows.push_back({d(dev), bu(x.reserved), bu(x.allocated_rounded),
                              bu(l.free_in_segments), bu(l.largest_free), bu(x.outside()),
                              bu(ledger_.peaks(dev).used)});
        }
        s.tables.push_back(std::move(t));
    }

    for (std::uint16_t dev : devices) {
        std::string suffix = devices.size() > 1 ? " (device " + std::to_string(dev) + ")" : "";
        DeviceLayout l = ledger_.layout(dev);
        // Segments with the most free space first: where fragmentation or cache lives.
        std::vector<const SegmentLayout*> segs;
        for (const auto& sl : l.segments) segs.push_back(&sl);
        std::sort(segs.begin(), segs.end(), [](const SegmentLayout* a, const SegmentLayout* c) {
            return a->free_bytes != c->free_bytes ? a->free_bytes > c->free_bytes
                                                  : a->segment.address < c->segment.address;
        });
        if (!segs.empty()) {
            Table t;
            t.id = "segments";
            t.title = "Segments with the most free space" + suffix + " (top " +
                      std::to_string(std::min(segs.size(), kTopSegments)) + " of " +
                      std::to_string(segs.size()) + ")";
            t.columns = {"address", "size", "allocated", "free", "largest free", "free blocks",
                         "stream", "kind", "created at"};
            for (std::size_t i = 0; i < segs.size() && i < kTopSegments; ++i) {
                const SegmentLayout& x = *segs[i];
                t.rows.push_back({hex(x.segment.address), bu(x.segment.size),
                                  bu(x.segment.allocated - std::min(x.segment.allocated, x.segment.pending)),
                                  bu(x.free_bytes), bu(x.largest_free), d(x.free_blocks),
                                  d(x.segment.stream),
                                  std::string(x.segment.expandable ? "expandable"
                                              : x.segment.blocks == 0 ? "unused"
                                                                      : "split"),
                                  site_name(x.segment.site)});
            }
            s.tables.push_back(std::move(t));
        }
        // Live bytes by call site.
        std::vector<SiteUsage> sites = ledger_.sites(dev);
        std::sort(sites.begin(), sites.end(), [](const SiteUsage& a, const SiteUsage& c) {
            return a.live_bytes > c.live_bytes;
        });
        double live_total = 0;
        for (const auto& u : sites) live_total += std::max<double>(0, static_cast<double>(u.live_bytes));
        if (!sites.empty() && sites.front().live_bytes > 0) {
            Table t;
            t.id = "top_sites";
            t.title = "Live memory by allocation site" + suffix;
            t.columns = {"site", "live", "blocks", "share"};
            for (std::size_t i = 0; i < sites.size() && i < kTopSites && sites[i].live_bytes > 0; ++i) {
                t.rows.push_back({site_name(sites[i].site), b(static_cast<double>(sites[i].live_bytes)),
                                  d(sites[i].live_blocks),
                                  format_percent(static_cast<double>(sites[i].live_bytes) / live_total)});
            }
            s.tables.push_back(std::move(t));
        }
        // Growth by site over the recorded history (first to last checkpoint).
        std::vector<std::uint64_t> cps = ledger_.checkpoint_ticks(dev);
        if (cps.size() >= 2) {
            std::vector<std::pair<std::int64_t, StringId>> growth;
            for (const auto& u : sites) {
                std::vector<std::int64_t> v = ledger_.site_checkpoints(dev, u.site);
                if (v.empty()) continue;
                std::int64_t g = u.live_bytes - v.front();
                if (g > 0) growth.emplace_back(g, u.site);
            }
            std::sort(growth.begin(), growth.end(), std::greater<>());
            if (!growth.empty()) {
                double total = 0;
                for (const auto& [g, id] : growth) total += static_cast<double>(g);
                Table t;
                t.id = "growth_sites";
                t.title = "Sites whose live memory grew over the recorded history" + suffix;
                t.columns = {"site", "growth", "share", "live now"};
                for (std::size_t i = 0; i < growth.size() && i < kTopSites; ++i) {
                    std::int64_t live = 0;
                    for (const auto& u : sites) {
                        if (u.site == growth[i].second) live = u.live_bytes;
                    }
                    t.rows.push_back({site_name(growth[i].second),
                                      b(static_cast<double>(growth[i].first)),
                                      format_percent(static_cast<double>(growth[i].first) / total),
                                      b(static_cast<double>(live))});
                }
                s.tables.push_back(std::move(t));
            }
        }
        // Phases.
        std::vector<PhaseMark> phases = ledger_.phases(dev);
        if (!phases.empty()) {
            std::sort(phases.begin(), phases.end(), [](const PhaseMark& a, const PhaseMark& c) {
                return a.allocated_peak > c.allocated_peak;
            });
            Table t;
            t.id = "phases";
            t.title = "Peak memory by phase" + suffix;
            t.columns = {"phase", "runs", "peak allocated", "peak reserved", "largest growth"};
            for (std::size_t i = 0; i < phases.size() && i < kTopSites * 2; ++i) {
                const PhaseMark& p = phases[i];
                t.rows.push_back({site_name(p.name), d(p.runs), bu(p.allocated_peak),
                                  bu(p.reserved_peak),
                                  (p.allocated_growth_max < 0 ? "-" : "") +
                                      b(std::fabs(static_cast<double>(p.allocated_growth_max)))});
            }
            s.tables.push_back(std::move(t));
        }
        // Series for plots: seconds from the first point.
        std::vector<MemorySeriesPoint> pts = ledger_.series(dev);
        if (!pts.empty()) {
            Series alloc{"allocated" + (devices.size() > 1 ? "_" + std::to_string(dev) : ""),
                         "Allocated (peak per interval)" + suffix, "bytes", {}};
            Series res{"reserved" + (devices.size() > 1 ? "_" + std::to_string(dev) : ""),
                       "Reserved (peak per interval)" + suffix, "bytes", {}};
            Series out{"outside" + (devices.size() > 1 ? "_" + std::to_string(dev) : ""),
                       "Outside the framework" + suffix, "bytes", {}};
            std::uint64_t t0 = pts.front().start_ns;
            bool any_outside = false;
            for (const auto& p : pts) {
                double x = static_cast<double>(p.start_ns - t0) / 1e9;
                alloc.points.emplace_back(x, d(p.allocated_max));
                res.points.emplace_back(x, d(p.reserved_max));
                out.points.emplace_back(x, d(p.outside_last));
                any_outside = any_outside || p.outside_last != 0;
            }
            s.series.push_back(std::move(alloc));
            s.series.push_back(std::move(res));
            if (any_outside) s.series.push_back(std::move(out));
        }
        std::vector<StepMark> steps = ledger_.steps(dev);
        if (!steps.empty()) {
            Series sp{"step_peak_allocated" + (devices.size() > 1 ? "_" + std::to_string(dev) : ""),
                      "Peak allocated per step (x = step)" + suffix, "bytes", {}};
            Series sm{"step_min_allocated" + (devices.size() > 1 ? "_" + std::to_string(dev) : ""),
                      "Lowest allocated per step (x = step)" + suffix, "bytes", {}};
            double ordinal = 0;
            std::uint64_t max_peak = 0;
            for (const auto& st : steps) {
                sp.points.emplace_back(ordinal, d(st.allocated_peak));
                sm.points.emplace_back(ordinal, d(st.allocated_min));
                ordinal += st.steps;
                max_peak = std::max(max_peak, st.allocated_peak);
            }
            s.series.push_back(std::move(sp));
            s.series.push_back(std::move(sm));
            if (dev == devices.front()) {
                fig("steps", ordinal, "count", "steps with memory watermarks");
                fig("peak_step_allocated_bytes", d(max_peak), "bytes", "highest per-step peak allocated");
            }
        }
    }
    report.sections.push_back(std::move(s));

    for (const auto& x : ooms_) {
        Finding f;
        f.id = "out_of_memory";
        f.severity = Severity::kCritical;
        f.device = x.device;
        f.title = "Out of memory" +
                  (x.requested_bytes != 0 ? ": " + bu(x.requested_bytes) : std::string()) +
                  " on device " + std::to_string(x.device) +
                  (x.requested_bytes != 0 ? std::string() : std::string(", request size unknown")) +
                  " (" + oom_cause_name(x.cause) + ")";
        f.summary = x.summary;
        f.figures = {{"requested_bytes", d(x.requested_bytes), "bytes", "requested"},
                     {"device_free_bytes", d(x.device_free_bytes), "bytes", "free on the device"},
                     {"free_in_segments_bytes", d(x.free_in_segments_bytes), "bytes", "free inside segments"},
                     {"largest_free_block_bytes", d(x.largest_free_block_bytes), "bytes", "largest free block"},
                     {"reserved_bytes", d(x.reserved_bytes), "bytes", "reserved"},
                     {"allocated_bytes", d(x.allocated_bytes), "bytes", "allocated"},
                     {"inactive_split_bytes", d(x.inactive_split_bytes), "bytes", "free in partly used segments"},
                     {"outside_framework_bytes", d(x.outside_framework_bytes), "bytes", "outside the framework"}};
        f.site_unit = "bytes";
        for (const auto& [site, pinned] : x.pinning_sites) {
            f.sites.push_back(CallSite{site, d(pinned), x.free_in_segments_bytes == 0 ? 0.0 : d(pinned) / d(x.free_in_segments_bytes),
                                       "free bytes in the segments this site's live blocks split"});
        }
        f.evidence.push_back(std::string("cause: ") + oom_cause_name(x.cause));
        f.evidence.push_back(std::string("expandable segments: ") + (x.expandable_segments ? "on" : "off"));
        f.advice = x.advice;
        report.findings.push_back(std::move(f));
    }
    if (ooms_seen_ > ooms_.size() + host_ooms_ + unplaced_ooms_) {
        report.notes.push_back(std::to_string(ooms_seen_ - host_ooms_ - unplaced_ooms_) +
                               " out-of-memory events on devices; " +
                               std::to_string(ooms_.size()) + " distinct ones explained");
    }
    if (host_ooms_ > 0) {
        report.notes.push_back(std::to_string(host_ooms_) +
                               " pinned host allocations (cudaMallocHost, cudaHostAlloc, "
                               "cudaHostRegister) failed: host memory ran out, not GPU memory");
    }
    if (unplaced_ooms_ > 0) {
        report.notes.push_back(std::to_string(unplaced_ooms_) +
                               " allocations failed on a device the capture could not tell "
                               "(several devices in use, none seen for the failing thread); "
                               "they are not explained");
    }
    if (retried_ooms_ > 0) {
        report.notes.push_back(std::to_string(retried_ooms_) +
                               " failed allocations succeeded when their caller retried them "
                               "(a caching allocator freeing its cache): not out-of-memory errors");
    }
    for (std::uint16_t dev : devices) {
        add_device_findings(report, dev);
        add_leak_finding(report, dev);
    }
}

void MemoryAnalyzer::add_device_findings(Report& report, std::uint16_t dev) {
    LedgerTotals t = ledger_.totals(dev);
    LedgerPeaks p = ledger_.peaks(dev);
    DeviceLayout l = ledger_.layout(dev);
    const double reserved = d(t.reserved);
    // In a step-based program the cache between steps is what the next step's peak needs, so
    // "unused" is measured against the recent per-step peak; without steps, against now.
    std::uint64_t needed = t.allocated_rounded;
    std::vector<StepMark> steps = ledger_.steps(dev);
    for (std::size_t i = steps.size() > 4 ? steps.size() - 4 : 0; i < steps.size(); ++i) {
        needed = std::max(needed, steps[i].allocated_peak);
    }
    const double unused = t.reserved > needed ? d(t.reserved - needed) : 0.0;

    // Sites that created the free segments (the cache's origin).
    auto free_segment_sites = [&](bool whole_only) {
        std::map<StringId, std::uint64_t> by_site;
        for (const auto& sl : l.segments) {
            if (whole_only && sl.segment.blocks != 0) continue;
            by_site[sl.segment.site] += sl.free_bytes;
        }
        std::vector<std::pair<std::uint64_t, StringId>> v;
        for (const auto& [site, free] : by_site) {
            if (free > 0 && site != kNoString) v.emplace_back(free, site);
        }
        std::sort(v.begin(), v.end(), std::greater<>());
        return v;
    };

    bool fragmentation_oom = false;
    for (const auto& x : ooms_) {
        if (x.device == dev && x.cause == OomCause::kFragmentation) fragmentation_oom = true;
    }

    if (unused >= kUnusedMinBytes && unused >= kUnusedMinShare * reserved) {
        Finding f;
        f.id = "reserved_unused";
        f.device = dev;
        f.severity = t.capacity != 0 && reserved >= kNearOomShare * d(t.capacity) ? Severity::kCritical
                                                                                   : Severity::kWarning;
        const double releasable_share = unused > 0 ? d(l.releasable) / unused : 0;
        bool bloated = l.releasable >= l.inactive_split;
        f.title = "Reserved but unused: " + b(unused) + " of " + b(reserved) + " reserved is cached, " +
                  "only " + bu(t.allocated_rounded) + " allocated";
        f.summary = "The framework holds " + b(reserved) + " in " + std::to_string(t.segments) +
                    " segments but only " + bu(t.allocated_rounded) + " is in live blocks; " +
                    b(unused) + " is cached free memory. " +
                    (bloated ? bu(l.releasable) + " of it (" + format_percent(releasable_share) +
                                   ") is whole free segments, a bloated cache that "
                                   "torch.cuda.empty_cache() would return to the driver"
                             : bu(l.inactive_split) + " of it sits in partly used segments, "
                                   "which empty_cache() cannot return") +
                    ". This is cache, not a leak: the allocator reuses it for its own requests, "
                    "but other processes and libraries cannot use it. It is usually what is left "
                    "after a peak (peak allocated " + bu(p.allocated_rounded) + ").";
        f.figures = {{"reserved_bytes", reserved, "bytes", "reserved"},
                     {"allocated_bytes", d(t.allocated_rounded), "bytes", "allocated (rounded)"},
                     {"unused_bytes", unused, "bytes", "reserved but unallocated"},
                     {"releasable_bytes", d(l.releasable), "bytes", "in fully free segments"},
                     {"inactive_split_bytes", d(l.inactive_split), "bytes", "in partly used segments"},
                     {"largest_free_block_bytes", d(l.largest_free), "bytes", "largest free block"},
                     {"peak_allocated_bytes", d(p.allocated_rounded), "bytes", "peak allocated"},
                     {"needed_bytes", d(needed), "bytes",
                      "allocated now, or the recent per-step peak in step-based programs"}};
        f.evidence.push_back("reserved " + b(reserved) + " vs allocated " + bu(t.allocated_rounded) +
                             " (" + format_percent(unused / std::max(reserved, 1.0)) + " unused)");
        f.evidence.push_back("largest free block " + bu(l.largest_free) + " of " +
                             std::to_string(l.free_blocks) + " free blocks");
        f.site_unit = "bytes";
        for (const auto& [free, site] : free_segment_sites(true)) {
            if (f.sites.size() >= 5) break;
            f.sites.push_back(CallSite{site_name(site), d(free), d(free) / std::max(unused, 1.0),
                                       "free bytes in fully free segments this site created"});
        }
        if (bloated) {
            f.advice.push_back("If other processes or libraries need the memory, call "
                               "torch.cuda.empty_cache() after the peak (it returns " +
                               bu(l.releasable) + " here).");
            f.advice.push_back("To keep the cache bounded automatically, set "
                               "PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.8, or cap "
                               "the process with torch.cuda.set_per_process_memory_fraction().");
        } else {
            f.advice.push_back("The cached space is stranded in partly used segments: see the "
                               "fragmentation advice (expandable segments).");
        }
        f.advice.push_back("Lower the peak that filled the cache (the peak allocated was " +
                           bu(p.allocated_rounded) + ").");
        f.confidence = 1.0;
        report.findings.push_back(std::move(f));
    }

    const double split = d(l.inactive_split);
    const double split_frag = split > 0 ? 1.0 - d(l.largest_split_free) / split : 0;
    if (fragmentation_oom || (split >= kSplitMinBytes && split >= kSplitMinShare * reserved &&
                              split_frag >= kSplitMinFragmentation)) {
        Finding f;
        f.id = "fragmentation";
        f.device = dev;
        f.severity = fragmentation_oom ? Severity::kCritical : Severity::kWarning;
        f.title = "Fragmentation: " + b(split) + " free in partly used segments, largest hole " +
                  bu(l.largest_split_free);
        f.summary = b(split) + " of the " + b(reserved) +
                    " reserved is free but stranded between live blocks (" +
                    std::to_string(l.free_blocks) + " free blocks; external fragmentation " +
                    format_percent(l.external_fragmentation()) +
                    "). empty_cache() cannot return it and a request larger than " +
                    bu(l.largest_free) + " cannot use it" +
                    (fragmentation_oom ? "; an allocation failed because of it." : ".");
        f.figures = {{"inactive_split_bytes", split, "bytes", "free in partly used segments"},
                     {"free_in_segments_bytes", d(l.free_in_segments), "bytes", "free in segments"},
                     {"largest_free_block_bytes", d(l.largest_free), "bytes", "largest free block"},
                     {"external_fragmentation", l.external_fragmentation(), "fraction",
                      "1 - largest free / free"},
                     {"reserved_bytes", reserved, "bytes", "reserved"}};
        OomContext ctx;
        ctx.strings = strings_;
        ctx.expandable_segments = expandable_;
        OomExplanation pins = explain_oom(l.largest_free + 1, dev, ledger_, ctx);
        f.site_unit = "bytes";
        for (const auto& [site, pinned] : pins.pinning_sites) {
            f.sites.push_back(CallSite{site, d(pinned), split > 0 ? std::min(1.0, d(pinned) / split) : 0,
                                       "free bytes in the segments this site's live blocks split"});
        }
        if (!expandable_) {
            f.advice.push_back("Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (PYTORCH_ALLOC_CONF "
                               "on torch >= 2.9) so free pages can be remapped into one growing "
                               "segment instead of staying stranded.");
        } else {
            f.advice.push_back("Expandable segments are already on: the stranded space is pinned "
                               "by live blocks (sites listed); free or allocate them earlier.");
        }
        f.advice.push_back("Allocate large long-lived tensors before transient ones; avoid keeping "
                           "small tensors alive across phases that allocate large ones.");
        report.findings.push_back(std::move(f));
    }

    if (t.capacity != 0 && d(p.used) >= kNearOomShare * d(t.capacity)) {
        double share = d(p.used) / d(t.capacity);
        Finding f;
        f.id = "near_oom";
        f.device = dev;
        f.severity = share >= kNearOomCriticalShare ? Severity::kCritical : Severity::kWarning;
        f.title = "Near out of memory: peak " + bu(p.used) + " of " + bu(t.capacity) + " (" +
                  format_percent(share) + ")";
        f.summary = "At its peak the process held " + bu(p.used) + " of the device's " +
                    bu(t.capacity) + " (" + bu(p.reserved) + " reserved by the framework, " +
                    bu(p.outside) + " outside it). A larger batch, a longer sequence or a library "
                    "workspace would fail.";
        f.figures = {{"peak_used_bytes", d(p.used), "bytes", "peak used"},
                     {"capacity_bytes", d(t.capacity), "bytes", "capacity"},
                     {"peak_share", share, "fraction", "peak share of capacity"},
                     {"peak_allocated_bytes", d(p.allocated_rounded), "bytes", "peak allocated"}};
        f.advice.push_back("Register a watch at 90 % of capacity to drop caches before the limit "
                           "(gpudiag MemoryWatch), or reduce the peak (smaller batch, activation "
                           "checkpointing).");
        report.findings.push_back(std::move(f));
    }

    const double outside = d(std::max(p.outside, t.outside()));
    if (outside >= kOutsideMinBytes && outside >= kOutsideMinShare * d(std::max<std::uint64_t>(p.used, 1))) {
        Finding f;
        f.id = "memory_outside_framework";
        f.device = dev;
        f.severity = t.capacity != 0 && outside >= 0.25 * d(t.capacity) ? Severity::kWarning
                                                                       : Severity::kInfo;
        f.title = "Memory outside the framework: " + b(outside) + " (peak)";
        f.summary = b(outside) + " of device memory was held outside the framework's allocator "
                    "(plain cudaMalloc: " + bu(t.outside_device) + ", stream-ordered pools: " +
                    bu(t.outside_pool) + ", virtual-memory mappings: " + bu(t.outside_vm) +
                    " now). The framework's statistics do not include it, and its cache cannot "
                    "reuse it.";
        f.figures = {{"outside_framework_bytes", outside, "bytes", "peak outside"},
                     {"outside_now_bytes", d(t.outside()), "bytes", "outside now"},
                     {"reserved_bytes", reserved, "bytes", "reserved by the framework"}};
        f.advice.push_back("Check communication buffers (NCCL_BUFFSIZE), library workspaces "
                           "(CUBLAS_WORKSPACE_CONFIG) and other allocators in the process.");
        report.findings.push_back(std::move(f));
    }
}

void MemoryAnalyzer::add_leak_finding(Report& report, std::uint16_t dev) {
    std::vector<TrendPoint> pts;
    std::vector<std::uint64_t> times;  // start of each point, to locate the warm-up end in time
    bool per_step = false;
    std::vector<StepMark> steps = ledger_.steps(dev);
    double ordinal = 0;
    for (const auto& st : steps) ordinal += st.steps;
    if (ordinal >= kMinLeakSteps && steps.size() >= kMinLeakSteps) {
        per_step = true;
        double x = 0;
        for (const auto& st : steps) {
            // The lowest level within a step is the floor that persists: transient activations
            // do not raise it, kept tensors do.
            pts.push_back({x + st.steps / 2.0, d(st.allocated_min)});
            times.push_back(st.start_ns);
            x += st.steps;
        }
    } else if (!ledger_.has_steps(dev)) {
        std::vector<MemorySeriesPoint> series = ledger_.series(dev);
        if (series.size() < kMinLeakWindows) return;
        std::uint64_t t0 = series.front().start_ns;
        for (const auto& sp : series) {
            pts.push_back({static_cast<double>(sp.start_ns - t0) / 1e9, d(sp.allocated_min)});
            times.push_back(sp.start_ns);
        }
    } else {
        return;
    }
    TrendResult r = analyze_trend(pts);
    LedgerTotals t = ledger_.totals(dev);
    double floor = std::max({kLeakMinBytes, kLeakMinLevelShare * r.level,
                             kLeakMinCapacityShare * d(t.capacity)});
    if (!is_leak(r, floor)) return;

    // Attribute the growth: live bytes per site at the first checkpoint after the warm-up
    // versus now.
    std::uint64_t warm_end = r.warmup_points < times.size() ? times[r.warmup_points] : 0;
    std::vector<std::uint64_t> cps = ledger_.checkpoint_ticks(dev);
    std::size_t k0 = 0;
    while (k0 + 1 < cps.size() && cps[k0] < warm_end) ++k0;
    std::vector<std::pair<std::int64_t, StringId>> growth;
    for (const auto& u : ledger_.sites(dev)) {
        std::vector<std::int64_t> v = ledger_.site_checkpoints(dev, u.site);
        std::int64_t before = k0 < v.size() ? v[k0] : 0;
        std::int64_t g = u.live_bytes - before;
        if (g > 0) growth.emplace_back(g, u.site);
    }
    std::sort(growth.begin(), growth.end(), std::greater<>());
    double total_growth = 0;
    for (const auto& [g, id] : growth) total_growth += static_cast<double>(g);

    Finding f;
    f.id = "memory_leak";
    f.device = dev;
    f.severity = Severity::kWarning;
    f.confidence = std::clamp(1.0 - r.p_value, 0.0, 1.0);
    const std::string unit = per_step ? "bytes/step" : "bytes/hour";
    const double rate = per_step ? r.slope : r.slope * 3600.0;
    f.title = "Memory leak: allocated memory grows by " +
              (per_step ? b(rate) + " per step" : b(rate) + " per hour");
    std::string span = per_step ? std::to_string(static_cast<long long>(r.x_end - r.x_start)) + " steps"
                                : format_duration_ns((r.x_end - r.x_start) * 1e9);
    f.summary = "After a warm-up of " + std::to_string(r.warmup_points) + (per_step ? " step points" : " windows") +
                ", the lowest allocated level " + (per_step ? "per step" : "per window") +
                " keeps rising: " + b(r.growth) + " over " + span + " (Theil-Sen slope, "
                "Mann-Kendall p = " + format_number(r.p_value, 4) + ", rising in every third of the run).";
    if (t.capacity != 0 && r.slope > 0) {
        double left = d(t.capacity) - d(t.used());
        double units = left / r.slope;
        f.summary += per_step ? " At this rate the device fills in about " +
                                    std::to_string(static_cast<long long>(units)) + " more steps."
                              : " At this rate the device fills in about " +
                                    format_duration_ns(units * 1e9) + ".";
    }
    f.figures = {{"rate", rate, unit, "growth rate"},
                 {"growth_bytes", r.growth, "bytes", "growth over the analysed range"},
                 {"level_bytes", r.level, "bytes", "median level"},
                 {"p_value", r.p_value, "", "Mann-Kendall p-value (one-sided)"},
                 {"warmup_points", d(r.warmup_points), "count", "points dropped as warm-up"}};
    f.site_unit = "bytes";
    for (std::size_t i = 0; i < growth.size() && i < 5; ++i) {
        f.sites.push_back(CallSite{site_name(growth[i].second), static_cast<double>(growth[i].first),
                                   total_growth > 0 ? static_cast<double>(growth[i].first) / total_growth : 0,
                                   "live bytes gained since the warm-up"});
    }
    f.evidence.push_back("lowest allocated went from " + b(pts[r.warmup_points].y) + " to " +
                         b(pts.back().y));
    f.advice.push_back("Look at what the top sites keep alive across steps: tensors appended to "
                       "lists (losses kept with their graph: use loss.item() or .detach()), "
                       "caches keyed by step, or hooks that store activations.");
    f.advice.push_back("Confirm with a snapshot diff: torch.cuda.memory._snapshot() at two steps, "
                       "then compare live blocks by frame.");
    report.findings.push_back(std::move(f));
}

}  // namespace gpudiag::detail
