// SPDX-License-Identifier: Apache-2.0
// Memory diagnostics shared by the offline analyses, the live session and the Python layer:
// watches on a device's memory level and the computed explanation of an
// out-of-memory failure.
#pragma once

#include <gpudiag/export.hpp>
#include <gpudiag/names.hpp>
#include <gpudiag/status.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace gpudiag {

/// Which level of a device's memory a watch or a figure refers to.
enum class MemoryMetric : std::uint8_t {
    kAllocated = 0,  ///< bytes in live framework blocks (rounded sizes)
    kReserved = 1,   ///< bytes of framework segments (allocated + cached)
    /// reserved + device memory held outside the framework, or the process' usage as NVML
    /// reports it when that is larger (it also counts the CUDA context)
    kDeviceUsed = 2,
};
template <>
GPUDIAG_API EnumNames<MemoryMetric> enum_names<MemoryMetric>() noexcept;
GPUDIAG_API const char* memory_metric_name(MemoryMetric m) noexcept;  ///< "allocated", ...

/// A level to watch. The callback fires once each time the value rises to the level or above,
/// and re-arms only after the value falls below `level × (1 − hysteresis_fraction)`, so a value
/// hovering at the level does not call back on every allocation.
struct MemoryWatch {
    int device = -1;  ///< -1: every device
    MemoryMetric metric = MemoryMetric::kDeviceUsed;
    std::uint64_t level_bytes = 0;  ///< absolute level; used when level_fraction is 0
    /// Level as a fraction of device capacity (0.9 = 90 %). Inactive until the capacity is known.
    double level_fraction = 0;
    double hysteresis_fraction = 0.05;
};

/// What a watch callback receives.
struct MemoryWatchCrossing {
    int watch_id = 0;
    int device = 0;
    MemoryMetric metric = MemoryMetric::kDeviceUsed;
    std::uint64_t level_bytes = 0;     ///< the resolved level
    std::uint64_t value_bytes = 0;     ///< the value that crossed it
    std::uint64_t capacity_bytes = 0;  ///< 0 when unknown
    std::uint64_t time_ns = 0;         ///< on the event source's clock
    /// What emptying the framework's cache could do at that moment: `releasable_bytes` sit in
    /// wholly free segments (torch.cuda.empty_cache() returns them), `stranded_bytes` are free
    /// but in segments that also hold live blocks (it cannot). Valid when `cache_known`.
    bool cache_known = false;
    std::uint64_t releasable_bytes = 0;
    std::uint64_t stranded_bytes = 0;
};

/// Called on the thread that feeds the ledger, inside its update. Keep it short; it must not
/// feed the same ledger.
using MemoryWatchCallback = std::function<void(const MemoryWatchCrossing&)>;

/// Why an allocation failed, from the allocator state at the moment of failure.
enum class OomCause : std::uint8_t {
    kUnknown = 0,
    /// Enough memory was free in total (in segments plus on the device) but no single free
    /// block was large enough, and segments could not be released to make room.
    kFragmentation = 1,
    /// The framework's cache held enough fully free segments to serve the request once
    /// released: the failing request came from outside that cache (another library or
    /// allocator in the process) or the cache was not released in time.
    kBloatedCache = 2,
    /// The request would have fitted if memory held outside the framework (other libraries'
    /// cudaMalloc, pools, virtual-memory mappings, other processes) had been free.
    kOutsideFramework = 3,
    /// Live data alone leaves too little room: the device is too small for this working set.
    kTooLittleMemory = 4,
    /// A free block large enough existed when the state was recorded (the request was on
    /// another stream or pool, or memory was freed between the failure and the snapshot).
    kFreeBlockAvailable = 5,
    /// The request would have fitted without the memory other processes hold on the device.
    kOtherProcess = 6,
};
template <>
GPUDIAG_API EnumNames<OomCause> enum_names<OomCause>() noexcept;
GPUDIAG_API const char* oom_cause_name(OomCause c) noexcept;  ///< "fragmentation", ...

