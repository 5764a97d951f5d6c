// SPDX-License-Identifier: Apache-2.0
// TimelineAnalyzer. The window problem: HTA's window ("everything launched before the last step
// began") and the step window are only known at the end, so every GPU activity is accumulated
// into a bucket chosen by *when it was launched*: before the first step, during step i, or after
// step i ended (and before the next began). A window is then a choice of buckets. Gaps belong to
// the activity that ends them.
#include "analysis/timeline/timeline_analyzer.hpp"

#include "analysis/findings/figure_keys.hpp"
#include "analysis/findings/finding_catalog.hpp"

#include "support/format.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>

namespace gpudiag::detail {
namespace {

constexpr std::size_t kReorderDepth = 512;  // GPU records CUPTI may deliver out of order
constexpr std::size_t kMaxDevices = 64;
constexpr std::size_t kMaxStreams = 1024;       // per device
constexpr std::size_t kMaxHostSpans = 1 << 18;  // per cause, a safety cap on the sliding window
constexpr std::uint64_t kHostHorizonNs = 10'000'000'000;     // devices quiet longer do not pin it
constexpr std::uint64_t kLaunchHorizonNs = 120'000'000'000;  // a launch older than this is stale
constexpr std::size_t kMaxSyncNames = 64;
constexpr std::size_t kMaxOpenRanges = 256;  // per thread
constexpr std::size_t kMaxThreads = 4096;
constexpr std::size_t kStepRows = 256;  // rows of the per-step table
constexpr std::size_t kSeriesPoints = 512;
constexpr std::size_t kMaxUnobservedWindows = 4096;  // capture pauses kept apart
constexpr std::size_t kMaxCollectiveKeys = 4096;     // (step, stream, kernel) kept for a job
constexpr std::size_t kMaxCollectiveChain = 8;
constexpr std::size_t kMaxColdLaunches = 4096;  // slow first launches kept as spans, per view

bool starts_with(std::string_view s, std::string_view p) {
    return s.size() >= p.size() && s.compare(0, p.size(), p) == 0;
}

bool parse_step_number(std::string_view name, std::int64_t& n) {
    if (!starts_with(name, "ProfilerStep#")) return false;
    std::string_view digits = name.substr(13);
    if (digits.empty() || digits.size() > 18) return false;
    n = 0;
    for (char c : digits) {
        if (c < '0' || c > '9') return false;
        n = n * 10 + (c - '0');
    }
    return true;
}

const char* copy_direction_name(std::size_t d) {
    switch (static_cast<CopyDirection>(d)) {
        case CopyDirection::kHostToDevice: return "host to device";
        case CopyDirection::kDeviceToHost: return "device to host";
        case CopyDirection::kDeviceToDevice: return "device to device";
        case CopyDirection::kHostToHost: return "host to host";
        case CopyDirection::kPeerToPeer: return "peer to peer";
        case CopyDirection::kUnknown: break;
    }
    return "unknown direction";
}

}  // namespace

std::uint64_t TimelineAnalyzer::ClassFrontier::extend(std::uint64_t s, std::uint64_t e) noexcept {
    if (!started) {
        started = true;
        end = e;
        return e - s;
    }
    if (s >= end) {
        end = e;
        return e - s;
    }
    if (e > end) {
        std::uint64_t added = e - end;
        end = e;
        return added;
    }
    return 0;
}

TimelineAnalyzer::TimelineAnalyzer(const AnalysisOptions& options, std::size_t critical_path_nodes)
    : options_(options), critical_path_(critical_path_nodes) {
    options_.progress = nullptr;  // not ours to call
}

void TimelineAnalyzer::begin(const SourceInfo& info, const StringTable& strings) {
    info_ = info;
    strings_ = &strings;
}

void TimelineAnalyzer::consume(std::span<const Event> events) {
    for (const Event& e : events) on_event(e);
}

void TimelineAnalyzer::end(const SourceSummary& /*summary*/) {
    for (auto& d : devices_) flush_pending(d);
    critical_path_.finish();
    critical_path_finished_ = true;
    ended_ = true;
}

void TimelineAnalyzer::add_unobserved(std::uint64_t start, std::uint64_t end) {
    // Pauses arrive in time order; past the cap the last window absorbs the new one (more is
    // excluded, never less).
    const bool overlaps_last = !unobserved_.empty() && start <= unobserved_.back().end;
    if (overlaps_last || unobserved_.size() >= kMaxUnobservedWindows) {
        unobserved_.back().end = std::max(unobserved_.back().end, end);
    } else {
        unobserved_.push_back(Span{start, end});
    }
}

TimelineAnalyzer::ObservedGap TimelineAnalyzer::observed_gap(std::uint64_t a,
                                                             std::uint64_t b) const {
    ObservedGap g{b - a, a};
    auto hide = [&](std::uint64_t ws, std::uint64_t we) {
        if (ws >= b || we <= a) return;
        std::uint64_t lo = std::max(ws, a);
        std::uint64_t hi = std::min(we, b);
        g.observed -= hi - lo;
        g.tail_start = std::max(g.tail_start, hi);
    };
    auto first = std::lower_bound(unobserved_.begin(), unobserved_.end(), a,
                                  [](const Span& w, std::uint64_t t) { return w.end <= t; });
    for (auto it = first; it != unobserved_.end() && it->start < b; ++it) hide(it->start, it->end);
    if (paused_since_ != UINT64_MAX) hide(paused_since_, UINT64_MAX);  // still paused
    return g;
}

namespace {

// GPU work, the host's API calls, syncs, steps and the host ranges the timeline attributes idle
// time to. Memory events, counters and generic annotations alone make no timeline.
bool is_timeline_event(const Event& e) {
    if (is_gpu_activity(e.kind)) return true;
    switch (e.kind) {
        case EventKind::kApiCall:
        case EventKind::kSync:
        case EventKind::kStepBegin:
        case EventKind::kStepEnd: return true;
        case EventKind::kRange:
        case EventKind::kRangeBegin:
            return e.range.category == RangeCategory::kCpuOp ||
                   e.range.category == RangeCategory::kInputWait ||
                   e.range.category == RangeCategory::kStep ||
                   e.range.category == RangeCategory::kCommunication;
        default: return false;
    }
}

}  // namespace

void TimelineAnalyzer::on_event(const Event& e) {
    saw_timeline_ = saw_timeline_ || is_timeline_event(e);
    if (e.device == kNoDevice && e.start_ns != 0) {
        host_first_ns_ = std::min(host_first_ns_, e.start_ns);
        host_last_ns_ = std::max(host_last_ns_, std::max(e.end_ns, e.start_ns));
    }
    switch (e.kind) {
        case EventKind::kKernel:
        case EventKind::kMemcpy:
        case EventKind::kMemset: on_gpu_activity(e); break;
        case EventKind::kApiCall: on_api_call(e); break;
        case EventKind::kSync:
            // Host-blocking synchronizations (not the GPU-side cudaStreamWaitEvent).
            if (e.sync.sync_kind != SyncKind::kStreamWaitEvent) {
                add_span(sync_spans_, e.start_ns, std::max(e.end_ns, e.start_ns));
                // The stream it waits on: a stream sync's own, an event sync's recording stream.
                std::uint32_t on = e.sync.sync_kind == SyncKind::kStream  ? e.stream
                                   : e.sync.sync_kind == SyncKind::kEvent ? e.sync.wait_stream
                                                                          : kNoStream;
                critical_path_.name_sync_stream(e.sync.correlation, on);
                critical_path_.add_host(HostCause::kSync, e.start_ns, e.end_ns, e.sync.correlation,
                                        e.device, on);
            } else {
                critical_path_.add_stream_wait(e.start_ns, e.device, e.stream, e.sync.wait_stream);
            }
            break;
        case EventKind::kAnnotation: on_annotation(e); break;
        case EventKind::kRange:
            if (e.device == kNoDevice) {
                on_host_range(e, e.start_ns, std::max(e.end_ns, e.start_ns), e.range.category,
                              e.range.name, e.range.id);
            }
            break;
        case EventKind::kRangeBegin: {
            if (e.device != kNoDevice) break;
            std::uint64_t key = (std::uint64_t{e.process} << 32) | e.thread;
            auto it = open_ranges_.find(key);
            if (it == open_ranges_.end()) {
                if (open_ranges_.size() >= kMaxThreads) break;
                it = open_ranges_.emplace(key, std::vector<Event>{}).first;
            }
            if (it->second.size() < kMaxOpenRanges) it->second.push_back(e);
            break;
        }
        case EventKind::kRangeEnd: {
            std::uint64_t key = (std::uint64_t{e.process} << 32) | e.thread;
            auto it = open_ranges_.find(key);
            if (it == open_ranges_.end() || it->second.empty()) break;
            Event b = it->second.back();
            it->second.pop_back();
            on_host_range(b, b.start_ns, std::max(e.start_ns, b.start_ns), b.range.category,
                          b.range.name, b.range.id);
            break;
        }
        case EventKind::kStepBegin:
            profiler_steps_ = true;
            on_step(static_cast<std::int64_t>(e.range.id), e.start_ns, UINT64_MAX);
            break;
        case EventKind::kCapturePaused:
            if (paused_since_ == UINT64_MAX) paused_since_ = e.start_ns;
            break;
        case EventKind::kCaptureResumed:
            if (paused_since_ != UINT64_MAX) {
                add_unobserved(paused_since_, std::max(e.start_ns, paused_since_));
                paused_since_ = UINT64_MAX;
            }
            break;
        case EventKind::kStepEnd: {
            // Close the most recent open step (with the same number when one matches).
            for (auto it = open_steps_.rbegin(); it != open_steps_.rend(); ++it) {
                StepRecord& st = steps_[*it];
                if (st.number == static_cast<std::int64_t>(e.range.id) ||
                    it + 1 == open_steps_.rend()) {
                    st.end_ns = std::max(e.start_ns, st.start_ns);
                    critical_path_.close_step(st.start_ns, st.end_ns);
                    open_steps_.erase(std::next(it).base());
                    break;
                }
            }
            break;
        }
        default: break;
    }
}

std::vector<StepSpan> TimelineAnalyzer::closed_steps() const {
    std::vector<StepSpan> out;
    out.reserve(steps_.size());
    for (const StepRecord& st : steps_) {
        if (st.end_ns != UINT64_MAX) out.push_back({st.number, st.start_ns, st.end_ns});
    }
    return out;
}

void TimelineAnalyzer::on_step(std::int64_t number, std::uint64_t start, std::uint64_t end) {
    // The same step seen twice (a marker and a profiler range, or two threads) counts once.
    for (std::size_t k = steps_.size(), seen = 0; k > 0 && seen < 4; --k, ++seen) {
        if (steps_[k - 1].number == number) return;
    }
    if (steps_.size() >= kMaxSteps) {
        ++steps_dropped_;
        return;
    }
    StepRecord r;
    r.number = number;
    r.start_ns = start;
    r.end_ns = end;
    auto pos =
        std::upper_bound(steps_.begin(), steps_.end(), start,
                         [](std::uint64_t t, const StepRecord& s) { return t < s.start_ns; });
    std::size_t index = static_cast<std::size_t>(pos - steps_.begin());
    if (index > 0) take_lead_in(steps_[index - 1], r);
    steps_.insert(pos, r);
    critical_path_.add_step(r.start_ns, end);
    for (auto& o : open_steps_) {
        if (o >= index) ++o;
    }
    if (end == UINT64_MAX) open_steps_.push_back(index);
}

void TimelineAnalyzer::on_host_range(const Event& /*e*/, std::uint64_t start, std::uint64_t end,
                                     RangeCategory category, StringId name, std::uint64_t id) {
    if (category == RangeCategory::kGeneric) note_host_item(start, end, name, false);
    std::int64_t number = 0;
    if (category == RangeCategory::kStep) {
        profiler_steps_ = true;
        on_step(static_cast<std::int64_t>(id), start, end);
        return;
    }
    if (category == RangeCategory::kGeneric && strings_ != nullptr &&
        parse_step_number(strings_->lookup(name), number)) {
        profiler_steps_ = true;
        on_step(number, start, end);  // an NVTX range carrying the profiler's step name
        return;
    }
    if ((category == RangeCategory::kGeneric || category == RangeCategory::kUserAnnotation) &&
        strings_ != nullptr) {
        // A serving engine's iteration is a step where the program marked none of its own.
        const std::string_view text = strings_->lookup(name);
        const ServingStep step = serving_step(text);
        if (step.known) {
            serving_.note_step(step, text);
            const auto nth = static_cast<std::int64_t>(serving_.steps()) - 1;
            if (!profiler_steps_) on_step(step.numbered ? step.number : nth, start, end);
            return;
        }
    }
    if (category == RangeCategory::kInputWait) {
        std::uint64_t dur = end - start;
        input_wait_ns_ += dur;
        ++input_waits_;
        longest_input_wait_ns_ = std::max(longest_input_wait_ns_, dur);
        std::size_t s = step_of(start);
        if (s != SIZE_MAX && start <= steps_[s].end_ns) {
            book_input_wait(steps_[s], dur);
        } else if (s != SIZE_MAX) {
            wait_between_steps(s, start, end);
        }
        add_span(input_spans_, start, end);
        if (input_wait_spans_.size() < kMaxInputWaitSpans)
            input_wait_spans_.push_back(Span{start, end});
        critical_path_.add_host(HostCause::kInput, start, end, 0);
        if (current_loader_ < loaders_.size()) loaders_[current_loader_].input_wait_ns += dur;
        if (!single_process_loader_ && strings_ != nullptr &&
            strings_->lookup(name).find("_SingleProcessDataLoaderIter") != std::string_view::npos) {
            single_process_loader_ = true;
        }
    }
}

void TimelineAnalyzer::book_input_wait(StepRecord& st, std::uint64_t dur) {
    st.input_wait_ns += dur;
    ++st.input_waits;
    st.longest_input_wait_ns = std::max(st.longest_input_wait_ns, dur);
}

// A wait that began after step `before` ended. Trainers fetch the next batch before the hook
// that opens a step, so the wait belongs to the step after it: booked there now when that step
// is already known (events out of order), else when it begins (take_lead_in). A wait before the
// first step is not booked: it includes starting the loader's workers, the loop's warm-up.
void TimelineAnalyzer::wait_between_steps(std::size_t before, std::uint64_t start,
                                          std::uint64_t end) {
    const std::size_t next = before + 1;
    if (next < steps_.size() && steps_[next].start_ns + kSyncSlackNs >= end) {
        StepRecord& st = steps_[next];
        book_input_wait(st, end - start);
        ++st.lead_in_waits;
        critical_path_.move_step_start(st.start_ns, start);
        st.start_ns = std::min(st.start_ns, start);
        return;
    }
    if (next < steps_.size()) return;  // it ended inside a later step: only the totals hold it
    if (waits_between_.size() >= kMaxWaitsBetween) waits_between_.pop_front();
    waits_between_.push_back({start, end});
}

// The waits since step `prev` ended that end before `step` starts are its fetch: booked to it,
// and it starts at the first of them.
void TimelineAnalyzer::take_lead_in(const StepRecord& prev, StepRecord& step) {
    if (prev.end_ns == UINT64_MAX || prev.end_ns > step.start_ns) {
        waits_between_.clear();
        return;
    }
    for (const Span& w : waits_between_) {
        if (w.start < prev.end_ns || w.end > step.start_ns + kSyncSlackNs) continue;
        book_input_wait(step, w.end - w.start);
        ++step.lead_in_waits;
        step.start_ns = std::min(step.start_ns, w.start);
    }
    waits_between_.clear();
}

TimelineAnalyzer::ApiClass TimelineAnalyzer::api_class(StringId name) {
    if (name < api_class_cache_.size() && api_class_cache_[name].known) {
        return api_class_cache_[name];
    }
    std::string_view n = strings_ != nullptr ? strings_->lookup(name) : std::string_view{};
    ApiClass api{HostCause::kLaunch, false, true};
    // cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize, cuCtxSynchronize,
    // hipStreamSynchronize ...: the host blocks until the GPU catches up.
    if (n.find("Synchronize") != std::string_view::npos) {
        api.cause = HostCause::kSync;
    } else if (starts_with(n, "cudaMemcpy") || starts_with(n, "cuMemcpy") ||
               starts_with(n, "hipMemcpy")) {
        api.cause = HostCause::kCopy;
    } else if (n.find("Launch") != std::string_view::npos) {
        api.launches = true;
    }
    if (name < (1u << 22)) {
        if (api_class_cache_.size() <= name) api_class_cache_.resize(name + 1);
        api_class_cache_[name] = api;
    }
    return api;
}

WorkClass TimelineAnalyzer::work_class(const Event& e) {
    if (e.kind != EventKind::kKernel) return WorkClass::kMemory;
    StringId name = e.kernel.name;
    if (name < comm_name_cache_.size() && comm_name_cache_[name] != 0) {
        return comm_name_cache_[name] == 2 ? WorkClass::kCommunication : WorkClass::kCompute;
    }
    std::string_view n = strings_ != nullptr ? strings_->lookup(name) : std::string_view{};
    // Collective kernels by what they do: NCCL/RCCL (HTA's rule), custom and symmetric-memory
    // all-reduce, MoE expert dispatch/combine (core/serving_names).
    const CommKernel kind = comm_kernel(n);
    serving_.note_kernel(n, kind);
    bool comm = kind != CommKernel::kNone;
    if (name < (1u << 22)) {
        if (comm_name_cache_.size() <= name) comm_name_cache_.resize(name + 1, 0);
        comm_name_cache_[name] = comm ? 2 : 1;
    }
    return comm ? WorkClass::kCommunication : WorkClass::kCompute;
}

void TimelineAnalyzer::on_api_call(const Event& e) {
    std::uint64_t start = e.start_ns;
    std::uint64_t end = std::max(e.end_ns, e.start_ns);
    std::uint32_t corr = e.api.correlation;
    if (corr != 0 && corr != UINT32_MAX) {
        launches_.put(corr, start);
        // Drop launches nothing has matched for minutes (API calls that launch no GPU work).
        if (start > launches_pruned_at_ + kLaunchHorizonNs / 4) {
            std::uint64_t cutoff = start > kLaunchHorizonNs ? start - kLaunchHorizonNs : 0;
            launches_.drop_older_than(cutoff);
            launches_pruned_at_ = start;
        }
    }
    const ApiClass api = api_class(e.api.name);
    if (api.launches && strings_ != nullptr &&
        strings_->lookup(e.api.name).find("GraphLaunch") != std::string_view::npos) {
        ++serving_.graph_launches;  // cudaGraphLaunch, cuGraphLaunch, hipGraphLaunch
    }
    switch (api.cause) {
        case HostCause::kSync: {
            ++sync_calls_;
            sync_ns_ += end - start;
            std::size_t s = step_of(start);
            if (s != SIZE_MAX && start <= steps_[s].end_ns) {
                ++steps_[s].sync_calls;
                steps_[s].sync_ns += end - start;
            }
            auto it = sync_by_name_.find(e.api.name);
            if (it == sync_by_name_.end() && sync_by_name_.size() < kMaxSyncNames) {
                it = sync_by_name_.emplace(e.api.name, std::make_pair(0ull, 0ull)).first;
            }
            if (it != sync_by_name_.end()) {
                ++it->second.first;
                it->second.second += end - start;
            }
            add_span(sync_spans_, start, end);
            break;
        }
        case HostCause::kCopy: add_span(copy_spans_, start, end); break;
        default:
            if (api.launches) launch_durations_.add(end - start);
            add_span(api_spans_, start, end);
            break;
    }
    critical_path_.add_host(api.cause, start, end, corr, e.device);
    note_host_item(start, end, e.api.name, true);
}

// gpudiag's PyTorch integration describes each DataLoader when it is first iterated, one
// "dataloader.<setting>" annotation per setting, num_workers first.
void TimelineAnalyzer::on_annotation(const Event& e) {
    if (strings_ == nullptr) return;
    std::string_view text = strings_->lookup(e.annotation.text);
    if (!starts_with(text, "dataloader.")) return;
    std::string_view key = text.substr(11);
    constexpr std::size_t kMaxLoaders = 16;
    if (key == "num_workers" || current_loader_ >= loaders_.size()) {
        if (loaders_.size() < kMaxLoaders) loaders_.emplace_back();
        current_loader_ = loaders_.size() - 1;
    }
    LoaderSettings& l = loaders_[current_loader_];
    const std::int64_t v = e.annotation.value;
    if (key == "num_workers")
        l.num_workers = v;
    else if (key == "pin_memory")
        l.pin_memory = v;
    else if (key == "prefetch_factor")
        l.prefetch_factor = v;
    else if (key == "persistent_workers")
        l.persistent_workers = v;
    else if (key == "batch_size")
        l.batch_size = v;
    else if (key == "cpu_cores")
        l.cpu_cores = v;
}

void TimelineAnalyzer::feed_critical_path(const Event& e, std::uint64_t launch, bool known,
                                          WorkClass work) {
    PathPart part = work == WorkClass::kCommunication ? PathPart::kCommunication
                    : work == WorkClass::kMemory      ? PathPart::kMemory
                                                      : PathPart::kCompute;
    bool pageable = e.kind == EventKind::kMemcpy && (e.copy.src_kind == MemoryKind::kPageable ||
                                                     e.copy.dst_kind == MemoryKind::kPageable);
    critical_path_.add_gpu(e, known ? launch : 0, part, pageable);
}

void TimelineAnalyzer::add_span(SpanQueue& queue, std::uint64_t start, std::uint64_t end) {
    std::deque<Span>& spans = queue.spans;
    queue.longest = std::max(queue.longest, end - start);
    if (spans.empty() || start >= spans.back().start) {
        spans.push_back(Span{start, end});
    } else {
        auto pos = std::upper_bound(spans.begin(), spans.end(), start,
                                    [](std::uint64_t t, const Span& s) { return t < s.start; });
        spans.insert(pos, Span{start, end});
    }
    if (spans.size() > kMaxHostSpans) {
        spans.pop_front();
        ++host_spans_dropped_;
    }
}

TimelineAnalyzer::DeviceTimeline* TimelineAnalyzer::device_for(std::uint16_t ordinal) {
    for (auto& d : devices_) {
        if (d.ordinal == ordinal) return &d;
    }
    if (devices_.size() >= kMaxDevices) return nullptr;
    devices_.emplace_back();
    devices_.back().ordinal = ordinal;
    return &devices_.back();
}

void TimelineAnalyzer::on_gpu_activity(const Event& e) {
    DeviceTimeline* d = device_for(e.device);
    if (d == nullptr) return;
    auto later = [](const Event& a, const Event& b) { return a.start_ns > b.start_ns; };
    d->pending.push_back(e);
    std::push_heap(d->pending.begin(), d->pending.end(), later);
    if (d->pending.size() > kReorderDepth) {
        std::pop_heap(d->pending.begin(), d->pending.end(), later);
        Event next = d->pending.back();
        d->pending.pop_back();
        process_gpu_activity(*d, next);
    }
}

void TimelineAnalyzer::flush_pending(DeviceTimeline& d) {
    auto later = [](const Event& a, const Event& b) { return a.start_ns > b.start_ns; };
    while (!d.pending.empty()) {
        std::pop_heap(d.pending.begin(), d.pending.end(), later);
        Event next = d.pending.back();
        d.pending.pop_back();
        process_gpu_activity(d, next);
    }
    prune_host_spans();
}

std::size_t TimelineAnalyzer::step_of(std::uint64_t ts) const {
    auto pos =
        std::upper_bound(steps_.begin(), steps_.end(), ts,
                         [](std::uint64_t t, const StepRecord& s) { return t < s.start_ns; });
    if (pos == steps_.begin()) return SIZE_MAX;
    return static_cast<std::size_t>(pos - steps_.begin()) - 1;
}

// Bucket 0: before the first step; 1 + 2i: during step i; 2 + 2i: after step i ended.
std::size_t TimelineAnalyzer::bucket_of(std::uint64_t launch) const {
    std::size_t s = step_of(launch);
    if (s == SIZE_MAX) return 0;
    return launch <= steps_[s].end_ns ? 1 + 2 * s : 2 + 2 * s;
}

template <typename Stats>
Stats& TimelineAnalyzer::bucket_ref(std::vector<Stats>& buckets, std::size_t index) {
    if (buckets.size() <= index) buckets.resize(index + 1);
    return buckets[index];
}

// HTA reads ns-resolution traces with float µs and rounds each event inward to whole µs (start
// up, end down; see HTA's trace_parser and pytorch/pytorch#122425). HTA's window mimics that so
// its figures compare one to one; on integer-µs traces it changes nothing.
namespace {
std::uint64_t ceil_us(std::uint64_t ns) {
    return (ns + 999) / 1000 * 1000;
}
std::uint64_t floor_us(std::uint64_t ns) {
    return ns / 1000 * 1000;
}
}  // namespace

void TimelineAnalyzer::process_gpu_activity(DeviceTimeline& d, const Event& e) {
    Placement p{};
    p.start = e.start_ns;
    p.end = std::max(e.end_ns, e.start_ns);
    ++gpu_activities_;
    std::uint32_t corr = e.kind == EventKind::kKernel ? e.kernel.correlation : e.copy.correlation;
    if (corr != 0 && corr != UINT32_MAX) {
        p.known = launches_.find(corr, p.launch);
    }
    if (options_.for_job && p.known && e.kind == EventKind::kKernel &&
        work_class(e) == WorkClass::kCommunication) {
        note_collective(e, p.launch);
    }
    if (options_.for_job && e.kind == EventKind::kKernel)
        note_arrival(e, p.known, p.launch, work_class(e));
    const std::uint64_t raw_launch = p.launch;
    bool hta = options_.window == AnalysisWindow::kHta;
    if (hta) {
        p.start = ceil_us(p.start);
        p.end = std::max(floor_us(p.end), p.start);
        p.launch = ceil_us(p.launch);
    }
    // HTA drops GPU work whose launch it cannot find; the other windows place it by start time.
    p.unattributed = !p.known && hta;
    p.bucket = p.unattributed ? 0 : bucket_of(p.known ? p.launch : p.start);
    p.work = work_class(e);
    if (e.kind == EventKind::kKernel) {
        if (kernels_seen_.size() <= e.kernel.name)
            kernels_seen_.resize(std::size_t{e.kernel.name} + 1);
        p.first_launch = kernels_seen_[e.kernel.name] == 0;
        kernels_seen_[e.kernel.name] = 1;
    }
    feed_critical_path(e, raw_launch, p.known, p.work);
    apply(d.all, p, e, true);
    if (hta && p.known) apply(d.attributed, p, e, false);

    if (e.kind == EventKind::kKernel) {
        kernel_durations_.add(p.end - p.start);
    } else if (e.kind == EventKind::kMemcpy && (e.copy.src_kind == MemoryKind::kPageable ||
                                                e.copy.dst_kind == MemoryKind::kPageable)) {
        auto dir = static_cast<std::size_t>(e.copy.direction);
        if (dir < pageable_bytes_by_direction_.size())
            pageable_bytes_by_direction_[dir] += e.copy.bytes;
    }
    if (++processed_since_prune_ >= 64) {
        processed_since_prune_ = 0;
        prune_host_spans();
    }
}

void TimelineAnalyzer::apply(UnionView& v, const Placement& p, const Event& e, bool observed) {
    std::uint64_t s = p.start;
    std::uint64_t en = p.end;
    GpuTimeStats& st = p.unattributed ? v.unattributed : bucket_ref(v.buckets, p.bucket);
    auto classify = [&](std::uint64_t gap_start, std::uint64_t gap) {
        if (p.known && p.launch > gap_start) return IdleKind::kHostWait;
        if (gap < kKernelWaitThresholdNs) return IdleKind::kKernelWait;
        return IdleKind::kOther;
    };
    constexpr auto kOtherIdle = static_cast<std::size_t>(IdleKind::kOther);

    // HTA's per-stream view: the gap to the previous activity on the same stream.
    std::uint32_t stream_id =
        v.streams.size() < kMaxStreams || v.streams.count(e.stream) != 0 ? e.stream : UINT32_MAX;
    StreamState& ss = v.streams[stream_id];
    StreamStats& sst = p.unattributed ? ss.unattributed : bucket_ref(ss.buckets, p.bucket);
    if (ss.started && s > ss.prev_end) {
        ObservedGap g = observed_gap(ss.prev_end, s);
        std::uint64_t tail = s - g.tail_start;
        if (tail > 0)
            sst.idle_by_kind[static_cast<std::size_t>(classify(g.tail_start, tail))] += tail;
        sst.idle_by_kind[kOtherIdle] += g.observed - tail;
    }
    ss.started = true;
    ss.prev_end = en;
    ++sst.activities;
    sst.busy_ns += en - s;

    // The device's union over all streams.
    ++st.activities;
    st.first_start_ns = std::min(st.first_start_ns, s);
    st.last_end_ns = std::max(st.last_end_ns, en);
    if (!v.started) {
        v.started = true;
        v.frontier = en;
        st.busy_ns += en - s;
    } else if (s > v.frontier) {
        // Time while capture was paused is unobserved, not idle: only the rest is classified,
        // the part after the last pause by the usual rules, earlier parts as "other".
        ObservedGap g = observed_gap(v.frontier, s);
        st.unobserved_ns += (s - v.frontier) - g.observed;
        std::uint64_t tail = s - g.tail_start;
        if (g.observed > 0) {
            IdleKind kind = tail > 0 ? classify(g.tail_start, tail) : IdleKind::kOther;
            st.idle_ns += g.observed;
            st.idle_by_kind[static_cast<std::size_t>(kind)] += tail;
            st.idle_by_kind[kOtherIdle] += g.observed - tail;
            ++st.gaps;
            st.longest_gap_ns = std::max(st.longest_gap_ns, g.observed);
            v.longest_gaps[1] =
                std::max(v.longest_gaps[1], std::min(v.longest_gaps[0], g.observed));
            v.longest_gaps[0] = std::max(v.longest_gaps[0], g.observed);
            HostCause cause = HostCause::kCpu;
            if (kind == IdleKind::kHostWait) {
                GpuTimeStats causes;
                attribute_host_wait(g.tail_start, s, p.launch, causes);
                std::size_t top = 0;
                for (std::size_t c = 0; c < kHostCauses; ++c) {
                    st.cause_ns[c] += causes.cause_ns[c];
                    if (causes.cause_ns[c] > causes.cause_ns[top]) top = c;
                }
                st.compile_ns += causes.compile_ns;
                cause = static_cast<HostCause>(top);
                if (!p.unattributed) {
                    causes.idle_ns = g.observed;
                    causes.idle_by_kind[static_cast<std::size_t>(kind)] = tail;
                    causes.idle_by_kind[kOtherIdle] += g.observed - tail;
                    causes.gaps = 1;
                    note_stall_gap(v, p.bucket, causes, v.frontier, s);
                }
            }
            // A slow first launch: the idle time from its launch call to its kernel is the
            // module loading (see kColdLaunchNs), booked apart as a one-off cost.
            const std::uint64_t loading = p.known ? s - std::clamp(p.launch, g.tail_start, s) : 0;
            if (p.first_launch && static_cast<double>(loading) >= kColdLaunchNs) {
                st.cold_launch_ns += loading;
                st.cold_launch_host_ns += kind == IdleKind::kHostWait ? loading : 0;
                ++st.cold_launches;
                if (v.cold_launches.size() < kMaxColdLaunches)
                    v.cold_launches.push_back(Span{s - loading, s});
            }
            if (observed && gap_observer_ && tail > 0) {
                gap_observer_(Gap{e.device, g.tail_start, s, kind, cause});
            }
        }
        st.busy_ns += en - s;
        v.frontier = en;
    } else if (en > v.frontier) {
        st.busy_ns += en - v.frontier;
        v.frontier = en;
    }

    auto wc = static_cast<std::size_t>(p.work);
    st.class_ns[wc] += v.classes[wc].extend(s, en);
    if (p.work != WorkClass::kMemory) st.comm_or_compute_ns += v.comm_or_compute.extend(s, en);
    if (e.kind == EventKind::kKernel) {
        ++st.kernels;
        st.kernel_ns += en - s;
    } else if (e.kind == EventKind::kMemcpy && (e.copy.src_kind == MemoryKind::kPageable ||
                                                e.copy.dst_kind == MemoryKind::kPageable)) {
        ++st.pageable_copies;
        st.pageable_bytes += e.copy.bytes;
        st.pageable_ns += en - s;
    }
}

// Keeps the chain of `e`'s (step, stream, kernel): a kernel no longer than a later one is the
// last of no length, so each new kernel removes the shorter ones before it.
void TimelineAnalyzer::note_collective(const Event& e, std::uint64_t launch) {
    std::size_t s = step_of(launch);
    if (s == SIZE_MAX || launch > steps_[s].end_ns) return;  // HTA's steps: launched within one
    CollectiveKey key{steps_[s].number, e.stream, e.kernel.name};
    auto it = collectives_.find(key);
    if (it == collectives_.end()) {
        if (collectives_.size() >= kMaxCollectiveKeys) return;
        it = collectives_.emplace(key, std::vector<Launched>{}).first;
    }
    auto& chain = it->second;
    const std::uint64_t duration = e.duration_ns();
    while (!chain.empty() && chain.back().duration <= duration) chain.pop_back();
    chain.push_back(Launched{e.start_ns, duration});
    if (chain.size() > kMaxCollectiveChain) chain.erase(chain.begin());
}

// Collective kernels in the order each rank's GPU reached them (matched across ranks by step,
// name and occurrence), with the compute its device ran since the collective before started:
// what a rank that arrives late was still doing.
void TimelineAnalyzer::note_arrival(const Event& e, bool known, std::uint64_t launch,
                                    WorkClass work) {
    constexpr std::size_t kMaxArrivals = 4096;
    constexpr std::size_t kMaxMerged = 4096;
    ComputeSince& since = compute_since_[e.device];
    const std::uint64_t start = e.start_ns;
    const std::uint64_t end = std::max(e.end_ns, e.start_ns);
    if (work == WorkClass::kCompute) {
        std::uint64_t from = std::max(start, since.last_collective_start);
        if (end <= from) return;
        // Past the cap the last span absorbs the new one (more counts as overlap, never less).
        const bool overlaps_last = !since.merged.empty() && from <= since.merged.back().end;
        if (overlaps_last || since.merged.size() >= kMaxMerged) {
            since.merged.back().end = std::max(since.merged.back().end, end);
        } else {
            since.merged.push_back(Span{from, end});
        }
        return;
    }
    if (work != WorkClass::kCommunication) return;
    std::uint64_t compute = 0;
    for (const Span& sp : since.merged) {
        std::uint64_t hi = std::min(sp.end, start);
        if (hi > sp.start) compute += hi - sp.start;
    }
    // The compute between two collectives' starts is what a rank did to reach the second (with
    // DDP's buckets it overlaps the first); what runs past this start counts toward the next.
    while (!since.merged.empty() && since.merged.front().end <= start) since.merged.pop_front();
    if (!since.merged.empty())
        since.merged.front().start = std::max(since.merged.front().start, start);
    since.last_collective_start = std::max(since.last_collective_start, start);
    std::size_t s = step_of(known ? launch : start);
    if (s == SIZE_MAX || arrivals_.size() >= kMaxArrivals) return;
    std::uint32_t& seen = arrival_counts_[{steps_[s].number, e.kernel.name}];
    arrivals_.push_back(
        Arrival{steps_[s].number, seen++, e.kernel.name, e.stream, start, end, compute});
}

const TimelineAnalyzer::UnionView& TimelineAnalyzer::window_view(const DeviceTimeline& d) const {
    // With two or more steps HTA keeps only work whose launch it found; a separate union
    // without the rest keeps those from filling the gaps between the work it keeps.
    if (options_.window == AnalysisWindow::kHta && steps_.size() >= 2) return d.attributed;
    return d.all;
}

namespace {

// Union length of `queue`'s spans (sorted by start) within [x, y).
template <typename Queue>
std::uint64_t union_overlap(const Queue& queue, std::uint64_t x, std::uint64_t y) {
    std::uint64_t covered = x;
    std::uint64_t total = 0;
    // No span starting before x - longest can reach x.
    std::uint64_t from = x > queue.longest ? x - queue.longest : 0;
    auto first = std::lower_bound(queue.spans.begin(), queue.spans.end(), from,
                                  [](const auto& sp, std::uint64_t t) { return sp.start < t; });
    for (auto it = first; it != queue.spans.end(); ++it) {
        const auto& sp = *it;
        if (sp.start >= y) break;
        std::uint64_t lo = std::max(sp.start, covered);
        std::uint64_t hi = std::min(sp.end, y);
        if (hi > lo) {
            total += hi - lo;
            covered = hi;
        }
    }
    return total;
}

}  // namespace

void TimelineAnalyzer::attribute_host_wait(std::uint64_t a, std::uint64_t b, std::uint64_t launch,
                                           GpuTimeStats& st) const {
    // The host owed the GPU work from `a` until it called the launch; the rest of the gap is the
    // launch's own latency.
    std::uint64_t host_end = std::clamp(launch, a, b);
    st.cause_ns[static_cast<std::size_t>(HostCause::kLaunch)] += b - host_end;
    std::uint64_t window = host_end - a;
    if (window == 0) return;
    std::uint64_t input = std::min(window, union_overlap(input_spans_, a, host_end));
    st.cause_ns[static_cast<std::size_t>(HostCause::kInput)] += input;
    std::uint64_t rest = window - input;
    if (rest == 0) return;
    // A sync that returned as the GPU ran dry is why the queue was empty: everything the host did
    // after it before relaunching is the price of that sync.
    std::uint64_t from = a > kSyncSlackNs ? a - kSyncSlackNs : 0;
    for (const auto& sp : sync_spans_.spans) {
        if (sp.start >= host_end) break;
        if (sp.end >= from && sp.end <= host_end) {
            st.cause_ns[static_cast<std::size_t>(HostCause::kSync)] += rest;
            return;
        }
    }
    std::uint64_t sync = std::min(rest, union_overlap(sync_spans_, a, host_end));
    rest -= sync;
    std::uint64_t copy = std::min(rest, union_overlap(copy_spans_, a, host_end));
    rest -= copy;
    std::uint64_t api = std::min(rest, union_overlap(api_spans_, a, host_end));
    rest -= api;
    st.compile_ns += std::min(rest, union_overlap(compile_spans_, a, host_end));
    st.cause_ns[static_cast<std::size_t>(HostCause::kSync)] += sync;
    st.cause_ns[static_cast<std::size_t>(HostCause::kCopy)] += copy;
    st.cause_ns[static_cast<std::size_t>(HostCause::kLaunch)] += api;
    st.cause_ns[static_cast<std::size_t>(HostCause::kCpu)] += rest;
}

void TimelineAnalyzer::prune_host_spans() {
    // The next gap on any device starts at or after its frontier; host spans that ended before
    // the oldest frontier can no longer explain anything.
    std::uint64_t newest = 0;
    for (const auto& d : devices_) {
        if (d.all.started) newest = std::max(newest, d.all.frontier);
    }
    if (newest == 0) return;
    std::uint64_t oldest = newest;
    for (const auto& d : devices_) {
        if (d.all.started && d.all.frontier + kHostHorizonNs >= newest) {
            oldest = std::min(oldest, d.all.frontier);
        }
    }
    std::uint64_t cutoff = oldest > kSyncSlackNs ? oldest - kSyncSlackNs : 0;
    for (auto* queue : {&input_spans_, &sync_spans_, &copy_spans_, &api_spans_, &compile_spans_}) {
        while (!queue->spans.empty() && queue->spans.front().end < cutoff) queue->spans.pop_front();
    }
    host_log_.prune_before(cutoff);
}

template <typename Stats>
Stats TimelineAnalyzer::select_window(const std::vector<Stats>& buckets,
                                      const Stats& unattributed) const {
    Stats out;
    auto add = [&](std::size_t i) {
        if (i < buckets.size()) out.add(buckets[i]);
    };
    std::size_t n = steps_.size();
    auto add_all = [&] {
        for (const auto& b : buckets) out.add(b);
        out.add(unattributed);
    };
    switch (options_.window) {
        case AnalysisWindow::kAll: add_all(); break;
        case AnalysisWindow::kSteps: {
            // Complete steps only: a step still open (the one a boundary began as the loop ended,
            // or the current one mid-run) has no duration yet.
            std::size_t closed = 0;
            for (const auto& st : steps_) closed += st.end_ns != UINT64_MAX ? 1 : 0;
            if (closed == 0) {
                add_all();
            } else {
                for (std::size_t i = 0; i < n; ++i) {
                    if (steps_[i].end_ns == UINT64_MAX) continue;
                    add(1 + 2 * i);
                    if (i + 1 < n) add(2 + 2 * i);  // between steps, but not after the last
                }
            }
            break;
        }
        case AnalysisWindow::kHta:
            if (n < 2) {
                add_all();
            } else {
                add(0);
                for (std::size_t i = 0; i + 1 < n; ++i) {
                    add(1 + 2 * i);
                    add(2 + 2 * i);
                }
            }
            break;
    }
    return out;
}

// The time between consecutive closed steps of [first, last) that no step covers, and the span
// from the first step's start to the last one's end it is a share of.
void TimelineAnalyzer::summarize_between_steps(std::size_t first, std::size_t last,
                                               TimelineSummary& s) const {
    const StepRecord* prev = nullptr;
    std::uint64_t span_start = UINT64_MAX;
    std::uint64_t span_end = 0;
    for (std::size_t i = first; i < last; ++i) {
        const StepRecord& st = steps_[i];
        if (st.end_ns == UINT64_MAX) continue;
        span_start = std::min(span_start, st.start_ns);
        span_end = std::max(span_end, st.end_ns);
        if (prev != nullptr && st.start_ns > prev->end_ns) {
            const std::uint64_t gap = st.start_ns - prev->end_ns;
            s.between_steps_ns += gap;
            ++s.between_step_gaps;
            s.longest_between_steps_ns = std::max(s.longest_between_steps_ns, gap);
        }
        if (prev == nullptr || st.end_ns > prev->end_ns) prev = &st;
    }
    s.steps_span_ns = span_end > span_start ? span_end - span_start : 0;
}

TimelineSummary TimelineAnalyzer::summarize() const {
    TimelineSummary s;
    s.window = options_.window;
    s.rank = info_.rank;
    std::size_t n = steps_.size();
    switch (options_.window) {
        case AnalysisWindow::kSteps:
            s.window_description = n == 0
                                       ? "whole trace (no steps found)"
                                       : "complete steps: GPU work launched from the first step's "
                                         "start to the last step's end";
            break;
        case AnalysisWindow::kHta:
            s.window_description = n < 2 ? "whole trace (HTA's window; fewer than 2 steps)"
                                         : "HTA's window: GPU work launched before the last step "
                                           "began, whose launch is in the trace";
            break;
        case AnalysisWindow::kAll: s.window_description = "whole trace"; break;
    }
    // Headline figures describe the busiest device.
    for (const auto& d : devices_) {
        const UnionView& v = window_view(d);
        GpuTimeStats g = select_window(v.buckets, v.unattributed);
        if (s.device < 0 || g.busy_ns > s.gpu.busy_ns) {
            s.gpu = g;
            s.device = d.ordinal;
        }
    }
    s.has_gpu_activity = gpu_activities_ > 0;

    std::size_t first = 0;
    std::size_t last = n;  // exclusive
    if (options_.window == AnalysisWindow::kHta && n >= 2) last = n - 1;
    bool use_steps = n > 0 && options_.window != AnalysisWindow::kAll;
    if (use_steps) {
        summarize_between_steps(first, last, s);
        for (std::size_t i = first; i < last; ++i) {
            const StepRecord& st = steps_[i];
            if (st.end_ns == UINT64_MAX) continue;  // a step marker never closed
            s.lead_in_waits += st.lead_in_waits;
            std::uint64_t dur = st.end_ns - st.start_ns;
            ++s.steps;
            s.host_time_ns += dur;
            s.step_time_max_ns = std::max(s.step_time_max_ns, dur);
            s.input_wait_ns += st.input_wait_ns;
            s.input_waits += st.input_waits;
            s.longest_input_wait_ns = std::max(s.longest_input_wait_ns, st.longest_input_wait_ns);
            s.sync_calls += st.sync_calls;
            s.sync_ns += st.sync_ns;
        }
        s.step_time_mean_ns = s.steps > 0 ? s.host_time_ns / s.steps : 0;
    }
    if (!use_steps || s.steps == 0) {
        s.steps = options_.window == AnalysisWindow::kAll ? n : 0;
        s.host_time_ns = host_last_ns_ > host_first_ns_ ? host_last_ns_ - host_first_ns_ : 0;
        if (s.host_time_ns == 0) s.host_time_ns = s.gpu.span_ns();
        s.input_wait_ns = input_wait_ns_;
        s.input_waits = input_waits_;
        s.longest_input_wait_ns = longest_input_wait_ns_;
        s.sync_calls = sync_calls_;
        s.sync_ns = sync_ns_;
        if (n > 0) {
            std::uint64_t total = 0;
            std::uint64_t closed = 0;
            for (const auto& st : steps_) {
                if (st.end_ns == UINT64_MAX) continue;
                total += st.end_ns - st.start_ns;
                s.step_time_max_ns = std::max(s.step_time_max_ns, st.end_ns - st.start_ns);
                ++closed;
            }
            s.step_time_mean_ns = closed > 0 ? total / closed : 0;
        }
    }
    for (const auto& [name, cn] : sync_by_name_) {
        s.sync_by_name.emplace_back(strings_ != nullptr ? std::string(strings_->lookup(name)) : "",
                                    cn);
    }
    std::sort(s.sync_by_name.begin(), s.sync_by_name.end(),
              [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
    s.single_process_loader = single_process_loader_;
    s.kernel_median_ns = kernel_durations_.quantile(0.5);
    s.launch_median_ns = launch_durations_.quantile(0.5);
    s.launch_calls = launch_durations_.count();
    std::size_t top = 0;
    for (std::size_t i = 1; i < pageable_bytes_by_direction_.size(); ++i) {
        if (pageable_bytes_by_direction_[i] > pageable_bytes_by_direction_[top]) top = i;
    }
    if (pageable_bytes_by_direction_[top] > 0) s.top_pageable_direction = copy_direction_name(top);

    // The what-ifs over the window's steps (all but the last in HTA's window).
    std::size_t cp_last = n;
    if (options_.window == AnalysisWindow::kHta) cp_last = n >= 2 ? n - 1 : 0;
    summarize_window(use_steps && s.steps > 0, cp_last, s);
    for (const auto& l : loaders_) {
        if (!s.loader_known || l.input_wait_ns > s.loader.input_wait_ns) {
            s.loader = l;
            s.loader_known = true;
        }
    }
    s.serving = serving_;
    return s;
}

void TimelineAnalyzer::contribute(Report& report) {
    if (!ended_) {  // a report mid-run: the replay keeps going (summarize finishes a copy)
        for (auto& d : devices_) flush_pending(d);
        ended_ = true;
    }
    TimelineSummary s = summarize();
    observe_evidence(report);
    // An input with no timeline (a memory snapshot) gets no section: its figures would all be
    // zeros that were never measured. Nor does one whose timeline events measured nothing (host
    // ranges of a device gpudiag cannot read, no steps, no input waits, no syncs).
    if (!saw_timeline_) return;
    if (s.has_gpu_activity || s.steps > 0 || s.input_waits > 0 || s.sync_calls > 0) {
        build_section(s, report);
    }
    add_timeline_findings(s, report);
    if (!s.has_gpu_activity) {
        report.notes.push_back(
            "No GPU activity in this input (no CUPTI or trace kernels): "
            "gpu_idle, host_sync_stall, launch_bound, pageable_memcpy and "
            "comm_bound need it and were not evaluated; input_bound and step "
            "times come from host time.");
    }
}

void TimelineAnalyzer::observe_evidence(Report& report) const {
    const bool closed_step = std::any_of(
        steps_.begin(), steps_.end(), [](const StepRecord& st) { return st.end_ns != UINT64_MAX; });
    if (closed_step) report.observe(Evidence::kSteps);
    if (input_waits_ > 0) report.observe(Evidence::kInputWaits);
    if (gpu_activities_ > 0) report.observe(Evidence::kGpuActivity);
}

namespace {

double share_of(std::uint64_t part, std::uint64_t whole) {
    return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

// Per step, the GPU's time split into parts that add up to its span: busy, and idle by why. The
// loop's input wait is host time, so it explains idle time only up to the host wait.
Table step_breakdown_table() {
    Table t;
    t.id = "step_breakdown";
    t.title = "GPU time per step: busy, and idle by cause";
    t.columns = {"step", "busy", "idle: input wait", "idle: host wait", "idle: other"};
    t.units = {Unit::kStep, Unit::kNanoseconds, Unit::kNanoseconds, Unit::kNanoseconds,
               Unit::kNanoseconds};
    t.kind = TableKind::kPartition;
    return t;
}

// Without GPU activity, what a host-only input does show: each step's time split into the wait
// for its batch and the rest (the loop's own work), so a starved loop is seen at a glance.
Table host_step_breakdown_table() {
    Table t;
    t.id = "step_host_breakdown";
    t.title = "Step time: waiting for input, and the rest of the step";
    t.columns = {"step", "input wait", "rest of the step"};
    t.units = {Unit::kStep, Unit::kNanoseconds, Unit::kNanoseconds};
    t.kind = TableKind::kPartition;
    return t;
}

void add_host_step_breakdown(Table& t, const StepRecord& step) {
    const std::uint64_t dur = step.end_ns - step.start_ns;
    const std::uint64_t wait = std::min(step.input_wait_ns, dur);
    t.rows.push_back({static_cast<double>(step.number), static_cast<double>(wait),
                      static_cast<double>(dur - wait)});
}

void add_step_breakdown(Table& t, const StepRecord& step, const GpuTimeStats& g) {
    std::uint64_t host = std::min(g.idle_ns, g.idle_by_kind[0]);
    std::uint64_t input = std::min(host, step.input_wait_ns);
    t.rows.push_back({static_cast<double>(step.number), static_cast<double>(g.busy_ns),
                      static_cast<double>(input), static_cast<double>(host - input),
                      static_cast<double>(g.idle_ns - host)});
}

}  // namespace

// What fell between the steps: the time no step covers, and the waits booked to the step after
// them. Said in a note once it is a share worth noticing (the 5 % a cause needs to be one).
void TimelineAnalyzer::add_between_steps(const TimelineSummary& s, Section& sec,
                                         Report& report) const {
    constexpr double kBetweenNotable = 0.05;
    if (s.lead_in_waits > 0) {
        sec.figures.push_back({"lead_in_waits", static_cast<double>(s.lead_in_waits), Unit::kCount,
                               "input waits before a step's marked start, booked to that step"});
    }
    // Below half a percent of the steps' span (the few µs between a profiler's step ranges) the
    // time between steps is no figure worth a line.
    constexpr double kBetweenWorthAFigure = 0.005;
    const double share = share_of(s.between_steps_ns, s.steps_span_ns);
    if (s.between_step_gaps == 0 || share < kBetweenWorthAFigure) return;
    sec.figures.push_back({"between_steps_ns", static_cast<double>(s.between_steps_ns),
                           Unit::kNanoseconds, "time between steps (in no step)"});
    sec.figures.push_back(
        {"between_steps_share", share, Unit::kFraction, "share of the steps' span between steps"});
    if (share < kBetweenNotable) return;
    report.notes.push_back(fmt::format(
        "{} ({} of the time from the first step's start to the last one's end) fell between "
        "steps, in {} {} (the longest {}): work between the hooks that mark the steps, such as "
        "evaluation, checkpoints or logging. The step figures leave it out{}",
        format_duration_ns(static_cast<double>(s.between_steps_ns)), format_percent(share),
        s.between_step_gaps, s.between_step_gaps == 1 ? "gap" : "gaps",
        format_duration_ns(static_cast<double>(s.longest_between_steps_ns)),
        s.lead_in_waits > 0 ? "; the input waits in it are booked to the step after them." : "."));
}

void TimelineAnalyzer::build_section(const TimelineSummary& s, Report& report) const {
    Section sec;
    sec.id = timeline_keys::kSection;
    sec.title = s.has_gpu_activity ? "GPU timeline: busy, idle and why"
                                   : "Host timeline (no GPU activity in the input)";
    auto fig = [&](const char* key, double value, Unit unit, const char* label) {
        sec.figures.push_back(Figure{key, value, unit, label});
    };
    const auto share = share_of;
    const GpuTimeStats& g = s.gpu;
    fig("window", static_cast<double>(s.window), Unit::kCode, "window: 0 steps, 1 hta, 2 all");
    if (s.has_gpu_activity) {  // without, the title says so: a 0 would claim what was not seen
        fig(timeline_keys::kGpuActivities, static_cast<double>(gpu_activities_), Unit::kCount,
            "GPU kernels, copies and memsets");
        std::uint64_t span = g.span_ns();
        std::uint64_t kernel_time = g.class_ns[0] + g.class_ns[1] + g.class_ns[2];
        fig("device", s.device, Unit::kDevice, "device (ordinal) these figures describe");
        fig(timeline_keys::kWindowSpanNs, static_cast<double>(span), Unit::kNanoseconds,
            "GPU time in the window");
        fig("busy_ns", static_cast<double>(g.busy_ns), Unit::kNanoseconds, "GPU busy");
        fig("idle_ns", static_cast<double>(g.idle_ns), Unit::kNanoseconds, "GPU idle");
        fig(timeline_keys::kIdleShare, share(g.idle_ns, span), Unit::kFraction,
            "GPU idle share of the window");
        fig("host_wait_share", share(g.idle_by_kind[0], g.idle_ns), Unit::kFraction,
            "idle time: host wait");
        fig("kernel_wait_share", share(g.idle_by_kind[1], g.idle_ns), Unit::kFraction,
            "idle time: kernel wait");
        fig("other_wait_share", share(g.idle_by_kind[2], g.idle_ns), Unit::kFraction,
            "idle time: other");
        fig("host_wait_ns", static_cast<double>(g.idle_by_kind[0]), Unit::kNanoseconds,
            "host wait");
        fig("kernel_wait_ns", static_cast<double>(g.idle_by_kind[1]), Unit::kNanoseconds,
            "kernel wait");
        fig("other_wait_ns", static_cast<double>(g.idle_by_kind[2]), Unit::kNanoseconds,
            "other idle");
        fig("unobserved_ns", static_cast<double>(g.unobserved_ns), Unit::kNanoseconds,
            "GPU time not observed (capture paused), excluded from idle");
        for (std::size_t c = 0; c < kHostCauses; ++c) {
            const auto cause = static_cast<HostCause>(c);
            sec.figures.push_back(Figure{fmt::format("idle_{}_share", host_cause_key(cause)),
                                         share(g.cause_ns[c], g.idle_ns), Unit::kFraction,
                                         fmt::format("idle time: {}", host_cause_label(cause))});
        }
        fig(timeline_keys::kComputeShare, share(g.class_ns[0], span), Unit::kFraction,
            "computation kernels");
        fig(timeline_keys::kCommunicationShare, share(g.class_ns[1], span), Unit::kFraction,
            "communication kernels");
        fig("memory_share", share(g.class_ns[2], span), Unit::kFraction, "copies and memsets");
        fig("communication_kernel_share", share(g.class_ns[1], kernel_time), Unit::kFraction,
            "communication share of kernel time");
        fig(timeline_keys::kCommOverlapShare, share(g.comm_overlap_ns(), g.class_ns[1]),
            Unit::kFraction, "communication overlapped with compute");
        fig(timeline_keys::kCommExposedShare,
            share(g.class_ns[1] - std::min(g.class_ns[1], g.comm_overlap_ns()), span),
            Unit::kFraction, "communication not overlapped, share of the window");
        fig("gaps", static_cast<double>(g.gaps), Unit::kCount, "idle gaps");
        fig("longest_gap_ns", static_cast<double>(g.longest_gap_ns), Unit::kNanoseconds,
            "longest idle gap");
        fig("kernels", static_cast<double>(g.kernels), Unit::kCount, "kernels");
        fig("kernel_median_ns", s.kernel_median_ns, Unit::kNanoseconds, "median kernel duration");
        fig("launch_median_ns", s.launch_median_ns, Unit::kNanoseconds,
            "median launch call duration");
        fig("pageable_copies", static_cast<double>(g.pageable_copies), Unit::kCount,
            "pageable copies");
        fig("pageable_bytes", static_cast<double>(g.pageable_bytes), Unit::kBytes,
            "pageable bytes copied");
    }
    // Host figures only where the input has what they measure: no steps, no step times; no
    // DataLoader fetches, no input figures (a program without one waits for no input it shows);
    // no GPU work and no syncs, no sync figures.
    if (s.steps > 0) {
        fig(timeline_keys::kSteps, static_cast<double>(s.steps), Unit::kCount,
            "steps in the window");
        fig(timeline_keys::kStepTimeNs, static_cast<double>(s.step_time_mean_ns),
            Unit::kNanoseconds, "mean step time");
        fig("step_time_max_ns", static_cast<double>(s.step_time_max_ns), Unit::kNanoseconds,
            "longest step");
    }
    add_between_steps(s, sec, report);
    if (s.input_waits > 0) {
        fig("input_wait_share", share(s.input_wait_ns, s.host_time_ns), Unit::kFraction,
            s.steps > 0 ? "step time waiting for input" : "host time waiting for input");
        if (s.steps > 0) {
            fig("input_wait_per_step_ns",
                static_cast<double>(s.input_wait_ns) / static_cast<double>(s.steps),
                Unit::kNanoseconds, "input wait per step");
        }
        fig("input_wait_max_ns", static_cast<double>(s.longest_input_wait_ns), Unit::kNanoseconds,
            "longest input wait");
    }
    if (s.has_gpu_activity || s.sync_calls > 0) {
        fig("sync_calls", static_cast<double>(s.sync_calls), Unit::kCount, "host synchronizations");
        fig("sync_ns", static_cast<double>(s.sync_ns), Unit::kNanoseconds,
            "time blocked in synchronizations");
    }

    if (s.has_gpu_activity) {
        Table causes;
        causes.id = "idle_causes";
        causes.title = "Idle time by kind and host-side cause";
        causes.columns = {"category", "ns", "share_of_idle"};
        causes.units = {Unit::kNumber, Unit::kNanoseconds, Unit::kFraction};
        const char* kinds[] = {"host_wait", "kernel_wait", "other"};
        for (std::size_t k = 0; k < 3; ++k) {
            causes.rows.push_back({std::string(kinds[k]), static_cast<double>(g.idle_by_kind[k]),
                                   share(g.idle_by_kind[k], g.idle_ns)});
        }
        for (std::size_t c = 0; c < kHostCauses; ++c) {
            causes.rows.push_back(
                {fmt::format("host_wait.{}", host_cause_key(static_cast<HostCause>(c))),
                 static_cast<double>(g.cause_ns[c]), share(g.cause_ns[c], g.idle_ns)});
        }
        sec.tables.push_back(std::move(causes));

        Table streams;
        streams.id = "streams";
        streams.title = "Per stream (HTA's per-stream idle breakdown)";
        streams.columns = {"device",       "stream",         "activities", "busy_ns",
                           "host_wait_ns", "kernel_wait_ns", "other_ns",   "host_wait_ratio"};
        streams.units = {Unit::kDevice,      Unit::kNumber,      Unit::kCount,
                         Unit::kNanoseconds, Unit::kNanoseconds, Unit::kNanoseconds,
                         Unit::kNanoseconds, Unit::kFraction};
        for (const auto& d : devices_) {
            for (const auto& [id, ss] : window_view(d).streams) {
                StreamStats w = select_window(ss.buckets, ss.unattributed);
                if (w.activities == 0) continue;
                std::uint64_t idle = w.idle_by_kind[0] + w.idle_by_kind[1] + w.idle_by_kind[2];
                streams.rows.push_back(
                    {static_cast<double>(d.ordinal), static_cast<double>(id),
                     static_cast<double>(w.activities), static_cast<double>(w.busy_ns),
                     static_cast<double>(w.idle_by_kind[0]), static_cast<double>(w.idle_by_kind[1]),
                     static_cast<double>(w.idle_by_kind[2]), share(w.idle_by_kind[0], idle)});
            }
        }
        sec.tables.push_back(std::move(streams));

        if (devices_.size() > 1) {
            Table devs;
            devs.id = "devices";
            devs.title = "Per device";
            devs.columns = {"device",     "busy_ns",       "idle_ns",
                            "idle_share", "compute_share", "communication_share"};
            devs.units = {Unit::kDevice,   Unit::kNanoseconds, Unit::kNanoseconds,
                          Unit::kFraction, Unit::kFraction,    Unit::kFraction};
            for (const auto& d : devices_) {
                const UnionView& v = window_view(d);
                GpuTimeStats w = select_window(v.buckets, v.unattributed);
                devs.rows.push_back({static_cast<double>(d.ordinal), static_cast<double>(w.busy_ns),
                                     static_cast<double>(w.idle_ns), share(w.idle_ns, w.span_ns()),
                                     share(w.class_ns[0], w.span_ns()),
                                     share(w.class_ns[1], w.span_ns())});
            }
            sec.tables.push_back(std::move(devs));
        }
    }

    if (!steps_.empty()) add_step_tables(s, sec);
    add_critical_path(s, sec, report);
    if (options_.for_job) add_job_tables(sec);
    report.sections.push_back(std::move(sec));
    report.notes.push_back("Timeline window: " + s.window_description + ".");
    if (std::string d = s.serving.steps_description(); !d.empty()) {
        report.notes.push_back("Steps: " + d +
                               (profiler_steps_ ? "; the trace's own steps (ProfilerStep) set the "
                                                  "window."
                                                : "."));
    }
    // NCCL alone is every distributed trace's: said only when other kinds were recognised.
    if (std::string c = s.serving.comm_description();
        c.find(';') != std::string::npos || (!c.empty() && c.rfind("NCCL", 0) != 0)) {
        report.notes.push_back("Communication kernels, by what they do: " + c + ".");
    }
    if (s.gpu.unobserved_ns > 0) {
        report.notes.push_back("GPU capture was paused for " +
                               format_duration_ns(static_cast<double>(s.gpu.unobserved_ns)) +
                               " (another CUPTI client such as torch.profiler held it, or capture "
                               "stalled); that time is excluded from the idle figures.");
    }
    if (steps_dropped_ > 0) {
        report.notes.push_back(fmt::format(
            "Only the first {} steps are broken out; {} later steps count toward the last one.",
            kMaxSteps, steps_dropped_));
    }
    if (host_spans_dropped_ > 0) {
        report.notes.push_back(
            fmt::format("Host activity far ahead of the GPU was dropped from idle-cause "
                        "attribution ({} spans).",
                        host_spans_dropped_));
    }
}

// Per step: the steps' host figures, and with GPU activity what the GPU did in each (a host-only
// input gets no GPU columns, bars or series: they would be zeros that were never measured).
void TimelineAnalyzer::add_step_tables(const TimelineSummary& s, Section& sec) const {
    const DeviceTimeline* primary = nullptr;
    for (const auto& d : devices_) {
        if (d.ordinal == s.device) primary = &d;
    }
    const bool gpu = s.has_gpu_activity;
    Table steps;
    steps.id = "steps";
    steps.title = gpu ? "Per step (GPU figures count work launched during the step)" : "Per step";
    if (gpu) {
        steps.columns = {"step",          "start_s",     "duration_ns",
                         "gpu_busy_ns",   "gpu_idle_ns", "host_wait_ns",
                         "input_wait_ns", "compute_ns",  "communication_ns",
                         "memory_ns",     "sync_calls"};
        steps.units = {Unit::kStep,        Unit::kSeconds,     Unit::kNanoseconds,
                       Unit::kNanoseconds, Unit::kNanoseconds, Unit::kNanoseconds,
                       Unit::kNanoseconds, Unit::kNanoseconds, Unit::kNanoseconds,
                       Unit::kNanoseconds, Unit::kCount};
    } else {
        steps.columns = {"step", "start_s", "duration_ns"};
        steps.units = {Unit::kStep, Unit::kSeconds, Unit::kNanoseconds};
    }
    const bool input = !gpu && s.input_waits > 0;  // a host-only table adds only what it saw
    if (input) {
        steps.columns.emplace_back("input_wait_ns");
        steps.units.emplace_back(Unit::kNanoseconds);
    }
    Table breakdown = step_breakdown_table();
    Table host_breakdown = host_step_breakdown_table();
    Series idle_series{"step_idle_share", "GPU idle share per step", Unit::kFraction, {}};
    Series time_series{"step_time", "Step time", Unit::kNanoseconds, {}};
    std::size_t stride = std::max<std::size_t>(1, (steps_.size() + kStepRows - 1) / kStepRows);
    std::size_t series_stride =
        std::max<std::size_t>(1, (steps_.size() + kSeriesPoints - 1) / kSeriesPoints);
    std::uint64_t origin = steps_.front().start_ns;
    for (std::size_t i = 0; i < steps_.size(); ++i) {
        const StepRecord& st = steps_[i];
        if (st.end_ns == UINT64_MAX) continue;  // still open: no row until it ends
        GpuTimeStats g2;
        if (primary != nullptr) {
            const UnionView& v = window_view(*primary);
            if (1 + 2 * i < v.buckets.size()) g2.add(v.buckets[1 + 2 * i]);
        }
        double dur = static_cast<double>(st.end_ns - st.start_ns);
        double t = static_cast<double>(st.start_ns - origin) / 1e9;
        if (i % stride == 0 && gpu) {
            steps.rows.push_back(
                {static_cast<double>(st.number), t, dur, static_cast<double>(g2.busy_ns),
                 static_cast<double>(g2.idle_ns), static_cast<double>(g2.idle_by_kind[0]),
                 static_cast<double>(st.input_wait_ns), static_cast<double>(g2.class_ns[0]),
                 static_cast<double>(g2.class_ns[1]), static_cast<double>(g2.class_ns[2]),
                 static_cast<double>(st.sync_calls)});
            add_step_breakdown(breakdown, st, g2);
        } else if (i % stride == 0) {
            steps.rows.push_back({static_cast<double>(st.number), t, dur});
            if (input) {
                steps.rows.back().emplace_back(static_cast<double>(st.input_wait_ns));
                add_host_step_breakdown(host_breakdown, st);
            }
        }
        if (i % series_stride == 0) {
            idle_series.points.emplace_back(t, share_of(g2.idle_ns, g2.span_ns()));
            time_series.points.emplace_back(t, dur);
        }
    }
    sec.tables.push_back(std::move(steps));
    if (gpu) {
        sec.tables.push_back(std::move(breakdown));
        sec.series.push_back(std::move(idle_series));
    } else if (input) {
        sec.tables.push_back(std::move(host_breakdown));
    }
    sec.series.push_back(std::move(time_series));
}

// The steps' critical path (what the step time was made of, along the chain that set it) and
// the what-ifs (the step time with one cause removed).
void TimelineAnalyzer::add_critical_path(const TimelineSummary& s, Section& sec,
                                         Report& report) const {
    const CriticalPathSummary& cp = s.critical_path;
    if (!cp.available) return;
    auto fig = [&](std::string key, double value, Unit unit, std::string label) {
        sec.figures.push_back(Figure{std::move(key), value, unit, std::move(label)});
    };
    const char* per = cp.per_step ? "per step" : "over the window";
    if (cp.traced_steps > 0) {
        fig(timeline_keys::kCriticalPathSteps, static_cast<double>(cp.traced_steps), Unit::kCount,
            "steps whose critical path was traced");
        double gpu = 0;
        for (PathPart p :
             {PathPart::kCompute, PathPart::kCommunication, PathPart::kMemory, PathPart::kGpuGap}) {
            gpu += cp.path_ns[static_cast<std::size_t>(p)];
        }
        fig("critical_path_gpu_share", cp.path_step_ns > 0 ? gpu / cp.path_step_ns : 0.0,
            Unit::kFraction, "share of the critical path on the GPU");
        Table parts;
        parts.id = "critical_path";
        parts.title = "Critical path per step: what the step time was made of";
        parts.columns = {"part", "ns_per_step", "share_of_step"};
        parts.units = {Unit::kNumber, Unit::kNanoseconds, Unit::kFraction};
        for (std::size_t p = 0; p < kPathParts; ++p) {
            parts.rows.push_back({std::string(path_part_key(static_cast<PathPart>(p))),
                                  cp.path_ns[p],
                                  cp.path_step_ns > 0 ? cp.path_ns[p] / cp.path_step_ns : 0.0});
        }
        sec.tables.push_back(std::move(parts));
        Table per_step;
        per_step.id = "step_critical_path";
        per_step.title = "Critical path of each step, by part";
        per_step.kind = TableKind::kPartition;
        per_step.columns = {"step"};
        per_step.units = {Unit::kStep};
        for (std::size_t p = 0; p < kPathParts; ++p) {
            per_step.columns.emplace_back(path_part_key(static_cast<PathPart>(p)));
            per_step.units.emplace_back(Unit::kNanoseconds);
        }
        for (const auto& [index, path] : cp.step_paths) {
            std::vector<Cell> row{
                static_cast<double>(index < steps_.size() ? steps_[index].number : 0)};
            for (std::uint64_t v : path) row.emplace_back(static_cast<double>(v));
            per_step.rows.push_back(std::move(row));
        }
        sec.tables.push_back(std::move(per_step));
    }
    if (cp.untraced_steps > 0) {
        fig("critical_path_untraced_steps", static_cast<double>(cp.untraced_steps), Unit::kCount,
            "steps too large to trace (more events than the history holds)");
        report.notes.push_back(fmt::format(
            "The critical path of {} steps was not traced: they hold more than {} events (the "
            "what-ifs still cover them).",
            cp.untraced_steps, CriticalPath::kMaxHistory));
    }
    Table whatif;
    whatif.id = timeline_keys::kWhatIfTable;
    whatif.title = std::string("Step time with one cause removed (replayed critical path), ") + per;
    whatif.columns = {"what_if", "saving_ns", "saving_share", "predicted_ns"};
    whatif.units = {Unit::kNumber, Unit::kNanoseconds, Unit::kFraction, Unit::kNanoseconds};
    const double base = cp.measured_ns;
    for (std::size_t w = 1; w < kWhatIfs; ++w) {
        whatif.rows.push_back({std::string(what_if_key(static_cast<WhatIf>(w))), cp.saving_ns[w],
                               base > 0 ? cp.saving_ns[w] / base : 0.0, base - cp.saving_ns[w]});
    }
    sec.tables.push_back(std::move(whatif));
    fig("replay_step_ns", base, Unit::kNanoseconds,
        std::string("replayed time ") + per + " (the what-ifs' baseline)");
    fig("replay_error_ns", cp.replay_error_ns, Unit::kNanoseconds,
        "replayed minus measured span (0: the graph explains it all)");
    fig("launch_links", static_cast<double>(cp.launch_edges), Unit::kCount,
        "GPU activities joined to their launch");
    fig("sync_waits", static_cast<double>(cp.sync_waits), Unit::kCount,
        "syncs and copies that waited for GPU work");
    fig("sync_links_named", static_cast<double>(cp.syncs_named), Unit::kCount,
        "syncs joined to the stream the trace names");
    fig("sync_links_inferred", static_cast<double>(cp.syncs_inferred), Unit::kCount,
        "syncs joined by timing");
    fig("stream_wait_links", static_cast<double>(cp.stream_waits), Unit::kCount,
        "cross-stream event waits the trace names");
    fig("stream_wait_links_inferred", static_cast<double>(cp.stream_waits_inferred), Unit::kCount,
        "waits on another stream inferred by timing");
    if (cp.forced_items + cp.late_items > 0) {
        report.notes.push_back(
            fmt::format("The critical-path replay took {} host events out of order (they arrived "
                        "late); the what-ifs are approximate there.",
                        cp.late_items + cp.forced_items));
    }
}

// What the job view needs to compare ranks in time: each step's bounds (the host's step and the
// GPU work launched in it) and the collective chains, on the clock all ranks share (Unix time,
// in µs as the traces write it, exact in a double).
void TimelineAnalyzer::add_job_tables(Section& sec) const {
    const double offset = static_cast<double>(info_.wall_clock_offset_ns);
    auto us = [offset](std::uint64_t ns) { return (static_cast<double>(ns) + offset) / 1000.0; };
    Table bounds;
    bounds.id = timeline_keys::kJobStepsTable;
    bounds.kind = TableKind::kData;  // the job view's input, on the shared clock
    bounds.title = "Step bounds for the job view (host step and the GPU work launched in it)";
    bounds.columns = {"step", "start_us", "end_us"};
    for (std::size_t i = 0; i < steps_.size() && i < kStepRows; ++i) {
        const StepRecord& st = steps_[i];
        if (st.end_ns == UINT64_MAX) continue;
        std::uint64_t first = st.start_ns;
        std::uint64_t last = st.end_ns == UINT64_MAX ? st.start_ns : st.end_ns;
        for (const auto& d : devices_) {
            if (1 + 2 * i < d.all.buckets.size()) {
                const GpuTimeStats& g = d.all.buckets[1 + 2 * i];
                if (g.activities > 0) {
                    first = std::min(first, g.first_start_ns);
                    last = std::max(last, g.last_end_ns);
                }
            }
        }
        bounds.rows.push_back({static_cast<double>(st.number), us(first), us(last)});
    }
    Table coll;
    coll.id = timeline_keys::kCollectivesTable;
    coll.kind = TableKind::kData;  // the job view's input, on the shared clock
    coll.title = "Collective kernels per step, the last of each length (for the job view)";
    coll.columns = {"step", "stream", "kernel", "start_us", "duration_ns"};
    for (const auto& [key, chain] : collectives_) {
        for (const Launched& k : chain) {
            coll.rows.push_back({static_cast<double>(key.step), static_cast<double>(key.stream),
                                 std::string(strings_ != nullptr ? strings_->lookup(key.name) : ""),
                                 us(k.start), static_cast<double>(k.duration)});
        }
    }
    if (!bounds.rows.empty()) sec.tables.push_back(std::move(bounds));
    if (!coll.rows.empty()) sec.tables.push_back(std::move(coll));
    Table arrivals;
    arrivals.id = timeline_keys::kCollectiveArrivalsTable;
    arrivals.kind = TableKind::kData;  // the job view's input, on the shared clock
    arrivals.title =
        "Collective kernels as the GPU reached them, with the compute before each (for the job "
        "view)";
    arrivals.columns = {"step",     "occurrence", "kernel",           "stream",
                        "start_us", "end_us",     "compute_before_ns"};
    for (const Arrival& a : arrivals_) {
        arrivals.rows.push_back({static_cast<double>(a.step), static_cast<double>(a.occurrence),
                                 std::string(strings_ != nullptr ? strings_->lookup(a.name) : ""),
                                 static_cast<double>(a.stream), us(a.start), us(a.end),
                                 static_cast<double>(a.compute_before)});
    }
    if (!arrivals.rows.empty()) sec.tables.push_back(std::move(arrivals));
}

// ---- one-off stalls and the window ------------------------------------------------------------

void TimelineAnalyzer::note_host_item(std::uint64_t start, std::uint64_t end, StringId name,
                                      bool api) {
    host_log_.add(start, end, name, api);
    if (strings_ == nullptr) return;
    if (compile_cache_.size() <= name) compile_cache_.resize(std::size_t{name} + 1, 0);
    std::uint8_t& known = compile_cache_[name];
    if (known == 0) {
        const std::string_view text = strings_->lookup(name);
        known = api ? (is_allocator_call(text) ? 3 : 1) : (is_compiler_range(text) ? 2 : 1);
    }
    if (known == 2) add_span(compile_spans_, start, std::max(start, end));
    if (known == 3) {
        ++allocator_calls_;
        allocator_ns_ += std::max(start, end) - start;
    }
}

void TimelineAnalyzer::note_stall_gap(UnionView& v, std::size_t bucket, const GpuTimeStats& delta,
                                      std::uint64_t start, std::uint64_t end) {
    if (delta.idle_ns <= v.stall_delta.idle_ns || static_cast<double>(delta.idle_ns) < kOneOffMinNs)
        return;
    v.stall_bucket = bucket;
    v.stall_delta = delta;
    v.stall_activity =
        strings_ != nullptr ? host_log_.describe(start, end, *strings_) : HostActivity{};
    v.stall_activity.start = start;
    v.stall_activity.end = end;
}

namespace {
std::uint64_t less(std::uint64_t a, std::uint64_t b) {
    return a > b ? a - b : 0;
}
// `g` without one gap's figures (delta: what that gap added).
void remove_gap(GpuTimeStats& g, const GpuTimeStats& delta) {
    g.idle_ns = less(g.idle_ns, delta.idle_ns);
    for (std::size_t i = 0; i < g.idle_by_kind.size(); ++i)
        g.idle_by_kind[i] = less(g.idle_by_kind[i], delta.idle_by_kind[i]);
    for (std::size_t i = 0; i < g.cause_ns.size(); ++i)
        g.cause_ns[i] = less(g.cause_ns[i], delta.cause_ns[i]);
    g.compile_ns = less(g.compile_ns, delta.compile_ns);
    g.gaps = less(g.gaps, delta.gaps);
}
// `g` without its slow first launches' waits: one-off module loading, not per-step launching.
void remove_cold_launches(GpuTimeStats& g) {
    constexpr auto kHost = static_cast<std::size_t>(IdleKind::kHostWait);
    constexpr auto kLaunch = static_cast<std::size_t>(HostCause::kLaunch);
    constexpr auto kOther = static_cast<std::size_t>(IdleKind::kOther);
    g.idle_ns = less(g.idle_ns, g.cold_launch_ns);
    g.idle_by_kind[kHost] = less(g.idle_by_kind[kHost], g.cold_launch_host_ns);
    g.idle_by_kind[kOther] = less(g.idle_by_kind[kOther], g.cold_launch_ns - g.cold_launch_host_ns);
    g.cause_ns[kLaunch] = less(g.cause_ns[kLaunch], g.cold_launch_host_ns);
}
}  // namespace

// A one-off stall: the host time before the first GPU work (a window without steps starts at the
// first GPU work, so that time is outside it already) or the longest host-wait gap in the window
// (then left out of the window's figures), whichever is longer, when it holds most of the idle.
void TimelineAnalyzer::find_one_off_stall(const DeviceTimeline& d, bool use_steps,
                                          TimelineSummary& s) const {
    const UnionView& v = window_view(d);
    GpuTimeStats delta;
    if (v.stall_bucket != SIZE_MAX) {
        std::vector<GpuTimeStats> one(v.stall_bucket + 1);
        one[v.stall_bucket] = v.stall_delta;
        delta = select_window(one, GpuTimeStats{});
    }
    // A gap is one-off only against others it stands out from.
    const std::uint64_t gap =
        delta.gaps == 1 && s.gpu.gaps >= 1 + kOneOffMinOtherGaps ? delta.idle_ns : 0;
    const std::uint64_t first_gpu = s.gpu.first_start_ns;
    const std::uint64_t before = !use_steps && first_gpu != UINT64_MAX && host_first_ns_ < first_gpu
                                     ? first_gpu - host_first_ns_
                                     : 0;
    const auto idle = static_cast<double>(s.gpu.idle_ns + before);
    const auto span = static_cast<double>(s.gpu.span_ns() + before);
    const auto len = static_cast<double>(std::max(gap, before));
    if (len < kOneOffMinNs || len < kOneOffShareOfIdle * idle ||
        len < kOneOffShareOfWindow * span) {
        return;
    }
    OneOffStall& st = s.stall;
    st.found = true;
    st.before_gpu = before >= gap;
    st.idle_with_stall_ns = s.gpu.idle_ns + before;
    st.span_with_stall_ns = s.gpu.span_ns() + before;
    if (st.before_gpu) {
        if (strings_ != nullptr)
            st.activity = host_log_.describe(host_first_ns_, first_gpu, *strings_);
        st.activity.start = host_first_ns_;
        st.activity.end = first_gpu;
    } else {
        st.activity = v.stall_activity;
        // A slow first launch that ends the stall is part of it, not counted apart.
        for (const Span& c : v.cold_launches) {
            if (c.start < st.activity.start || c.end > st.activity.end) continue;
            s.gpu.cold_launch_ns = less(s.gpu.cold_launch_ns, c.end - c.start);
            s.gpu.cold_launch_host_ns = less(s.gpu.cold_launch_host_ns, c.end - c.start);
            s.gpu.cold_launches = less(s.gpu.cold_launches, 1);
        }
        remove_gap(s.gpu, delta);
        s.gpu.longest_gap_ns = std::min(s.gpu.longest_gap_ns, v.longest_gaps[1]);
    }
    for (const StepRecord& step : steps_) {
        if (step.end_ns != UINT64_MAX && step.end_ns <= st.activity.start) ++st.steps_before;
    }
    st.allocator_calls = allocator_calls_;
    st.allocator_ns = allocator_ns_;
}

// The window the findings describe and the what-ifs replay, once: the steps, or without them the
// GPU window (first to last GPU work), less a one-off stall in it.
void TimelineAnalyzer::summarize_window(bool use_steps, std::size_t cp_last,
                                        TimelineSummary& s) const {
    // HTA's window keeps HTA's figures, to compare one to one: nothing is left out of it.
    const bool hta = options_.window == AnalysisWindow::kHta;
    for (const auto& d : devices_) {
        if (!hta && static_cast<std::int32_t>(d.ordinal) == s.device)
            find_one_off_stall(d, use_steps, s);
    }
    PathWindow w;
    const bool gpu_window = !use_steps && s.has_gpu_activity &&
                            s.gpu.last_end_ns > s.gpu.first_start_ns &&
                            s.gpu.first_start_ns != UINT64_MAX;
    if (gpu_window) {
        w.from = s.gpu.first_start_ns;
        w.to = s.gpu.last_end_ns;
    }
    std::uint64_t excluded = 0;
    if (s.stall.found && !s.stall.before_gpu) {
        w.exclude.emplace_back(s.stall.activity.start, s.stall.activity.end);
        excluded += s.stall.length_ns();
    }
    for (const auto& d : devices_) {
        if (hta || static_cast<std::int32_t>(d.ordinal) != s.device) continue;
        for (const Span& c : window_view(d).cold_launches) w.exclude.emplace_back(c.start, c.end);
    }
    if (hta) {
        s.gpu.cold_launch_ns = 0;
        s.gpu.cold_launch_host_ns = 0;
        s.gpu.cold_launches = 0;
    }
    remove_cold_launches(s.gpu);
    excluded += s.gpu.cold_launch_ns;
    const CriticalPath* path = &critical_path_;
    CriticalPath pending;
    if (!critical_path_finished_) {  // a report while the input still flows: replay a copy
        pending = critical_path_;
        pending.finish();
        path = &pending;
    }
    s.critical_path = path->summarize(0, cp_last, w);
    // Without steps, input_bound's host-time figures are restated over the same window.
    const bool restate =
        gpu_window && !s.critical_path.per_step && input_wait_spans_.size() < kMaxInputWaitSpans;
    if (restate) {
        s.input_wait_ns = 0;
        s.input_waits = 0;
        s.longest_input_wait_ns = 0;
        for (const Span& sp : input_wait_spans_) {
            const std::uint64_t a = std::max(sp.start, w.from);
            const std::uint64_t b = std::min(sp.end, w.to);
            if (b <= a) continue;
            s.input_wait_ns += b - a;
            ++s.input_waits;
            s.longest_input_wait_ns = std::max(s.longest_input_wait_ns, b - a);
        }
    }
    s.window_ns = gpu_window && !s.critical_path.per_step
                      ? less(w.to - w.from, excluded)
                      : static_cast<std::uint64_t>(s.critical_path.window_ns);
    if (restate) s.host_time_ns = s.window_ns;
    s.window_name = s.critical_path.per_step
                        ? fmt::format("over {} step{}", s.critical_path.steps,
                                      s.critical_path.steps == 1 ? "" : "s")
                        : std::string("over the GPU window (first to last GPU work)");
    if (s.stall.found && !s.stall.before_gpu) s.window_name += ", less the one-off stall";
    if (s.gpu.cold_launches > 0) {
        s.window_name += fmt::format(", less {} first kernel launches that loaded modules ({})",
                                     s.gpu.cold_launches,
                                     format_duration_ns(static_cast<double>(s.gpu.cold_launch_ns)));
    }
}

}  // namespace gpudiag::detail
