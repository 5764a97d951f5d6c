// SPDX-License-Identifier: Apache-2.0
// The event core: one compact, trivially copyable record for everything gpudiag observes.
//
// Every producer (live CUPTI/NVTX/NVML capture, the Kineto and torch-snapshot importers, our own
// recordings, tests) emits `Event`s; every analysis consumes them. An Event is exactly 64 bytes so
// that a cache line holds one, rings and recordings store them raw, and the layout is versioned by
// the recording format (fields are only ever appended to payloads' spare bytes).
#pragma once

#include <gpudiag/export.hpp>
#include <gpudiag/names.hpp>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace gpudiag {

/// Index into a StringTable; 0 is the empty string.
using StringId = std::uint32_t;
inline constexpr StringId kNoString = 0;

inline constexpr std::uint16_t kNoDevice = 0xFFFF;  ///< host-only events
inline constexpr std::uint32_t kNoStream = 0;       ///< unknown or not applicable

enum class EventKind : std::uint8_t {
    kInvalid = 0,
    // ---- device memory (payload: MemoryPayload) ----
    kDeviceAlloc = 1,  ///< driver-level allocation outside any pool (cudaMalloc, cuMemAlloc)
    kDeviceFree = 2,
    kPoolAlloc = 3,  ///< stream-ordered pool allocation (cudaMallocAsync); aux = pool id
    kPoolFree = 4,
    kPoolResize = 5,  ///< a pool's reserved size changed; bytes = reserved, aux = utilized
    kVmMap = 6,       ///< virtual-memory map (cuMemMap); bytes = mapped, aux = physical bytes
    kVmUnmap = 7,
    kSegmentAlloc = 8,  ///< a framework allocator reserved a segment (torch caching allocator);
                        ///< aux = its pool (kSegmentPoolSmall/Large), 0 when not known;
                        ///< extra = its private pool (a CUDA graph's, a MemPool), numbered
                        ///< from 1 by the source; 0 = the allocator's default pool
    kSegmentFree = 9,
    kBlockAlloc = 10,  ///< a framework block handed to the program; bytes = rounded,
                       ///< aux = requested, extra = segment id (0 = unknown) and category
                       ///< (see MemoryCategory); address 0 = the source gives no address
    kBlockFree = 11,
    // ---- memory CUDA allocates that is not device memory (payload: MemoryPayload) ----
    kHostAlloc = 12,  ///< host memory through CUDA (cudaMallocHost, cudaHostAlloc,
                      ///< cudaHostRegister); flags = kPinned (page-locked) or kPageable.
                      ///< Host RAM: never counted as GPU memory
    kHostFree = 13,
    kManagedAlloc = 14,  ///< unified memory (cudaMallocManaged, __managed__): migrates between
                         ///< host and devices on demand, so it is counted apart from both
    kManagedFree = 15,
    // ---- GPU activity ----
    kKernel = 20,   ///< KernelPayload
    kMemcpy = 21,   ///< CopyPayload
    kMemset = 22,   ///< CopyPayload (src kind unused)
    kSync = 23,     ///< SyncPayload: host blocked on the GPU
    kApiCall = 24,  ///< ApiPayload: runtime/driver API call on a host thread
    /// CollectivePayload: one call on a process group as the framework's recorder kept it
    /// (PyTorch's Flight Recorder): start_ns = when it was enqueued, end_ns = when it was found
    /// completed (== start_ns when it was not)
    kCollective = 25,
    // ---- host ranges (payload: RangePayload) ----
    kRangeBegin = 40,  ///< push of a named range (NVTX push, phase enter)
    kRangeEnd = 41,    ///< pop of the innermost open range on the same thread
    kRange = 42,       ///< a complete range [start_ns, end_ns] (importers, CPU ops)
    kStepBegin = 43,   ///< training/inference step boundary; RangePayload.id = step number
    kStepEnd = 44,
    // ---- markers ----
    kOutOfMemory = 60,  ///< OomPayload: an allocation request failed
    kAnnotation = 61,   ///< AnnotationPayload: a user note with an optional value
    kCounter = 62,      ///< CounterPayload: a sampled metric (NVML, allocator statistics)
    /// AnnotationPayload (text = reason): GPU capture stops seeing activity from here (yielded
    /// to another CUPTI client, or found starved of records), until kCaptureResumed. Analyses
    /// treat the window as unobserved, never as idle GPU time.
    kCapturePaused = 63,
    kCaptureResumed = 64,  ///< AnnotationPayload: GPU capture sees activity again from here
};
template <>
GPUDIAG_API EnumNames<EventKind> enum_names<EventKind>() noexcept;

