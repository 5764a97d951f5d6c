// SPDX-License-Identifier: Apache-2.0
// MemoryAnalyzer: feeds a MemoryLedger, summarizes it (MemorySummary) and turns the summary into
// the "memory" section and the findings memory_leak, memory_growth_in_iteration, fragmentation,
// reserved_unused, near_oom, memory_outside_framework and out_of_memory.
#pragma once

#include <gpudiag/memory.hpp>

#include "analysis/allocator/allocation_history.hpp"
#include "analysis/memory/memory_ledger.hpp"
#include "analysis/memory/memory_summary.hpp"
#include "core/analyzer.hpp"

#include <map>
#include <string>
#include <vector>

namespace gpudiag::detail {

class MemoryAnalyzer final : public Analyzer {
public:
    /// `history_ops`: allocator operations kept for the what-if (AllocationHistory).
    explicit MemoryAnalyzer(std::size_t history_ops = AllocationHistory::kMaxOps);
    void begin(const SourceInfo& info, const StringTable& strings) override;
    void consume(std::span<const Event> events) override;
    void end(const SourceSummary& summary) override;
    void contribute(Report& report) override;

    /// Everything the section and the findings are built from.
    [[nodiscard]] MemorySummary summarize() const;

    [[nodiscard]] const MemoryLedger& ledger() const noexcept { return ledger_; }
    /// For owners that register watches on the books (the live session).
    [[nodiscard]] MemoryLedger& ledger() noexcept { return ledger_; }
    /// Expandable segments were on (allocator setting, or seen on segments).
    [[nodiscard]] bool expandable_segments() const noexcept { return expandable_; }
    /// The allocator what-if's advice for `device` (the best of the usual allocator settings
    /// replayed on the allocations seen, or that none helps); its sentence is "" when the input
    /// has no allocation history to replay. Replays the history: call it once per device.
    [[nodiscard]] MeasuredAdvice allocator_advice_for(std::uint16_t device) const;

private:
    // Where an out-of-memory marker was counted, so that a later withdrawal (its caller's retry
    // succeeded) can take it back.
    enum class Counted : std::uint8_t { kNewGroup, kJoinedGroup, kDuplicate, kHost, kUnplaced };
    struct Retryable {
        std::uint32_t thread;
        std::uint32_t correlation;
        Counted counted;
        std::uint16_t device;
        std::uint64_t time_ns;
    };

    void on_oom(const Event& e);
    [[nodiscard]] std::uint16_t oom_device(const Event& e, bool& inferred) const;
    Counted count_oom(const Event& e, std::uint16_t device, bool inferred);
    [[nodiscard]] OomExplanation explain_now(const Event& e, std::uint16_t device) const;
    void withdraw_oom(const Event& e);
    [[nodiscard]] DeviceMemorySummary summarize_device(std::uint16_t device) const;
    [[nodiscard]] std::string site_name(StringId id) const;
    [[nodiscard]] std::vector<PoolLine> pools_of(std::uint16_t device,
                                                 const DeviceLayout& layout) const;

    MemoryLedger ledger_;
    AllocationHistory history_;  // for the allocator what-if quoted by findings' advice
    const StringTable* strings_ = nullptr;
    bool expandable_ = false;
    bool observed_ = false;
    // Private pools' owners and ids as the source named them (properties
    // "private_pool.<n>.owner" and "private_pool.<n>.id").
    std::map<std::uint32_t, std::string> pool_owners_;
    std::map<std::uint32_t, std::string> pool_ids_;
    std::vector<OomGroup> ooms_;
    // Retryable markers not withdrawn yet (bounded: one is withdrawn within moments or never).
    std::vector<Retryable> retryable_;
    std::uint64_t oom_events_ = 0;     ///< out-of-memory markers, withdrawn ones excluded
    std::uint64_t host_ooms_ = 0;      ///< of which host allocations (pinned or pageable)
    std::uint64_t unplaced_ooms_ = 0;  ///< of which on a device the input does not name
    std::uint64_t retried_ooms_ = 0;   ///< withdrawn: the caller's retry succeeded
    double dropped_share_ = 0;         ///< of the source's events, dropped (from end())
};

}  // namespace gpudiag::detail
