// SPDX-License-Identifier: Apache-2.0
// CriticalPath: the dependency graph of the training loop, replayed under what-ifs.
//
// The host is one sequence of items in time (input waits, synchronizations, blocking copies, API
// calls; the CPU time between them), the union of its threads: the training loop and the autograd
// thread hand off to each other, so their union is the loop's own progress. Each GPU activity
// depends on its launch (correlation id), on the activity before it on its stream, and on the
// stream it waits for (cudaStreamWaitEvent, where the trace names it); a synchronizing call or a
// blocking copy returns when the GPU work it waits for ends (the stream the trace names, else the
// last work that ended before it returned).
//
// Replaying the graph with the measured durations gives back the measured times; replaying it
// with one cause removed (input waits, host syncs, pageable copies, per-kernel launches,
// communication) gives the step time a fix would buy. The replay runs forward over the events as
// they arrive and keeps O(streams) state per what-if; the per-step critical path is traced back
// over a bounded history of nodes (steps whose nodes do not fit are counted, not traced).
#pragma once

#include <gpudiag/event.hpp>

#include "analysis/timeline/host_cause.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

namespace gpudiag::detail {

/// What a stretch of a step's critical path was: GPU work, or the host (one part per HostCause).
enum class PathPart : std::uint8_t {
    kCompute = 0,        ///< compute kernels
    kCommunication = 1,  ///< collective (NCCL/RCCL) kernels, waiting for peers included
    kMemory = 2,         ///< copies and memsets on the GPU
    kGpuGap = 3,         ///< gaps between queued GPU work (launch gaps the device adds)
    kInput = 4,          ///< the host waiting for its next batch
    kSync = 5,           ///< the host in a synchronizing call, beyond the GPU work it waited for
    kCopy = 6,           ///< the host in a blocking copy, beyond the copy itself
    kLaunch = 7,         ///< API calls and the latency from a launch to its kernel's start
    kCpu = 8,            ///< CPU work between API calls (Python, the framework)
};
inline constexpr std::size_t kPathParts = 9;
/// The host's part for `c`: the host parts follow the GPU ones in HostCause order.
constexpr PathPart path_part_of(HostCause c) noexcept {
    return static_cast<PathPart>(static_cast<std::size_t>(PathPart::kInput) +
                                 static_cast<std::size_t>(c));
}
static_assert(path_part_of(HostCause::kInput) == PathPart::kInput &&
                  path_part_of(HostCause::kSync) == PathPart::kSync &&
                  path_part_of(HostCause::kCopy) == PathPart::kCopy &&
                  path_part_of(HostCause::kLaunch) == PathPart::kLaunch &&
                  path_part_of(HostCause::kCpu) == PathPart::kCpu &&
                  kPathParts == static_cast<std::size_t>(PathPart::kInput) + kHostCauses,
              "one host part per HostCause, in its order");
/// "compute", "communication", "memory", "gpu_gap", then host_cause_key's ("input", ...).
const char* path_part_key(PathPart p) noexcept;

/// The causes a replay removes.
enum class WhatIf : std::uint8_t {
    kMeasured = 0,      ///< nothing removed: reproduces the measured timeline
    kNoInputWait = 1,   ///< batches ready when the loop asks (input waits take no time)
    kNoSync = 2,        ///< synchronizing calls do not block the host
    kPinnedCopies = 3,  ///< pageable copies made pinned and async: the host does not wait for them
    kCudaGraph = 4,     ///< launches batched / captured in a CUDA graph: no per-kernel host work
    kNoCommunication = 5,  ///< collectives hidden behind compute (take no time on the path)
    kHostNeverLate = 6,    ///< all host-side causes at once: the GPU-bound step time
    kEveryCause = 7,       ///< every cause above removed together: what fixing all findings buys
};
inline constexpr std::size_t kWhatIfs = 8;
/// "no_input_wait", "hidden_communication", ...: the what_if table's row keys (other analyses read
/// rows by them).
const char* what_if_key(WhatIf w) noexcept;

/// Results over a range of steps (or the whole input without steps).
struct CriticalPathSummary {
    bool available = false;   ///< a host timeline and GPU work were seen
    bool per_step = false;    ///< figures are per step (else per window)
    std::uint64_t steps = 0;  ///< steps the savings are averaged over
    double measured_ns = 0;   ///< measured time per step (or the window), replay's span
    std::array<double, kWhatIfs> saving_ns{};  ///< time saved per step (or window) by each what-if
    std::uint64_t traced_steps = 0;            ///< steps whose critical path was traced
    std::uint64_t untraced_steps = 0;          ///< steps with more nodes than the history holds
    std::array<double, kPathParts> path_ns{};  ///< mean critical path per traced step, by part
    double path_step_ns = 0;                   ///< mean duration of the traced steps
    /// Per traced step (index into the step list, at most kPathRows, evenly spread): its path.
    std::vector<std::pair<std::size_t, std::array<std::uint64_t, kPathParts>>> step_paths;
    // How the graph was joined.
    std::uint64_t launch_edges = 0;           ///< GPU activities joined to their launch call
    std::uint64_t unlaunched = 0;             ///< GPU activities whose launch is not in the input
    std::uint64_t sync_waits = 0;             ///< host syncs and copies that waited for GPU work
    std::uint64_t syncs_named = 0;            ///< syncs whose stream the trace names
    std::uint64_t syncs_inferred = 0;         ///< syncs joined by timing (the stream is not named)
    std::uint64_t stream_waits = 0;           ///< cudaStreamWaitEvent edges between streams
    std::uint64_t stream_waits_inferred = 0;  ///< waits on another stream inferred by timing
    std::uint64_t late_items = 0;    ///< host items that arrived after the replay passed them
    std::uint64_t forced_items = 0;  ///< host items replayed before their GPU work arrived
    double replay_error_ns = 0;      ///< |replayed - measured| span (0: the graph is complete)
    /// The measured time the savings cover, in all (not per step): the window the findings state.
    double window_ns = 0;
};

/// The stretch of time a summary without steps covers, and stretches left out of it (one-off
/// costs, reported on their own). 0 / UINT64_MAX: from the first thing seen to the last.
struct PathWindow {
    std::uint64_t from = 0;
    std::uint64_t to = UINT64_MAX;
    /// [start, end) stretches left out; those outside the window are ignored.
    std::vector<std::pair<std::uint64_t, std::uint64_t>> exclude{};
};

class CriticalPath {
public:
    /// Bounds (memory): nodes kept for tracing paths back, host items and GPU activities waiting
    /// to be replayed, steps.
    static constexpr std::size_t kMaxHistory = 1 << 19;
    static constexpr std::size_t kMaxPendingHost = 1 << 18;
    static constexpr std::size_t kMaxPendingGpu = 1 << 18;
    static constexpr std::size_t kMaxSteps = 1 << 16;
    static constexpr std::size_t kMaxStreams = 1024;
    static constexpr std::size_t kPathRows = 256;

