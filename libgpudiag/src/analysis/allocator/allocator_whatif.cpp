// SPDX-License-Identifier: Apache-2.0
// What-if orchestration: which replays to run, and what they say together.
#include "analysis/allocator/allocator_whatif.hpp"

#include "analysis/allocator/allocator_replay.hpp"
#include "support/format.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

namespace gpudiag::detail {
namespace {

struct Variant {
    std::string label;
    std::string change;
    AllocatorSettings settings;
};

const DeviceHistory* pick_device(const AllocationHistory& history, int requested, Status& error) {
    const DeviceHistory* best = nullptr;
    for (const DeviceHistory& d : history.devices()) {
        if (requested >= 0) {
            if (d.device == requested) best = &d;
        } else if (best == nullptr || d.allocations > best->allocations) {
            best = &d;
        }
    }
    if (requested >= 0 && best == nullptr) {
        error = invalid_argument(fmt::format("device {} has no allocator activity in {}", requested,
                                             history.info().description));
        return nullptr;
    }
    if (best == nullptr || best->ops.empty()) {
        error = failed_precondition(
            (history.info().description.empty() ? std::string("the input")
                                                : history.info().description) +
            " holds no allocation history to replay (a torch snapshot needs its trace: call "
            "torch.cuda.memory._record_memory_history() before the program allocates)");
        return nullptr;
    }
    return best;
}

std::uint64_t live_blocks(const DeviceHistory& h) {
    std::uint64_t n = 0;
    for (const StartSegment& s : h.start) n += s.blocks.size();
    return n;
}

WhatIfOutcome to_outcome(const Variant& v, WhatIfStart start, const ReplayOutcome& r) {
    WhatIfOutcome o;
    o.label = v.label;
    o.change = v.change;
    o.settings = v.settings.to_conf();
    o.start = start;
    o.replayed_to_end = r.replayed_to_end;
    o.peak_reserved_bytes = r.stats.peak_reserved;
    o.peak_allocated_bytes = r.stats.peak_active;
    o.peak_stranded_bytes = r.stats.peak_stranded;
    o.final_reserved_bytes = r.stats.reserved;
    o.device_mallocs = r.stats.device_mallocs;
    o.device_frees = r.stats.device_frees;
    o.page_maps = r.stats.page_maps;
    o.page_unmaps = r.stats.page_unmaps;
    o.alloc_retries = r.stats.alloc_retries;
    o.oom = r.new_oom;
    o.oom_entry = r.oom_entry;
    o.oom_request_bytes = r.oom_request;
    o.recorded_ooms = r.recorded_ooms;
    o.recorded_ooms_avoided = r.recorded_ooms_avoided;
    return o;
}

// The usual advice, one change at a time over the base settings.
std::vector<Variant> sweep_variants(const AllocatorSettings& base, bool fraction_applies) {
    std::vector<Variant> out;
    auto add = [&](const std::string& change) {
        Variant v;
        v.label = "sweep";
        v.change = change;
        v.settings = base;
        if (!apply_allocator_conf(v.settings, change).is_ok() || v.settings == base) return;
        out.push_back(std::move(v));
    };
    add(base.expandable_segments ? "expandable_segments:False" : "expandable_segments:True");
    for (const char* mb : {"128", "256", "512"}) add(std::string("max_split_size_mb:") + mb);
    if (base.max_split_size != kNoSplitLimit) add("max_split_size_mb:none");
    add("roundup_power2_divisions:4");
    if (fraction_applies) add("garbage_collection_threshold:0.8");
    return out;
}

std::string bytes_text(std::uint64_t b) {
    return whatif_bytes(b);
}

// Lower peak first; then fewer driver calls (cheaper); then the order tried.
const WhatIfOutcome* best_of(const std::vector<const WhatIfOutcome*>& rows) {
    const WhatIfOutcome* best = nullptr;
    for (const WhatIfOutcome* r : rows) {
        if (best == nullptr || r->peak_reserved_bytes < best->peak_reserved_bytes ||
            (r->peak_reserved_bytes == best->peak_reserved_bytes &&
             r->device_mallocs + r->page_maps < best->device_mallocs + best->page_maps)) {
            best = r;
        }
    }
    return best;
}

bool unsupported(const WhatIfOutcome& o) {
    return std::any_of(o.cautions.begin(), o.cautions.end(),
                       [](const WhatIfCaution& c) { return c.unsupported; });
}

std::string conclude_sentence(const WhatIfOutcome& baseline, const WhatIfOutcome* best,
                              std::uint64_t capacity, AllocatorAdvice& a);

// The conclusion, from the baseline (recorded settings replayed like the others) and the tried
// rows: the best setting that is supported for this program.
AllocatorAdvice conclude(const WhatIfOutcome& baseline,
                         const std::vector<const WhatIfOutcome*>& tried, std::uint64_t capacity,
                         bool exact) {
    AllocatorAdvice a;
    a.available = true;
    a.reproduction_exact = exact;
    a.baseline_peak_reserved_bytes = baseline.peak_reserved_bytes;
    a.recorded_oom = baseline.recorded_ooms > 0;
    std::vector<const WhatIfOutcome*> fitting;
    std::vector<const WhatIfOutcome*> fitting_but_unsupported;
    for (const WhatIfOutcome* r : tried) {
        const bool avoids_recorded = r->recorded_ooms_avoided == r->recorded_ooms;
        if (r->oom || !r->replayed_to_end || !avoids_recorded) continue;
        (unsupported(*r) ? fitting_but_unsupported : fitting).push_back(r);
    }
    const WhatIfOutcome* best = best_of(fitting);
    a.sentence = conclude_sentence(baseline, best, capacity, a);
    // A setting that would do better but is unsupported here is named, never advised.
    if (const WhatIfOutcome* other = best_of(fitting_but_unsupported);
        other != nullptr &&
        (best == nullptr || other->peak_reserved_bytes < best->peak_reserved_bytes) &&
        (a.about_oom || other->peak_reserved_bytes < baseline.peak_reserved_bytes)) {
        for (const WhatIfCaution& c : other->cautions) {
            if (!c.unsupported) continue;
            a.sentence += " " + other->change + " would fit with a peak reserved of " +
                          bytes_text(other->peak_reserved_bytes) +
                          ", but is unsupported for this program: " + c.reason + ".";
            break;
        }
    }
    if (best != nullptr && best->change == a.best_change) {
        for (const WhatIfCaution& c : best->cautions) {
            a.sentence += " Caution: " + c.change + " is risky here: " + c.reason + ".";
        }
    }
    return a;
}

std::string conclude_sentence(const WhatIfOutcome& baseline, const WhatIfOutcome* best,
                              std::uint64_t capacity, AllocatorAdvice& a) {
    const std::string peak_now = bytes_text(baseline.peak_reserved_bytes);
    const bool oom_question = a.recorded_oom || baseline.oom;
    a.about_oom = oom_question;
    if (oom_question) {
        if (best == nullptr) {
            return "No allocator setting tried avoids the out-of-memory failure: the program's "
                   "live blocks alone peak at " +
                   bytes_text(baseline.peak_allocated_bytes) +
                   (capacity != 0 ? " (the allocator could reach " + bytes_text(capacity) + ")"
                                  : std::string()) +
                   ", so it needs less memory (smaller batches, activation checkpointing, lower "
                   "precision) or a larger device.";
        }
        a.best_change = best->change;
        a.best_peak_reserved_bytes = best->peak_reserved_bytes;
        a.oom_avoided = true;
        if (a.recorded_oom) {
            return "With " + best->change +
                   " the out-of-memory failure would not recur: the peak "
                   "reserved would be " +
                   bytes_text(best->peak_reserved_bytes) +
                   (baseline.replayed_to_end ? " instead of " + peak_now : std::string()) + ".";
        }
        return fmt::format(
            "Within {} the recorded settings run out of memory at history entry {} (a {} "
            "request); with {} the program fits, with a peak reserved of {}.",
            bytes_text(capacity), baseline.oom_entry + 1, bytes_text(baseline.oom_request_bytes),
            best->change, bytes_text(best->peak_reserved_bytes));
    }
    if (best == nullptr || best->peak_reserved_bytes >= baseline.peak_reserved_bytes) {
        return "No allocator setting tried lowers the peak reserved below " + peak_now +
               ": at that peak the memory is held by blocks the program uses (" +
               bytes_text(baseline.peak_allocated_bytes) +
               " at most), not by the cache, so only using less memory helps.";
    }
    a.best_change = best->change;
    a.best_peak_reserved_bytes = best->peak_reserved_bytes;
    const double saved =
        static_cast<double>(baseline.peak_reserved_bytes - best->peak_reserved_bytes);
    return "With " + best->change + " the peak reserved would be " +
           bytes_text(best->peak_reserved_bytes) + " instead of " + peak_now + " (" +
           format_percent(saved / static_cast<double>(baseline.peak_reserved_bytes)) + " less).";
}

// "key=value" as PYTORCH_CUDA_ALLOC_CONF writes it ("key:value").
std::string conf_form(std::string text) {
    const std::size_t eq = text.find('=');
    if (eq != std::string::npos && text.find(':') > eq) text[eq] = ':';
    return text;
}

struct Plan {
    const DeviceHistory* device = nullptr;
    AllocatorSettings recorded;
    /// What the baseline and the sweep vary from: the recorded settings under the chosen memory
    /// fraction (a limit on the program, like the capacity, not a placement choice).
    AllocatorSettings base;
    std::vector<Variant> variants;  // chosen and sweep
    DeviceLimits limits;
    bool fraction_applies = false;
    WhatIfStart start = WhatIfStart::kRecordedState;
    ModelledVersion version;
};

Status make_plan(const AllocationHistory& history, const WhatIfOptions& options, Plan& plan) {
    Status error;
    plan.device = pick_device(history, options.device, error);
    if (plan.device == nullptr) return error;
    plan.recorded = history.recorded_settings();
    plan.version = select_version(history.info(), options.torch_version);
    if (!options.torch_version.empty() && !plan.version.recorded.known) {
        return invalid_argument("not a torch version: \"" + options.torch_version +
                                "\" (give it as 2.15 or 2.15.0)");
    }
    Variant chosen;
    chosen.label = "chosen";
    chosen.settings = plan.recorded;
    for (const std::string& s : options.settings) {
        GPUDIAG_RETURN_IF_ERROR(apply_allocator_conf(chosen.settings, s));
        if (!chosen.change.empty()) chosen.change += ',';
        chosen.change += conf_form(s);
    }
    plan.limits.capacity_bytes = options.capacity_bytes;
    plan.limits.device_total_bytes = options.device_total_bytes;
    plan.fraction_applies =
        chosen.settings.memory_fraction < 1.0 || plan.recorded.memory_fraction < 1.0;
    if (plan.fraction_applies && options.capacity_bytes == 0 && options.device_total_bytes == 0) {
        return invalid_argument(
            "per_process_memory_fraction is a fraction of the device's memory: "
            "give the capacity or the device's total memory too");
    }
    plan.base = plan.recorded;
    plan.base.memory_fraction = chosen.settings.memory_fraction;
    if (!options.settings.empty() && !(chosen.settings == plan.base))
        plan.variants.push_back(chosen);
    if (options.sweep) {
        for (Variant& v : sweep_variants(plan.base, plan.fraction_applies)) {
            // A sweep row equal to the chosen settings would only repeat it.
            if (options.settings.empty() || !(v.settings == chosen.settings))
                plan.variants.push_back(std::move(v));
        }
    }
    plan.start =
        plan.device->start.empty() ? WhatIfStart::kRecordedState : WhatIfStart::kLiveBlocks;
    return Status::ok();
}

ReplayConfig config_for(const Plan& plan, const AllocatorSettings& settings) {
    ReplayConfig c;
    c.settings = settings;
    c.rules = plan.version.rules;
    c.limits = plan.limits;
    c.start = plan.start == WhatIfStart::kLiveBlocks ? ReplayStart::kLiveBlocksOnly
                                                     : ReplayStart::kRecordedState;
    return c;
}

void add_notes(const AllocationHistory& history, const Plan& plan, WhatIfResult& r) {
    const DeviceHistory& h = *plan.device;
    if (!r.history_complete) {
        r.notes.push_back(fmt::format(
            "The recording's trace ring buffer overflowed (trace_alloc_overflowed): the history "
            "is complete only from its first entry (time_us {}), what came before was "
            "overwritten, so no figure here is exact, the reproduction included; record with a "
            "larger max_entries for an exact answer.",
            history.info().property(fmt::format("snapshot_history_complete_since_us.{}", h.device),
                                    "unknown")));
    }
    if (!history.settings_recorded()) {
        r.notes.push_back(
            "The input does not record the allocator's settings: torch's defaults were "
            "assumed (expandable segments if its segments were expandable).");
    }
    if (!history.settings_problem().empty()) {
        r.notes.push_back("The recorded settings could not be read (" + history.settings_problem() +
                          "); torch's defaults were assumed.");
    }
    if (r.segments_before_history > 0) {
        r.notes.push_back(fmt::format(
            "The history starts after {} segments existed (a trace ring buffer keeps only the "
            "last entries); the state at its start was rebuilt from the final state and the "
            "trace. The rows after the reproduction start from the {} blocks live then, allocated "
            "afresh with an empty cache, so the cache built before the history does not bias the "
            "comparison; compare them with the baseline row.",
            r.segments_before_history, r.live_blocks_before_history));
    }
    if (h.cache_releases > 0) {
        std::string n = fmt::format(
            "The history releases the cache {} times (torch.cuda.empty_cache(), replayed as such "
            "under every setting)",
            h.cache_releases);
        if (h.releases_before_new_segment > 0) {
            n += fmt::format(
                "; {} came right before a new segment, which is also what the allocator does "
                "itself when cudaMalloc fails: memory was nearly full there",
                h.releases_before_new_segment);
        }
        r.notes.push_back(n + ".");
    }
    if (h.recorded_ooms > 0 && plan.limits.capacity_bytes == 0) {
        r.notes.push_back(
            "Each recorded out-of-memory failure is replayed against the memory the "
            "allocator could reach at that moment (what it held plus what the driver "
            "reported free); elsewhere no limit is assumed.");
    }
    if (plan.base.memory_fraction < 1.0) {
        char fraction[32];
        std::snprintf(fraction, sizeof fraction, "%g", plan.base.memory_fraction);
        r.notes.push_back(
            std::string("per_process_memory_fraction:") + fraction +
            " caps the baseline and every row after it (the reproduction runs as recorded).");
    }
    if (!plan.fraction_applies) {
        r.notes.push_back(
            "garbage_collection_threshold acts only with a per-process memory fraction "
            "below 1; try it with per_process_memory_fraction and a capacity.");
    }
    if (h.start_blocks_outside_segments > 0) {
        r.notes.push_back(fmt::format(
            "{} blocks live before the history lie outside every recorded segment and were left "
            "out.",
            h.start_blocks_outside_segments));
    }
    if (history.outside_allocator_events() > 0) {
        r.notes.push_back(fmt::format(
            "Memory allocated outside the caching allocator ({} events) is not part of the replay.",
            history.outside_allocator_events()));
    }
    if (h.truncated) {
        r.notes.push_back(fmt::format("The history was cut at {} entries; figures cover that part.",
                                      history.max_ops()));
    }
    if (history.devices().size() > 1) {
        std::string n = "Devices with allocator activity:";
        for (const DeviceHistory& d : history.devices()) {
            n += fmt::format(" {} ({} allocations)", d.device, d.allocations);
        }
        r.notes.push_back(fmt::format("{}; replayed: device {}.", n, h.device));
    }
    if (history.facts().private_pools > 0) {
        r.notes.push_back(fmt::format(
            "Allocations in {} private pool{} (CUDA graphs, torch.cuda.MemPool) were replayed "
            "apart from the default pool, each pool told by the recorded segment holding the "
            "block; a segment freed before the end does not name its pool, so allocations in it "
            "count as the default pool's.",
            history.facts().private_pools, history.facts().private_pools > 1 ? "s" : ""));
    }
    r.notes.push_back(
        "Not modelled: a private pool's cache released once its CUDA graph or MemPool is gone "
        "(private pools are kept throughout), expandable_segments_reserve (torch 2.15), and "
        "settings torch does not record in snapshots (max_non_split_rounding_mb, "
        "large_segment_size_mb, the memory fraction: defaults assumed unless given).");
}

void fill_reproduction(const DeviceHistory& h, const ReplayOutcome& out, WhatIfReproduction& rep) {
    const ReproductionCheck c = compare(h, out);
    rep.checked = c.checked;
    rep.exact = c.checked && c.exact;
    rep.recorded_peak_reserved_bytes = h.observed_peak_reserved;
    rep.modelled_peak_reserved_bytes = out.stats.peak_reserved;
    rep.recorded_segment_actions = c.recorded_actions;
    rep.modelled_segment_actions = c.modelled_actions;
    rep.matching_segment_actions = c.matching_actions;
    rep.allocations = out.allocations;
    rep.allocations_at_recorded_address = out.at_recorded_address;
    rep.recorded_final_segments = h.final_segments.size();
    rep.modelled_final_segments = out.final_segments.size();
    rep.final_segments_match = c.final_segments_match;
    rep.first_difference =
        c.checked ? c.first_difference : "the input records no segments to compare the replay with";
}

}  // namespace

std::string whatif_bytes(std::uint64_t bytes) {
    return format_bytes_3(static_cast<double>(bytes));
}

Result<WhatIfResult> run_whatif(const AllocationHistory& history, const WhatIfOptions& options) {
    Plan plan;
    GPUDIAG_RETURN_IF_ERROR(make_plan(history, options, plan));
    const DeviceHistory& h = *plan.device;
    WhatIfResult r;
    r.source = history.info().description;
    r.device = h.device;
    r.history_entries = h.ops.size();
    r.allocations = h.allocations;
    // Only a source that records segments shows that nothing existed before its history.
    r.history_from_start = h.start.empty() && h.has_segment_records;
    r.segments_before_history = h.start.size();
    r.live_blocks_before_history = live_blocks(h);
    r.settings_recorded = history.settings_recorded();
    r.recorded_settings = plan.recorded.to_conf();
    r.capacity_bytes = options.capacity_bytes;
    r.capacity_origin = options.capacity_bytes != 0 ? "given"
                        : h.recorded_ooms > 0       ? "the recorded OOM"
                                                    : "unlimited";

    // The reproduction: recorded settings, recorded state and addresses, no assumed limit.
    Variant recorded{"recorded", "", plan.recorded};
    ReplayConfig repro;
    repro.settings = plan.recorded;
    repro.rules = plan.version.rules;
    repro.limits.device_total_bytes =
        options.device_total_bytes != 0 ? options.device_total_bytes : options.capacity_bytes;
    repro.recorded_addresses = true;
    repro.log_actions = true;
    repro.stop_at_new_oom = false;
    const ReplayOutcome reproduced = replay(h, repro);
    fill_reproduction(h, reproduced, r.reproduction);
    r.outcomes.push_back(to_outcome(recorded, WhatIfStart::kRecordedState, reproduced));
    r.torch_version = plan.version.text;
    r.torch_version_origin = plan.version.origin;
    r.torch_version_note = plan.version.note;
    r.history_complete =
        history.info().property(fmt::format("snapshot_history_cut.{}", h.device)) != "true";

    // The baseline: the recorded settings replayed the way the tried ones are.
    Variant baseline{"baseline", "", plan.base};
    r.outcomes.push_back(to_outcome(baseline, plan.start, replay(h, config_for(plan, plan.base))));
    for (const Variant& v : plan.variants) {
        r.outcomes.push_back(to_outcome(v, plan.start, replay(h, config_for(plan, v.settings))));
        r.outcomes.back().cautions =
            cautions_for(v.settings, plan.base, history.facts(), plan.version);
    }
    std::vector<const WhatIfOutcome*> tried;
    for (std::size_t i = 2; i < r.outcomes.size(); ++i) tried.push_back(&r.outcomes[i]);
    r.advice =
        conclude(r.outcomes[1], tried, options.capacity_bytes, r.reproduction.exact).sentence;

    add_notes(history, plan, r);
    if (!h.has_segment_records) {
        r.notes.insert(r.notes.begin(),
                       "The input records block allocations but not the allocator's segments, so "
                       "what was allocated before it started is unknown: the replay starts from an "
                       "empty allocator and its figures cover the allocations the input holds.");
    }
    if (reproduced.unknown_frees > 0) {
        r.notes.push_back(fmt::format(
            "{} frees name blocks the replay does not hold (allocated before the history and not "
            "in the recorded state): they were skipped.",
            reproduced.unknown_frees));
    }
    // The baseline differs from the reproduction only by its addresses when no limit applies.
    const bool comparable = r.history_from_start && options.capacity_bytes == 0 &&
                            r.outcomes[1].replayed_to_end && r.outcomes[0].replayed_to_end;
    if (comparable && r.outcomes[1].peak_reserved_bytes != r.outcomes[0].peak_reserved_bytes) {
        r.notes.push_back("With invented segment addresses the recorded settings peak at " +
                          bytes_text(r.outcomes[1].peak_reserved_bytes) + " instead of " +
                          bytes_text(r.outcomes[0].peak_reserved_bytes) +
                          ": ties between equal free blocks go to the lowest address, so the rows "
                          "under other settings carry that much uncertainty.");
    }
    return r;
}

AllocatorAdvice allocator_advice(const AllocationHistory& history, int device,
                                 std::uint64_t capacity_bytes) {
    WhatIfOptions options;
    options.device = device;
    options.capacity_bytes = capacity_bytes;
    Result<WhatIfResult> r = run_whatif(history, options);
    if (!r.is_ok() || r->outcomes.size() < 2) return AllocatorAdvice{};
    std::vector<const WhatIfOutcome*> tried;
    for (std::size_t i = 2; i < r->outcomes.size(); ++i) tried.push_back(&r->outcomes[i]);
    AllocatorAdvice a = conclude(r->outcomes[1], tried, capacity_bytes,
                                 r->reproduction.exact && r->history_complete);
    if (!r->history_complete) {
        a.sentence +=
            " (The recording's allocation history was cut when its trace ring buffer "
            "overflowed, so these figures cover only its last part and cannot be exact.)";
    } else if (!a.reproduction_exact && r->reproduction.checked) {
        a.sentence += " (The model did not reproduce this recording exactly: " +
                      r->reproduction.first_difference + ".)";
    }
    return a;
}

}  // namespace gpudiag::detail
