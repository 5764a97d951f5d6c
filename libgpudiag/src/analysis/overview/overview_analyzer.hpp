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
    // The keys inserted last: events come in runs from one thread or stream, and a repeat need
    // not search the set again. Each starts at a value no key can take.
    std::uint16_t last_device_ = kNoDevice;
    std::uint64_t last_stream_ = UINT64_MAX;  // devices stop at 0xFFFF
    std::uint64_t last_thread_ = 0;           // tid 0 is never recorded
};

}  // namespace gpudiag::detail
