// SPDX-License-Identifier: Apache-2.0
#include "analysis/collectives/collective_analyzer.hpp"

#include "analysis/collectives/collective_verdict.hpp"
#include "analysis/findings/finding_catalog.hpp"
#include "importers/flight_recorder/flight_recorder_source.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>

namespace gpudiag::detail {
namespace {

namespace fr = flight_recorder_keys;

const char* state_name(std::uint8_t state) {
    switch (state) {
        case collective_state::kScheduled: return "scheduled";
        case collective_state::kStarted: return "started";
        case collective_state::kCompleted: return "completed";
        default: return "unknown";
    }
}

// "enqueued,started,completed" -> the three counters (-1 where not said).
std::array<std::int64_t, 3> status_of(const std::string& text) {
    std::array<std::int64_t, 3> out{-1, -1, -1};
    std::size_t at = 0;
    for (auto& v : out) {
        const std::size_t end = std::min(text.find(',', at), text.size());
        std::from_chars(text.data() + at, text.data() + end, v);
        at = end + 1;
        if (at > text.size()) break;
    }
    return out;
}

// Frames of torch's own package (the collective's wrappers) and of Python's standard library
// (multiprocessing, threading, runpy): not where the program called the collective.
bool library_frame(std::string_view frame) {
    if (frame.find("/torch/") != std::string_view::npos) return true;
    const std::size_t lib = frame.find("/lib/python3");
    return lib != std::string_view::npos && frame.find("-packages/", lib) == std::string_view::npos;
}

}  // namespace

std::string call_site(std::string_view stack, std::size_t frames) {
    std::string out;
    std::size_t kept = 0;
    for (std::size_t at = 0; at < stack.size() && kept < frames;) {
        const std::size_t end = std::min(stack.find('\n', at), stack.size());
        const std::string_view frame = stack.substr(at, end - at);
        at = end + 1;
        if (library_frame(frame)) continue;
        out += (out.empty() ? "" : " <- ") + std::string(frame);
        ++kept;
    }
    // A stack of library frames only (a collective torch issued itself) is named by its first.
    if (out.empty() && !stack.empty()) out = std::string(stack.substr(0, stack.find('\n')));
    return out;
}

void CollectiveAnalyzer::begin(const SourceInfo& info, const StringTable& strings) {
    strings_ = &strings;
    info_ = info;
}

void CollectiveAnalyzer::consume(std::span<const Event> events) {
    for (const Event& e : events) {
        if (e.kind != EventKind::kCollective) continue;
        ++records_;
        const CollectivePayload& c = e.collective;
        const std::string name(strings_->lookup(c.group));
        auto it = groups_.find(name);
        if (it == groups_.end()) {
            if (groups_.size() >= kCollectiveGroupsKept) {
                ++groups_dropped_;
                continue;
            }
            it = groups_.emplace(name, Group{}).first;
        }
        Group& g = it->second;
        if ((e.flags & kEventFlagP2p) != 0) {  // p2p calls pair two ranks, not the group
            ++g.p2p_calls;
            continue;
        }
        ++g.calls;
        g.last_enqueued = std::max(g.last_enqueued, c.seq);
        if (c.state == collective_state::kCompleted)
            g.last_completed = std::max(g.last_completed, c.seq);
        g.records.push_back(Record{c.seq, std::string(strings_->lookup(c.op)),
                                   std::string(strings_->lookup(c.sizes)), c.state, e.start_ns,
                                   c.stack});
        if (g.records.size() > kCollectiveRecordsKept) g.records.pop_front();
    }
}

// One dump alone: the job view of a job of one rank, whose other members are all missing.
void CollectiveAnalyzer::add_own_verdict(Report& report, Section& section) const {
    Report job;
    job.source.world_size = info_.world_size;
    Report self;
    self.source = info_;
    self.sections.push_back(section);
    job.ranks.push_back(std::move(self));
    const auto absent = add_collective_verdicts(job, section);
    for (auto& f : job.findings) report.findings.push_back(std::move(f));
    for (auto& n : job.notes) report.notes.push_back(std::move(n));
    if (absent.empty()) return;
    std::string list;
    for (std::size_t i = 0; i < absent.size() && i < kCollectiveRanksNamed; ++i)
        list += fmt::format("{}{}", i > 0 ? ", " : "", absent[i]);
    if (absent.size() > kCollectiveRanksNamed)
        list += fmt::format(" and {} more", absent.size() - kCollectiveRanksNamed);
    report.input.complete = false;
    report.input.missing.insert(
        report.input.missing.begin(),
        fmt::format("{} member rank{} of its process groups {} no Flight Recorder dump among the "
                    "inputs (rank{} {}): the collectives' verdict covers only the dumps given",
                    absent.size(), absent.size() > 1 ? "s" : "", absent.size() > 1 ? "have" : "has",
                    absent.size() > 1 ? "s" : "", list));
}

void CollectiveAnalyzer::contribute(Report& report) {
    if (records_ == 0 && info_.producer != fr::kProducer) return;
    Section s;
    s.id = collective_keys::kSection;
    s.title = "Process groups and their collectives (Flight Recorder)";
    s.figures.push_back({"collective_records", static_cast<double>(records_), Unit::kCount,
                         "calls the recorder held"});
    s.figures.push_back({"process_groups", static_cast<double>(groups_.size()), Unit::kCount,
                         "process groups with calls"});
    Table groups;
    groups.id = collective_keys::kGroupsTable;
    groups.title = "Per process group: the last collective enqueued and the last completed";
    groups.columns = {"group",          "description", "members",  "last_enqueued",
                      "last_completed", "collectives", "p2p_calls"};
    groups.units = {Unit::kNumber, Unit::kNumber, Unit::kNumber, Unit::kCount,
                    Unit::kCount,  Unit::kCount,  Unit::kCount};
    Table records;
    records.id = collective_keys::kRecordsTable;
    records.title = "The latest collectives of each process group, as recorded";
    records.kind = TableKind::kData;
    records.columns = {"group", "seq", "op", "sizes", "state", "created_ns", "call_site"};
    records.units = {Unit::kNumber, Unit::kCount,  Unit::kNumber, Unit::kNumber,
                     Unit::kNumber, Unit::kNumber, Unit::kNumber};
    for (auto& [name, g] : groups_) {
        // pg_status counts calls the ring may no longer hold; gloo's lags behind its records.
        const auto status = status_of(info_.property(std::string(fr::kGroupStatus) + name));
        const double enqueued =
            std::max<double>(static_cast<double>(g.last_enqueued), static_cast<double>(status[0]));
        const double completed =
            std::max<double>(static_cast<double>(g.last_completed), static_cast<double>(status[2]));
        groups.rows.push_back({name, info_.property(std::string(fr::kGroupDesc) + name),
                               info_.property(std::string(fr::kGroupRanks) + name), enqueued,
                               completed, static_cast<double>(g.calls),
                               static_cast<double>(g.p2p_calls)});
        for (const Record& r : g.records) {
            records.rows.push_back({name, static_cast<double>(r.seq), r.op, r.sizes,
                                    std::string(state_name(r.state)),
                                    static_cast<double>(r.created_ns),
                                    call_site(strings_->lookup(r.stack), kCallSiteFrames)});
        }
    }
    s.tables.push_back(std::move(groups));
    s.tables.push_back(std::move(records));
    if (alone_ && info_.rank >= 0) add_own_verdict(report, s);
    if (groups_dropped_ > 0) {
        report.notes.push_back(fmt::format(
            "Flight Recorder: {} calls on process groups beyond the first {} were left out",
            groups_dropped_, kCollectiveGroupsKept));
    }
    report.sections.push_back(std::move(s));
}

}  // namespace gpudiag::detail
