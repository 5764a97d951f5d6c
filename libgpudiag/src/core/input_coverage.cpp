// SPDX-License-Identifier: Apache-2.0
#include "core/input_coverage.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <string>

namespace gpudiag::detail {

InputCoverage input_coverage(const SourceSummary& summary, std::uint64_t events,
                             std::uint64_t first_ns, std::uint64_t last_ns) {
    InputCoverage c;
    c.events = events;
    c.first_ns = first_ns;
    c.last_ns = last_ns;
    c.missing = summary.missing;
    c.complete = !summary.truncated && summary.damaged == 0 && summary.missing.empty();
    if (summary.damaged > 0 && c.missing.empty()) {
        c.missing.push_back(
            fmt::format("{} events were in damaged parts of the input and could "
                        "not be read",
                        summary.damaged));
    }
    if (summary.truncated && c.missing.empty()) {
        c.missing.emplace_back(
            "the input ends early (its writer stopped, or the file was cut "
            "short): whatever came after the last event read is missing");
    }
    return c;
}

void add_coverage(InputCoverage& into, const InputCoverage& part, const std::string& prefix) {
    if (part.events > 0) {
        into.first_ns = into.events > 0 ? std::min(into.first_ns, part.first_ns) : part.first_ns;
        into.last_ns = std::max(into.last_ns, part.last_ns);
    }
    into.events += part.events;
    into.complete = into.complete && part.complete;
    for (const auto& m : part.missing) into.missing.push_back(prefix + m);
}

std::vector<std::int32_t> absent_ranks(const std::vector<Report>& ranks, std::int32_t world_size,
                                       std::size_t limit) {
    std::set<std::int32_t> present;
    for (const auto& r : ranks) present.insert(r.source.rank);
    std::vector<std::int32_t> absent;
    for (std::int32_t rank = 0; rank < world_size && absent.size() < limit; ++rank) {
        if (present.count(rank) == 0) absent.push_back(rank);
    }
    return absent;
}

InputCoverage job_coverage(const std::vector<Report>& ranks, std::int32_t world_size) {
    InputCoverage c;
    bool any = false;
    for (const auto& r : ranks) {
        c.events += r.input.events;
        if (r.input.events > 0) {
            c.first_ns = any ? std::min(c.first_ns, r.input.first_ns) : r.input.first_ns;
            c.last_ns = std::max(c.last_ns, r.input.last_ns);
            any = true;
        }
        if (r.input.complete) continue;
        c.complete = false;
        const std::string who =
            r.source.rank >= 0 ? fmt::format("rank {}", r.source.rank) : r.source.description;
        for (const auto& m : r.input.missing) c.missing.push_back(who + ": " + m);
    }
    // A job names its world size in every rank's trace; ranks it names but no input holds are
    // missing outright (their stragglers and imbalance cannot be judged).
    constexpr std::size_t kListed = 16;
    const auto absent = absent_ranks(ranks, world_size, kListed);
    if (!absent.empty()) {
        std::set<std::int32_t> present;
        for (const auto& r : ranks) {
            if (r.source.rank >= 0 && r.source.rank < world_size) present.insert(r.source.rank);
        }
        const auto total = static_cast<std::size_t>(world_size) - present.size();
        c.complete = false;
        std::string list;
        for (std::size_t i = 0; i < absent.size(); ++i)
            list += fmt::format("{}{}", i > 0 ? ", " : "", absent[i]);
        if (total > absent.size()) list += fmt::format(" and {} more", total - absent.size());
        c.missing.insert(
            c.missing.begin(),
            fmt::format("{} of the job's {} ranks {} no input (rank{} {}): the "
                        "job figures cover only the ranks given",
                        total, world_size, total > 1 ? "have" : "has", total > 1 ? "s" : "", list));
    }
    return c;
}

}  // namespace gpudiag::detail
