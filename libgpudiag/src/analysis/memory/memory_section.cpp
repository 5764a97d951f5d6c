// SPDX-License-Identifier: Apache-2.0
// The "memory" section: figures the input measured (a figure it cannot give is absent, and a
// note says why: add_memory_notes), the ledger's lines, what was live at the peak, tables and
// series for plots.
#include "analysis/memory/memory_summary.hpp"

#include "support/format.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace gpudiag::detail {
namespace {

constexpr std::size_t kTopSegments = 20;
constexpr std::size_t kTopSites = 10;
constexpr std::size_t kPeakRows = 15;
// The peak partition names this many sites (what one legend row of a plot holds with "other").
constexpr std::size_t kPeakPartsNamed = 3;

std::string b(double v) {
    return format_bytes(v);
}
std::string bu(std::uint64_t v) {
    return format_bytes(static_cast<double>(v));
}
double d(std::uint64_t v) {
    return static_cast<double>(v);
}

std::string hex(std::uint64_t v) {
    return fmt::format("{:#x}", v);
}

std::string suffix_for(const MemorySummary& s, std::uint16_t dev) {
    return s.devices.size() > 1 ? fmt::format(" (device {})", dev) : "";
}
std::string id_suffix(const MemorySummary& s, std::uint16_t dev) {
    return s.devices.size() > 1 ? fmt::format("_{}", dev) : "";
}

std::string kind_of(const SiteLine& l) {
    if (l.driver) return memory_owner_label(l.owner);
    return l.category == MemoryCategory::kOther
               ? "framework block"
               : std::string("framework block: ") + memory_category_name(l.category);
}

// What every device together measured, and sums of it.
struct Totals {
    LedgerTotals sum;
    LedgerPeaks peak;
    DeviceLayout layout;
    bool segments = false, blocks = false, exact_requested = true, allocated = false,
         reserved = false, driver = false, process = false, split_reported = false;
    std::uint64_t devices_with_capacity = 0;
    const char* allocated_source = "";
};

Totals totals_of(const MemorySummary& s) {
    Totals x;
    for (const auto& dev : s.devices) {
        const LedgerTotals& t = dev.totals;
        x.sum.reserved += t.reserved;
        x.sum.allocated_rounded += t.allocated_rounded;
        x.sum.allocated_requested += t.allocated_requested;
        x.sum.pending_free += t.pending_free;
        x.sum.live_blocks += t.live_blocks;
        x.sum.segments += t.segments;
        x.sum.outside_device += t.outside();  // (the sum of outside(), reported as one figure)
        x.sum.framework_attributed += t.framework_attributed;
        x.sum.capacity += t.capacity;
        x.sum.process_used += t.process_used;
        x.sum.inactive_split_reported += t.inactive_split_reported;
        x.peak.allocated_rounded += dev.peaks.allocated_rounded;
        x.peak.reserved += dev.peaks.reserved;
        x.peak.used += dev.peaks.used;
        x.peak.live += dev.peaks.live;
        x.peak.process_used += dev.peaks.process_used;
        x.layout.free_in_segments += dev.layout.free_in_segments;
        x.layout.largest_free = std::max(x.layout.largest_free, dev.layout.largest_free);
        x.layout.releasable += dev.layout.releasable;
        x.layout.private_pool_free += dev.layout.private_pool_free;
        x.layout.pending_blocks += dev.layout.pending_blocks;
        x.layout.inactive_split += dev.layout.inactive_split;
        x.layout.free_blocks += dev.layout.free_blocks;
        x.segments = x.segments || t.segments_seen;
        x.blocks = x.blocks || t.blocks_seen;
        x.allocated = x.allocated || dev.allocated_known();
        x.reserved = x.reserved || dev.reserved_known();
        // A source that reports host allocations through CUDA (CUPTI's memory records) sees the
        // driver-level ones too: none seen is a measured zero.
        x.driver = x.driver || t.driver_seen || s.host.seen;
        x.process = x.process || t.process_sampled;
        x.split_reported = x.split_reported || t.split_reported;
        if (t.allocated_reported || t.allocated_from_sizes) x.exact_requested = false;
        if (t.capacity != 0) ++x.devices_with_capacity;
        x.allocated_source =
            t.blocks_seen && !t.allocated_reported
                ? "allocated, rounded block sizes (= torch.cuda.memory_allocated())"
            : t.allocated_reported ? "allocated (the framework's own total)"
            : t.allocated_from_sizes
                ? "allocated (running sum of allocation sizes since the input began)"
                : x.allocated_source;
    }
    x.exact_requested = x.exact_requested && x.blocks;
    return x;
}

// Adds a figure to the section; high-water marks are declared as peaks (plots draw them as
// watermarks).
struct FigureAdder {
    Section& sec;
    void operator()(const char* key, double v, Unit unit, std::string label,
                    FigureKind kind = FigureKind::kGauge) const {
        sec.figures.push_back(Figure{key, v, unit, std::move(label), kind});
    }
};
constexpr FigureKind kPeak = FigureKind::kPeak;

// The framework's levels, by the definitions _memory_viz.py and torch use.
void add_level_figures(const Totals& x, Section& sec) {
    FigureAdder fig{sec};
    const LedgerTotals& t = x.sum;
    if (x.reserved)
        fig("reserved_bytes", d(t.reserved), Unit::kBytes,
            "reserved by the framework (its segments)");
    if (x.exact_requested) {
        fig("allocated_requested_bytes", d(t.allocated_requested), Unit::kBytes,
            "allocated, requested sizes (= _memory_viz.py stats 'allocated')");
    }
    if (x.allocated)
        fig("allocated_rounded_bytes", d(t.allocated_rounded), Unit::kBytes, x.allocated_source);
    if (x.segments && x.exact_requested) {
        fig("free_bytes", d(t.reserved - std::min(t.reserved, t.allocated_requested)), Unit::kBytes,
            "reserved minus allocated (requested) (= _memory_viz.py stats 'free')");
        fig("rounding_waste_bytes",
            d(t.allocated_rounded - std::min(t.allocated_rounded, t.allocated_requested)),
            Unit::kBytes, "allocated rounded minus requested (_memory_viz 'internal')");
    }
}

// What the segments and blocks measure (absent without them).
void add_layout_figures(const Totals& x, Section& sec) {
    FigureAdder fig{sec};
    const LedgerTotals& t = x.sum;
    if (x.segments) {
        fig("free_in_segments_bytes", d(x.layout.free_in_segments), Unit::kBytes,
            "free blocks inside segments (inactive)");
        fig("largest_free_block_bytes", d(x.layout.largest_free), Unit::kBytes,
            "largest free block in a segment");
        fig("external_fragmentation", x.layout.external_fragmentation(), Unit::kFraction,
            "1 - largest free block / free in segments");
        fig("inactive_split_bytes", d(x.layout.inactive_split), Unit::kBytes,
            "free blocks in partly used segments (fragmentation: empty_cache cannot return them)");
        fig("releasable_bytes", d(x.layout.releasable), Unit::kBytes,
            "free in wholly free segments (empty_cache returns them)");
        if (x.layout.private_pool_free > 0) {
            fig("private_pool_free_bytes", d(x.layout.private_pool_free), Unit::kBytes,
                "free in wholly free segments of private pools (returned once the pool is "
                "released)");
        }
        fig("segments", d(t.segments), Unit::kCount, "segments");
        fig("free_blocks", d(x.layout.free_blocks), Unit::kCount, "free blocks in segments");
    } else if (x.split_reported) {
        fig("inactive_split_bytes", d(t.inactive_split_reported), Unit::kBytes,
            "free blocks in partly used segments, the framework's figure (fragmentation)");
    }
    if (x.exact_requested) {  // with the framework's totals, blocks cover only the input's window
        fig("pending_free_bytes", d(t.pending_free), Unit::kBytes,
            "freed, awaiting stream completion");
        if (x.segments) {
            fig("pending_free_blocks", d(x.layout.pending_blocks), Unit::kCount,
                "blocks freed, awaiting stream completion (active_pending_free)");
        }
        fig("live_blocks", d(t.live_blocks), Unit::kCount, "live blocks");
    }
}

// What the process holds beyond the framework's levels, and the high-water marks.
void add_held_figures(const MemorySummary& s, const Totals& x, Section& sec) {
    FigureAdder fig{sec};
    const LedgerTotals& t = x.sum;
    if (x.driver) {
        fig("outside_framework_bytes", d(t.outside_device), Unit::kBytes,
            "device memory held outside the framework's allocator");
    }
    if (t.framework_attributed > 0) {
        fig("framework_driver_bytes", d(t.framework_attributed), Unit::kBytes,
            "driver allocations that are the framework's segments (counted once, as reserved)");
    }
    if (t.capacity != 0) {
        fig("capacity_bytes", d(t.capacity), Unit::kBytes,
            x.devices_with_capacity > 1 ? fmt::format("capacity of the {} devices the program used",
                                                      x.devices_with_capacity)
                                        : std::string("capacity of the device the program used"));
    }
    if (x.allocated)
        fig("peak_allocated_bytes", d(x.peak.allocated_rounded), Unit::kBytes,
            "peak allocated (rounded)", kPeak);
    if (x.reserved)
        fig("peak_reserved_bytes", d(x.peak.reserved), Unit::kBytes, "peak reserved", kPeak);
    if (x.reserved || x.driver)
        fig("peak_used_bytes", d(x.peak.used), Unit::kBytes, "peak reserved + outside", kPeak);
    if (x.allocated || x.driver) {
        fig("peak_live_bytes", d(x.peak.live), Unit::kBytes,
            "peak of live allocations (allocated + outside)", kPeak);
    }
    if (x.process) {
        fig("process_used_bytes", d(t.process_used), Unit::kBytes,
            "the process' device memory per NVML");
        fig("peak_process_used_bytes", d(x.peak.process_used), Unit::kBytes,
            "peak of the process per NVML", kPeak);
        std::uint64_t unattributed = 0;
        for (const auto& dev : s.devices) unattributed += dev.totals.unattributed();
        fig("unattributed_bytes", d(unattributed), Unit::kBytes,
            "NVML's per-process figure minus what the ledger attributes (CUDA context, unseen "
            "allocations)");
    }
    if (const HostMemoryTotals& h = s.host; h.seen) {
        // Shown only where the input reports such allocations (CUPTI does; snapshots do not):
        // a zero from a source that cannot see them would be an all-clear for data not seen.
        // Host RAM, not device memory: never plotted against the device's levels.
        fig("pinned_host_bytes", d(h.pinned), Unit::kBytes,
            "pinned host memory (host RAM, not GPU memory)");
        fig("peak_pinned_host_bytes", d(h.peak_pinned), Unit::kBytes, "peak pinned host memory");
        fig("managed_bytes", d(h.managed), Unit::kBytes,
            "managed memory (migrates on demand; not counted as device memory)");
        fig("peak_managed_bytes", d(h.peak_managed), Unit::kBytes, "peak managed memory");
        if (h.peak_pageable != 0)
            fig("pageable_host_bytes", d(h.pageable), Unit::kBytes,
                "pageable host memory CUDA reported");
    }
    if (s.unmatched_frees > 0) {
        fig("unmatched_frees", d(s.unmatched_frees), Unit::kCount,
            "frees of allocations the input never showed");
    }
}

// The leak rate as a section figure (exporters read sections): the fastest leak of any device.
void add_leak_figures(const MemorySummary& s, Section& sec) {
    const MemoryTrend* fastest = nullptr;
    for (const auto& dev : s.devices) {
        for (const auto& t : dev.trends) {
            if (t.leak &&
                (fastest == nullptr ||
                 (t.per_step == fastest->per_step ? t.rate > fastest->rate : t.per_step))) {
                fastest = &t;
            }
        }
    }
    if (fastest == nullptr) return;
    if (fastest->per_step) {
        sec.figures.push_back(
            {"leak_rate_bytes_per_step", fastest->rate, Unit::kBytesPerStep,
             std::string("memory leak rate (") + trend_metric_name(fastest->metric) + ")"});
    } else {
        sec.figures.push_back(
            {"leak_rate_bytes_per_second", fastest->rate, Unit::kBytesPerSecond,
             std::string("memory leak rate (") + trend_metric_name(fastest->metric) + ")"});
    }
    sec.figures.push_back(
        {"leak_growth_bytes", fastest->result.growth, Unit::kBytes, "growth since the leak began"});
}

void add_devices_table(const MemorySummary& s, Section& sec) {
    if (s.devices.size() < 2) return;
    Table t;
    t.id = "devices";
    t.title = "Memory by device";
    t.columns = {"device", "reserved", "allocated", "outside", "peak used", "capacity"};
    for (const auto& dev : s.devices) {
        const LedgerTotals& x = dev.totals;
        auto known = [](bool k, std::uint64_t v) -> Cell {
            return k ? Cell(bu(v)) : Cell(std::string("n/a"));
        };
        t.rows.push_back({d(dev.device), known(dev.reserved_known(), x.reserved),
                          known(dev.allocated_known(), x.allocated_rounded),
                          known(x.driver_seen, x.outside()), bu(dev.peaks.used),
                          known(x.capacity != 0, x.capacity)});
    }
    sec.tables.push_back(std::move(t));
}

// The reconciled ledger: every line now and at the peak of live allocations.
void add_ledger_table(const MemorySummary& s, const DeviceMemorySummary& dev, Section& sec) {
    const LedgerTotals& now = dev.totals;
    const LedgerTotals& then = dev.peaks.at_live_peak;
    Table t;
    t.id = "ledger";
    t.title = "Where the memory is" + suffix_for(s, dev.device);
    t.columns = {"line", "now", "at the peak"};
    auto row = [&](std::string line, std::uint64_t a, std::uint64_t p) {
        t.rows.push_back({std::move(line), bu(a), bu(p)});
    };
    if (dev.allocated_known())
        row("framework: allocated (live blocks)", now.allocated_rounded, then.allocated_rounded);
    if (dev.reserved_known()) {
        row("framework: reserved (segments)", now.reserved, then.reserved);
        if (dev.allocated_known())
            row("framework: cached, not allocated", now.unallocated(), then.unallocated());
    }
    if (now.framework_attributed > 0 || then.framework_attributed > 0) {
        row("  of reserved: driver allocations matched to it (not counted again)",
            now.framework_attributed, then.framework_attributed);
    }
    if (now.driver_seen) {
        for (std::size_t o = 0; o < kMemoryOwnerCount; ++o) {
            if (now.outside_by_owner[o] == 0 && then.outside_by_owner[o] == 0) continue;
            row(std::string("outside the framework: ") +
                    memory_owner_label(static_cast<MemoryOwner>(o)),
                now.outside_by_owner[o], then.outside_by_owner[o]);
        }
    }
    if (now.process_sampled) {
        row("NVML: the process", now.process_used, then.process_used);
        row("NVML minus the lines above (CUDA context, unseen allocations)", now.unattributed(),
            then.unattributed());
    }
    if (s.host.seen && &dev == &s.devices.front()) {
        // Process-wide lines (their "at the peak" column is their own peak).
        row("pinned host memory (process-wide, not device memory)", s.host.pinned,
            s.host.peak_pinned);
        if (s.host.peak_managed != 0) {
            row("managed memory (process-wide, migrates on demand)", s.host.managed,
                s.host.peak_managed);
        }
        if (s.host.peak_pageable != 0) {
            row("pageable host memory CUDA reported (process-wide)", s.host.pageable,
                s.host.peak_pageable);
        }
    }
    if (!t.rows.empty()) sec.tables.push_back(std::move(t));
}

struct PeakRow {
    std::string site, kind;
    double bytes;
};

// What was live at the peak of live allocations, by site, with the bytes the level counts but no
// site carries said so rather than left out; the rows add up to the peak.
std::vector<PeakRow> peak_rows(const DeviceMemorySummary& dev) {
    const LedgerPeaks& p = dev.peaks;
    std::vector<PeakRow> rows;
    double framework_sites = 0, driver_sites = 0, rest = 0;
    for (std::size_t i = 0; i < dev.peak_sites.size(); ++i) {
        const SiteLine& l = dev.peak_sites[i];
        (l.driver ? driver_sites : framework_sites) += l.bytes;
        if (i < kPeakRows) {
            rows.push_back({l.site, kind_of(l), l.bytes});
        } else {
            rest += l.bytes;
        }
    }
    if (rest > 0) rows.push_back({"<other sites>", "-", rest});
    // Bytes the level counts but no site carries (totals reported without blocks, driver memory
    // with no call site): said so rather than left out.
    const LedgerTotals& at = p.at_live_peak;
    double no_site_fw = std::max(0.0, d(at.allocated_rounded) - framework_sites);
    double no_site_driver = std::max(0.0, d(at.outside()) - driver_sites);
    if (no_site_fw > 0) rows.push_back({"<no block detail>", "framework allocated", no_site_fw});
    if (no_site_driver > 0)
        rows.push_back({"<no call site>", "outside the framework", no_site_driver});
    return rows;
}

// What was live at the peak: by site (and category or owner), then by category.
void add_peak_tables(const MemorySummary& s, const DeviceMemorySummary& dev, Section& sec) {
    const LedgerPeaks& p = dev.peaks;
    if (p.live == 0) return;
    const double when =
        dev.first_ns != 0 && p.live_ns > dev.first_ns ? d(p.live_ns - dev.first_ns) / 1e9 : 0;
    Table t;
    t.id = "peak_sites";
    t.title = "Live at the peak: " + bu(p.live) + ", " + format_duration_ns(when * 1e9) +
              " after the first event" + suffix_for(s, dev.device);
    t.columns = {"site", "kind", "bytes", "share"};
    t.units = {Unit::kNumber, Unit::kNumber, Unit::kBytes, Unit::kFraction};
    for (const PeakRow& r : peak_rows(dev))
        t.rows.push_back({r.site, r.kind, r.bytes, r.bytes / d(p.live)});
    sec.tables.push_back(std::move(t));
    sec.figures.push_back({"peak_live_time_ns" + id_suffix(s, dev.device), when * 1e9,
                           Unit::kNanoseconds,
                           "when the peak of live allocations was reached (from the first event)" +
                               suffix_for(s, dev.device)});
    if (!dev.categories_known) return;
    Table c;
    c.id = "peak_categories";
    c.title =
        "Live at the peak by what it holds (where the framework says)" + suffix_for(s, dev.device);
    c.columns = {"category", "bytes", "share"};
    c.units = {Unit::kNumber, Unit::kBytes, Unit::kFraction};
    for (std::size_t k = 0; k < kMemoryCategoryCount; ++k) {
        double v = dev.peak_by_category[k];
        if (v <= 0) continue;
        c.rows.push_back(
            {std::string(memory_category_name(static_cast<MemoryCategory>(k))), v, v / d(p.live)});
    }
    sec.tables.push_back(std::move(c));
}

// The peaks' composition as one partition (a row per device, its parts adding up to its peak):
// the largest sites over every device by name, the rest as one part, so a plot stacks them.
void add_peak_partition(const MemorySummary& s, Section& sec) {
    std::vector<std::pair<const DeviceMemorySummary*, std::vector<PeakRow>>> peaks;
    std::vector<std::pair<std::string, double>> by_site;
    for (const auto& dev : s.devices) {
        if (dev.peaks.live == 0) continue;
        peaks.emplace_back(&dev, peak_rows(dev));
        for (const PeakRow& r : peaks.back().second) {
            if (r.site == "<other sites>") continue;  // the part every site not named goes to
            auto it = std::find_if(by_site.begin(), by_site.end(),
                                   [&](const auto& e) { return e.first == r.site; });
            if (it == by_site.end()) {
                by_site.emplace_back(r.site, r.bytes);
            } else {
                it->second += r.bytes;
            }
        }
    }
    if (peaks.empty()) return;
    std::stable_sort(by_site.begin(), by_site.end(),
                     [](const auto& a, const auto& c) { return a.second > c.second; });
    if (by_site.size() > kPeakPartsNamed) by_site.resize(kPeakPartsNamed);
    Table t;
    t.id = "peak_by_site";
    t.title = "Live at the peak, by site";
    t.kind = TableKind::kPartition;
    t.columns = {"peak"};
    t.units = {Unit::kNumber};
    for (const auto& [site, bytes] : by_site) {
        t.columns.push_back(site);
        t.units.emplace_back(Unit::kBytes);
    }
    t.columns.emplace_back("other sites");
    t.units.emplace_back(Unit::kBytes);
    for (const auto& [dev, rows] : peaks) {
        std::vector<Cell> row{s.devices.size() > 1 ? fmt::format("device {}", dev->device)
                                                   : std::string("peak")};
        double named = 0;
        for (const auto& [site, total] : by_site) {
            double v = 0;
            for (const PeakRow& r : rows) v += r.site == site ? r.bytes : 0;
            row.emplace_back(v);
            named += v;
        }
        row.emplace_back(std::max(0.0, d(dev->peaks.live) - named));
        t.rows.push_back(std::move(row));
    }
    sec.tables.push_back(std::move(t));
}

void add_segment_table(const MemorySummary& s, const DeviceMemorySummary& dev, Section& sec) {
    std::vector<const SegmentLayout*> segs;
    for (const auto& sl : dev.layout.segments) segs.push_back(&sl);
    auto site_of = [&](const SegmentLayout* sl) {
        auto i = static_cast<std::size_t>(sl - dev.layout.segments.data());
        return i < dev.segment_sites.size() ? dev.segment_sites[i] : std::string("<unknown site>");
    };
    if (segs.empty()) return;
    // Segments with the most free space first: where fragmentation or cache lives.
    std::sort(segs.begin(), segs.end(), [](const SegmentLayout* a, const SegmentLayout* c) {
        return a->free_bytes != c->free_bytes ? a->free_bytes > c->free_bytes
                                              : a->segment.address < c->segment.address;
    });
    Table t;
    t.id = "segments";
    t.title =
        fmt::format("Segments with the most free space{} (top {} of {})", suffix_for(s, dev.device),
                    std::min(segs.size(), kTopSegments), segs.size());
    t.columns = {"address",     "size",   "allocated", "free",      "largest free",
                 "free blocks", "stream", "kind",      "created at"};
    for (std::size_t i = 0; i < segs.size() && i < kTopSegments; ++i) {
        const SegmentLayout& x = *segs[i];
        t.rows.push_back(
            {hex(x.segment.address), bu(x.segment.size),
             bu(x.segment.allocated - std::min(x.segment.allocated, x.segment.pending)),
             bu(x.free_bytes), bu(x.largest_free), d(x.free_blocks), d(x.segment.stream),
             std::string(x.segment.expandable    ? "expandable"
                         : x.segment.blocks == 0 ? "unused"
                                                 : "split"),
             site_of(segs[i])});
    }
    sec.tables.push_back(std::move(t));
}

// The allocator's pools, when a private one exists: what each holds and who filled it. Their
// bytes are the device's reserved and allocated figures split, not added to them.
void add_pool_table(const MemorySummary& s, const DeviceMemorySummary& dev, Section& sec) {
    if (dev.pools.empty()) return;
    Table t;
    t.id = "pools";
    t.title = "Allocator pools: the default and private ones (CUDA graphs, MemPool, a KV cache)" +
              suffix_for(s, dev.device);
    // Columns added before the owner keep the earlier ones where readers expect them.
    t.columns = {"pool",           "segments", "reserved", "allocated", "pending free",
                 "pending blocks", "free",     "torch id", "state",     "allocated by"};
    t.units = {Unit::kNumber, Unit::kCount, Unit::kBytes,  Unit::kBytes,  Unit::kBytes,
               Unit::kCount,  Unit::kBytes, Unit::kNumber, Unit::kNumber, Unit::kNumber};
    for (const PoolLine& p : dev.pools) {
        t.rows.push_back({p.pool == 0 ? std::string("default") : fmt::format("private {}", p.pool),
                          d(p.segments), d(p.reserved), d(p.allocated), d(p.pending),
                          d(p.pending_blocks), d(p.free),
                          p.torch_id.empty() ? std::string("-") : p.torch_id,
                          std::string(p.pool == 0 ? "shared"
                                      : p.idle()  ? "no live block: only the pool keeps it"
                                                  : "in use"),
                          p.pool == 0       ? std::string("shared (sites below)")
                          : p.owner.empty() ? std::string("<unknown site>")
                                            : p.owner});
    }
    sec.tables.push_back(std::move(t));
}

// Private pools of every device together, as figures (exporters and tests read figures): what
// they hold, their share of reserved memory now and at its peak, and what idle ones keep.
void add_pool_figures(const MemorySummary& s, Section& sec) {
    double pools = 0, reserved = 0, allocated = 0, idle = 0, idle_bytes = 0;
    double all_reserved = 0, peak_private = 0, peak_reserved = 0;
    for (const auto& dev : s.devices) {
        if (dev.pools.empty()) continue;
        all_reserved += d(dev.totals.reserved);
        peak_private += d(dev.peaks.private_pool_reserved);
        peak_reserved += d(dev.peaks.reserved);
        for (const PoolLine& p : dev.pools) {
            if (p.pool == 0) continue;
            ++pools;
            reserved += d(p.reserved);
            allocated += d(p.allocated);
            if (p.idle()) {
                ++idle;
                idle_bytes += d(p.reserved);
            }
        }
    }
    if (pools == 0) return;
    FigureAdder fig{sec};
    fig("private_pools", pools, Unit::kCount, "private pools (CUDA graphs, MemPool, a KV cache)");
    fig("private_pool_reserved_bytes", reserved, Unit::kBytes, "reserved in private pools");
    fig("private_pool_allocated_bytes", allocated, Unit::kBytes, "allocated in private pools");
    if (all_reserved > 0) {
        fig("private_pool_reserved_share", reserved / all_reserved, Unit::kFraction,
            "share of reserved held in private pools");
    }
    if (peak_reserved > 0) {
        fig("private_pool_reserved_share_at_peak", peak_private / peak_reserved, Unit::kFraction,
            "share of reserved held in private pools when reserved peaked");
    }
    if (idle > 0) {
        fig("idle_private_pools", idle, Unit::kCount,
            "private pools with segments but no live block");
        fig("idle_private_pool_bytes", idle_bytes, Unit::kBytes,
            "reserved by private pools with no live block (kept only by the pool)");
    }
}

void add_site_tables(const MemorySummary& s, const DeviceMemorySummary& dev, Section& sec) {
    double live_total = 0;
    for (const auto& l : dev.live_sites) live_total += l.bytes;
    if (!dev.live_sites.empty()) {
        Table t;
        t.id = "top_sites";
        t.title = "Live memory by allocation site" + suffix_for(s, dev.device);
        t.columns = {"site", "kind", "live", "blocks", "share"};
        for (const auto& l : dev.live_sites) {
            t.rows.push_back({l.site, kind_of(l), b(l.bytes), d(l.blocks),
                              format_percent(l.bytes / live_total)});
        }
        sec.tables.push_back(std::move(t));
    }
    if (!dev.growth_sites.empty()) {
        double total = 0;
        for (const auto& l : dev.growth_sites) total += l.bytes;
        Table t;
        t.id = "growth_sites";
        t.title =
            "Sites whose live memory grew over the recorded history" + suffix_for(s, dev.device);
        t.columns = {"site", "kind", "growth", "share"};
        for (const auto& l : dev.growth_sites) {
            t.rows.push_back({l.site, kind_of(l), b(l.bytes), format_percent(l.bytes / total)});
        }
        sec.tables.push_back(std::move(t));
    }
}

void add_phase_table(const MemorySummary& s, const DeviceMemorySummary& dev, Section& sec) {
    const std::vector<std::string>& names = dev.phase_names;
    if (dev.phases.empty()) return;
    std::vector<std::size_t> order(dev.phases.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t c) {
        return dev.phases[a].allocated_peak > dev.phases[c].allocated_peak;
    });
    Table t;
    t.id = "phases";
    t.title = "Peak memory by phase" + suffix_for(s, dev.device);
    t.columns = {"phase", "runs", "peak allocated", "peak reserved", "largest growth"};
    for (std::size_t k = 0; k < order.size() && k < kTopSites * 2; ++k) {
        const PhaseMark& p = dev.phases[order[k]];
        double growth = static_cast<double>(p.allocated_growth_max);
        t.rows.push_back({names[order[k]], d(p.runs), bu(p.allocated_peak), bu(p.reserved_peak),
                          (growth < 0 ? "-" : "") + b(std::abs(growth))});
    }
    sec.tables.push_back(std::move(t));
}