    /// `max_history`: nodes kept for tracing steps back (tests use a small one).
    explicit CriticalPath(std::size_t max_history = kMaxHistory) : max_history_(max_history) {}

    /// A host item: an input wait (kInput), a synchronizing call or a CUPTI/Kineto sync record
    /// (kSync), a copy call (kCopy), a launch or any other API call (kLaunch); kCpu is the time
    /// between items, never one. `stream`: the stream a sync waits on (kNoStream when the trace
    /// does not say).
    void add_host(HostCause kind, std::uint64_t start, std::uint64_t end, std::uint32_t correlation,
                  std::uint16_t device = kNoDevice, std::uint32_t stream = kNoStream);
    /// A sync record that names what an API sync call (same correlation) waits on.
    void name_sync_stream(std::uint32_t correlation, std::uint32_t stream);
    /// cudaStreamWaitEvent at `at`: work on `stream` launched after it waits for the work on
    /// `on_stream` launched before it.
    void add_stream_wait(std::uint64_t at, std::uint16_t device, std::uint32_t stream,
                         std::uint32_t on_stream);
    /// A GPU activity, in start order per device; `launch` 0 when its launch is unknown.
    void add_gpu(const Event& e, std::uint64_t launch, PathPart part, bool pageable);
    /// Steps, as the timeline analysis finds them (an open step has end UINT64_MAX).
    void add_step(std::uint64_t start, std::uint64_t end);
    void close_step(std::uint64_t start, std::uint64_t end);
    /// The step that starts at `start` starts at `earlier` instead (its fetch, found after the
    /// step: see TimelineAnalyzer::wait_between_steps); ignored once the replay has passed it.
    void move_step_start(std::uint64_t start, std::uint64_t earlier);

    /// Replays everything still waiting (end of input). Idempotent.
    void finish();
    /// Results over steps [first, last) of the step list (in start order); with no steps, the
    /// whole input. Call after finish() (a copy can be finished for a report mid-run).
    [[nodiscard]] CriticalPathSummary summarize(std::size_t first, std::size_t last,
                                                const PathWindow& window = {}) const;
    [[nodiscard]] std::size_t steps() const noexcept { return steps_.size(); }

private:
    static constexpr std::uint64_t kNone = UINT64_MAX;
    using Times = std::array<std::uint64_t, kWhatIfs>;