/// Where memory lives (for copies and allocations).
enum class MemoryKind : std::uint8_t {
    kUnknown = 0,
    kDevice = 1,
    kPageable = 2,  ///< ordinary host memory: copies stage through a bounce buffer, synchronously
    kPinned = 3,    ///< page-locked host memory
    kManaged = 4,
    kArray = 5,
};
template <>
GPUDIAG_API EnumNames<MemoryKind> enum_names<MemoryKind>() noexcept;

enum class CopyDirection : std::uint8_t {
    kUnknown = 0,
    kHostToDevice = 1,
    kDeviceToHost = 2,
    kDeviceToDevice = 3,
    kHostToHost = 4,
    kPeerToPeer = 5,
};
template <>
GPUDIAG_API EnumNames<CopyDirection> enum_names<CopyDirection>() noexcept;

enum class SyncKind : std::uint8_t {
    kUnknown = 0,
    kEvent = 1,            ///< cudaEventSynchronize
    kStreamWaitEvent = 2,  ///< cudaStreamWaitEvent (GPU-side wait, not a host block)
    kStream = 3,           ///< cudaStreamSynchronize
    kDevice = 4,           ///< cudaDeviceSynchronize / context synchronize
    kImplicit = 5,         ///< a blocking call that synchronizes implicitly (pageable memcpy, free)
};
template <>
GPUDIAG_API EnumNames<SyncKind> enum_names<SyncKind>() noexcept;

/// What a host range means to the analyses.
enum class RangeCategory : std::uint8_t {
    kGeneric = 0,        ///< NVTX or user range with no special meaning
    kPhase = 1,          ///< gpudiag.phase("forward") and friends
    kInputWait = 2,      ///< the loop waiting for its next batch (DataLoader __next__)
    kCpuOp = 3,          ///< framework operator on the CPU (aten::conv2d)
    kStep = 4,           ///< a whole step given as a range (ProfilerStep#N)
    kCommunication = 5,  ///< host side of a collective (nccl:all_reduce)
    kUserAnnotation = 6,
    kOsRuntime = 7,  ///< a call into the operating system (Nsight Systems' OS runtime trace)
};
template <>
GPUDIAG_API EnumNames<RangeCategory> enum_names<RangeCategory>() noexcept;

enum class ApiDomain : std::uint8_t { kUnknown = 0, kRuntime = 1, kDriver = 2 };
template <>
GPUDIAG_API EnumNames<ApiDomain> enum_names<ApiDomain>() noexcept;

