// SPDX-License-Identifier: Apache-2.0
// StepIndex: the program's steps as the analysis that owns them (the timeline) found them, for
// analyses that judge something per step (did the steps slow down while the GPU throttled?).
// Read when they contribute, after every event was consumed, or while events flow by an analysis
// the registry feeds after the owner (each batch reaches the owner first): the phase times fold
// their buffered time against the steps closed so far.
#pragma once

#include <cstdint>
#include <vector>

namespace gpudiag::detail {

struct StepSpan {
    std::int64_t number = 0;
    std::uint64_t start_ns = 0;
    std::uint64_t end_ns = 0;
};

class StepIndex {
public:
    virtual ~StepIndex() = default;
    /// The steps that ended, by start time (at most the owner's bound on steps kept).
    [[nodiscard]] virtual std::vector<StepSpan> closed_steps() const = 0;
};

}  // namespace gpudiag::detail
