// SPDX-License-Identifier: Apache-2.0
// MemoryAnalyzer: feeds a MemoryLedger and turns it into the "memory" section and the findings
// memory_leak, fragmentation, reserved_unused, near_oom, memory_outside_framework and
// out_of_memory.
#pragma once

#include <gpudiag/memory.hpp>

#include "analysis/memory/memory_ledger.hpp"
#include "core/analyzer.hpp"

#include <vector>

namespace gpudiag::detail {

class MemoryAnalyzer final : public Analyzer {
public:
    MemoryAnalyzer();
    void begin(const SourceInfo& info, const StringTable& strings) override;
    void consume(std::span<const Event> events) override;
    void end(const SourceSummary& summary) override;
    void contribute(Report& report) override;

    [[nodiscard]] const MemoryLedger& ledger() const noexcept { return ledger_; }
    /// For owners that register watches on the books (the live session).
    [[nodiscard]] MemoryLedger& ledger() noexcept { return ledger_; }
    [[nodiscard]] const std::vector<OomExplanation>& ooms() const noexcept { return ooms_; }
    /// Expandable segments were on (allocator setting, or seen on segments).
    [[nodiscard]] bool expandable_segments() const noexcept { return expandable_; }

private:
    void on_oom(const Event& e);
    void explain_at(const Event& e, std::uint16_t device);
    void withdraw_oom(const Event& e);
    void add_device_findings(Report& report, std::uint16_t device);
    void add_leak_finding(Report& report, std::uint16_t device);
    [[nodiscard]] std::string site_name(StringId id) const;

    MemoryLedger ledger_;
    const StringTable* strings_ = nullptr;
    bool expandable_ = false;
    bool memory_events_ = false;
    std::vector<OomExplanation> ooms_;
    struct OomSeen {  // beside each explanation
        std::uint64_t time_ns;
        std::uint32_t thread;
        std::uint32_t correlation;  // of a retryable marker, 0 otherwise
    };
    std::vector<OomSeen> oom_seen_;
    // Retryable markers not withdrawn yet, and where each was counted (bounded: a marker is
    // withdrawn within seconds or never).
    enum class Counted : std::uint8_t { kExplained, kDuplicate, kHost, kUnplaced };
    struct Retryable {
        std::uint32_t thread;
        std::uint32_t correlation;
        Counted counted;
    };
    std::vector<Retryable> retryable_;
    std::uint64_t ooms_seen_ = 0;   ///< out-of-memory markers, withdrawn ones excluded
    std::uint64_t host_ooms_ = 0;   ///< of which page-locked host allocations
    std::uint64_t unplaced_ooms_ = 0;  ///< of which on a device the input does not name
    std::uint64_t retried_ooms_ = 0;   ///< withdrawn: the caller's retry succeeded
};

}  // namespace gpudiag::detail
