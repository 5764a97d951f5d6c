// SPDX-License-Identifier: Apache-2.0
// MemoryAnalyzer: feeds a MemoryLedger, summarizes it (MemorySummary) and turns the summary into
// the "memory" section and the findings memory_leak, memory_growth_in_iteration, fragmentation,
// reserved_unused, near_oom, memory_outside_framework and out_of_memory.
#pragma once

#include <gpudiag/memory.hpp>

#include "analysis/memory/memory_ledger.hpp"
#include "analysis/memory/memory_summary.hpp"
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

    /// Everything the section and the findings are built from.
    [[nodiscard]] MemorySummary summarize() const;

    [[nodiscard]] const MemoryLedger& ledger() const noexcept { return ledger_; }
    /// For owners that register watches on the books (the live session).
    [[nodiscard]] MemoryLedger& ledger() noexcept { return ledger_; }
    /// Expandable segments were on (allocator setting, or seen on segments).
    [[nodiscard]] bool expandable_segments() const noexcept { return expandable_; }

private:
    void on_oom(const Event& e);
    [[nodiscard]] std::uint16_t oom_device(const Event& e, bool& inferred) const;
    [[nodiscard]] DeviceMemorySummary summarize_device(std::uint16_t device) const;
    [[nodiscard]] std::string site_name(StringId id) const;

    MemoryLedger ledger_;
    const StringTable* strings_ = nullptr;
    bool expandable_ = false;
    bool observed_ = false;
    std::vector<OomGroup> ooms_;
    std::uint64_t oom_events_ = 0;
};

}  // namespace gpudiag::detail
