// SPDX-License-Identifier: Apache-2.0
// MemoryAnalyzer: events into the ledger, OOMs explained at their moment, then summarize() ->
// MemorySummary -> the section (memory_section.cpp) and the findings (memory_findings.cpp).
#include "analysis/memory/memory_analyzer.hpp"

#include "analysis/allocator/allocator_versions.hpp"
#include "analysis/allocator/allocator_whatif.hpp"
#include "analysis/findings/finding_catalog.hpp"
#include "analysis/memory/memory_trend.hpp"
#include "analysis/memory/oom_explainer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <string>
#include <string_view>
#include <utility>

namespace gpudiag::detail {
namespace {

constexpr std::size_t kMaxOomMoments = 32;
constexpr std::size_t kMaxOomGroups = 64;
// Retryable markers waiting for a withdrawal: one is withdrawn within moments or never.
constexpr std::size_t kMaxRetryable = 64;
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

// The n of a property "private_pool.<n><suffix>", 0 for other keys.
std::uint32_t private_pool_of(std::string_view key, std::string_view suffix) {
    constexpr std::string_view kPrefix = "private_pool.";
    if (key.size() <= kPrefix.size() + suffix.size() || key.substr(0, kPrefix.size()) != kPrefix ||
        key.substr(key.size() - suffix.size()) != suffix) {
        return 0;
    }
    key = key.substr(kPrefix.size(), key.size() - kPrefix.size() - suffix.size());
    std::uint32_t pool = 0;
    auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), pool);
    return ec == std::errc() && end == key.data() + key.size() ? pool : 0;
}

}  // namespace

MemoryAnalyzer::MemoryAnalyzer(std::size_t history_ops) : history_(history_ops) {}

void MemoryAnalyzer::begin(const SourceInfo& info, const StringTable& strings) {
    history_.begin(info, strings);
    strings_ = &strings;
    ledger_.set_strings(&strings);
    expandable_ = info.property("expandable_segments") == "true";
    pool_owners_.clear();
    pool_ids_.clear();
    for (const auto& [key, value] : info.properties) {
        if (const std::uint32_t pool = private_pool_of(key, ".owner"); pool != 0) {
            pool_owners_[pool] = value;
        } else if (const std::uint32_t id_of = private_pool_of(key, ".id"); id_of != 0) {
            pool_ids_[id_of] = value;
        }
    }
    for (const auto& dev : info.devices) {
        if (dev.total_memory_bytes != 0) ledger_.set_capacity(dev.ordinal, dev.total_memory_bytes);
    }
}

