// SPDX-License-Identifier: Apache-2.0
// The memory findings, one add_<finding>() each. Their thresholds, each with why it is where it
// is, are in the findings catalog. Every finding states the evidence it rests on. Causes come
// before their symptoms: a leak that explains an out-of-memory failure is emitted first and is as
// severe as it.
#include "analysis/memory/memory_summary.hpp"

#include "analysis/findings/finding_catalog.hpp"
#include "analysis/memory/memory_trend.hpp"
#include "support/format.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace gpudiag::detail {
namespace {

constexpr std::size_t kSitesPerFinding = 5;

std::string b(double v) {
    return format_bytes(v);
}
std::string bu(std::uint64_t v) {
    return format_bytes(static_cast<double>(v));
}
double d(std::uint64_t v) {
    return static_cast<double>(v);
}
std::string seconds(double s) {
    return format_duration_ns(s * 1e9);
}

const char* metric_words(TrendMetric m) {
    switch (m) {
        case TrendMetric::kAllocated: return "allocated memory (the framework's live blocks)";
        case TrendMetric::kOutside:
            return "device memory outside the framework (driver-level allocations)";
        case TrendMetric::kReserved: return "the framework's reserved memory (its cache included)";
        case TrendMetric::kProcess: return "the process' device memory as NVML reports it";
    }
    return "memory";
}

std::string basis_words(const MemoryTrend& t) {
    switch (t.basis) {
        case Repetition::kSteps: return fmt::format("{} steps", t.repetitions);
        case Repetition::kPeriod:
            return fmt::format(
                "a pattern that repeats every {} ({} repetitions of the same allocation)",
                seconds(t.period_ns / 1e9), t.repetitions);
        case Repetition::kWindows:
            return fmt::format("{} windows of {}", t.repetitions, seconds(t.window_ns / 1e9));
        case Repetition::kNone: break;
    }
    return "too few repetitions";
}

// Steps per second at the steps' own pace since the onset (a service marking one step per
// request runs at the rate requests come, gaps included); 0 for trends not per step.
double steps_per_second(const MemoryTrend& t) {
    return t.per_step && t.span_s > 0 && t.span_steps > 0 ? t.span_steps / t.span_s : 0;
}

std::string rate_text(const MemoryTrend& t) {
    if (!t.per_step) return b(t.rate * 3600.0) + " per hour";
    const double pace = steps_per_second(t);
    if (pace <= 0) return b(t.rate) + " per step";
    return fmt::format("{} per step ({} per hour at its pace)", b(t.rate),
                       b(t.rate * pace * 3600.0));
}

// Whether the device's peak is near enough its capacity for `near_oom` to be critical.
bool near_full(const DeviceMemorySummary& dev) {
    const LedgerTotals& t = dev.totals;
    const std::uint64_t held = std::max(dev.peaks.used, dev.peaks.process_used);
    return t.capacity != 0 && d(held) >= kNearOomCriticalShare * d(t.capacity);
}

// Whether a leak of `dev` is what its near-full peak comes from.
bool leaks(const DeviceMemorySummary& dev) {
    return std::any_of(dev.trends.begin(), dev.trends.end(),
                       [](const MemoryTrend& t) { return t.leak; });
}

std::string until_full_text(const MemoryTrend& t) {
    if (!t.full_known) return "";
    if (t.until_full <= 0) return " The device is full already.";
    if (!t.per_step)
        return " At this rate the device is full in about " + seconds(t.until_full) + ".";
    std::string out = fmt::format(" At this rate the device is full in about {} more steps",
                                  static_cast<long long>(t.until_full));
    if (steps_per_second(t) > 0) {
        out += " (" + seconds(t.until_full / steps_per_second(t)) + " at the steps' pace)";
    } else if (t.step_ns > 0) {
        out += " (" + seconds(t.until_full * t.step_ns / 1e9) + " at the mean step time)";
    }
    return out + ".";
}

// The OOM groups of a device that a leak explains: without the leak's growth the request fits,
// or (size unknown) the failures came after the growth began.
bool explains(const MemoryTrend& leak, const OomGroup& g) {
    if (!leak.leak || g.first_ns < leak.since_ns) return false;
    double growth = std::max(0.0, leak.last_level - leak.first_level);
    return g.smallest_request == 0 || growth >= d(g.smallest_request);
}

const MemoryTrend* explaining_leak(const MemorySummary& s, const OomGroup& g) {
    const DeviceMemorySummary* dev = s.device(g.device);
    if (dev == nullptr) return nullptr;
    for (const auto& t : dev->trends) {
        if (explains(t, g)) return &t;
    }
    return nullptr;
}

bool explains_any_oom(const MemorySummary& s, const DeviceMemorySummary& dev,
                      const MemoryTrend& t) {
    for (const auto& g : s.ooms) {
        if (g.device == dev.device && explains(t, g)) return true;
    }
    return false;
}

void leak_advice(const DeviceMemorySummary& dev, const MemoryTrend& t, Finding& f) {
    const bool service = dev.total_steps == 0;
    switch (t.metric) {
        case TrendMetric::kAllocated:
            f.advice.push_back(
                service ? "Look at what the top sites keep alive from one request to the next: "
                          "caches keyed by request, outputs kept in lists, tensors captured by "
                          "closures or hooks."
                        : "Look at what the top sites keep alive across steps: tensors appended "
                          "to lists (losses kept with their graph: use loss.item() or "
                          ".detach()), caches keyed by step, or hooks that store activations.");
            f.advice.push_back(
                "Confirm with two snapshots (torch.cuda.memory._snapshot()) some iterations "
                "apart, and compare live blocks by frame.");
            break;
        case TrendMetric::kOutside:
            f.advice.push_back(
                "The growth is in driver-level allocations (cudaMalloc, cuMemAlloc, cuMemMap) "
                "made at the sites listed and never freed: check those calls for a missing "
                "cudaFree, or for a library object created per request and never destroyed "
                "(TensorRT execution contexts, cuBLAS/cuDNN handles and workspaces).");
            f.advice.push_back(
                "Pool such buffers, or create them once per worker instead of per request.");
            break;
        case TrendMetric::kReserved:
            f.advice.push_back(
                "The cache grows while live data does not: requests of varying sizes keep "
                "splitting cached blocks, so the allocator maps new segments. Set "
                "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, or round request shapes "
                "(padding to a few bucket sizes).");
            break;
        case TrendMetric::kProcess:
            f.advice.push_back(
                "NVML's figure grows while the allocations gpudiag sees do not: something it "
                "does not observe holds the memory (an allocator without CUPTI memory "
                "records, JIT or module caches, the CUDA context). Capture with CUPTI (deep "
                "mode for call sites) to see where.");
            break;
    }
    if (service) {
        f.advice.push_back(
            "Until it is fixed: register a memory watch below capacity "
            "(Session::watch_memory / gpudiag.watch_memory) that writes a report, so the "
            "operator is warned before requests fail.");
    }
}

void add_memory_leak(const MemorySummary& s, const DeviceMemorySummary& dev, const MemoryTrend& t,
                     Report& report) {
    Finding f;
    f.id = finding_name(FindingId::kMemoryLeak);
    f.device = dev.device;
    const bool causes_oom = explains_any_oom(s, dev, t);
    // The cause outranks its symptom: a leak that brought the device near full is as urgent as
    // the near_oom it explains.
    const bool fills_device = !causes_oom && near_full(dev);
    const bool lower_bound = s.dropped_share >= kLeakLowerBoundDropShare;
    f.severity = causes_oom || fills_device ? Severity::kCritical : Severity::kWarning;
    f.confidence = std::clamp(1.0 - t.result.p_value, 0.0, 1.0);
    const double growth = std::max(0.0, t.last_level - t.first_level);
    f.title = std::string("Memory leak: ") + trend_metric_name(t.metric) + " memory grows by " +
              (lower_bound ? "at least " : "") + rate_text(t) +
              (t.per_step      ? ""
               : t.since_s > 0 ? " since " + seconds(t.since_s) + " into the run"
                               : " since the start of the run");
    const std::string since =
        t.since_s > 0 ? fmt::format("since {} after the first event", seconds(t.since_s))
                      : std::string("from the first event on");
    const std::string span = t.per_step
                                 ? fmt::format("{} steps", static_cast<long long>(t.span_steps))
                                 : seconds(t.span_s);
    f.summary = fmt::format(
        "Across {}, the lowest level of {} in each {} keeps rising: from {} to {} (+{}) {}, over "
        "{}.{}",
        basis_words(t), metric_words(t.metric),
        t.per_step                       ? "step"
        : t.basis == Repetition::kPeriod ? "repetition"
                                         : "window",
        b(t.first_level), b(t.last_level), b(growth), since, span, until_full_text(t));
    if (!t.sites.empty()) {
        f.summary += " " + t.sites.front().site + " holds " +
                     format_percent(t.sites.front().bytes / std::max(t.sites_total, 1.0)) +
                     " of the growth.";
    }
    if (causes_oom) f.summary += " It explains the out-of-memory failures reported below.";
    if (fills_device) f.summary += " The device is near full because of it (near_oom, below).";
    if (lower_bound) {
        f.summary +=
            fmt::format(" The capture dropped {} of its events: the rate is a lower bound.",
                        format_percent(s.dropped_share));
        f.evidence.push_back(
            fmt::format("{} of the capture's events dropped (>= {}): the rate reads low",
                        format_percent(s.dropped_share), quote_share(kLeakLowerBoundDropShare)));
    }
    if (dev.history_cut) {
        // The ring kept only the newest entries: growth before them is unseen, and an early
        // allocation freed later may be counted as held.
        f.summary +=
            " The framework's allocation history was cut (its trace ring overflowed): the rate "
            "and onset come from the entries it kept and cannot be exact.";
        f.evidence.push_back("allocation history cut (trace_alloc_overflowed): not exact");
        f.confidence = std::min(f.confidence, 0.5);
    }
    if (t.per_step) {
        f.figures.push_back(
            {"leak_rate_bytes_per_step", t.rate, Unit::kBytesPerStep, "growth rate"});
        if (steps_per_second(t) > 0) {
            f.figures.push_back({"leak_rate_bytes_per_hour", t.rate * steps_per_second(t) * 3600.0,
                                 Unit::kBytesPerHour, "growth rate per hour, at the steps' pace"});
        }
    } else {
        f.figures.push_back(
            {"leak_rate_bytes_per_second", t.rate, Unit::kBytesPerSecond, "growth rate"});
        f.figures.push_back({"leak_rate_bytes_per_hour", t.rate * 3600.0, Unit::kBytesPerHour,
                             "growth rate per hour"});
    }
    f.figures.push_back({"growth_bytes", growth, Unit::kBytes, "growth since the onset"});
    f.figures.push_back({"level_bytes", t.result.level, Unit::kBytes, "median level"});
    f.figures.push_back(
        {"since_ns", t.since_s * 1e9, Unit::kNanoseconds, "onset, after the first event"});
    f.figures.push_back(
        {"repetitions", d(t.repetitions), Unit::kCount, "repeated iterations the trend covers"});
    f.figures.push_back(
        {"p_value", t.result.p_value, Unit::kNumber, "Mann-Kendall p-value (one-sided)"});
    if (t.full_known) {
        f.figures.push_back(t.per_step
                                ? Figure{"steps_until_full", t.until_full, Unit::kCount,
                                         "steps until the device is full"}
                                : Figure{"time_until_full_ns", t.until_full * 1e9,
                                         Unit::kNanoseconds, "time until the device is full"});
        if (steps_per_second(t) > 0) {
            f.figures.push_back({"time_until_full_ns", t.until_full / steps_per_second(t) * 1e9,
                                 Unit::kNanoseconds,
                                 "time until the device is full, at the steps' pace"});
        }
    }
    f.evidence.push_back(std::string("metric: ") + trend_metric_name(t.metric));
    f.evidence.push_back("repeated iterations: " + basis_words(t));
    f.evidence.push_back("lowest level per iteration went from " + b(t.first_level) + " to " +
                         b(t.last_level));
    f.evidence.push_back("Theil-Sen slope " + rate_text(t) +
                         ", Mann-Kendall p = " + format_number(t.result.p_value, 6) +
                         ", rising in every third of the analysed range");
    f.evidence.push_back(
        fmt::format("growth {} >= the {} a leak must reach ({}, {} of the level, {} of capacity)",
                    b(growth), b(t.floor_bytes), quote_bytes(kLeakMinBytes),
                    quote_share(kLeakMinLevelShare), quote_share(kLeakMinCapacityShare)));
    f.site_unit = Unit::kBytes;
    for (std::size_t i = 0; i < t.sites.size() && i < kSitesPerFinding; ++i) {
        f.sites.push_back(CallSite{t.sites[i].site, t.sites[i].bytes,
                                   t.sites_total > 0 ? t.sites[i].bytes / t.sites_total : 0,
                                   "live bytes gained since the onset"});
    }
    leak_advice(dev, t, f);
    report.findings.push_back(std::move(f));
}

void add_memory_growth_in_iteration(const DeviceMemorySummary& dev, const MemoryTrend& t,
                                    Report& report) {
    Finding f;
    f.id = finding_name(FindingId::kMemoryGrowthInIteration);
    f.device = dev.device;
    f.severity = Severity::kInfo;
    const double growth = std::max(0.0, t.last_level - t.first_level);
    f.title = "Memory held within the iteration: allocated rose by " + b(growth) + " over " +
              seconds(t.span_s) + " (not a leak verdict)";
    f.summary = fmt::format(
        "The allocated level rises from {} to {} over {}, but the input holds {}: fewer than {} "
        "repetitions. Growth within one iteration is memory held until later in it (activations "
        "kept for the backward pass, outputs gathered until the end), not a leak: a leak shows as "
        "a floor that rises from one iteration to the next. No rate is given, as none can be "
        "extrapolated from it.",
        b(t.first_level), b(t.last_level), seconds(t.span_s),
        dev.total_steps > 0 ? fmt::format("{} steps", dev.total_steps)
                            : std::string("no repeated allocation pattern"),
        kMinRepetitions);
    f.figures = {{"growth_bytes", growth, Unit::kBytes, "growth over the input"},
                 {"span_ns", t.span_s * 1e9, Unit::kNanoseconds, "time it covers"},
                 {"repetitions", d(dev.total_steps), Unit::kCount, "steps in the input"}};
    f.evidence.push_back("lowest allocated per interval went from " + b(t.first_level) + " to " +
                         b(t.last_level));
    f.evidence.push_back(fmt::format(
        "repetitions: {} steps, no period in the allocation pattern (a leak verdict needs {})",
        dev.total_steps, kMinRepetitions));
    f.site_unit = Unit::kBytes;
    double total = 0;
    for (const auto& l : dev.growth_sites) total += l.bytes;
    for (std::size_t i = 0; i < dev.growth_sites.size() && i < kSitesPerFinding; ++i) {
        const SiteLine& l = dev.growth_sites[i];
        f.sites.push_back(CallSite{l.site, l.bytes, total > 0 ? l.bytes / total : 0,
                                   "live bytes gained over the input"});
    }
    f.advice.push_back(
        fmt::format("To tell held memory from a leak, record at least {} iterations and mark them "
                    "(gpudiag.step(), or torch.profiler's step()).",
                    kMinRepetitions));
    report.findings.push_back(std::move(f));
}

// Sites that created the wholly free segments (the cache's origin), most free bytes first.
std::vector<std::pair<std::uint64_t, std::string>> free_segment_sites(
    const DeviceMemorySummary& dev) {
    std::map<std::string, std::uint64_t> by_site;
    for (std::size_t i = 0; i < dev.layout.segments.size(); ++i) {
        const SegmentLayout& sl = dev.layout.segments[i];
        if (sl.segment.blocks != 0 || i >= dev.segment_sites.size()) continue;
        by_site[dev.segment_sites[i]] += sl.free_bytes;
    }
    std::vector<std::pair<std::uint64_t, std::string>> v;
    for (const auto& [site, free] : by_site) {
        if (free > 0 && site != "<unknown site>") v.emplace_back(free, site);
    }
    std::sort(v.begin(), v.end(), std::greater<>());
    return v;
}

// The allocator what-if's sentence (a replay of this program's allocations under the usual
// settings) goes at `position` in the advice: measured, it says more than the general advice. A
// replay that did not reproduce what the allocator did predicts less surely: it goes last. An
// out-of-memory failure quotes it only when it answers whether a setting avoids the failure (a
// lower peak reserved says nothing about a request from outside the cache, say).
void quote_allocator_advice(const AllocatorAdviceFn& allocator_advice, std::size_t position,
                            Finding& f) {
    if (!allocator_advice || f.device < 0) return;
    MeasuredAdvice a = allocator_advice(static_cast<std::uint16_t>(f.device));
    if (a.sentence.empty() || (f.id == finding_name(FindingId::kOutOfMemory) && !a.about_oom))
        return;
    position = a.reproduced ? std::min(position, f.advice.size()) : f.advice.size();
    f.advice.insert(f.advice.begin() + static_cast<std::ptrdiff_t>(position),
                    std::move(a.sentence));
    f.evidence.push_back(
        std::string("allocator what-if: the allocations seen, replayed under the usual allocator "
                    "settings (the replay ") +
        (a.reproduced ? "reproduced" : "did not exactly reproduce") + " the recorded allocator)");
}

// What reserved_unused rests on: the cache beyond what the program needs, where it sits, and
// which of the two rules (a cache as large as the use; spare wholly free segments) it meets.
struct UnusedCache {
    double reserved = 0;
    double unused = 0;      ///< reserved − needed
    double stranded = 0;    ///< free in partly used segments: empty_cache() cannot return it
    double releasable = 0;  ///< free in wholly free segments: empty_cache() returns it
    double spare = 0;       ///< of the releasable, what the program does not need again
    bool layout = false;
    bool split_known = false;
    bool large_cache = false;     ///< the cache is ≥ kUnusedMinShare of what is held
    bool spare_segments = false;  ///< spare wholly free segments ≥ kReleasableMinShare
    bool near_full = false;       ///< capacity known and the reserve crowds it
    double idle_pools = 0;        ///< private pools with segments and no live block
    double idle_pool_bytes = 0;   ///< what they reserve: only the pool keeps it
};

UnusedCache measure_unused(const DeviceMemorySummary& dev) {
    const LedgerTotals& t = dev.totals;
    UnusedCache u;
    u.reserved = d(t.reserved);
    u.unused = t.reserved > dev.needed ? d(t.reserved - dev.needed) : 0.0;
    u.layout = t.segments_seen;
    u.split_known = u.layout || t.split_reported;
    u.stranded = u.layout ? d(dev.layout.inactive_split) : d(t.inactive_split_reported);
    u.releasable = u.layout ? d(dev.layout.releasable) : std::max(0.0, u.unused - u.stranded);
    // In step-based programs the next step takes back up to its peak: only what lies beyond it
    // is spare, even in wholly free segments.
    u.spare = std::min(u.releasable, u.unused);
    u.large_cache = u.unused >= kUnusedMinBytes && u.unused >= kUnusedMinShare * u.reserved;
    u.spare_segments =
        u.layout && u.spare >= kUnusedMinBytes && u.spare >= kReleasableMinShare * u.reserved;
    u.near_full = t.capacity != 0 && u.reserved >= kNearOomShare * d(t.capacity);
    for (const PoolLine& p : dev.pools) {
        if (!p.idle()) continue;
        ++u.idle_pools;
        u.idle_pool_bytes += d(p.reserved);
    }
    return u;
}

// What empty_cache() would return and what it would leave, in one sentence.
std::string returnable_words(const UnusedCache& u) {
    if (!u.split_known) return "How much of it empty_cache() could return is not in the input";
    return fmt::format(
        "torch.cuda.empty_cache() would return the {} in wholly free segments to the driver; "
        "the {} free in partly used segments stays stranded (it releases only segments without "
        "a live block, and those of a private pool, CUDA graphs' or a torch.cuda.MemPool's, only "
        "once the pool is released)",
        b(u.releasable), b(u.stranded));
}

// Private pools with no live block: memory nothing uses that only the pool keeps.
std::string idle_pool_words(const UnusedCache& u) {
    if (u.idle_pools == 0) return {};
    return fmt::format(
        " {} of it is kept by {} private pool{} with no live block left: a CUDA graph's pool "
        "whose graph may be gone (its segments stay until the last reference to the pool is "
        "dropped), or a torch.cuda.MemPool not released. Nothing uses it, and empty_cache() "
        "cannot return it until the pool is released.",
        b(u.idle_pool_bytes), u.idle_pools, u.idle_pools > 1 ? "s" : "");
}

std::string rule_evidence(const UnusedCache& u, const DeviceMemorySummary& dev) {
    if (u.large_cache) {
        return fmt::format("cached {} >= {} and >= {} of reserved", b(u.unused),
                           quote_bytes(kUnusedMinBytes), quote_share(kUnusedMinShare));
    }
    return fmt::format(
        "wholly free segments beyond what is needed ({}) {} >= {} and >= {} of reserved; the "
        "cache is smaller than the use",
        bu(dev.needed), b(u.spare), quote_bytes(kUnusedMinBytes), quote_share(kReleasableMinShare));
}

std::string capacity_evidence(const UnusedCache& u, const LedgerTotals& t) {
    if (t.capacity == 0)
        return "capacity not in the input: whether the cache crowds the device is not judged";
    return fmt::format(
        "reserved is {} of the device's {}{}", format_percent(u.reserved / d(t.capacity)),
        bu(t.capacity),
        u.near_full ? fmt::format(" (>= {})", quote_share(kNearOomShare)) : std::string());
}

void reserved_unused_advice(const UnusedCache& u, const DeviceMemorySummary& dev, Finding& f) {
    const bool bloated = u.split_known && u.releasable >= u.stranded;
    if (bloated || !u.split_known) {
        f.advice.push_back(
            "If other processes or libraries need the memory, call torch.cuda.empty_cache() "
            "after the peak" +
            (bloated ? " (it returns " + b(u.releasable) + " here)." : std::string(".")));
        f.advice.push_back(
            "To keep the cache bounded automatically, cap the process with "
            "torch.cuda.set_per_process_memory_fraction() and add "
            "PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.8 (the threshold acts only "
            "under a memory fraction below 1).");
    } else {
        f.advice.push_back(
            "The cached space is stranded in partly used segments: see the fragmentation "
            "advice (expandable segments).");
    }
    if (u.idle_pools > 0) {
        // First when the idle pools hold more than the cache empty_cache() can act on.
        const auto at = u.idle_pool_bytes > std::max(u.releasable, u.stranded) ? f.advice.begin()
                                                                               : f.advice.end();
        f.advice.insert(
            at,
            "Drop the CUDA graphs you no longer replay (and any graph.pool() handles kept for "
            "sharing) or delete the torch.cuda.MemPool objects no longer used, then call "
            "torch.cuda.empty_cache(): that returns the " +
                b(u.idle_pool_bytes) + " the idle private pools keep.");
    }
    f.advice.push_back("Lower the peak that filled the cache (the peak allocated was " +
                       bu(dev.peaks.allocated_rounded) + ").");
}

void add_reserved_unused(const DeviceMemorySummary& dev, const AllocatorAdviceFn& allocator_advice,
                         Report& report) {
    const LedgerTotals& t = dev.totals;
    if (!dev.reserved_known() || !dev.allocated_known()) return;
    const UnusedCache u = measure_unused(dev);
    if (!u.large_cache && !u.spare_segments) return;
    Finding f;
    f.id = finding_name(FindingId::kReservedUnused);
    f.device = dev.device;
    // A cache smaller than the use is this program's concern only when the device is near full.
    f.severity = u.near_full     ? Severity::kCritical
                 : u.large_cache ? Severity::kWarning
                                 : Severity::kInfo;
    // In a step-based program what it needs is a step's peak, not what is live between steps:
    // the words say which, so the figures add up.
    const bool step_peak = dev.needed > t.allocated_rounded;
    const std::string beyond =
        step_peak ? fmt::format("beyond the {} a step needs at its peak", bu(dev.needed))
                  : fmt::format("cached, only {} allocated", bu(t.allocated_rounded));
    f.title = fmt::format("Reserved but unused: {} of {} reserved is {}", b(u.unused),
                          b(u.reserved), beyond);
    f.summary = fmt::format(
        "The framework holds {}{} but only {} is in live blocks; {} is cached free memory{}. {}. "
        "This is cache, not a leak: the allocator reuses it for its own requests, but other "
        "processes and libraries cannot use it. It is usually what is left after a peak (peak "
        "allocated {}).{}",
        b(u.reserved), u.layout ? fmt::format(" in {} segments", t.segments) : std::string(),
        bu(t.allocated_rounded), b(u.unused),
        step_peak ? fmt::format(" beyond a step's peak of {}", bu(dev.needed)) : std::string(),
        returnable_words(u), bu(dev.peaks.allocated_rounded), idle_pool_words(u));
    f.figures = {
        {"reserved_bytes", u.reserved, Unit::kBytes, "reserved"},
        {"allocated_bytes", d(t.allocated_rounded), Unit::kBytes, "allocated (rounded)"},
        {"unused_bytes", u.unused, Unit::kBytes, "reserved beyond what is needed"},
        {"peak_allocated_bytes", d(dev.peaks.allocated_rounded), Unit::kBytes, "peak allocated"},
        {"needed_bytes", d(dev.needed), Unit::kBytes,
         "allocated now, or the recent per-step peak in step-based programs"}};
    if (u.split_known) {
        f.figures.push_back(
            {"releasable_bytes", u.releasable, Unit::kBytes, "in wholly free segments"});
        f.figures.push_back(
            {"inactive_split_bytes", u.stranded, Unit::kBytes, "in partly used segments"});
    }
    if (u.layout)
        f.figures.push_back({"largest_free_block_bytes", d(dev.layout.largest_free), Unit::kBytes,
                             "largest free block"});
    if (u.idle_pools > 0) {
        f.figures.push_back({"idle_private_pool_bytes", u.idle_pool_bytes, Unit::kBytes,
                             "reserved by private pools with no live block"});
        f.evidence.push_back(fmt::format("{} private pool(s) hold {} with no live block",
                                         u.idle_pools, b(u.idle_pool_bytes)));
    }
    f.evidence.push_back("reserved " + b(u.reserved) + " vs needed " + bu(dev.needed) + " (" +
                         format_percent(u.unused / std::max(u.reserved, 1.0)) + " unused)");
    f.evidence.push_back(rule_evidence(u, dev));
    f.evidence.push_back(capacity_evidence(u, t));
    if (u.split_known)
        f.evidence.push_back("wholly free segments " + b(u.releasable) +
                             " vs stranded in partly used " + b(u.stranded));
    if (u.layout) {
        f.evidence.push_back(fmt::format("largest free block {} of {} free blocks",
                                         bu(dev.layout.largest_free), dev.layout.free_blocks));
    }
    f.site_unit = Unit::kBytes;
    for (const auto& [free, site] : free_segment_sites(dev)) {
        if (f.sites.size() >= kSitesPerFinding) break;
        f.sites.push_back(CallSite{site, d(free), d(free) / std::max(u.unused, 1.0),
                                   "free bytes in wholly free segments this site created"});
    }
    reserved_unused_advice(u, dev, f);
    quote_allocator_advice(allocator_advice, 0, f);
    report.findings.push_back(std::move(f));
}

void add_fragmentation(const MemorySummary& s, const DeviceMemorySummary& dev,
                       const AllocatorAdviceFn& allocator_advice, Report& report) {
    const LedgerTotals& t = dev.totals;
    const DeviceLayout& l = dev.layout;
    const double reserved = d(t.reserved);
    const double split = t.segments_seen ? d(l.inactive_split) : d(t.inactive_split_reported);
    bool by_layout = false;
    if (t.segments_seen) {
        const double split_frag = split > 0 ? 1.0 - d(l.largest_split_free) / split : 0;
        by_layout = split >= kSplitMinBytes && split >= kSplitMinShare * reserved &&
                    split_frag >= kSplitMinFragmentation;
    }
    // Without the layout the holes' sizes are unknown: only a failure it caused says it matters.
    if (!dev.fragmentation_oom && !by_layout) return;
    Finding f;
    f.id = finding_name(FindingId::kFragmentation);
    f.device = dev.device;
    f.severity = dev.fragmentation_oom ? Severity::kCritical : Severity::kWarning;
    f.title = "Fragmentation: " + b(split) + " free in partly used segments" +
              (t.segments_seen ? ", largest hole " + bu(l.largest_split_free) : std::string());
    f.summary =
        b(split) + " of the " + b(reserved) + " reserved is free but stranded between live blocks" +
        (t.segments_seen ? fmt::format(" ({} free blocks; external fragmentation {})",
                                       l.free_blocks, format_percent(l.external_fragmentation()))
                         : std::string()) +
        ". empty_cache() cannot return it" +
        (t.segments_seen ? " and a request larger than " + bu(l.largest_free) + " cannot use it"
                         : std::string()) +
        (dev.fragmentation_oom ? "; an allocation failed because of it." : ".");
    f.figures = {{"inactive_split_bytes", split, Unit::kBytes, "free in partly used segments"},
                 {"reserved_bytes", reserved, Unit::kBytes, "reserved"}};
    if (t.segments_seen) {
        f.figures.push_back(
            {"free_in_segments_bytes", d(l.free_in_segments), Unit::kBytes, "free in segments"});
        f.figures.push_back(
            {"largest_free_block_bytes", d(l.largest_free), Unit::kBytes, "largest free block"});
        f.figures.push_back({"external_fragmentation", l.external_fragmentation(), Unit::kFraction,
                             "1 - largest free / free"});
        f.evidence.push_back("stranded " + b(split) + " (" +
                             format_percent(split / std::max(reserved, 1.0)) +
                             " of reserved), largest stranded hole " + bu(l.largest_split_free));
    }
    if (dev.fragmentation_oom)
        f.evidence.push_back("an allocation failed with enough free in total (out_of_memory)");
    f.site_unit = Unit::kBytes;
    for (const auto& [site, pinned] : dev.pinning_sites) {
        f.sites.push_back(CallSite{site, d(pinned),
                                   split > 0 ? std::min(1.0, d(pinned) / split) : 0,
                                   "free bytes in the segments this site's live blocks split"});
    }
    if (!s.expandable) {
        f.advice.push_back(
            "Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (PYTORCH_ALLOC_CONF on torch >= "
            "2.9) so free pages can be remapped into one growing segment instead of staying "
            "stranded.");
    } else {
        f.advice.push_back(
            "Expandable segments are already on: the stranded space is pinned by live blocks "
            "(sites listed); free or allocate them earlier.");
    }
    f.advice.push_back(
        "Allocate large long-lived tensors before transient ones; avoid keeping small tensors "
        "alive across phases that allocate large ones.");
    quote_allocator_advice(allocator_advice, 0, f);
    report.findings.push_back(std::move(f));
}

void add_near_oom(const DeviceMemorySummary& dev, Report& report) {
    const LedgerTotals& t = dev.totals;
    const LedgerPeaks& p = dev.peaks;
    const std::uint64_t held = std::max(p.used, p.process_used);
    if (t.capacity == 0 || d(held) < kNearOomShare * d(t.capacity)) return;
    const double share = d(held) / d(t.capacity);
    Finding f;
    f.id = finding_name(FindingId::kNearOom);
    f.device = dev.device;
    f.severity = share >= kNearOomCriticalShare ? Severity::kCritical : Severity::kWarning;
    const bool leaking = leaks(dev);
    f.title = "Near out of memory: peak " + bu(held) + " of " + bu(t.capacity) + " (" +
              format_percent(share) + ")" + (leaking ? " (memory_leak)" : "");
    f.summary =
        "At its peak the process held " + bu(held) + " of the device's " + bu(t.capacity) + " (" +
        bu(p.reserved) + " reserved by the framework, " + bu(p.outside) + " outside it" +
        (p.process_used > p.used ? ", " + bu(p.process_used) + " per NVML" : std::string()) +
        "). A larger batch, a longer sequence or a library workspace would fail." +
        (leaking ? std::string(" Behind it: the memory leak reported above.") : std::string());
    f.figures = {{"peak_used_bytes", d(held), Unit::kBytes, "peak used"},
                 {"capacity_bytes", d(t.capacity), Unit::kBytes, "capacity"},
                 {"peak_share", share, Unit::kFraction, "peak share of capacity"}};
    if (dev.allocated_known())
        f.figures.push_back(
            {"peak_allocated_bytes", d(p.allocated_rounded), Unit::kBytes, "peak allocated"});
    f.evidence.push_back(fmt::format("peak {} >= {} of capacity {}", bu(held),
                                     quote_share(kNearOomShare), bu(t.capacity)));
    f.advice.push_back(
        "Register a watch below capacity (gpudiag.watch_memory(..., action='empty_cache') or "
        "Session::watch_memory) to act before the limit, or reduce the peak (smaller batch, "
        "activation checkpointing).");
    report.findings.push_back(std::move(f));
}

void add_memory_outside_framework(const DeviceMemorySummary& dev, Report& report) {
    const LedgerTotals& t = dev.totals;
    // Without a framework every allocation is "outside" one: the ledger's lines say it all.
    if (!t.driver_seen || !(dev.reserved_known() || dev.allocated_known())) return;
    const double outside = d(std::max(dev.peaks.outside, t.outside()));
    if (outside < kOutsideMinBytes ||
        outside < kOutsideMinShare * d(std::max<std::uint64_t>(dev.peaks.used, 1)))
        return;
    Finding f;
    f.id = finding_name(FindingId::kMemoryOutsideFramework);
    f.device = dev.device;
    f.severity = t.capacity != 0 && outside >= kOutsideWarningShare * d(t.capacity)
                     ? Severity::kWarning
                     : Severity::kInfo;
    f.title = "Memory outside the framework: " + b(outside) + " (peak)";
    std::string owners;
    for (std::size_t o = 0; o < kMemoryOwnerCount; ++o) {
        if (t.outside_by_owner[o] == 0) continue;
        owners += (owners.empty() ? "" : ", ") +
                  std::string(memory_owner_label(static_cast<MemoryOwner>(o))) + " " +
                  bu(t.outside_by_owner[o]);
    }
    f.summary = b(outside) + " of device memory was held outside the framework's allocator" +
                (owners.empty() ? std::string() : " (now: " + owners + ")") +
                ". The framework's statistics do not include it, and its cache cannot reuse it." +
                (t.framework_attributed > 0
                     ? " " + bu(t.framework_attributed) +
                           " of driver allocations were matched to the framework's own "
                           "segments and are not counted here."
                     : std::string());
    f.figures = {{"outside_framework_bytes", outside, Unit::kBytes, "peak outside"},
                 {"outside_now_bytes", d(t.outside()), Unit::kBytes, "outside now"},
                 {"reserved_bytes", d(t.reserved), Unit::kBytes, "reserved by the framework"}};
    f.evidence.push_back(fmt::format("outside {} >= {} and >= {} of the {} held", b(outside),
                                     quote_bytes(kOutsideMinBytes), quote_share(kOutsideMinShare),
                                     bu(dev.peaks.used)));
    if (!owners.empty()) f.evidence.push_back("by owner: " + owners);
    f.site_unit = Unit::kBytes;
    for (const auto& l : dev.live_sites) {
        if (!l.driver || f.sites.size() >= kSitesPerFinding) continue;
        f.sites.push_back(CallSite{l.site, l.bytes, l.bytes / std::max(d(t.outside()), 1.0),
                                   memory_owner_label(l.owner)});
    }
    f.advice.push_back(
        "Check communication buffers (NCCL_BUFFSIZE), library workspaces "
        "(CUBLAS_WORKSPACE_CONFIG) and other allocators in the process.");
    report.findings.push_back(std::move(f));
}

std::string moments_text(const MemorySummary& s, const OomGroup& g) {
    const DeviceMemorySummary* dev = s.device(g.device);
    const std::uint64_t t0 = dev != nullptr ? dev->first_ns : 0;
    std::string out;
    for (std::size_t i = 0; i < g.moments.size() && i < 8; ++i) {
        out += (i == 0 ? "" : ", ") + seconds(g.moments[i] > t0 ? d(g.moments[i] - t0) / 1e9 : 0);
    }
    if (g.count > 8) out += ", ...";
    return out;
}

std::string oom_summary(const MemorySummary& s, const OomGroup& g, const MemoryTrend* leak) {
    std::string out = g.count > 1 ? fmt::format(
                                        "{} allocations failed (at {} after the first event). The "
                                        "first: {}",
                                        g.count, moments_text(s, g), g.explanation.summary)
                                  : g.explanation.summary;
    if (leak != nullptr) {
        out += " Behind it: the memory leak reported above. " +
               std::string(metric_words(leak->metric)) + " grew by " +
               b(std::max(0.0, leak->last_level - leak->first_level)) + " since " +
               seconds(leak->since_s) +
               (leak->sites.empty() ? "" : ", mostly at " + leak->sites.front().site) +
               "; without that growth the request" + (g.count > 1 ? "s" : "") +
               " would have fitted.";
    }
    if (g.device_inferred)
        out += " (The failure carried no device; it is the one the process allocates on.)";
    return out;
}

std::vector<Figure> oom_figures(const OomGroup& g) {
    const OomExplanation& x = g.explanation;
    std::vector<Figure> f = {{"failures", d(g.count), Unit::kCount, "distinct failed allocations"}};
    if (x.requested_bytes != 0) {
        f.push_back(
            {"requested_bytes", d(g.smallest_request), Unit::kBytes, "smallest failed request"});
        f.push_back({"largest_request_bytes", d(g.largest_request), Unit::kBytes,
                     "largest failed request"});
    }
    if (x.device_free_known)
        f.push_back(
            {"device_free_bytes", d(x.device_free_bytes), Unit::kBytes, "free on the device"});
    f.push_back({"reserved_bytes", d(x.reserved_bytes), Unit::kBytes, "reserved"});
    f.push_back({"allocated_bytes", d(x.allocated_bytes), Unit::kBytes, "allocated"});
    f.push_back({"inactive_split_bytes", d(x.inactive_split_bytes), Unit::kBytes,
                 "free in partly used segments"});
    if (x.largest_free_block_bytes != 0) {
        f.push_back({"largest_free_block_bytes", d(x.largest_free_block_bytes), Unit::kBytes,
                     "largest free block"});
    }
    f.push_back({"outside_framework_bytes", d(x.outside_framework_bytes), Unit::kBytes,
                 "outside the framework"});
    return f;
}

// Advice that fits the cause and the program: the leak first when it explains the failures; no
// training advice for a step-less service.
std::vector<std::string> oom_advice(const OomGroup& g, const MemoryTrend* leak, bool service) {
    if (leak != nullptr) {
        std::vector<std::string> out = {
            "Fix the leak (memory_leak above): the failures are its symptom, and no "
            "allocator setting or smaller request prevents them while it grows."};
        if (service) {
            out.push_back(
                "Until then, restart the service before it fills the device, or act on a memory "
                "watch below capacity.");
        }
        return out;
    }
    if (service && g.explanation.cause == OomCause::kTooLittleMemory) {
        return {
            "The working set of the requests in flight does not fit: lower the concurrency or the "
            "batch per request, bound library workspaces, or move the model to a device with more "
            "memory."};
    }
    return g.explanation.advice;
}

void add_out_of_memory(const MemorySummary& s, const OomGroup& g,
                       const AllocatorAdviceFn& allocator_advice, Report& report) {
    const OomExplanation& x = g.explanation;
    const MemoryTrend* leak = explaining_leak(s, g);
    const DeviceMemorySummary* dev = s.device(g.device);
    Finding f;
    f.id = finding_name(FindingId::kOutOfMemory);
    f.severity = Severity::kCritical;
    f.device = g.device == kNoDevice ? -1 : g.device;
    const std::string cause = std::string(leak != nullptr ? finding_name(FindingId::kMemoryLeak)
                                                          : oom_cause_name(x.cause));
    const std::string size_unknown = x.requested_bytes == 0 ? ", request size unknown" : "";
    const std::string what = g.count != 1 ? fmt::format(": {} failed allocations", g.count)
                             : x.requested_bytes != 0 ? fmt::format(": {}", bu(x.requested_bytes))
                                                      : std::string();
    f.title =
        fmt::format("Out of memory{} on device {}{} ({})", what, f.device, size_unknown, cause);
    f.summary = oom_summary(s, g, leak);
    f.figures = oom_figures(g);
    f.site_unit = Unit::kBytes;
    if (leak != nullptr) {
        for (std::size_t i = 0; i < leak->sites.size() && i < kSitesPerFinding; ++i) {
            f.sites.push_back(
                CallSite{leak->sites[i].site, leak->sites[i].bytes,
                         leak->sites_total > 0 ? leak->sites[i].bytes / leak->sites_total : 0,
                         "live bytes the leak gained since its onset"});
        }
    } else {
        for (const auto& [site, pinned] : x.pinning_sites) {
            f.sites.push_back(CallSite{
                site, d(pinned),
                x.free_in_segments_bytes == 0 ? 0.0 : d(pinned) / d(x.free_in_segments_bytes),
                "free bytes in the segments this site's live blocks split"});
        }
    }
    f.evidence.push_back(std::string("cause of the first failure: ") + oom_cause_name(x.cause));
    for (const auto& e : x.evidence) f.evidence.push_back(e);
    if (leak != nullptr) {
        f.evidence.push_back("memory_leak (" + std::string(trend_metric_name(leak->metric)) +
                             ") began at " + seconds(leak->since_s) +
                             ", before the first failure, and grew by more than the request");
    }
    f.evidence.push_back(std::string("expandable segments: ") +
                         (x.expandable_segments ? "on" : "off"));
    f.advice = oom_advice(g, leak, dev != nullptr && dev->total_steps == 0);
    // A leak that explains the failures stays the first thing to fix.
    quote_allocator_advice(allocator_advice, leak != nullptr ? 1 : 0, f);
    report.findings.push_back(std::move(f));
}

void add_oom_notes(const MemorySummary& s, Report& report) {
    std::uint64_t distinct = 0;
    for (const auto& g : s.ooms) distinct += g.count;
    const std::uint64_t on_devices =
        s.oom_events - std::min(s.oom_events, s.host_ooms + s.unplaced_ooms);
    if (on_devices > distinct) {
        report.notes.push_back(fmt::format(
            "{} out-of-memory events on devices; {} distinct failures (the rest were retries of "
            "the same request within a second, or one failure seen both by CUPTI and by the "
            "framework)",
            on_devices, distinct));
    }
    if (s.host_ooms > 0) {
        report.notes.push_back(fmt::format(
            "{} host allocations through CUDA (cudaMallocHost, cudaHostAlloc, cudaHostRegister) "
            "failed: host memory ran out, not GPU memory",
            s.host_ooms));
    }
    if (s.unplaced_ooms > 0) {
        report.notes.push_back(fmt::format(
            "{} allocations failed on a device the capture could not tell (several devices in "
            "use, or none seen); they are not explained",
            s.unplaced_ooms));
    }
    if (s.retried_ooms > 0) {
        report.notes.push_back(fmt::format(
            "{} failed allocations succeeded when their caller retried them (a caching allocator "
            "freeing its cache): not out-of-memory errors",
            s.retried_ooms));
    }
}

}  // namespace

