// SPDX-License-Identifier: Apache-2.0
// EventQueue: where live producers (CUPTI decoder, NVTX handlers, NVML sampler, framework hooks)
// put events. Implementations never block and never grow: a full queue refuses and counts.
#pragma once

#include <gpudiag/event.hpp>

namespace gpudiag::detail {

class EventQueue {
public:
    virtual ~EventQueue() = default;
    /// Hands `event` over; false when full (the implementation counts the drop).
    /// Thread-safety: safe from any number of producer threads. Callback-safe: yes.
    virtual bool try_push(const Event& event) noexcept = 0;
};

}  // namespace gpudiag::detail