/// Metrics sampled over time. Values are in the unit named.
enum class CounterKind : std::uint16_t {
    kUnknown = 0,
    kGpuUtilizationPercent = 1,
    kMemoryUtilizationPercent = 2,
    kDeviceMemoryUsedBytes = 3,  ///< NVML used (all processes)
    kDeviceMemoryTotalBytes = 4,
    kProcessMemoryUsedBytes = 5,     ///< this process, per NVML
    kForeignProcessMemoryBytes = 6,  ///< other processes on the same GPU
    kSmClockMhz = 7,
    kSmClockMaxMhz = 8,
    kTemperatureC = 9,
    kPowerWatts = 10,
    kPowerLimitWatts = 11,
    kThrottleReasons = 12,  ///< NVML clock-event reason bit mask
    kEccCorrectedErrors = 13,
    kEccUncorrectedErrors = 14,
    kPcieLinkGeneration = 15,       ///< PCIe generation the link runs at now
    kPcieLinkGenerationMax = 16,    ///< the highest both the GPU and the system support
    kPcieLinkWidth = 17,            ///< lanes the link runs on now
    kPcieLinkWidthMax = 18,         ///< the most lanes both ends support
    kPcieReplays = 19,              ///< PCIe replays since the driver loaded (link errors)
    kFrameworkAllocatedBytes = 20,  ///< torch memory_allocated
    kFrameworkReservedBytes = 21,   ///< torch memory_reserved
    kFrameworkAllocRetries = 22,
    kFrameworkOoms = 23,
    kFrameworkInactiveSplitBytes = 24,
    kDroppedRecords = 30,             ///< capture losses reported by the source
    kCaptureOverheadNs = 31,          ///< CUPTI's own time (its OVERHEAD records), cumulative
    kUntimedKernels = 32,             ///< kernels CUPTI saw but could not time (device timestamp
                                      ///< buffer full), cumulative: seen, not lost
    kRetiredPagesSingleBit = 40,      ///< pages retired for repeated corrected errors (pre-Ampere)
    kRetiredPagesDoubleBit = 41,      ///< pages retired for an uncorrected error (pre-Ampere)
    kRetiredPagesPending = 42,        ///< 1: a retirement waits for the next reset or driver load
    kRemappedRowsCorrectable = 43,    ///< memory rows remapped for corrected errors (Ampere on)
    kRemappedRowsUncorrectable = 44,  ///< rows remapped for uncorrected errors
    kRowRemapPending = 45,            ///< 1: a remap waits for the next reset
    kRowRemapFailed = 46,             ///< 1: a remap failed (the GPU needs service)
    kXidError = 47,              ///< one per Xid event NVML delivered; the value is the Xid number
    kNvlinkLinksActive = 48,     ///< NVLink links up
    kNvlinkReplayErrors = 49,    ///< summed over the active links, since the driver loaded
    kNvlinkRecoveryErrors = 50,  ///< link recoveries (retraining), summed, since the driver loaded
    kNvlinkCrcErrors = 51,       ///< flow-control and data CRC errors, summed
    kPowerLimitDefaultWatts = 52,  ///< the board's default power limit
    kPersistenceMode = 53,         ///< 1: the driver stays loaded without clients
    kMigMode = 54,                 ///< 1: the GPU is split into MIG instances
    // NVML GPU performance monitoring (GPM, Hopper on): shares of a window between two readings.
    kSmActivePercent = 55,      ///< SMs with at least one warp resident, averaged (DCGM SM active)
    kSmOccupancyPercent = 56,   ///< warps resident of the most the SMs can hold, averaged
    kTensorActivePercent = 57,  ///< tensor pipes busy (any precision)
    kDramActivePercent = 58,    ///< device memory bandwidth used, of the peak
    kFanSpeedPercent = 59,      ///< the fan's speed, of its maximum (boards with fans)
    kOtherProcessMemoryBytes = 60,  ///< one other process' memory; Event::process = its PID
                                    ///< as NVML lists it (the host's, outside a container)
    kForeignProcessSmPercent = 61,  ///< SM time other processes used since the last sample
};
template <>
GPUDIAG_API EnumNames<CounterKind> enum_names<CounterKind>() noexcept;

/// Bits of a kThrottleReasons counter's value: why the clocks were lowered. The values are NVML's
/// clock-event reasons (nvmlClocksEventReason*), so a recorded mask reads the same everywhere.
namespace clock_event_reason {
inline constexpr std::uint64_t kGpuIdle = 0x1;
inline constexpr std::uint64_t kSwPowerCap = 0x4;
inline constexpr std::uint64_t kHwSlowdown = 0x8;
inline constexpr std::uint64_t kSwThermal = 0x20;
inline constexpr std::uint64_t kHwThermal = 0x40;
inline constexpr std::uint64_t kHwPowerBrake = 0x80;
}  // namespace clock_event_reason

struct MemoryPayload {
    std::uint64_t address;
    std::uint64_t bytes;
    std::uint64_t aux;    ///< meaning per kind (see EventKind)
    StringId site;        ///< call site or stack (interned), kNoString when unknown
    std::uint32_t extra;  ///< correlation id for driver events, segment id for blocks
};

struct KernelPayload {
    StringId name;
    std::uint32_t correlation;
    std::uint32_t grid_size;     ///< blocks in the grid (x*y*z), 0 when unknown
    std::uint32_t block_size;    ///< threads per block, 0 when unknown
    std::uint32_t shared_bytes;  ///< static + dynamic shared memory
    std::uint32_t registers;     ///< per thread
    std::uint64_t reserved;
};

struct CopyPayload {
    std::uint64_t bytes;
    std::uint32_t correlation;
    CopyDirection direction;
    MemoryKind src_kind;
    MemoryKind dst_kind;
    std::uint8_t is_async;  ///< issued through an async API
    std::uint64_t reserved[2];
};

