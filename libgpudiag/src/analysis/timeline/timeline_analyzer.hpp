// SPDX-License-Identifier: Apache-2.0
// TimelineAnalyzer: why the GPU idles. Builds each device's busy timeline (union of kernels,
// copies and memsets over all streams), classifies every gap the way Holistic Trace Analysis does
// (host wait / kernel wait / other), finds the host-side cause of host waits (input, sync, copy,
// launch, CPU work) and accumulates it per step.
//
// Works from events alone, one pass: GPU activity must arrive in start order per device (a small
// reorder buffer absorbs the disorder of CUPTI buffers); host ranges and API calls may run ahead.
// Memory is bounded by the number of steps, streams and devices, plus a sliding window of recent
// host activity; nothing is kept per kernel.
#pragma once

#include "analysis/timeline/critical_path.hpp"
#include "analysis/timeline/host_activity.hpp"
#include "analysis/timeline/launch_table.hpp"
#include "analysis/timeline/log_histogram.hpp"
#include "analysis/timeline/timeline_stats.hpp"
#include "analysis/timeline/timeline_summary.hpp"
#include "core/analyzer.hpp"
#include "core/serving_names.hpp"
#include "core/step_index.hpp"

#include <array>
#include <compare>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <unordered_map>
#include <vector>

namespace gpudiag::detail {

class TimelineAnalyzer final : public Analyzer, public StepIndex {
public:
    /// HTA's consecutive_kernel_delay: a gap shorter than this between back-to-back kernels is
    /// launch latency ("kernel wait"), not the host falling behind. HTA keeps µs, so 30 = 30 µs.
    static constexpr std::uint64_t kKernelWaitThresholdNs = 30'000;
    /// CPU and GPU clocks in a trace agree to a few µs; a sync that returned this long before the
    /// GPU went idle still counts as the sync that drained it.
    static constexpr std::uint64_t kSyncSlackNs = 10'000;
    /// Steps tracked one by one; later ones are counted but not broken out (bounded memory).
    static constexpr std::size_t kMaxSteps = 1 << 16;

    /// `critical_path_nodes`: GPU activities kept for tracing steps back (CriticalPath).
    explicit TimelineAnalyzer(const AnalysisOptions& options,
                              std::size_t critical_path_nodes = CriticalPath::kMaxHistory);
    void begin(const SourceInfo& info, const StringTable& strings) override;
    void consume(std::span<const Event> events) override;
    void end(const SourceSummary& summary) override;
    void contribute(Report& report) override;

    [[nodiscard]] std::vector<StepSpan> closed_steps() const override;

    /// The figures of the configured window (valid after end()).
    [[nodiscard]] TimelineSummary summarize() const;
    void summarize_between_steps(std::size_t first, std::size_t last, TimelineSummary& s) const;

    /// One idle gap of a device, as classified (for exports and tests).
    struct Gap {
        std::uint16_t device;
        std::uint64_t start_ns;
        std::uint64_t end_ns;
        IdleKind kind;
        HostCause cause;  ///< the largest host-side cause; meaningful for host waits only
    };
    /// Called for every gap of every device, in each device's time order.
    void set_gap_observer(std::function<void(const Gap&)> observer) {
        gap_observer_ = std::move(observer);
    }

private:
    struct Span {
        std::uint64_t start;
        std::uint64_t end;
    };
    // Host spans of one kind, sorted by start, with the longest one's length so an overlap query
    // can binary-search its first candidate.
    struct SpanQueue {
        std::deque<Span> spans;
        std::uint64_t longest = 0;
    };
    struct StreamState {
        bool started = false;
        std::uint64_t prev_end = 0;
        std::vector<StreamStats> buckets;
        StreamStats unattributed;
    };
    struct ClassFrontier {
        bool started = false;
        std::uint64_t end = 0;
        // Extends the union by [s, e); returns the time added to it.
        std::uint64_t extend(std::uint64_t s, std::uint64_t e) noexcept;
    };
    // One union of GPU activity over a device: the frontier, the per-class unions, and what they
    // add up to per bucket and per stream.
    struct UnionView {
        bool started = false;
        std::uint64_t frontier = 0;  // end of the union so far
        ClassFrontier classes[3];
        ClassFrontier comm_or_compute;
        std::vector<GpuTimeStats> buckets;  // see bucket_of()
        GpuTimeStats unattributed;          // launch unknown (excluded from HTA's window)
        std::map<std::uint32_t, StreamState> streams;
        // The longest host-wait gap (a one-off stall candidate): its bucket, what it added to
        // that bucket's figures, and what the host did in it; the two longest gaps of any kind.
        std::size_t stall_bucket = SIZE_MAX;
        GpuTimeStats stall_delta;
        HostActivity stall_activity;
        std::array<std::uint64_t, 2> longest_gaps{};
        // The host waits inside slow first launches (GpuTimeStats::cold_launch_ns), bounded.
        std::vector<Span> cold_launches;
    };
    struct DeviceTimeline {
        std::uint16_t ordinal = 0;
        UnionView all;               // every activity
        UnionView attributed;        // HTA's window only: activities whose launch is in the trace
        std::vector<Event> pending;  // min-heap by start: the reorder buffer
    };
    struct Placement {
        std::uint64_t start;
        std::uint64_t end;
        bool known;
        std::uint64_t launch;
        bool unattributed;
        std::size_t bucket;
        WorkClass work;
        bool first_launch;  // the first launch of this kernel (by name) in the input
    };
    // How an API call is booked, by its name: its cause (kSync, kCopy, or kLaunch for launches
    // and every other call) and whether it launches GPU work (the launch-latency histogram holds
    // launches only).
    struct ApiClass {
        HostCause cause = HostCause::kLaunch;
        bool launches = false;
        bool known = false;  // false: a cache slot not classified yet
    };
    // A collective kernel's identity within a step, for the cross-rank view of late starts.
    struct CollectiveKey {
        std::int64_t step;
        std::uint32_t stream;
        StringId name;
        auto operator<=>(const CollectiveKey&) const = default;
    };
    struct Launched {
        std::uint64_t start;
        std::uint64_t duration;
    };