void add_series(const MemorySummary& s, const DeviceMemorySummary& dev, Section& sec) {
    const std::string suffix = suffix_for(s, dev.device);
    const std::string ids = id_suffix(s, dev.device);
    if (!dev.series.empty()) {
        Series alloc{"allocated" + ids, "Allocated (peak per interval)" + suffix, Unit::kBytes, {}};
        Series res{"reserved" + ids, "Reserved (peak per interval)" + suffix, Unit::kBytes, {}};
        Series out{"outside" + ids, "Outside the framework" + suffix, Unit::kBytes, {}};
        Series proc{"process" + ids, "The process per NVML" + suffix, Unit::kBytes, {}};
        const std::uint64_t t0 = dev.series.front().start_ns;
        bool any_outside = false, any_process = false;
        for (const auto& p : dev.series) {
            double x = d(p.start_ns - t0) / 1e9;
            alloc.points.emplace_back(x, d(p.allocated_max));
            res.points.emplace_back(x, d(p.reserved_max));
            out.points.emplace_back(x, d(p.outside_last));
            if (p.process_max > 0) proc.points.emplace_back(x, d(p.process_max));
            any_outside = any_outside || p.outside_last != 0;
            any_process = any_process || p.process_max != 0;
        }
        if (dev.allocated_known()) sec.series.push_back(std::move(alloc));
        if (dev.reserved_known()) sec.series.push_back(std::move(res));
        if (any_outside) sec.series.push_back(std::move(out));
        if (any_process) sec.series.push_back(std::move(proc));
    }
    if (dev.steps.empty() || !dev.allocated_known()) return;
    Series sp{"step_peak_allocated" + ids,
              "Peak allocated per step" + suffix,
              Unit::kBytes,
              {},
              Unit::kStep};
    Series sm{"step_min_allocated" + ids,
              "Lowest allocated per step" + suffix,
              Unit::kBytes,
              {},
              Unit::kStep};
    double ordinal = 0;
    std::uint64_t max_peak = 0;
    for (const auto& st : dev.steps) {
        sp.points.emplace_back(ordinal, d(st.allocated_peak));
        sm.points.emplace_back(ordinal, d(st.allocated_min));
        ordinal += st.steps;
        max_peak = std::max(max_peak, st.allocated_peak);
    }
    sec.series.push_back(std::move(sp));
    sec.series.push_back(std::move(sm));
    if (&dev == &s.devices.front()) {
        sec.figures.push_back({"steps", ordinal, Unit::kCount, "steps with memory watermarks"});
        sec.figures.push_back({"peak_step_allocated_bytes", d(max_peak), Unit::kBytes,
                               "highest per-step peak allocated", FigureKind::kPeak});
    }
}

