// SPDX-License-Identifier: Apache-2.0
// explain_oom: why a request of N bytes fails on a device, from the ledger at that instant. The
// decision itself is explain_oom_state (public, memory.hpp), which every path shares: the ledger
// (snapshots, recordings, live allocator events) and a framework's own figures (PyTorch's OOM
// observer from Python).
#pragma once

#include <gpudiag/memory.hpp>
#include <gpudiag/string_table.hpp>

#include "analysis/memory/memory_ledger.hpp"

#include <cstdint>
#include <string>

namespace gpudiag::detail {

struct OomContext {
    bool device_free_known = false;
    std::uint64_t device_free_bytes = 0;  ///< what the driver reported free at the failure
    bool expandable_segments = false;     ///< the allocator setting (or seen on segments)
    /// Why expandable segments are unsupported for this program ("" when nothing says so): the
    /// advice then names them as such instead of advising them (expandable_unsupported_reason
    /// in analysis/allocator/allocator_versions.hpp fills it from the allocation history).
    std::string expandable_unsupported;
    const StringTable* strings = nullptr;  ///< for site names; may be null
};

/// The computed explanation: cause, figures, plain-language summary and advice that fits.
/// A request of 0 bytes means "unknown" (CUPTI outside deep mode): the cause then rests on the
/// state alone.
OomExplanation explain_oom(std::uint64_t request_bytes, std::uint16_t device,
                           const MemoryLedger& ledger, const OomContext& context = {});

/// The ledger's state as AllocatorOomState (what explain_oom decides on).
AllocatorOomState oom_state(std::uint64_t request_bytes, std::uint16_t device,
                            const MemoryLedger& ledger, const DeviceLayout& layout,
                            const OomContext& context);

/// torch's CUDACachingAllocator rounding: requests round up to 512 B multiples.
std::uint64_t torch_round_size(std::uint64_t bytes);
/// torch's segment size for a request: ≤1 MiB → 2 MiB, <10 MiB → 20 MiB, else 2 MiB multiples.
std::uint64_t torch_segment_size(std::uint64_t rounded);

}  // namespace gpudiag::detail