void add_memory_findings(const MemorySummary& s, Report& report,
                         const AllocatorAdviceFn& allocator_advice) {
    // Causes first: leaks (they may explain failures), then the allocator's state, then the
    // failures themselves, then what is only information.
    for (const auto& dev : s.devices) {
        for (const auto& t : dev.trends) {
            if (t.leak) add_memory_leak(s, dev, t, report);
        }
    }
    for (const auto& dev : s.devices) {
        add_fragmentation(s, dev, allocator_advice, report);
        add_reserved_unused(dev, allocator_advice, report);
        add_memory_outside_framework(dev, report);
        add_near_oom(dev, report);
    }
    for (const auto& g : s.ooms) add_out_of_memory(s, g, allocator_advice, report);
    for (const auto& dev : s.devices) {
        for (const auto& t : dev.trends) {
            if (t.growth_only) add_memory_growth_in_iteration(dev, t, report);
        }
    }
}

// The tracking cap keeps memory bounded; the report says when it changed how figures were made.
void add_untracked_note(const UntrackedAllocations& u, Report& report) {
    if (u.booked == 0) return;
    std::string note = fmt::format(
        "{} allocations arrived while {} were live in their table (the tracking cap, which keeps "
        "gpudiag's own memory bounded): they were booked by size rather than one by one. Totals, "
        "sites and leak rates include them ({} of them, {}, still live).",
        u.booked, u.cap, u.live, bu(u.live_bytes));
    if (u.unsited_freed_bytes > 0) {
        note += fmt::format(
            " Frees of them could not be matched to their sites: site figures may be up to {} "
            "too high.",
            bu(u.unsited_freed_bytes));
    }
    report.notes.push_back(std::move(note));
}

