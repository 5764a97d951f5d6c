// SPDX-License-Identifier: Apache-2.0
// OverviewAnalyzer: what the input holds (span, event counts by kind, devices, streams, threads).
#pragma once

#include "core/analyzer.hpp"

#include <array>
#include <cstdint>
#include <set>

namespace gpudiag::detail {

class OverviewAnalyzer final : public Analyzer {
public:
    void begin(const SourceInfo& info, const StringTable& strings) override;
    void consume(std::span<const Event> events) override;
    void contribute(Report& report) override;

private:
    std::array<std::uint64_t, 256> counts_{};
    std::uint64_t first_ns_ = UINT64_MAX;
    std::uint64_t last_ns_ = 0;
    std::set<std::uint16_t> devices_;
    std::set<std::uint64_t> streams_;  // device << 32 | stream
    std::set<std::uint64_t> threads_;  // pid << 32 | tid
};

}  // namespace gpudiag::detail