    void on_event(const Event& e);
    void on_gpu_activity(const Event& e);
    void process_gpu_activity(DeviceTimeline& d, const Event& e);
    void apply(UnionView& v, const Placement& p, const Event& e, bool observed);
    [[nodiscard]] const UnionView& window_view(const DeviceTimeline& d) const;
    void on_api_call(const Event& e);
    void on_host_range(const Event& e, std::uint64_t start, std::uint64_t end,
                       RangeCategory category, StringId name, std::uint64_t id);
    void on_step(std::int64_t number, std::uint64_t start, std::uint64_t end);
    static void book_input_wait(StepRecord& st, std::uint64_t dur);
    void wait_between_steps(std::size_t before, std::uint64_t start, std::uint64_t end);
    void take_lead_in(const StepRecord& prev, StepRecord& step);
    // Capture pauses: windows in which GPU activity was not observed.
    struct ObservedGap {
        std::uint64_t observed;    // the gap's length less its unobserved parts
        std::uint64_t tail_start;  // start of the observed part that ends the gap
    };
    void add_unobserved(std::uint64_t start, std::uint64_t end);
    [[nodiscard]] ObservedGap observed_gap(std::uint64_t a, std::uint64_t b) const;
    void add_span(SpanQueue& queue, std::uint64_t start, std::uint64_t end);
    void attribute_host_wait(std::uint64_t gap_start, std::uint64_t gap_end, std::uint64_t launch,
                             GpuTimeStats& st) const;
    void prune_host_spans();
    void flush_pending(DeviceTimeline& d);
    DeviceTimeline* device_for(std::uint16_t ordinal);
    ApiClass api_class(StringId name);
    WorkClass work_class(const Event& e);
    std::size_t bucket_of(std::uint64_t launch) const;
    std::size_t step_of(std::uint64_t ts) const;  // index, or SIZE_MAX
    template <typename Stats>
    static Stats& bucket_ref(std::vector<Stats>& buckets, std::size_t index);
    template <typename Stats>
    Stats select_window(const std::vector<Stats>& buckets, const Stats& unattributed) const;
    void observe_evidence(Report& report) const;
    void build_section(const TimelineSummary& s, Report& report) const;
    void add_between_steps(const TimelineSummary& s, Section& sec, Report& report) const;
    void add_step_tables(const TimelineSummary& s, Section& sec) const;
    void add_critical_path(const TimelineSummary& s, Section& sec, Report& report) const;
    void on_annotation(const Event& e);
    void feed_critical_path(const Event& e, std::uint64_t launch, bool known, WorkClass work);
    void note_collective(const Event& e, std::uint64_t launch);
    void note_arrival(const Event& e, bool known, std::uint64_t launch, WorkClass work);
    void add_job_tables(Section& sec) const;
    // One-off stalls (see OneOffStall).
    void note_host_item(std::uint64_t start, std::uint64_t end, StringId name, bool api);
    void note_stall_gap(UnionView& v, std::size_t bucket, const GpuTimeStats& delta,
                        std::uint64_t start, std::uint64_t end);
    void find_one_off_stall(const DeviceTimeline& d, bool use_steps, TimelineSummary& s) const;
    void summarize_window(bool use_steps, std::size_t cp_last, TimelineSummary& s) const;

    AnalysisOptions options_;
    std::function<void(const Gap&)> gap_observer_;
    const StringTable* strings_ = nullptr;
    SourceInfo info_;
    bool ended_ = false;