// Watch crossings: the level, what emptying the cache could have done then, and the action.
void add_crossings_table(const MemorySummary& s, Section& sec) {
    if (s.crossings.empty()) return;
    Table t;
    t.id = "watch_crossings";
    t.title = fmt::format("Memory watch crossings ({})", s.crossings_total);
    t.columns = {"device",   "metric", "level", "value", "empty_cache could return",
                 "stranded", "action", "result"};
    for (const auto& c : s.crossings) {
        const MemoryWatchCrossing& x = c.crossing;
        std::string result =
            !c.action_recorded ? std::string("-")
            : !c.action_ok     ? "failed: " + c.detail
            : c.bytes_freed > 0
                ? "freed " + bu(c.bytes_freed) + (c.detail.empty() ? "" : "; " + c.detail)
                : (c.detail.empty() ? std::string("done") : c.detail);
        t.rows.push_back(
            {d(static_cast<std::uint64_t>(x.device)), std::string(memory_metric_name(x.metric)),
             bu(x.level_bytes), bu(x.value_bytes),
             x.cache_known ? Cell(bu(x.releasable_bytes)) : Cell(std::string("unknown")),
             x.cache_known ? Cell(bu(x.stranded_bytes)) : Cell(std::string("unknown")),
             c.action_recorded ? c.action : std::string("-"), result});
    }
    sec.tables.push_back(std::move(t));
}

}  // namespace

void add_memory_section(const MemorySummary& s, Report& report) {
    Section sec;
    sec.id = "memory";
    sec.title = "Device memory";
    Totals x = totals_of(s);
    add_level_figures(x, sec);
    add_layout_figures(x, sec);
    add_held_figures(s, x, sec);
    add_leak_figures(s, sec);
    add_pool_figures(s, sec);
    add_devices_table(s, sec);
    for (const auto& dev : s.devices) {
        add_ledger_table(s, dev, sec);
        add_pool_table(s, dev, sec);
        add_peak_tables(s, dev, sec);
        add_segment_table(s, dev, sec);
        add_site_tables(s, dev, sec);
        add_phase_table(s, dev, sec);
        add_series(s, dev, sec);
    }
    add_peak_partition(s, sec);
    add_crossings_table(s, sec);
    report.sections.push_back(std::move(sec));
}

}  // namespace gpudiag::detail