struct SyncPayload {
    std::uint32_t correlation;
    SyncKind sync_kind;
    std::uint8_t pad[3];
    std::uint64_t object;  ///< event or stream handle waited on, 0 when unknown
    /// kEvent / kStreamWaitEvent: the stream the waited-on event was recorded on, kNoStream when
    /// the source does not say (Kineto's wait_on_stream)
    std::uint32_t wait_stream;
    /// correlation id of the cudaEventRecord call the wait is for, 0 when unknown
    std::uint32_t record_correlation;
    std::uint64_t reserved;
};

struct ApiPayload {
    StringId name;  ///< e.g. "cudaLaunchKernel"
    std::uint32_t correlation;
    std::uint32_t callback_id;  ///< CUPTI cbid, 0 when unknown
    ApiDomain domain;
    std::uint8_t pad[3];
    std::int64_t return_code;  ///< CUresult / cudaError_t, 0 = success
    std::uint64_t reserved;
};

struct RangePayload {
    StringId name;
    RangeCategory category;
    std::uint8_t pad[3];
    std::uint64_t id;      ///< step number for steps, range or correlation id otherwise
    std::uint64_t parent;  ///< enclosing range id, 0 when none
    std::uint64_t reserved;
};

struct OomPayload {
    std::uint64_t requested_bytes;
    std::uint64_t free_bytes;   ///< free device memory the failing allocator saw, if known
    std::uint64_t total_bytes;  ///< device capacity, if known
    StringId site;
    std::uint32_t correlation;  ///< CUPTI correlation id of the failed call, 0 when none
};

struct AnnotationPayload {
    StringId text;
    std::uint32_t pad;
    std::int64_t value;
    std::uint64_t reserved[2];
};

/// CollectivePayload::state: how far a collective got, as its recorder last saw it.
namespace collective_state {
inline constexpr std::uint8_t kUnknown = 0;
inline constexpr std::uint8_t kScheduled = 1;  ///< enqueued, not seen started
inline constexpr std::uint8_t kStarted = 2;    ///< running (waiting for its peers, or moving data)
inline constexpr std::uint8_t kCompleted = 3;
}  // namespace collective_state

struct CollectivePayload {
    StringId group;      ///< the process group's name as the recorder gives it ("0", "tp:1")
    StringId op;         ///< the call without its backend prefix ("all_reduce", "send")
    std::uint64_t seq;   ///< its sequence id on the group (the p2p one with kEventFlagP2p)
    StringId sizes;      ///< input and output sizes and dtypes as text ("[[4]] Float -> [[4]]")
    StringId stack;      ///< the Python stack that called it, innermost frame first, one a line
    std::uint8_t state;  ///< collective_state::k*
    std::uint8_t pad[3];
    std::uint32_t record;  ///< the recorder's record id (low 32 bits): the order of the calls
};

struct CounterPayload {
    CounterKind counter;
    std::uint16_t pad;
    std::uint32_t pad2;
    double value;
    std::uint64_t reserved[2];
};

/// Bits of Event::flags. Memory events keep their MemoryKind in the low four bits, and so do
/// kOutOfMemory markers (the kind of memory the failed request asked for; kUnknown = device).
inline constexpr std::uint8_t kMemoryKindMask = 0x0F;
/// kOutOfMemory: a failed allocation call whose caller may retry it (a caching allocator frees
/// its cache and tries again), so not yet an out-of-memory error for the program. A later
/// kOutOfMemory with kEventFlagRetrySucceeded and the same OomPayload::correlation withdraws it.
inline constexpr std::uint8_t kEventFlagRetryable = 0x10;
/// kOutOfMemory: the same request then succeeded on the same thread: the retryable marker with
/// this correlation was an allocator retry, not an out-of-memory error (shares its bit with
/// kEventFlagExpandable, which only segment events carry).
inline constexpr std::uint8_t kEventFlagRetrySucceeded = 0x20;
/// kSegmentAlloc/kSegmentFree: pages mapped into or unmapped from an expandable segment (torch
/// segment_map/segment_unmap); the range extends or shrinks the segment that contains it.
inline constexpr std::uint8_t kEventFlagExpandable = 0x20;
/// kBlockFree: the program freed the block but the allocator may not reuse it until the streams
/// that used it catch up (torch free_requested); a later kBlockFree without it completes the free.
inline constexpr std::uint8_t kEventFlagPendingFree = 0x40;
/// kCollective: a point-to-point call (send, recv): CollectivePayload::seq is its p2p sequence id.
inline constexpr std::uint8_t kEventFlagP2p = 0x01;
/// kCollective: the recorder retired it (its work object is gone: completed, or failed/timed out
/// where the state is not kCompleted).
inline constexpr std::uint8_t kEventFlagRetired = 0x02;
/// Reconstructed or derived rather than observed (initial state rebuilt from a snapshot, say).
inline constexpr std::uint8_t kEventFlagSynthetic = 0x80;

