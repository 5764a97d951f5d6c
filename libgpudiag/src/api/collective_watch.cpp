// SPDX-License-Identifier: Apache-2.0
#include "api/collective_watch.hpp"

#include "core/clock.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace gpudiag::detail {

void CollectiveWatch::consume(std::span<const Event> events) {
    for (const Event& e : events) {
        // Point-to-point sequence ids pair two ranks, not the group: not aligned here either.
        if (e.kind != EventKind::kCollective || (e.flags & kEventFlagP2p) != 0) continue;
        ++seen_;
        const CollectivePayload& c = e.collective;
        const Key key{c.group, c.seq};
        if (c.state == collective_state::kCompleted) {
            in_flight_.erase(key);
            auto& done = completed_[c.group];
            done = std::max(done, c.seq);
            continue;
        }
        if (auto done = completed_.find(c.group); done != completed_.end() && c.seq <= done->second)
            continue;  // a later completion was seen already
        if (auto it = in_flight_.find(key); it != in_flight_.end()) {
            it->second.state = std::max(it->second.state, c.state);
            continue;
        }
        if (in_flight_.size() >= kMaxInFlight) {
            ++past_cap_;
            continue;
        }
        in_flight_.emplace(key, InFlight{c.op, c.state, monotonic_now_ns(), false});
    }
    // A group's completion covers its earlier calls (the recorder's counters say so).
    for (auto it = in_flight_.begin(); it != in_flight_.end();) {
        auto done = completed_.find(it->first.first);
        it = done != completed_.end() && it->first.second <= done->second ? in_flight_.erase(it)
                                                                          : std::next(it);
    }
}

std::string CollectiveWatch::line(const Key& key, const InFlight& c, std::uint64_t now_ns) const {
    const double age_s = static_cast<double>(now_ns - std::min(now_ns, c.since_ns)) * 1e-9;
    std::string rank = rank_ >= 0 ? fmt::format("rank {} ", rank_) : std::string();
    return fmt::format("process group {} {} #{}: {}in it for {:.1f} s, not completed",
                       strings_.lookup(key.first), strings_.lookup(c.op), key.second, rank, age_s);
}

std::vector<std::string> CollectiveWatch::newly_overdue(std::uint64_t now_ns) {
    std::vector<std::string> out;
    if (timeout_ns_ == 0) return out;
    for (auto& [key, c] : in_flight_) {
        if (c.overdue || now_ns < c.since_ns || now_ns - c.since_ns < timeout_ns_) continue;
        c.overdue = true;
        out.push_back(line(key, c, now_ns));
        if (notes_.size() < kMaxInFlight) notes_.push_back(out.back());
    }
    return out;
}

Section CollectiveWatch::section(std::uint64_t now_ns) const {
    Section s;
    s.id = "collectives_in_flight";
    s.title = "Collectives in flight";
    s.figures.push_back({"in_flight", static_cast<double>(in_flight_.size()), Unit::kCount,
                         "collectives enqueued and not completed"});
    s.figures.push_back({"overdue", static_cast<double>(notes_.size()), Unit::kCount,
                         "collectives found in flight past collective_timeout_s"});
    if (past_cap_ > 0)
        s.figures.push_back({"past_cap", static_cast<double>(past_cap_), Unit::kCount,
                             "collectives not tracked: the table was full"});
    Table t;
    t.id = "collectives_in_flight";
    t.title = "Collectives enqueued and not completed, oldest first";
    t.columns = {"group", "op", "seq", "age_s", "rank", "state", "overdue"};
    t.units = {Unit::kNumber, Unit::kNumber, Unit::kCount, Unit::kSeconds,
               Unit::kRank,   Unit::kNumber, Unit::kNumber};
    std::vector<std::pair<Key, InFlight>> rows(in_flight_.begin(), in_flight_.end());
    std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
        return a.second.since_ns < b.second.since_ns;
    });
    for (const auto& [key, c] : rows) {
        const double age_s = static_cast<double>(now_ns - std::min(now_ns, c.since_ns)) * 1e-9;
        t.rows.push_back(
            {std::string(strings_.lookup(key.first)), std::string(strings_.lookup(c.op)),
             static_cast<double>(key.second), age_s, static_cast<double>(rank_),
             std::string(c.state == collective_state::kStarted ? "started" : "scheduled"),
             std::string(c.overdue ? "yes" : "no")});
    }
    s.tables.push_back(std::move(t));
    return s;
}

}  // namespace gpudiag::detail