void MemoryAnalyzer::consume(std::span<const Event> events) {
    history_.consume(events);
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

void MemoryAnalyzer::end(const SourceSummary& summary) {
    history_.end(summary);
    const double seen = static_cast<double>(summary.events + summary.dropped);
    dropped_share_ = seen > 0 ? static_cast<double>(summary.dropped) / seen : 0;
}

// An OOM marker whose device the capture could not tell (CUPTI sees the failed call, not the
// device its caller meant) is the device in the books when there is one; with several it is not
// placed, since explaining it from the wrong device's books would be worse than saying so.
std::uint16_t MemoryAnalyzer::oom_device(const Event& e, bool& inferred) const {
    inferred = false;
    if (e.device != kNoDevice) return e.device;
    std::vector<std::uint16_t> devices = ledger_.devices();
    if (devices.size() != 1) return kNoDevice;
    inferred = true;
    return devices.front();
}

void MemoryAnalyzer::on_oom(const Event& e) {
    observed_ = true;
    if ((e.flags & kEventFlagRetrySucceeded) != 0) {
        withdraw_oom(e);
        return;
    }
    ++oom_events_;
    const auto memory = static_cast<MemoryKind>(e.flags & kMemoryKindMask);
    Counted counted = Counted::kHost;
    std::uint16_t device = kNoDevice;
    if (memory == MemoryKind::kPinned || memory == MemoryKind::kPageable) {
        ++host_ooms_;  // host RAM ran out, not the GPU: no device explanation applies
    } else {
        bool inferred = false;
        device = oom_device(e, inferred);
        if (device == kNoDevice) {
            ++unplaced_ooms_;
            counted = Counted::kUnplaced;
        } else {
            counted = count_oom(e, device, inferred);
        }
    }
    if ((e.flags & kEventFlagRetryable) != 0 && e.oom.correlation != 0) {
        if (retryable_.size() >= kMaxRetryable) retryable_.erase(retryable_.begin());
        retryable_.push_back(Retryable{e.thread, e.oom.correlation, counted, device, e.start_ns});
    }
}

OomExplanation MemoryAnalyzer::explain_now(const Event& e, std::uint16_t device) const {
    OomContext ctx;
    // torch records the driver's free bytes in the oom trace entry; 0 means "not recorded"
    // only when the source says nothing else, so a genuine 0 free is kept when total is known.
    ctx.device_free_known = e.oom.free_bytes != 0 || e.oom.total_bytes != 0;
    ctx.device_free_bytes = e.oom.free_bytes;
    ctx.expandable_segments = expandable_;
    // A setting this program cannot use is named with its reason, never advised.
    ctx.expandable_unsupported =
        expandable_unsupported_reason(history_.facts(), select_version(history_.info(), ""));
    ctx.strings = strings_;
    return explain_oom(e.oom.requested_bytes, device, ledger_, ctx);
}

// Joins the failure to its device's group. One failure can be seen several times within moments:
// callers such as cuDNN's algorithm search catch an OOM and retry the same request, and one
// failure can reach the input both from CUPTI (often without its size) and from the framework's
// OOM hook. A failure within a second of the group's last one, of the same size or with either
// size unknown, is that same failure; the sighting that knows the size explains it.
MemoryAnalyzer::Counted MemoryAnalyzer::count_oom(const Event& e, std::uint16_t device,
                                                  bool inferred) {
    if (e.oom.total_bytes != 0) ledger_.set_capacity(device, e.oom.total_bytes);
    const std::uint64_t request = e.oom.requested_bytes;
    auto group = std::find_if(ooms_.begin(), ooms_.end(),
                              [&](const OomGroup& g) { return g.device == device; });
    if (group == ooms_.end()) {
        if (ooms_.size() >= kMaxOomGroups) return Counted::kDuplicate;
        OomGroup g;
        g.device = device;
        g.device_inferred = inferred;
        g.count = 1;
        g.moments.push_back(e.start_ns);
        g.first_ns = g.last_ns = e.start_ns;
        g.smallest_request = g.largest_request = g.last_request = request;
        g.explanation = explain_now(e, device);
        ooms_.push_back(std::move(g));
        return Counted::kNewGroup;
    }
    OomGroup& g = *group;
    const std::uint64_t apart =
        e.start_ns > g.last_ns ? e.start_ns - g.last_ns : g.last_ns - e.start_ns;
    const bool same_size = request == g.last_request || request == 0 || g.last_request == 0;
    const bool seen_again = apart < kOomRetryWindowNs && same_size;
    g.last_ns = std::max(g.last_ns, e.start_ns);
    if (request != 0) g.last_request = request;
    if (seen_again) {
        if (g.count == 1 && g.explanation.requested_bytes == 0 && request != 0) {
            g.explanation = explain_now(e, device);
            g.device_inferred = inferred;
            g.smallest_request = g.largest_request = request;
        }
        return Counted::kDuplicate;
    }
    ++g.count;
    if (g.moments.size() < kMaxOomMoments) g.moments.push_back(e.start_ns);
    if (request != 0) {
        g.smallest_request =
            g.smallest_request == 0 ? request : std::min(g.smallest_request, request);
        g.largest_request = std::max(g.largest_request, request);
    }
    return Counted::kJoinedGroup;
}

// A retryable marker whose caller's retry then succeeded was no out-of-memory error: everything
// it added is taken back.
void MemoryAnalyzer::withdraw_oom(const Event& e) {
    auto it = std::find_if(retryable_.begin(), retryable_.end(), [&](const Retryable& r) {
        return r.thread == e.thread && r.correlation == e.oom.correlation;
    });
    if (it == retryable_.end()) return;  // its marker came before the input began
    const Retryable r = *it;
    retryable_.erase(it);
    ++retried_ooms_;
    if (oom_events_ > 0) --oom_events_;
    switch (r.counted) {
        case Counted::kHost: --host_ooms_; return;
        case Counted::kUnplaced: --unplaced_ooms_; return;
        case Counted::kDuplicate: return;
        case Counted::kNewGroup:
        case Counted::kJoinedGroup: break;
    }
    auto group = std::find_if(ooms_.begin(), ooms_.end(),
                              [&](const OomGroup& g) { return g.device == r.device; });
    if (group == ooms_.end()) return;
    if (group->count <= 1) {
        ooms_.erase(group);
        return;
    }
    // Later failures joined the group: it stays, one failure fewer. (Its explanation keeps the
    // state at the withdrawn marker, the closest moment to them the books still have.)
    --group->count;
    auto moment = std::find(group->moments.begin(), group->moments.end(), r.time_ns);
    if (moment != group->moments.end()) group->moments.erase(moment);
}

std::string MemoryAnalyzer::site_name(StringId id) const {
    if (id == kNoString) return "<unknown site>";
    if (id == StringTable::kOverflowString) return "<other sites>";
    std::string_view s = strings_ != nullptr ? strings_->lookup(id) : std::string_view();
    return s.empty() ? "<unknown site>" : std::string(s);
}

DeviceMemorySummary MemoryAnalyzer::summarize_device(std::uint16_t dev) const {
    DeviceMemorySummary d;
    d.history_cut = history_.info().property(fmt::format("snapshot_history_cut.{}", dev)) == "true";
    d.device = dev;
    d.totals = ledger_.totals(dev);
    d.peaks = ledger_.peaks(dev);
    if (d.totals.segments_seen) {
        d.layout = ledger_.layout(dev);
        for (const auto& sl : d.layout.segments)
            d.segment_sites.push_back(site_name(sl.segment.site));
        d.pools = pools_of(dev, d.layout);
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
        if (u.live_bytes > 0)
            d.live_sites.push_back(
                line_of(u, site_name(u.site), static_cast<double>(u.live_bytes)));
        if (u.at_peak > 0) {
            d.peak_sites.push_back(line_of(u, site_name(u.site), static_cast<double>(u.at_peak)));
            if (!u.driver) {
                d.peak_by_category[static_cast<std::size_t>(u.category)] +=
                    static_cast<double>(u.at_peak);
                d.categories_known = d.categories_known || u.category != MemoryCategory::kOther;
            }
        }
        if (cps.size() >= 2) {
            std::vector<std::int64_t> v = ledger_.site_checkpoints(dev, u.slot);
            std::int64_t g = v.empty() ? 0 : u.live_bytes - v.front();
            if (g > 0)
                d.growth_sites.push_back(line_of(u, site_name(u.site), static_cast<double>(g)));
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
        if (g.device == dev && g.explanation.cause == OomCause::kFragmentation)
            d.fragmentation_oom = true;
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

// The pools' figures from the segments' layout, and each private pool's owner: as the source
// named it, else the site holding the most live bytes in it.
std::vector<PoolLine> MemoryAnalyzer::pools_of(std::uint16_t device,
                                               const DeviceLayout& layout) const {
    std::map<std::uint32_t, PoolLine> by_pool;
    for (const SegmentLayout& sl : layout.segments) {
        const LedgerSegment& seg = sl.segment;
        PoolLine& p = by_pool[seg.pool];
        p.pool = seg.pool;
        ++p.segments;
        p.reserved += seg.size;
        p.allocated += seg.allocated - std::min(seg.allocated, seg.pending);
        p.pending += seg.pending;
        p.pending_blocks += seg.pending_blocks;
        p.free += sl.free_bytes;
    }
    if (by_pool.size() < 2 && (by_pool.empty() || by_pool.begin()->first == 0)) return {};
    // Live bytes by (pool, site), for pools the source did not name an owner of.
    std::map<std::pair<std::uint32_t, StringId>, std::uint64_t> site_bytes;
    for (const LedgerBlock& b : ledger_.blocks(device)) {
        auto it = std::upper_bound(
            layout.segments.begin(), layout.segments.end(), b.address,
            [](std::uint64_t a, const SegmentLayout& sl) { return a < sl.segment.address; });
        if (it == layout.segments.begin()) continue;
        const LedgerSegment& seg = std::prev(it)->segment;
        if (seg.pool == 0 || b.address - seg.address >= seg.size || b.pending) continue;
        site_bytes[{seg.pool, b.site}] += b.size;
    }
    std::vector<PoolLine> out;
    for (auto& [pool, line] : by_pool) {
        if (auto id = pool_ids_.find(pool); id != pool_ids_.end()) line.torch_id = id->second;
        if (pool == 0 && !pool_ids_.empty()) line.torch_id = "(0, 0)";
        if (pool != 0) {
            if (auto named = pool_owners_.find(pool); named != pool_owners_.end()) {
                line.owner = named->second;
                line.owner_from_frames = true;
            } else {
                std::uint64_t most = 0;
                for (const auto& [key, bytes] : site_bytes) {
                    if (key.first != pool || bytes <= most) continue;
                    most = bytes;
                    line.owner = site_name(key.second);
                }
            }
        }
        out.push_back(std::move(line));
    }
    return out;
}

MemorySummary MemoryAnalyzer::summarize() const {
    MemorySummary s;
    s.observed = observed_;
    for (std::uint16_t dev : ledger_.devices()) s.devices.push_back(summarize_device(dev));
    s.ooms = ooms_;
    s.oom_events = oom_events_;
    s.dropped_share = dropped_share_;
    s.crossings = ledger_.crossings();
    s.crossings_total = ledger_.crossings_total();
    s.expandable = expandable_;
    s.host = ledger_.host_totals();
    s.host_ooms = host_ooms_;
    s.unplaced_ooms = unplaced_ooms_;
    s.retried_ooms = retried_ooms_;
    s.unmatched_frees = ledger_.unmatched_frees();
    s.untracked = ledger_.untracked();
    return s;
}

void MemoryAnalyzer::contribute(Report& report) {
    MemorySummary s = summarize();
    add_memory_notes(s, report);
    if (!s.observed) return;
    report.observe(Evidence::kDeviceMemory);
    add_memory_section(s, report);
    // The what-if replays the device's allocations under the usual settings: run once per device
    // with a finding that quotes it, and only then.
    std::vector<std::pair<std::uint16_t, MeasuredAdvice>> asked;
    auto advice = [&](std::uint16_t device) -> MeasuredAdvice {
        for (const auto& [dev, measured] : asked) {
            if (dev == device) return measured;
        }
        asked.emplace_back(device, allocator_advice_for(device));
        return asked.back().second;
    };
    add_memory_findings(s, report, advice);
}

MeasuredAdvice MemoryAnalyzer::allocator_advice_for(std::uint16_t device) const {
    if (history_.device(device) == nullptr) return {};
    const std::uint64_t capacity = ledger_.totals(device).capacity;
    AllocatorAdvice a = allocator_advice(history_, device, capacity);
    if (!a.available) return {};
    return MeasuredAdvice{a.sentence, a.reproduction_exact, a.about_oom};
}

}  // namespace gpudiag::detail