/// One observation. Trivially copyable, 64 bytes, no pointers: safe to store in rings and files.
struct Event {
    EventKind kind = EventKind::kInvalid;
    std::uint8_t flags = 0;            ///< MemoryKind for memory events; bit 7 = synthetic
    std::uint16_t device = kNoDevice;  ///< device ordinal; kNoDevice for host-only events
    std::uint32_t stream = kNoStream;
    std::uint32_t process = 0;   ///< pid (or rank-local process id from an importer)
    std::uint32_t thread = 0;    ///< tid
    std::uint64_t start_ns = 0;  ///< nanoseconds on the source's clock
    std::uint64_t end_ns = 0;    ///< == start_ns for instants
    union {
        MemoryPayload memory;
        KernelPayload kernel;
        CopyPayload copy;
        SyncPayload sync;
        ApiPayload api;
        RangePayload range;
        OomPayload oom;
        AnnotationPayload annotation;
        CounterPayload counter;
        CollectivePayload collective;
        std::uint8_t raw[32];
    };

    Event() noexcept : raw{} {}

    [[nodiscard]] std::uint64_t duration_ns() const noexcept {
        return end_ns > start_ns ? end_ns - start_ns : 0;
    }
};

static_assert(sizeof(Event) == 64, "Event must stay 64 bytes: rings and recordings store it raw");
static_assert(std::is_trivially_copyable_v<Event>, "Event must be trivially copyable");
static_assert(std::is_standard_layout_v<Event>, "Event must have a standard layout");

/// kSegmentAlloc's aux: which pool of torch's caching allocator the segment belongs to.
inline constexpr std::uint64_t kSegmentPoolUnknown = 0;
inline constexpr std::uint64_t kSegmentPoolSmall = 1;  ///< requests up to 1 MiB
inline constexpr std::uint64_t kSegmentPoolLarge = 2;

/// What a framework block holds, where the framework says (torch snapshots: from the frames of
/// its own code: nn.Module setup, the forward call, autograd's backward, torch.optim). Carried by
/// kBlockAlloc in the top four bits of MemoryPayload::extra; the low 28 bits keep the segment id.
/// Inputs that predate it carry 0: kOther.
enum class MemoryCategory : std::uint8_t {
    kOther = 0,           ///< the framework did not say
    kParameters = 1,      ///< model weights (allocated by module setup, .to(), loading)
    kGradients = 2,       ///< allocated during the backward pass (gradients and their temporaries)
    kOptimizerState = 3,  ///< allocated by the optimizer (its state and step temporaries)
    kActivations = 4,     ///< allocated during the forward pass
};
inline constexpr std::size_t kMemoryCategoryCount = 5;

constexpr MemoryCategory block_category(const MemoryPayload& m) noexcept {
    auto c = static_cast<std::uint8_t>(m.extra >> 28);
    return c < kMemoryCategoryCount ? static_cast<MemoryCategory>(c) : MemoryCategory::kOther;
}
constexpr void set_block_category(MemoryPayload& m, MemoryCategory c) noexcept {
    m.extra = (m.extra & 0x0FFFFFFFu) | (static_cast<std::uint32_t>(c) << 28);
}
template <>
GPUDIAG_API EnumNames<MemoryCategory> enum_names<MemoryCategory>() noexcept;
/// "parameters", "gradients", "optimizer_state", "activations", "other".
GPUDIAG_API const char* memory_category_name(MemoryCategory c) noexcept;

/// True for kinds whose payload is MemoryPayload.
constexpr bool is_memory_event(EventKind k) noexcept {
    return k >= EventKind::kDeviceAlloc && k <= EventKind::kManagedFree;
}

/// True for work that occupies a GPU (kernels, copies, memsets).
constexpr bool is_gpu_activity(EventKind k) noexcept {
    return k == EventKind::kKernel || k == EventKind::kMemcpy || k == EventKind::kMemset;
}

/// A stable lower-case name for a kind ("kernel", "block_alloc"); "unknown" for others.
GPUDIAG_API const char* event_kind_name(EventKind kind) noexcept;

}  // namespace gpudiag
