// SPDX-License-Identifier: Apache-2.0
// CollectiveAnalyzer: one rank's process groups as its Flight Recorder kept them: per group,
// the last call it enqueued and the last it completed, and its latest calls (op, sequence id,
// sizes, state, call site) as a data table the job view aligns across ranks
// (collective_verdict.hpp).
#pragma once

#include "core/analyzer.hpp"

#include <cstdint>
#include <deque>
#include <map>
#include <string>

namespace gpudiag::detail {

/// The section and tables this analysis writes, and the job view reads.
namespace collective_keys {
inline constexpr const char* kSection = "collectives";
inline constexpr const char* kGroupsTable = "process_groups";
inline constexpr const char* kRecordsTable = "collective_records";
}  // namespace collective_keys

class CollectiveAnalyzer final : public Analyzer {
public:
    /// `alone`: the dump is the job's only input (not analysed for a job): its own report then
    /// holds the verdict, against the members its process groups list.
    explicit CollectiveAnalyzer(bool alone = false) : alone_(alone) {}

    void begin(const SourceInfo& info, const StringTable& strings) override;
    void consume(std::span<const Event> events) override;
    void contribute(Report& report) override;

private:
    struct Record {
        std::uint64_t seq = 0;
        std::string op;
        std::string sizes;
        std::uint8_t state = 0;
        std::uint64_t created_ns = 0;
        StringId stack = kNoString;
    };
    struct Group {
        std::deque<Record> records;  // the latest kCollectiveRecordsKept collectives, in order
        std::uint64_t calls = 0;
        std::uint64_t p2p_calls = 0;
        std::uint64_t last_enqueued = 0;
        std::uint64_t last_completed = 0;
    };

    void add_own_verdict(Report& report, Section& section) const;

    bool alone_ = false;
    const StringTable* strings_ = nullptr;
    SourceInfo info_;
    std::map<std::string, Group> groups_;
    std::uint64_t records_ = 0;
    std::uint64_t groups_dropped_ = 0;  // calls on groups past kCollectiveGroupsKept
};

/// Where a recorded call came from: its stack without the frames of torch's own package (the
/// collective's wrappers) and of Python's standard library, at most `frames` of them, joined by
/// " <- ".
std::string call_site(std::string_view stack, std::size_t frames);

}  // namespace gpudiag::detail