    std::vector<DeviceTimeline> devices_;
    std::vector<StepRecord> steps_;
    std::uint64_t steps_dropped_ = 0;
    LaunchTable launches_;  // correlation -> start of the API call
    std::uint64_t launches_pruned_at_ = 0;
    SpanQueue input_spans_;
    SpanQueue sync_spans_;
    SpanQueue copy_spans_;
    SpanQueue api_spans_;
    SpanQueue compile_spans_;  // a compiler's host ranges (is_compiler_range)
    // Per name: 0 unknown, 1 nothing, 2 a compiler's range, 3 an allocator call.
    std::vector<std::uint8_t> compile_cache_;
    HostActivityLog host_log_;                // named calls and ranges, for one-off stalls
    std::vector<std::uint8_t> kernels_seen_;  // per kernel name: launched before
    // Input waits as spans (bounded), to restate them over a window without steps.
    static constexpr std::size_t kMaxInputWaitSpans = 1 << 16;
    std::vector<Span> input_wait_spans_;
    std::uint64_t allocator_calls_ = 0;  // cudaMalloc / cudaFree and kin, whole input
    std::uint64_t allocator_ns_ = 0;
    std::uint64_t host_spans_dropped_ = 0;
    std::uint64_t processed_since_prune_ = 0;
    std::vector<ApiClass> api_class_cache_;
    std::vector<std::uint8_t> comm_name_cache_;  // 0 unknown, 1 compute, 2 communication
    std::map<StringId, std::pair<std::uint64_t, std::uint64_t>> sync_by_name_;
    // Open NVTX-style ranges per thread, to pair kRangeBegin with kRangeEnd.
    std::unordered_map<std::uint64_t, std::vector<Event>> open_ranges_;
    std::vector<std::size_t> open_steps_;  // indexes into steps_ of steps begun but not ended
    // Input waits since the last step ended, for the step that begins next (take_lead_in).
    static constexpr std::size_t kMaxWaitsBetween = 256;
    std::deque<Span> waits_between_;
    std::vector<Span> unobserved_;             // closed capture pauses, in time order
    std::uint64_t paused_since_ = UINT64_MAX;  // an open pause (kCapturePaused not yet resumed)

    // Host totals over the whole input.
    std::uint64_t host_first_ns_ = UINT64_MAX;
    std::uint64_t host_last_ns_ = 0;
    std::uint64_t input_wait_ns_ = 0;
    std::uint64_t input_waits_ = 0;
    std::uint64_t longest_input_wait_ns_ = 0;
    bool single_process_loader_ = false;
    std::uint64_t sync_calls_ = 0;
    std::uint64_t sync_ns_ = 0;
    LogHistogram kernel_durations_;
    LogHistogram launch_durations_;
    std::array<std::uint64_t, 6> pageable_bytes_by_direction_{};
    std::uint64_t gpu_activities_ = 0;
    bool saw_timeline_ = false;  ///< any event the timeline is made of (not memory, counters)
    // For reports combined into a job (AnalysisOptions::for_job): per step, stream and collective
    // kernel, the kernels that are the last one at least as long as some duration: the latest,
    // then earlier ones each longer than all after it. Whatever length a job-wide filter asks
    // for, its "last such kernel" is in the chain.
    std::map<CollectiveKey, std::vector<Launched>> collectives_;
    // For a job: when each collective kernel started and ended on the GPU (ranks arriving late
    // start it late), and the compute its device ran since the collective before it.
    struct Arrival {
        std::int64_t step;
        std::uint32_t occurrence;  // of this kernel name within the step
        StringId name;
        std::uint32_t stream;
        std::uint64_t start;
        std::uint64_t end;
        std::uint64_t compute_before;
    };
    struct ComputeSince {
        std::deque<Span> merged;  // compute kernels' union since the last collective started
        std::uint64_t last_collective_start = 0;
    };
    std::vector<Arrival> arrivals_;
    std::map<std::pair<std::int64_t, StringId>, std::uint32_t> arrival_counts_;
    std::map<std::uint16_t, ComputeSince> compute_since_;
    // The step's dependency graph, replayed under what-ifs (bounded; see critical_path.hpp).
    CriticalPath critical_path_;
    bool critical_path_finished_ = false;
    // DataLoaders the program described (gpudiag's PyTorch integration records their settings
    // as "dataloader.<setting>" annotations when a loader is iterated), and the input wait each
    // was iterated for.
    std::vector<LoaderSettings> loaders_;
    std::size_t current_loader_ = SIZE_MAX;
    // A serving engine's iterations (steps where the trace has no ProfilerStep), its CUDA graph
    // launches and the communication kernels by kind.
    ServingSeen serving_;
    bool profiler_steps_ = false;  // a ProfilerStep or step marker was seen: it sets the steps
};

}  // namespace gpudiag::detail
