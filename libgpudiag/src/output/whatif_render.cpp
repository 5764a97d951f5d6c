// SPDX-License-Identifier: Apache-2.0
// What-if results as plain text (the CLI's output) and as JSON.
#include <gpudiag/whatif.hpp>

#include "analysis/allocator/allocator_whatif.hpp"
#include "support/format.hpp"

#include <fmt/format.h>
#include "support/json_writer.hpp"

#include <algorithm>
#include <exception>
#include <string>
#include <vector>

namespace gpudiag {
namespace {

// 1234567 -> "1,234,567"
std::string grouped(std::uint64_t v) {
    std::string digits = fmt::to_string(v);
    std::string out;
    for (std::size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
        out += digits[i];
    }
    return out;
}

std::string bytes(std::uint64_t b) {
    return detail::whatif_bytes(b);
}

std::string row_name(const WhatIfOutcome& o) {
    if (o.label == "recorded") return "recorded (reproduction)";
    if (o.label == "baseline") return "recorded (baseline)";
    return o.change.empty() ? o.label : o.change;
}

// Against the baseline; the reproduction started elsewhere, so it is not compared.
std::string relative(const WhatIfOutcome& o, const WhatIfOutcome& base) {
    if (&o == &base || o.label == "recorded" || base.peak_reserved_bytes == 0) return "";
    const double d = (static_cast<double>(o.peak_reserved_bytes) -
                      static_cast<double>(base.peak_reserved_bytes)) /
                     static_cast<double>(base.peak_reserved_bytes);
    return fmt::format("{:+.1f} %", d * 100.0);
}

std::string oom_cell(const WhatIfOutcome& o) {
    std::string cell;
    if (o.recorded_ooms > 0) {
        cell = o.recorded_ooms_avoided == o.recorded_ooms ? "avoided"
               : o.recorded_ooms_avoided == 0
                   ? "recurs"
                   : fmt::format("{} of {} avoided", o.recorded_ooms_avoided, o.recorded_ooms);
    }
    if (o.oom) {
        if (!cell.empty()) cell += "; ";
        cell +=
            "fails at entry " + grouped(o.oom_entry + 1) + " (" + bytes(o.oom_request_bytes) + ")";
    }
    return cell.empty() ? "no" : cell;
}

void reproduction_text(const WhatIfResult& r, std::string& out) {
    const WhatIfReproduction& p = r.reproduction;
    if (!p.checked) {
        out += "Reproduction: not checked (" + p.first_difference + ").\n";
        return;
    }
    out += std::string("Reproduction under the recorded settings: ") +
           (p.exact ? "exact" : "NOT exact") +
           (r.history_complete ? "" : " (over the kept history only: the rest was overwritten)") +
           "\n";
    out +=
        "  segment actions (cudaMalloc, cudaFree, maps, unmaps) matching in kind, size, address "
        "and order: " +
        grouped(p.matching_segment_actions) + " of " + grouped(p.recorded_segment_actions) +
        " recorded (" + grouped(p.modelled_segment_actions) + " modelled)\n";
    out += "  allocations placed at their recorded address: " +
           grouped(p.allocations_at_recorded_address) + " of " + grouped(p.allocations) + "\n";
    out += "  peak reserved: " + grouped(p.modelled_peak_reserved_bytes) + " B modelled, " +
           grouped(p.recorded_peak_reserved_bytes) + " B recorded (" +
           bytes(p.recorded_peak_reserved_bytes) + ")\n";
    out += "  final segments: " + grouped(p.modelled_final_segments) + " modelled, " +
           grouped(p.recorded_final_segments) + " recorded, " +
           (p.final_segments_match ? "identical" : "different") + "\n";
    if (!p.exact) out += "  first difference: " + p.first_difference + "\n";
}

void table_text(const WhatIfResult& r, std::string& out) {
    if (r.outcomes.empty()) return;
    const WhatIfOutcome& base = r.outcomes.size() > 1 ? r.outcomes[1] : r.outcomes[0];
    std::size_t width = 8;
    for (const auto& o : r.outcomes) width = std::max(width, row_name(o).size());
    out += fmt::format("{:<{}}  {:>13}  {:>8}  {:>11}  {:>13}  {:>10}  {:>8}  {:>11}  {}\n",
                       "settings", width, "peak reserved", "vs base", "peak in use",
                       "stranded peak", "cudaMalloc", "cudaFree", "maps/unmaps", "out of memory");
    for (const auto& o : r.outcomes) {
        std::string maps = o.page_maps + o.page_unmaps == 0
                               ? "-"
                               : grouped(o.page_maps) + "/" + grouped(o.page_unmaps);
        out += fmt::format("{:<{}}  {:>13}  {:>8}  {:>11}  {:>13}  {:>10}  {:>8}  {:>11}  {}\n",
                           row_name(o), width, bytes(o.peak_reserved_bytes), relative(o, base),
                           bytes(o.peak_allocated_bytes), bytes(o.peak_stranded_bytes),
                           grouped(o.device_mallocs), grouped(o.device_frees), maps, oom_cell(o));
    }
}

// Settings that may fit but are unsafe or unsupported here, once each (a setting can be in
// several rows).
void cautions_text(const WhatIfResult& r, std::string& out) {
    std::vector<std::string> said;
    for (const auto& o : r.outcomes) {
        for (const WhatIfCaution& c : o.cautions) {
            const std::string key = c.change + c.reason;
            if (std::find(said.begin(), said.end(), key) != said.end()) continue;
            if (said.empty()) out += "\nCautions:\n";
            said.push_back(key);
            out += "  - " + c.change +
                   (c.unsupported ? " is unsupported here: " : " is risky here: ") + c.reason +
                   " [" + c.source + "]\n";
        }
    }
}

std::string render_text(const WhatIfResult& r) {
    std::string out = fmt::format("Allocator what-if: {}, device {}\n",
                                  r.source.empty() ? std::string("events") : r.source, r.device);
    out += "History: " + grouped(r.history_entries) + " entries (" + grouped(r.allocations) +
           " allocations)";
    if (r.history_from_start) {
        out += " from the device's first segment on.\n";
    } else if (r.segments_before_history == 0) {
        out += "; the state before it is unknown (no segments recorded).\n";
    } else {
        out += ", starting after " + grouped(r.segments_before_history) + " segments and " +
               grouped(r.live_blocks_before_history) +
               " live blocks existed (rebuilt from the final state).\n";
    }
    if (!r.history_complete) {
        out +=
            "History cut: the trace ring buffer overflowed; the history is complete only from "
            "its first entry, so no figure below is exact.\n";
    }
    if (!r.torch_version.empty()) {
        out += "Allocator modelled: torch " + r.torch_version + " (" + r.torch_version_origin +
               (r.torch_version_note.empty() ? "" : ": " + r.torch_version_note) + ")\n";
    }
    out += "Recorded settings: " +
           (r.recorded_settings.empty() ? std::string("torch defaults") : r.recorded_settings) +
           (r.settings_recorded ? "" : " (not recorded: assumed)") + "\n";
    out += "Capacity: ";
    if (r.capacity_bytes != 0) {
        out += bytes(r.capacity_bytes) + " (" + r.capacity_origin + ")\n";
    } else if (r.capacity_origin == "the recorded OOM") {
        out += "what was reachable at each recorded out-of-memory failure\n";
    } else {
        out += "unlimited (give one to check for out-of-memory)\n";
    }
    out += "\n";
    reproduction_text(r, out);
    out += "\n";
    if (r.outcomes.size() > 1) {
        out += std::string("Predictions (the baseline and the rows after it start from ") +
               (r.outcomes[1].start == WhatIfStart::kLiveBlocks
                    ? "the blocks live at the history's start"
                    : "the recorded state") +
               ", with invented segment addresses):\n";
    }
    table_text(r, out);
    cautions_text(r, out);
    if (!r.advice.empty()) out += "\n" + r.advice + "\n";
    if (!r.notes.empty()) {
        out += "\nNotes:\n";
        for (const auto& n : r.notes) out += "  - " + n + "\n";
    }
    return out;
}

void outcome_json(detail::JsonWriter& w, const WhatIfOutcome& o) {
    w.begin_object();
    w.field("label", o.label);
    w.field("change", o.change);
    w.field("settings", o.settings);
    w.field("start", whatif_start_name(o.start));
    w.field("replayed_to_end", o.replayed_to_end);
    w.field("peak_reserved_bytes", o.peak_reserved_bytes);
    w.field("peak_allocated_bytes", o.peak_allocated_bytes);
    w.field("peak_stranded_bytes", o.peak_stranded_bytes);
    w.field("final_reserved_bytes", o.final_reserved_bytes);
    w.field("device_mallocs", o.device_mallocs);
    w.field("device_frees", o.device_frees);
    w.field("page_maps", o.page_maps);
    w.field("page_unmaps", o.page_unmaps);
    w.field("alloc_retries", o.alloc_retries);
    w.field("oom", o.oom);
    w.key("oom_entry");
    if (o.oom) {
        w.value(o.oom_entry);
    } else {
        w.null();
    }
    w.field("oom_request_bytes", o.oom_request_bytes);
    w.field("recorded_ooms", o.recorded_ooms);
    w.field("recorded_ooms_avoided", o.recorded_ooms_avoided);
    w.key("cautions").begin_array();
    for (const WhatIfCaution& c : o.cautions) {
        w.begin_object();
        w.field("change", c.change);
        w.field("unsupported", c.unsupported);
        w.field("reason", c.reason);
        w.field("source", c.source);
        w.end_object();
    }
    w.end_array();
    w.end_object();
}

std::string render_json(const WhatIfResult& r) {
    std::string out;
    detail::JsonWriter w(out);
    w.begin_object();
    w.field("source", r.source);
    w.field("device", r.device);
    w.field("history_entries", r.history_entries);
    w.field("allocations", r.allocations);
    w.field("history_from_start", r.history_from_start);
    w.field("history_complete", r.history_complete);
    w.field("torch_version", r.torch_version);
    w.field("torch_version_origin", r.torch_version_origin);
    w.field("torch_version_note", r.torch_version_note);
    w.field("segments_before_history", r.segments_before_history);
    w.field("live_blocks_before_history", r.live_blocks_before_history);
    w.field("settings_recorded", r.settings_recorded);
    w.field("recorded_settings", r.recorded_settings);
    w.field("capacity_bytes", r.capacity_bytes);
    w.field("capacity_origin", r.capacity_origin);
    const WhatIfReproduction& p = r.reproduction;
    w.key("reproduction").begin_object();
    w.field("checked", p.checked);
    w.field("exact", p.exact);
    w.field("recorded_peak_reserved_bytes", p.recorded_peak_reserved_bytes);
    w.field("modelled_peak_reserved_bytes", p.modelled_peak_reserved_bytes);
    w.field("recorded_segment_actions", p.recorded_segment_actions);
    w.field("modelled_segment_actions", p.modelled_segment_actions);
    w.field("matching_segment_actions", p.matching_segment_actions);
    w.field("allocations", p.allocations);
    w.field("allocations_at_recorded_address", p.allocations_at_recorded_address);
    w.field("recorded_final_segments", p.recorded_final_segments);
    w.field("modelled_final_segments", p.modelled_final_segments);
    w.field("final_segments_match", p.final_segments_match);
    w.field("first_difference", p.first_difference);
    w.end_object();
    w.key("outcomes").begin_array();
    for (const auto& o : r.outcomes) outcome_json(w, o);
    w.end_array();
    w.field("advice", r.advice);
    w.key("notes").begin_array();
    for (const auto& n : r.notes) w.value(n);
    w.end_array();
    w.end_object();
    out += '\n';
    return out;
}

}  // namespace

std::string whatif_text(const WhatIfResult& result) {
    try {
        return render_text(result);
    } catch (const std::exception&) {
        return "gpudiag: out of memory while rendering the what-if\n";
    }
}

std::string whatif_json(const WhatIfResult& result) {
    try {
        return render_json(result);
    } catch (const std::exception&) {
        return "{}\n";
    }
}

}  // namespace gpudiag
