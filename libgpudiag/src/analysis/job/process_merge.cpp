// SPDX-License-Identifier: Apache-2.0
#include "analysis/job/process_merge.hpp"

#include "core/input_coverage.hpp"
#include "core/producers.hpp"

#include <algorithm>
#include <string>

namespace gpudiag::detail {
namespace {

// The file name of a report's source, to say which file a note is about.
std::string file_of(const Report& r) {
    const std::string& d = r.source.description;
    std::size_t slash = d.find_last_of('/');
    return slash == std::string::npos ? d : d.substr(slash + 1);
}

template <typename T>
T* by_id(std::vector<T>& items, const std::string& id) {
    auto it = std::find_if(items.begin(), items.end(), [&](const T& x) { return x.id == id; });
    return it == items.end() ? nullptr : &*it;
}

void merge_source(SourceInfo& into, const SourceInfo& from) {
    into.description += " + " + from.description;
    if (into.rank < 0) into.rank = from.rank;
    if (into.world_size <= 0) into.world_size = from.world_size;
    if (into.pid == 0) into.pid = from.pid;
    if (into.hostname.empty()) into.hostname = from.hostname;
    for (const auto& d : from.devices) {
        auto it = std::find_if(into.devices.begin(), into.devices.end(),
                               [&](const DeviceInfo& x) { return x.ordinal == d.ordinal; });
        if (it == into.devices.end()) {
            into.devices.push_back(d);
        } else {
            if (it->total_memory_bytes == 0) it->total_memory_bytes = d.total_memory_bytes;
            if (it->name.empty()) it->name = d.name;
            if (it->uuid.empty()) it->uuid = d.uuid;
        }
    }
    for (const auto& [k, v] : from.properties) {
        if (into.property(k, "\x01") == "\x01") into.properties.emplace_back(k, v);
    }
}

void merge_part(Report& into, Report part, bool several) {
    const bool snapshot = is_snapshot_report(part);
    const std::string file = file_of(part);
    merge_source(into.source, part.source);
    into.capture.events += part.capture.events;
    into.capture.dropped += part.capture.dropped;
    into.capture.damaged += part.capture.damaged;
    into.capture.truncated = into.capture.truncated || part.capture.truncated;
    for (auto& n : part.capture.notes) into.capture.notes.push_back(several ? file + ": " + n : n);
    add_coverage(into.input, part.input, several ? file + ": " : std::string());
    for (Evidence e : part.observed) into.observe(e);  // one process: what either input showed
    into.observed_known = into.observed_known && part.observed_known;
    for (auto& n : part.notes) {
        if (std::find(into.notes.begin(), into.notes.end(), n) == into.notes.end())
            into.notes.push_back(n);
    }
    for (auto& f : part.findings) {
        Finding* same = by_id(into.findings, f.id);
        if (same == nullptr)
            into.findings.push_back(std::move(f));
        else if (snapshot)
            *same = std::move(f);
    }
    for (auto& s : part.sections) {
        Section* same = by_id(into.sections, s.id);
        if (same == nullptr)
            into.sections.push_back(std::move(s));
        else if (snapshot && s.id == "memory")
            *same = std::move(s);
    }
}

}  // namespace

bool is_snapshot_report(const Report& r) noexcept {
    return r.source.producer == kProducerTorchSnapshot;
}

bool is_flight_recorder_report(const Report& r) noexcept {
    return r.source.producer == "flight-recorder";
}

bool is_side_report(const Report& r) noexcept {
    return is_snapshot_report(r) || is_flight_recorder_report(r);
}

Report merge_process_reports(std::vector<Report> parts) {
    if (parts.size() == 1) return std::move(parts.front());
    auto base = std::find_if(parts.begin(), parts.end(),
                             [](const Report& r) { return !is_side_report(r); });
    if (base == parts.end()) base = parts.begin();
    std::rotate(parts.begin(), base, base + 1);  // the base first, the others in their order
    Report out = std::move(parts.front());
    const std::string base_file = file_of(out);
    for (auto& n : out.capture.notes) n = base_file + ": " + n;
    for (auto& m : out.input.missing) m = base_file + ": " + m;
    for (std::size_t i = 1; i < parts.size(); ++i) merge_part(out, std::move(parts[i]), true);
    std::stable_sort(out.findings.begin(), out.findings.end(),
                     [](const Finding& a, const Finding& b) { return a.severity > b.severity; });
    return out;
}

}  // namespace gpudiag::detail