    struct HostItem {
        std::uint64_t start;
        std::uint64_t end;
        std::uint32_t correlation;
        std::uint32_t stream;
        std::uint16_t device;
        HostCause kind;
        bool stream_wait;  // a cudaStreamWaitEvent mark, not host time
        std::uint32_t on_stream;
    };
    struct GpuItem {
        std::uint64_t start;
        std::uint64_t end;
        std::uint64_t launch;  // 0: unknown
        std::uint32_t correlation;
        std::uint32_t stream;
        std::uint16_t device;
        PathPart part;
        bool pageable;
    };
    // How a replayed GPU activity was released (the edge the measured timeline says bound it).
    enum class Binding : std::uint8_t { kLaunch, kPrevious, kWaited, kUnknownLaunch };
    struct GpuNode {
        GpuItem item;
        Binding binding;
        std::uint64_t ref;  // node id of the previous/waited activity
        Times end;          // replayed ends per what-if
    };
    struct HostNode {
        std::uint64_t start;  // flattened: items never overlap
        std::uint64_t end;
        Times start_r;  // replayed start and end per what-if
        Times end_r;
        HostCause kind;
        bool waited;            // ended by GPU work (a sync or blocking copy that waited)
        std::uint64_t gpu;      // the node it waited for
        std::uint64_t gpu_end;  // measured end of that work
    };
    struct PendingWait {
        std::uint64_t at;
        std::uint64_t dep;  // node id of the work waited for (kNone: nothing)
        Times dep_end;
    };
    struct StreamState {
        std::uint16_t device = 0;
        std::uint32_t stream = 0;
        std::deque<GpuItem> queue;         // arrived, not replayed (launch order)
        std::deque<std::uint64_t> recent;  // replayed node ids, in stream order
        bool started = false;
        std::uint64_t last_end = 0;  // measured end of the last replayed activity
        std::uint64_t last_id = kNone;
        Times last_end_r{};
        std::vector<PendingWait> waits;
        double gap_mean = 2000;  // typical gap between queued activities (ns)
    };
    struct StepAcc {
        std::uint64_t start;
        std::uint64_t end;
        bool host_done = false;  // the replay passed its end
        Times host_start_r{};    // replayed host start and end
        Times host_end_r{};
        Times gpu_end_r{};  // latest replayed end of work launched in it
        bool gpu_seen = false;
        std::uint64_t gpu_end = 0;  // measured
        bool traced = false;
        bool untraceable = false;
        std::array<std::uint64_t, kPathParts> path{};
    };

    void pump(bool final);
    bool replay_ready_gpu(std::uint64_t until, bool final);
    void replay_gpu(StreamState& s);
    void replay_host(const HostItem& h);
    void replay_host_time(const HostItem& h, std::uint64_t start, std::uint64_t end);
    // Measured host time `t` in each what-if's replayed time.
    [[nodiscard]] Times warp(std::uint64_t t) const;
    // The replayed time of measured time `t` at or before the end of everything replayed.
    [[nodiscard]] std::uint64_t replayed_end(std::uint64_t t, std::size_t w) const;
    [[nodiscard]] const GpuNode* node(std::uint64_t id) const;
    [[nodiscard]] std::uint64_t inferred_wait(const StreamState& waiting,
                                              std::uint64_t start) const;
    [[nodiscard]] std::uint64_t waited_for(const HostItem& h, std::uint32_t stream,
                                           bool& named) const;
    void close_steps_before(std::uint64_t t);
    void trace_ready_steps(bool final);
    void trace_step(StepAcc& s);
    void prune_history();
    StreamState& stream_of(std::uint16_t device, std::uint32_t stream);
    std::size_t step_index(std::uint64_t t) const;  // last step starting at or before t

    std::deque<HostItem> host_pending_;  // by start
    std::map<std::pair<std::uint16_t, std::uint32_t>, std::size_t> stream_index_;
    std::vector<StreamState> streams_;
    std::size_t gpu_pending_ = 0;
    std::unordered_map<std::uint32_t, std::uint32_t> sync_streams_;  // correlation -> stream
    std::deque<std::uint32_t> sync_stream_order_;

    std::deque<GpuNode> gpu_nodes_;
    std::uint64_t gpu_base_ = 0;  // id of gpu_nodes_.front()
    std::deque<HostNode> host_nodes_;

    // The replay's host cursor: measured time reached, and the replayed time it maps to.
    bool host_started_ = false;
    std::uint64_t cursor_ = 0;
    Times cursor_r_{};
    bool last_was_api_ = false;   // the previous host item was a non-blocking API call
    std::uint64_t host_now_ = 0;  // latest host start seen
    std::uint64_t gpu_now_ = 0;   // latest GPU start seen
    std::uint64_t first_ns_ = UINT64_MAX;
    std::uint64_t pruned_before_ = 0;  // history before this time was dropped
    std::uint64_t last_gpu_end_ = 0;
    Times last_gpu_end_r_{};
    double launch_latency_mean_ = 5000;  // typical launch-to-start latency of idle-GPU launches

    std::size_t max_history_;
    std::vector<StepAcc> steps_;
    std::size_t traced_upto_ = 0;  // steps before this index are traced or given up
    bool finished_ = false;
    CriticalPathSummary counts_;  // the join counters (the figures come from summarize)
};

}  // namespace gpudiag::detail
