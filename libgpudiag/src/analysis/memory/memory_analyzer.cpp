// SPDX-License-Identifier: Apache-2.0
// MemoryAnalyzer: events into the ledger, OOMs explained at their moment, then summarize() ->
// MemorySummary -> the section (memory_section.cpp) and the findings (memory_findings.cpp).
#include "analysis/memory/memory_analyzer.hpp"

#include "analysis/memory/memory_trend.hpp"
#include "analysis/memory/oom_explainer.hpp"

#include <algorithm>

namespace gpudiag::detail {
namespace {

// Callers such as cuDNN's algorithm search catch an OOM and retry, so one real failure can be
// reported many times within moments: a failure of the same size on the same device within a
// second of the previous one is that retry.
constexpr std::uint64_t kRetryWindowNs = 1'000'000'000ull;
constexpr std::size_t kMaxOomMoments = 32;
constexpr std::size_t kMaxOomGroups = 64;
constexpr std::size_t kTopSites = 10;

bool is_memory_counter(const Event& e) {
    if (e.kind != EventKind::kCounter || e.device == kNoDevice) return false;
    switch (e.counter.counter) {
        case CounterKind::kFrameworkAllocatedBytes:
        case CounterKind::kFrameworkReservedBytes:
        case CounterKind::kProcessMemoryUsedBytes: return true;
        default: return false;
    }
}

SiteLine line_of(const SiteUsage& u, std::string name, double bytes) {
    SiteLine l;
    l.site = std::move(name);
    l.driver = u.driver;
    l.category = u.category;
    l.owner = u.owner;
    l.bytes = bytes;
    l.blocks = u.live_blocks;
    return l;
}

void keep_top(std::vector<SiteLine>& v, std::size_t n) {
    std::sort(v.begin(), v.end(), [](const SiteLine& a, const SiteLine& b) {
        return a.bytes != b.bytes ? a.bytes > b.bytes : a.site < b.site;
    });
    if (v.size() > n) v.resize(n);
}

}  // namespace

MemoryAnalyzer::MemoryAnalyzer() = default;

void MemoryAnalyzer::begin(const SourceInfo& info, const StringTable& strings) {
    strings_ = &strings;
    ledger_.set_strings(&strings);
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
            observed_ = true;
            if (e.kind == EventKind::kSegmentAlloc && (e.flags & kEventFlagExpandable) != 0) {
                expandable_ = true;
            }
        } else if (is_memory_counter(e)) {
            observed_ = true;
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

// An OOM seen by CUPTI carries no device: it is the device the process allocates on when there
// is one, else the one whose books changed last (the failing call came from the thread that was
// allocating).
std::uint16_t MemoryAnalyzer::oom_device(const Event& e, bool& inferred) const {
    inferred = false;
    if (e.device != kNoDevice) return e.device;
    std::vector<std::uint16_t> devices = ledger_.devices();
    if (devices.empty()) return kNoDevice;
    inferred = true;
    std::uint16_t best = devices.front();
    std::uint64_t latest = 0;
    for (std::uint16_t dev : devices) {
        std::vector<MemorySeriesPoint> s = ledger_.series(dev);
        std::uint64_t last = s.empty() ? 0 : s.back().start_ns;
        if (last >= latest) {
            latest = last;
            best = dev;
        }
    }
    return best;
}

void MemoryAnalyzer::on_oom(const Event& e) {
    ++oom_events_;
    observed_ = true;
    bool inferred = false;
    std::uint16_t device = oom_device(e, inferred);
    if (device != kNoDevice && e.oom.total_bytes != 0) ledger_.set_capacity(device, e.oom.total_bytes);
    auto group = std::find_if(ooms_.begin(), ooms_.end(),
                              [&](const OomGroup& g) { return g.device == device; });
    if (group != ooms_.end()) {
        bool retry = e.start_ns - group->last_ns < kRetryWindowNs &&
                     e.oom.requested_bytes == group->last_request;
        group->last_ns = std::max(group->last_ns, e.start_ns);
        group->last_request = e.oom.requested_bytes;
        if (retry) return;
        ++group->count;
        if (group->moments.size() < kMaxOomMoments) group->moments.push_back(e.start_ns);
        if (e.oom.requested_bytes != 0) {
            group->smallest_request = group->smallest_request == 0
                                          ? e.oom.requested_bytes
                                          : std::min(group->smallest_request, e.oom.requested_bytes);
            group->largest_request = std::max(group->largest_request, e.oom.requested_bytes);
        }
        return;
    }
    if (ooms_.size() >= kMaxOomGroups) return;
    OomGroup g;
    g.device = device;
    g.device_inferred = inferred;
    g.count = 1;
    g.moments.push_back(e.start_ns);
    g.first_ns = g.last_ns = e.start_ns;
    g.smallest_request = g.largest_request = g.last_request = e.oom.requested_bytes;
    if (device != kNoDevice) {
        OomContext ctx;
        // torch records the driver's free bytes in the oom trace entry; 0 means "not recorded"
        // only when the source says nothing else, so a genuine 0 free is kept when total is known.
        ctx.device_free_known = e.oom.free_bytes != 0 || e.oom.total_bytes != 0;
        ctx.device_free_bytes = e.oom.free_bytes;
        ctx.expandable_segments = expandable_;
        ctx.strings = strings_;
        g.explanation = explain_oom(e.oom.requested_bytes, device, ledger_, ctx);
    } else {
        g.explanation.requested_bytes = e.oom.requested_bytes;
        g.explanation.summary = "An allocation failed, but no device's memory was observed, so it "
                                "cannot be explained.";
    }
    ooms_.push_back(std::move(g));
}

std::string MemoryAnalyzer::site_name(StringId id) const {
    if (id == kNoString) return "<unknown site>";
    if (id == StringTable::kOverflowString) return "<other sites>";
    std::string_view s = strings_ != nullptr ? strings_->lookup(id) : std::string_view();
    return s.empty() ? "<unknown site>" : std::string(s);
}

DeviceMemorySummary MemoryAnalyzer::summarize_device(std::uint16_t dev) const {
    DeviceMemorySummary d;
    d.device = dev;
    d.totals = ledger_.totals(dev);
    d.peaks = ledger_.peaks(dev);
    if (d.totals.segments_seen) {
        d.layout = ledger_.layout(dev);
        for (const auto& sl : d.layout.segments) d.segment_sites.push_back(site_name(sl.segment.site));
    }
    d.steps = ledger_.steps(dev);
    for (const auto& st : d.steps) d.total_steps += st.steps;
    if (d.total_steps > 0 && d.steps.back().end_ns > d.steps.front().start_ns) {
        d.step_ns = static_cast<double>(d.steps.back().end_ns - d.steps.front().start_ns) /
                    static_cast<double>(d.total_steps);
    }
    d.phases = ledger_.phases(dev);
    for (const auto& p : d.phases) d.phase_names.push_back(site_name(p.name));
    d.series = ledger_.series(dev);
    if (!d.series.empty()) d.first_ns = d.series.front().start_ns;
    d.period = ledger_.period(dev, kMinRepetitions);

    std::vector<std::uint64_t> cps = ledger_.checkpoint_ticks(dev);
    for (const SiteUsage& u : ledger_.sites(dev)) {
        if (u.live_bytes > 0) d.live_sites.push_back(line_of(u, site_name(u.site), static_cast<double>(u.live_bytes)));
        if (u.at_peak > 0) {
            d.peak_sites.push_back(line_of(u, site_name(u.site), static_cast<double>(u.at_peak)));
            if (!u.driver) {
                d.peak_by_category[static_cast<std::size_t>(u.category)] += static_cast<double>(u.at_peak);
                d.categories_known = d.categories_known || u.category != MemoryCategory::kOther;
            }
        }
        if (cps.size() >= 2) {
            std::vector<std::int64_t> v = ledger_.site_checkpoints(dev, u.slot);
            std::int64_t g = v.empty() ? 0 : u.live_bytes - v.front();
            if (g > 0) d.growth_sites.push_back(line_of(u, site_name(u.site), static_cast<double>(g)));
        }
    }
    keep_top(d.live_sites, kTopSites);
    keep_top(d.growth_sites, kTopSites);
    std::sort(d.peak_sites.begin(), d.peak_sites.end(),
              [](const SiteLine& a, const SiteLine& b) { return a.bytes > b.bytes; });

    // In a step-based program the cache between steps is what the next step's peak needs, so
    // "unused" is measured against the recent per-step peak; without steps, against now.
    d.needed = d.totals.allocated_rounded;
    for (std::size_t i = d.steps.size() > 4 ? d.steps.size() - 4 : 0; i < d.steps.size(); ++i) {
        d.needed = std::max(d.needed, d.steps[i].allocated_peak);
    }
    for (const auto& g : ooms_) {
        if (g.device == dev && g.explanation.cause == OomCause::kFragmentation) d.fragmentation_oom = true;
    }
    if (d.totals.segments_seen) {
        OomContext ctx;
        ctx.strings = strings_;
        ctx.expandable_segments = expandable_;
        d.pinning_sites = explain_oom(d.layout.largest_free + 1, dev, ledger_, ctx).pinning_sites;
    }
    d.trends = compute_trends(ledger_, d, [this](StringId id) { return site_name(id); });
    return d;
}

MemorySummary MemoryAnalyzer::summarize() const {
    MemorySummary s;
    s.observed = observed_;
    for (std::uint16_t dev : ledger_.devices()) s.devices.push_back(summarize_device(dev));
    s.ooms = ooms_;
    s.oom_events = oom_events_;
    s.crossings = ledger_.crossings();
    s.crossings_total = ledger_.crossings_total();
    s.expandable = expandable_;
    s.pinned_seen = ledger_.pinned_host_seen();
    s.pinned_host = ledger_.pinned_host();
    s.pinned_host_peak = ledger_.pinned_host_peak();
    s.unmatched_frees = ledger_.unmatched_frees();
    return s;
}

void MemoryAnalyzer::contribute(Report& report) {
    MemorySummary s = summarize();
    add_memory_notes(s, report);
    if (!s.observed) return;
    add_memory_section(s, report);
    add_memory_findings(s, report);
}

}  // namespace gpudiag::detail