void add_memory_notes(const MemorySummary& s, Report& report) {
    if (!s.observed) {
        report.notes.push_back(
            "Device memory was not observed: the input has no allocation events, "
            "allocator figures or NVML memory samples, so the report says nothing about "
            "memory (no memory finding means no data, not no problem).");
        return;
    }
    add_oom_notes(s, report);
    add_untracked_note(s.untracked, report);
    for (const auto& dev : s.devices) {
        const LedgerTotals& t = dev.totals;
        const std::string which =
            s.devices.size() > 1 ? fmt::format(" of device {}", dev.device) : "";
        if (t.allocated_from_sizes) {
            report.notes.push_back(
                "Allocated memory" + which +
                " is a running sum of the allocation events' sizes: "
                "they carry no addresses (Kineto [memory] events before 2022), so what was "
                "allocated before the input began is not counted.");
        }
        if (!dev.reserved_known() && dev.allocated_known()) {
            report.notes.push_back("Reserved memory" + which +
                                   " is not in the input (no allocator segments or "
                                   "totals): cache figures are absent.");
        }
        if (!t.segments_seen && (dev.reserved_known() || dev.allocated_known())) {
            report.notes.push_back(
                "Free blocks, fragmentation and what empty_cache() could return" + which +
                " need the allocator's segments (a torch memory snapshot); the input has "
                "none, so those figures are absent.");
        }
        if (t.capacity == 0) {
            report.notes.push_back("The capacity" + which +
                                   " is not in the input: how close memory came to the "
                                   "limit (near_oom) is not judged.");
        }
    }
}

}  // namespace gpudiag::detail