/// A computed explanation of an out-of-memory failure, with the figures behind it.
struct OomExplanation {
    OomCause cause = OomCause::kUnknown;
    int device = 0;
    std::uint64_t requested_bytes = 0;
    std::uint64_t rounded_bytes = 0;   ///< as the caching allocator rounds it (512 B multiples)
    std::uint64_t segment_bytes = 0;   ///< size of the new segment the allocator would map
    std::uint64_t capacity_bytes = 0;  ///< 0 when unknown
    bool device_free_known = false;
    std::uint64_t device_free_bytes = 0;  ///< free on the device (driver view), if known
    std::uint64_t reserved_bytes = 0;
    std::uint64_t allocated_bytes = 0;         ///< live blocks, rounded
    std::uint64_t free_in_segments_bytes = 0;  ///< inactive blocks inside segments
    std::uint64_t largest_free_block_bytes = 0;
    std::uint64_t releasable_bytes = 0;      ///< in fully free segments (empty_cache can return)
    std::uint64_t inactive_split_bytes = 0;  ///< free blocks in partly used segments
    std::uint64_t pending_free_bytes = 0;    ///< freed, waiting for streams to catch up
    std::uint64_t outside_framework_bytes = 0;
    std::uint64_t other_processes_bytes = 0;
    bool expandable_segments = false;
    std::string summary;  ///< plain language, with the numbers
    /// The facts the cause rests on, one per line ("largest free block 314 MiB < 1.0 GiB").
    std::vector<std::string> evidence;
    std::vector<std::string> advice;  ///< what fits these facts, most effective first
    /// Call sites of live blocks that pin partly used segments (split them around free space),
    /// with the free bytes of the segments they pin; most first.
    std::vector<std::pair<std::string, std::uint64_t>> pinning_sites;
};

/// The allocator's figures at a failed allocation, as a framework reports them (PyTorch's OOM
/// observer plus torch.cuda.memory_stats), for explain_oom_state. Unknown figures stay 0 with
/// their `*_known` flag false.
struct AllocatorOomState {
    int device = 0;
    std::uint64_t requested_bytes = 0;  ///< the request, or the segment the allocator tried to map
    std::uint64_t segment_bytes = 0;    ///< the new segment it needed (0: derived from the request)
    bool device_free_known = false;
    std::uint64_t device_free_bytes = 0;
    std::uint64_t capacity_bytes = 0;  ///< 0 when unknown
    std::uint64_t reserved_bytes = 0;
    std::uint64_t allocated_bytes = 0;
    /// Free bytes in segments that also hold live blocks (torch's inactive_split_bytes).
    std::uint64_t inactive_split_bytes = 0;
    /// Free bytes in wholly free segments. torch releases them and retries before it reports a
    /// failure (except while a CUDA graph is captured), so after a real OOM this is 0, known.
    bool releasable_known = false;
    std::uint64_t releasable_bytes = 0;
    bool largest_free_block_known = false;
    std::uint64_t largest_free_block_bytes = 0;
    std::uint64_t pending_free_bytes = 0;
    std::uint64_t outside_framework_bytes = 0;  ///< device memory this process holds outside it
    std::uint64_t other_processes_bytes = 0;    ///< held by other processes (NVML)
    bool expandable_segments = false;
};

/// The one OOM explainer (every path uses it): why a request fails given the allocator's state.
/// In order: a free block that fits (another stream or pool asked); wholly free cached segments
/// that cover the new segment (the allocator releases them and retries, so a failure with them
/// means the request came from outside its cache: a bloated cache); enough free in total but not
/// in one block (fragmentation); memory held by other processes or outside the framework; else
/// the working set does not fit. Errors: none (unknown figures lower what can be concluded).
GPUDIAG_API OomExplanation explain_oom_state(const AllocatorOomState& state) noexcept;

/// Explains why an allocation of `request_bytes` on `device` fails given the allocator state in
/// a torch memory snapshot (read with the safe reader; never executes the file).
/// Errors: as analyze_files for the file; kInvalidArgument for a zero request.
/// Thread-safety: safe.
GPUDIAG_API Result<OomExplanation> explain_oom_in_snapshot(const std::string& path,
                                                           std::uint64_t request_bytes,
                                                           int device = 0) noexcept;

/// One frame of a call stack (Python or native), as torch records them.
struct StackFrame {
    std::string filename;
    std::string name;       ///< function
    std::int64_t line = 0;  ///< 0 when unknown
};

/// Where an allocation came from, named as every gpudiag report names it ("train/model.py:42
/// forward"): from frames innermost first, the first in the program's own Python code (not
/// torch, not an installed package or the standard library); else the first Python frame outside
/// torch, then the first native frame that is not the allocator itself, then the first torch
/// Python frame. "" when no frame says anything. Thread-safety: safe. Errors: none.
GPUDIAG_API std::string allocation_site(const std::vector<StackFrame>& frames) noexcept;

}  // namespace gpudiag
