// SPDX-License-Identifier: Apache-2.0
// SessionOptions::collective_timeout_s: the collectives a live session has seen enqueued and not
// completed (kCollective events), how long each has been in flight, and which ones are past the
// timeout (each named once, for one window dump). Bounded: a job that never completes anything
// cannot grow it past kMaxInFlight.
#pragma once

#include <gpudiag/event.hpp>
#include <gpudiag/report.hpp>
#include <gpudiag/sink.hpp>
#include <gpudiag/string_table.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace gpudiag::detail {

class CollectiveWatch final : public EventSink {
public:
    static constexpr std::size_t kMaxInFlight = 256;

    /// `timeout_ns` 0: the table is kept (for the report), nothing is ever overdue.
    CollectiveWatch(const StringTable& strings, std::uint64_t timeout_ns, std::int32_t rank)
        : strings_(strings), timeout_ns_(timeout_ns), rank_(rank) {}

    void consume(std::span<const Event> events) override;
    /// Each collective in flight past the timeout at `now_ns` not named before: one line each
    /// ("process group 0 all_reduce #5 ..."); from then on it is overdue (the report's note).
    std::vector<std::string> newly_overdue(std::uint64_t now_ns);
    /// Whether any collective was seen (the report has the section only then).
    [[nodiscard]] bool seen_any() const noexcept { return seen_ > 0; }
    /// The section "collectives_in_flight": those in flight at `now_ns`, oldest first.
    [[nodiscard]] Section section(std::uint64_t now_ns) const;
    [[nodiscard]] const std::vector<std::string>& overdue_notes() const noexcept { return notes_; }
    void set_rank(std::int32_t rank) noexcept { rank_ = rank; }

private:
    struct InFlight {
        StringId op = kNoString;
        std::uint8_t state = 0;
        std::uint64_t since_ns = 0;  // when the session first saw it (the session's clock)
        bool overdue = false;
    };
    using Key = std::pair<StringId, std::uint64_t>;  // (group, seq)

    std::string line(const Key& key, const InFlight& c, std::uint64_t now_ns) const;

    const StringTable& strings_;
    std::uint64_t timeout_ns_;
    std::int32_t rank_;
    std::map<Key, InFlight> in_flight_;
    std::map<StringId, std::uint64_t> completed_;  // per group: the highest seq seen completed
    std::vector<std::string> notes_;               // the overdue ones (bounded like the table)
    std::uint64_t seen_ = 0;
    std::uint64_t past_cap_ = 0;
};

}  // namespace gpudiag::detail
