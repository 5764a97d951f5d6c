// SPDX-License-Identifier: Apache-2.0
// CriticalPath. The replay runs in host time order: a host item is replayed once every GPU
// activity that started before it ended has arrived (so a sync can find the work it waited for),
// and a GPU activity once the host item that launched it is replayed (so its launch has a
// replayed time). Every what-if is replayed in the same pass; each keeps a host cursor (where the
// host has got to) and, per stream, where its last activity ended.
#include "analysis/timeline/critical_path.hpp"

#include <algorithm>
#include <cmath>

namespace gpudiag::detail {
namespace {

// CPU and GPU clocks of one trace agree to a few µs: a sync that returned this long after work
// ended still waited for it (the timeline analysis uses the same slack).
constexpr std::uint64_t kSlackNs = 10'000;
// A sync waits for the last work on its stream; the search looks this far back on each stream.
constexpr std::size_t kRecentPerStream = 256;
// Host history kept for replaying late-arriving work launched this long ago.
constexpr std::uint64_t kWarpHorizonNs = 10'000'000'000;
// HTA's consecutive_kernel_delay: work that starts more than this after what released it waited
// for something else.
constexpr std::uint64_t kUnexplainedNs = 30'000;
// Launch latencies above this are queueing, not the launch itself (kept out of the mean).
constexpr double kLatencySampleMaxNs = 1'000'000;
// Gaps between queued activities above HTA's kernel-wait threshold are not the device's own.
constexpr double kGapSampleMaxNs = 30'000;
constexpr double kMeanWeight = 0.05;

// The what-ifs that remove every host-side cause, each cause's own among them.
bool removes_host_causes(std::size_t w) {
    return w == static_cast<std::size_t>(WhatIf::kHostNeverLate) ||
           w == static_cast<std::size_t>(WhatIf::kEveryCause);
}
bool removes_input(std::size_t w) {
    return w == static_cast<std::size_t>(WhatIf::kNoInputWait) || removes_host_causes(w);
}
bool removes_sync(std::size_t w) {
    return w == static_cast<std::size_t>(WhatIf::kNoSync) || removes_host_causes(w);
}
bool pins_copies(std::size_t w) {
    return w == static_cast<std::size_t>(WhatIf::kPinnedCopies) || removes_host_causes(w);
}
bool graphs_launches(std::size_t w) {
    return w == static_cast<std::size_t>(WhatIf::kCudaGraph) || removes_host_causes(w);
}
bool hides_communication(std::size_t w) {
    return w == static_cast<std::size_t>(WhatIf::kNoCommunication) ||
           w == static_cast<std::size_t>(WhatIf::kEveryCause);
}

std::uint64_t sub(std::uint64_t a, std::uint64_t b) {
    return a > b ? a - b : 0;
}

}  // namespace

const char* path_part_key(PathPart p) noexcept {
    switch (p) {
        case PathPart::kCompute: return "compute";
        case PathPart::kCommunication: return "communication";
        case PathPart::kMemory: return "memory";
        case PathPart::kGpuGap: return "gpu_gap";
        case PathPart::kInput:
        case PathPart::kSync:
        case PathPart::kCopy:
        case PathPart::kLaunch:
        case PathPart::kCpu:
            return host_cause_key(static_cast<HostCause>(
                static_cast<std::size_t>(p) - static_cast<std::size_t>(PathPart::kInput)));
    }
    return "unknown";
}

const char* what_if_key(WhatIf w) noexcept {
    switch (w) {
        case WhatIf::kMeasured: return "measured";
        case WhatIf::kNoInputWait: return "no_input_wait";
        case WhatIf::kNoSync: return "no_host_sync";
        case WhatIf::kPinnedCopies: return "pinned_async_copies";
        case WhatIf::kCudaGraph: return "cuda_graph";
        case WhatIf::kNoCommunication: return "hidden_communication";
        case WhatIf::kHostNeverLate: return "host_never_late";
        case WhatIf::kEveryCause: return "every_cause";
    }
    return "unknown";
}

// ---- input
// ---------------------------------------------------------------------------------------

void CriticalPath::add_host(HostCause kind, std::uint64_t start, std::uint64_t end,
                            std::uint32_t correlation, std::uint16_t device, std::uint32_t stream) {
    if (finished_) return;
    end = std::max(end, start);
    host_now_ = std::max(host_now_, start);
    first_ns_ = std::min(first_ns_, start);
    // An item that arrives after the replay passed it (not one nested in the last item: an API
    // call inside an input wait is covered by the wait) is replayed as far as it is left.
    if (host_started_ && start < cursor_ &&
        (host_nodes_.empty() || start < host_nodes_.back().start || end > host_nodes_.back().end)) {
        ++counts_.late_items;
    }
    HostItem h{start, end, correlation, stream, device, kind, false, kNoStream};
    auto pos = std::upper_bound(host_pending_.begin(), host_pending_.end(), start,
                                [](std::uint64_t t, const HostItem& x) { return t < x.start; });
    host_pending_.insert(pos, h);
    pump(false);
}

void CriticalPath::name_sync_stream(std::uint32_t correlation, std::uint32_t stream) {
    if (finished_ || correlation == 0 || stream == kNoStream) return;
    constexpr std::size_t kMaxNamed = 4096;  // syncs are replayed within a few thousand events
    if (sync_streams_.emplace(correlation, stream).second) {
        sync_stream_order_.push_back(correlation);
        if (sync_stream_order_.size() > kMaxNamed) {
            sync_streams_.erase(sync_stream_order_.front());
            sync_stream_order_.pop_front();
        }
    }
}

void CriticalPath::add_stream_wait(std::uint64_t at, std::uint16_t device, std::uint32_t stream,
                                   std::uint32_t on_stream) {
    if (finished_ || stream == kNoStream || on_stream == kNoStream || stream == on_stream) return;
    HostItem h{at, at, 0, stream, device, HostCause::kLaunch, true, on_stream};
    auto pos = std::upper_bound(host_pending_.begin(), host_pending_.end(), at,
                                [](std::uint64_t t, const HostItem& x) { return t < x.start; });
    host_pending_.insert(pos, h);
    pump(false);
}

void CriticalPath::add_gpu(const Event& e, std::uint64_t launch, PathPart part, bool pageable) {
    if (finished_) return;
    if (streams_.size() >= kMaxStreams && stream_index_.count({e.device, e.stream}) == 0) return;
    GpuItem g{e.start_ns, std::max(e.end_ns, e.start_ns), launch, 0, e.stream, e.device, part,
              pageable};
    g.correlation = e.kind == EventKind::kKernel ? e.kernel.correlation : e.copy.correlation;
    stream_of(e.device, e.stream).queue.push_back(g);
    ++gpu_pending_;
    gpu_now_ = std::max(gpu_now_, e.start_ns);
    first_ns_ = std::min(first_ns_, launch != 0 ? std::min(launch, e.start_ns) : e.start_ns);
    pump(false);
}

void CriticalPath::add_step(std::uint64_t start, std::uint64_t end) {
    if (steps_.size() >= kMaxSteps) return;
    StepAcc s{};
    s.start = start;
    s.end = end;
    auto pos = std::upper_bound(steps_.begin(), steps_.end(), start,
                                [](std::uint64_t t, const StepAcc& x) { return t < x.start; });
    auto index = static_cast<std::size_t>(pos - steps_.begin());
    steps_.insert(pos, s);
    if (index < traced_upto_) traced_upto_ = index;  // a step found late: trace it if it can be
    close_steps_before(cursor_);
}

void CriticalPath::close_step(std::uint64_t start, std::uint64_t end) {
    for (auto it = steps_.rbegin(); it != steps_.rend(); ++it) {
        if (it->start == start && it->end == UINT64_MAX) {
            it->end = std::max(end, start);
            break;
        }
    }
    close_steps_before(cursor_);
}

void CriticalPath::move_step_start(std::uint64_t start, std::uint64_t earlier) {
    if (earlier >= start || earlier < cursor_) return;
    for (std::size_t i = steps_.size(); i > 0; --i) {
        StepAcc& s = steps_[i - 1];
        if (s.start != start) continue;
        // Moving it must keep the steps in start order and it must not have been replayed.
        if (s.host_done || s.traced || (i > 1 && steps_[i - 2].start > earlier)) return;
        s.start = earlier;
        return;
    }
}

CriticalPath::StreamState& CriticalPath::stream_of(std::uint16_t device, std::uint32_t stream) {
    auto [it, added] = stream_index_.emplace(std::make_pair(device, stream), streams_.size());
    if (added) {
        streams_.emplace_back();
        streams_.back().device = device;
        streams_.back().stream = stream;
    }
    return streams_[it->second];
}

std::size_t CriticalPath::step_index(std::uint64_t t) const {
    auto pos = std::upper_bound(steps_.begin(), steps_.end(), t,
                                [](std::uint64_t x, const StepAcc& s) { return x < s.start; });
    if (pos == steps_.begin()) return SIZE_MAX;
    return static_cast<std::size_t>(pos - steps_.begin()) - 1;
}

// ---- replay
// --------------------------------------------------------------------------------------

void CriticalPath::pump(bool final) {
    for (;;) {
        const bool have_host = !host_pending_.empty();
        replay_ready_gpu(have_host ? host_pending_.front().start : UINT64_MAX, final);
        if (!have_host) break;
        const HostItem& h = host_pending_.front();
        const bool arrived = gpu_now_ >= h.end && host_now_ >= h.end;
        const bool crowded =
            host_pending_.size() > kMaxPendingHost || gpu_pending_ > kMaxPendingGpu;
        if (!final && !arrived && !crowded) break;
        if (!arrived && !final) ++counts_.forced_items;
        HostItem item = h;
        host_pending_.pop_front();
        replay_host(item);
        close_steps_before(cursor_);
    }
    if (final) {
        replay_ready_gpu(UINT64_MAX, true);
        close_steps_before(UINT64_MAX);
    }
    trace_ready_steps(final);
    prune_history();
}

// Replays, in launch order across streams, the arrived GPU work whose launch the host replay has
// passed (launch before `until`, the next host item's start).
bool CriticalPath::replay_ready_gpu(std::uint64_t until, bool final) {
    bool any = false;
    for (;;) {
        StreamState* best = nullptr;
        std::uint64_t best_key = UINT64_MAX;
        for (auto& s : streams_) {
            if (s.queue.empty()) continue;
            const GpuItem& g = s.queue.front();
            std::uint64_t key = g.launch != 0 ? g.launch : g.start;
            if (key < best_key) {
                best_key = key;
                best = &s;
            }
        }
        if (best == nullptr || (best_key >= until && !(final && until == UINT64_MAX))) break;
        replay_gpu(*best);
        any = true;
    }
    return any;
}

// One search for `t` among the kept host nodes serves every what-if (the search was a tenth of
// a large trace's analysis when it ran once per what-if).
CriticalPath::Times CriticalPath::warp(std::uint64_t t) const {
    Times out{};
    if (!host_started_) {
        out.fill(t);
        return out;
    }
    if (t >= cursor_) {
        for (std::size_t w = 0; w < kWhatIfs; ++w) out[w] = cursor_r_[w] + (t - cursor_);
        return out;
    }
    auto it = std::upper_bound(host_nodes_.begin(), host_nodes_.end(), t,
                               [](std::uint64_t x, const HostNode& n) { return x < n.start; });
    if (it == host_nodes_.begin()) {
        // Before the history kept: shift by the oldest node's offset.
        for (std::size_t w = 0; w < kWhatIfs; ++w) {
            if (host_nodes_.empty()) {
                out[w] = cursor_r_[w] - std::min(cursor_r_[w], cursor_ - t);
            } else {
                const HostNode& n = host_nodes_.front();
                out[w] = n.start_r[w] - std::min(n.start_r[w], n.start - t);
            }
        }
        return out;
    }
    const HostNode& n = *std::prev(it);
    for (std::size_t w = 0; w < kWhatIfs; ++w) {
        if (t < n.end) {
            out[w] = n.start_r[w] + std::min(t - n.start, n.end_r[w] - n.start_r[w]);
            continue;
        }
        const std::uint64_t after = n.end_r[w] + (t - n.end);
        const std::uint64_t next = it != host_nodes_.end() ? it->start_r[w] : cursor_r_[w];
        out[w] = std::min(after, std::max(next, n.end_r[w]));
    }
    return out;
}

const CriticalPath::GpuNode* CriticalPath::node(std::uint64_t id) const {
    if (id == kNone || id < gpu_base_ || id - gpu_base_ >= gpu_nodes_.size()) return nullptr;
    return &gpu_nodes_[id - gpu_base_];
}

void CriticalPath::replay_gpu(StreamState& s) {
    GpuItem g = s.queue.front();
    s.queue.pop_front();
    --gpu_pending_;
    const std::uint64_t key = g.launch != 0 ? g.launch : g.start;
    // The measured constraints: the stream's previous work, and the work it was told to wait for.
    std::uint64_t prev_end = s.started ? s.last_end : 0;
    std::uint64_t dep = kNone;
    std::uint64_t dep_end = 0;
    Times dep_end_r{};
    auto w_end = std::remove_if(s.waits.begin(), s.waits.end(), [&](const PendingWait& pw) {
        if (pw.at > key) return false;
        if (const GpuNode* d = node(pw.dep); d != nullptr && d->item.end > dep_end) {
            dep = pw.dep;
            dep_end = d->item.end;
        }
        if (pw.dep != kNone) {
            for (std::size_t w = 0; w < kWhatIfs; ++w)
                dep_end_r[w] = std::max(dep_end_r[w], pw.dep_end[w]);
        }
        return true;
    });
    s.waits.erase(w_end, s.waits.end());
    if (dep == kNone && g.start > std::max(g.launch, prev_end) + kUnexplainedNs) {
        dep = inferred_wait(s, g.start);
        if (const GpuNode* d = node(dep)) {
            dep_end = d->item.end;
            dep_end_r = d->end;
            ++counts_.stream_waits_inferred;
        }
    }
    // Work that starts before the previous work ends (timestamps rounded to µs) is not pushed
    // back by the overlap.
    const std::uint64_t overlap = sub(std::max(prev_end, dep_end), g.start);
    const std::uint64_t bound = std::max(prev_end, dep_end) - overlap;

    GpuNode n{g, Binding::kUnknownLaunch, kNone, {}};
    std::uint64_t latency = 0;
    if (g.launch != 0 && g.launch >= bound) {
        n.binding = Binding::kLaunch;
        latency = sub(g.start, g.launch);
        if (static_cast<double>(latency) < kLatencySampleMaxNs) {
            launch_latency_mean_ +=
                kMeanWeight * (static_cast<double>(latency) - launch_latency_mean_);
        }
    } else {
        if (g.launch != 0) n.binding = dep_end > prev_end ? Binding::kWaited : Binding::kPrevious;
        n.ref = dep_end > prev_end ? dep : s.last_id;
        const double gap = static_cast<double>(g.start - bound);
        if ((s.started || dep != kNone) && gap < kGapSampleMaxNs)
            s.gap_mean += kMeanWeight * (gap - s.gap_mean);
    }
    const auto device_gap = static_cast<std::uint64_t>(std::max(0.0, s.gap_mean));
    const std::uint64_t gap = g.start - bound;
    const std::uint64_t dur = g.end - g.start;
    const Times released_at = warp(g.launch != 0 ? g.launch : g.start);
    for (std::size_t w = 0; w < kWhatIfs; ++w) {
        std::uint64_t ready = std::max(s.started ? s.last_end_r[w] : 0, dep_end_r[w]);
        std::uint64_t released = 0;
        std::uint64_t after_gpu = 0;
        if (n.binding == Binding::kLaunch) {
            std::uint64_t lat = graphs_launches(w) ? std::min(latency, device_gap) : latency;
            released = released_at[w] + lat;
            after_gpu = ready + std::min(device_gap, gap);
        } else if (g.launch != 0) {
            auto typical = static_cast<std::uint64_t>(launch_latency_mean_);
            std::uint64_t lat = std::min(sub(g.start, g.launch), typical);
            if (graphs_launches(w)) lat = std::min(lat, device_gap);
            released = released_at[w] + lat;
            after_gpu = ready + gap;
        } else {
            released = released_at[w];
            after_gpu = ready + gap;
        }
        after_gpu = sub(after_gpu, overlap);
        std::uint64_t start_r =
            (s.started || dep != kNone) ? std::max(released, after_gpu) : released;
        n.end[w] =
            start_r + (hides_communication(w) && g.part == PathPart::kCommunication ? 0 : dur);
        last_gpu_end_r_[w] = std::max(last_gpu_end_r_[w], n.end[w]);
    }
    if (g.launch != 0) {
        ++counts_.launch_edges;
    } else {
        ++counts_.unlaunched;
    }
    const std::uint64_t id = gpu_base_ + gpu_nodes_.size();
    gpu_nodes_.push_back(n);
    s.recent.push_back(id);
    if (s.recent.size() > kRecentPerStream) s.recent.pop_front();
    s.started = true;
    s.last_end = std::max(s.last_end, g.end);
    s.last_end_r = n.end;
    s.last_id = id;
    last_gpu_end_ = std::max(last_gpu_end_, g.end);
    if (std::size_t i = step_index(key); i != SIZE_MAX) {
        StepAcc& st = steps_[i];
        st.gpu_seen = true;
        st.gpu_end = std::max(st.gpu_end, g.end);
        for (std::size_t w = 0; w < kWhatIfs; ++w)
            st.gpu_end_r[w] = std::max(st.gpu_end_r[w], n.end[w]);
    }
}

// Work that started long after its launch and its stream's previous work waited for something: the
// work on another stream of its device that ended just before it started (an event wait the
// trace does not name), if any. kNone otherwise.
std::uint64_t CriticalPath::inferred_wait(const StreamState& waiting, std::uint64_t start) const {
    std::uint64_t best = kNone;
    std::uint64_t best_end = 0;
    for (const auto& s : streams_) {
        if (&s == &waiting || s.device != waiting.device) continue;
        for (auto it = s.recent.rbegin(); it != s.recent.rend(); ++it) {
            const GpuNode* n = node(*it);
            if (n == nullptr) break;
            if (n->item.end > start) continue;
            if (n->item.end + kUnexplainedNs >= start && n->item.end > best_end) {
                best = *it;
                best_end = n->item.end;
            }
            break;
        }
    }
    return best;
}

// The GPU work a sync (or blocking copy) at [start, end] waited for: on each stream it may wait
// on, the last work launched before the call that ended by the time it returned; the latest of
// those. kNone when there is none.
std::uint64_t CriticalPath::waited_for(const HostItem& h, std::uint32_t stream, bool& named) const {
    named = stream != kNoStream;
    std::uint64_t best = kNone;
    std::uint64_t best_end = 0;
    for (const auto& s : streams_) {
        if (named && s.stream != stream) continue;
        if (h.device != kNoDevice && s.device != h.device) continue;
        for (auto it = s.recent.rbegin(); it != s.recent.rend(); ++it) {
            const GpuNode* n = node(*it);
            if (n == nullptr) break;
            std::uint64_t launched = n->item.launch != 0 ? n->item.launch : n->item.start;
            if (launched >= h.start) continue;  // issued after the call began (another thread)
            if (n->item.end <= h.end + kSlackNs && n->item.end > best_end) {
                best = *it;
                best_end = n->item.end;
            }
            break;
        }
    }
    return best;
}

void CriticalPath::replay_host(const HostItem& h) {
    if (h.stream_wait) {
        StreamState& on = stream_of(h.device, h.on_stream);
        if (on.started) {
            stream_of(h.device, h.stream)
                .waits.push_back(PendingWait{h.start, on.last_id, on.last_end_r});
            ++counts_.stream_waits;
        }
        return;
    }
    const std::uint64_t start = host_started_ ? std::max(h.start, cursor_) : h.start;
    if (h.end <= start && !(h.end == h.start && start == h.start)) return;  // covered already
    replay_host_time(h, start, std::max(h.end, start));
}

void CriticalPath::replay_host_time(const HostItem& h, std::uint64_t a, std::uint64_t b) {
    const bool api = h.kind == HostCause::kLaunch;
    HostNode n{a, b, {}, {}, h.kind, false, kNone, 0};
    for (std::size_t w = 0; w < kWhatIfs; ++w) {
        std::uint64_t gap = host_started_ ? a - cursor_ : 0;
        // A CUDA graph replays the kernels without the host dispatching them one by one: the CPU
        // time between launches of one burst goes with the launches.
        if (graphs_launches(w) && api && last_was_api_) gap = 0;
        n.start_r[w] = host_started_ ? cursor_r_[w] + gap : a;
    }
    const std::uint64_t dur = b - a;
    switch (h.kind) {
        case HostCause::kInput:
            for (std::size_t w = 0; w < kWhatIfs; ++w)
                n.end_r[w] = n.start_r[w] + (removes_input(w) ? 0 : dur);
            break;
        case HostCause::kLaunch:
        case HostCause::kCpu:  // never an item: it is the time between them
            for (std::size_t w = 0; w < kWhatIfs; ++w)
                n.end_r[w] = n.start_r[w] + (graphs_launches(w) ? 0 : dur);
            break;
        case HostCause::kSync: {
            std::uint32_t stream = h.stream;
            if (stream == kNoStream) {
                auto it = sync_streams_.find(h.correlation);
                if (it != sync_streams_.end()) stream = it->second;
            }
            bool named = false;
            std::uint64_t dep = waited_for(h, stream, named);
            if (named && dep == kNone) dep = waited_for(h, kNoStream, named);  // not on that stream
            ++(named ? counts_.syncs_named : counts_.syncs_inferred);
            const GpuNode* d = node(dep);
            const std::uint64_t waited_end = d != nullptr ? d->item.end : 0;
            n.waited = d != nullptr && waited_end > a;
            n.gpu = dep;
            n.gpu_end = waited_end;
            const std::uint64_t own = sub(b, std::max(a, waited_end));
            for (std::size_t w = 0; w < kWhatIfs; ++w) {
                if (removes_sync(w)) {
                    n.end_r[w] = n.start_r[w];
                } else {
                    std::uint64_t ready = d != nullptr ? d->end[w] : 0;
                    n.end_r[w] = std::max(n.start_r[w], ready) + (d != nullptr ? own : dur);
                }
            }
            break;
        }
        case HostCause::kCopy: {
            // The copy this call issued has the call's start as its launch: replay it first.
            cursor_ = a;
            cursor_r_ = n.start_r;
            host_started_ = true;
            replay_ready_gpu(a + 1, false);
            const GpuNode* copy = nullptr;
            std::uint64_t copy_id = kNone;
            for (const auto& s : streams_) {
                for (auto it = s.recent.rbegin(); it != s.recent.rend(); ++it) {
                    const GpuNode* c = node(*it);
                    if (c == nullptr || c->item.launch < a) break;
                    if (c->item.launch == a && c->item.correlation == h.correlation) {
                        copy = c;
                        copy_id = *it;
                        break;
                    }
                }
            }
            const bool blocking =
                copy != nullptr && copy->item.end > a && copy->item.end <= b + kSlackNs;
            const std::uint64_t own = blocking ? sub(b, copy->item.end) : dur;
            for (std::size_t w = 0; w < kWhatIfs; ++w) {
                if (blocking && copy->item.pageable && pins_copies(w)) {
                    n.end_r[w] = n.start_r[w] + own;  // an async call: the host goes on
                } else if (blocking) {
                    n.end_r[w] = std::max(n.start_r[w], copy->end[w]) + own;
                } else {
                    n.end_r[w] = n.start_r[w] + dur;
                }
            }
            n.waited = blocking;
            n.gpu = blocking ? copy_id : kNone;
            n.gpu_end = blocking ? copy->item.end : 0;
            break;
        }
    }
    if (n.waited) ++counts_.sync_waits;
    cursor_ = b;
    cursor_r_ = n.end_r;
    host_started_ = true;
    last_was_api_ = api;
    host_nodes_.push_back(n);
}

void CriticalPath::close_steps_before(std::uint64_t t) {
    if (!host_started_) return;
    for (auto& s : steps_) {
        if (s.host_done || s.end == UINT64_MAX || s.end > t) continue;
        s.host_start_r = warp(s.start);
        s.host_end_r = warp(s.end);
        s.host_done = true;
    }
}

// ---- critical path per step
// -----------------------------------------------------------------------

void CriticalPath::trace_ready_steps(bool final) {
    while (traced_upto_ < steps_.size()) {
        StepAcc& s = steps_[traced_upto_];
        if (s.end == UINT64_MAX) {
            if (!final) break;
        } else if (!s.host_done) {
            break;
        } else if (!s.traced && !s.untraceable) {
            trace_step(s);
        }
        ++traced_upto_;
    }
}

// Walks back from the step's end along what released each node, charging each stretch of time
// to what ran on the path, until the step's start.
void CriticalPath::trace_step(StepAcc& s) {
    const std::uint64_t s0 = s.start;
    std::uint64_t t = s.end;
    auto charge = [&](PathPart p, std::uint64_t from) {  // [max(from, s0), t) to p
        std::uint64_t lo = std::max(from, s0);
        if (t > lo) s.path[static_cast<std::size_t>(p)] += t - lo;
        t = std::min(t, std::max(from, s0));
    };
    if (!host_nodes_.empty() && host_nodes_.front().start > s0 && pruned_before_ > s0) {
        s.untraceable = true;
        return;
    }
    const GpuNode* g = nullptr;
    // Each node is left at most twice (a CPU gap, then the node): a bound, not a limit.
    const std::size_t guard = 2 * (host_nodes_.size() + gpu_nodes_.size()) + 16;
    for (std::size_t steps = 0; t > s0 && steps < guard; ++steps) {
        if (g != nullptr) {
            charge(g->item.part, g->item.start);
            if (t <= s0) break;
            const std::uint64_t start = g->item.start;
            if (g->binding == Binding::kLaunch) {
                charge(PathPart::kLaunch, g->item.launch);
                g = nullptr;
                continue;
            }
            const GpuNode* before = node(g->ref);
            if (g->binding == Binding::kUnknownLaunch && before == nullptr) {
                g = nullptr;  // launched before the input: the host was at its start
                continue;
            }
            if (before == nullptr) {
                charge(g->item.part, s0);  // history gone: the rest stays with this work
                break;
            }
            charge(PathPart::kGpuGap, std::min(before->item.end, start));
            g = before;
            continue;
        }
        // On the host: the item covering t, or the CPU time since the last one.
        auto it = std::lower_bound(host_nodes_.begin(), host_nodes_.end(), t,
                                   [](const HostNode& n, std::uint64_t x) { return n.start < x; });
        if (it == host_nodes_.begin()) {
            charge(PathPart::kCpu, s0);
            break;
        }
        const HostNode& n = *std::prev(it);
        if (t > n.end) {
            charge(PathPart::kCpu, n.end);
            continue;
        }
        const PathPart own = path_part_of(n.kind);
        if (n.waited) {
            charge(own, std::max(n.gpu_end, n.start));
            const GpuNode* w = node(n.gpu);
            if (w != nullptr && t > s0 && t <= w->item.end) {
                g = w;
                continue;
            }
        }
        charge(own, n.start);
    }
    s.traced = true;
}

void CriticalPath::prune_history() {
    std::uint64_t keep_from = cursor_;
    if (traced_upto_ < steps_.size()) keep_from = std::min(keep_from, steps_[traced_upto_].start);
    std::uint64_t warp_from = gpu_now_ > kWarpHorizonNs ? gpu_now_ - kWarpHorizonNs : 0;
    for (const auto& s : streams_) {
        if (!s.queue.empty() && s.queue.front().launch != 0)
            warp_from = std::min(warp_from, s.queue.front().launch);
    }
    const std::uint64_t host_from = std::min(keep_from, warp_from);
    while (host_nodes_.size() > 1 &&
           (host_nodes_.front().end < host_from || host_nodes_.size() > max_history_)) {
        pruned_before_ = std::max(pruned_before_, host_nodes_.front().end);
        host_nodes_.pop_front();
    }
    while (!gpu_nodes_.empty() &&
           (gpu_nodes_.front().item.end < keep_from || gpu_nodes_.size() > max_history_)) {
        pruned_before_ = std::max(pruned_before_, gpu_nodes_.front().item.end);
        gpu_nodes_.pop_front();
        ++gpu_base_;
    }
    // Steps whose start was pruned cannot be traced.
    for (std::size_t i = traced_upto_; i < steps_.size() && steps_[i].start < pruned_before_; ++i) {
        if (!steps_[i].traced) steps_[i].untraceable = true;
    }
}

void CriticalPath::finish() {
    if (finished_) return;
    pump(true);
    finished_ = true;
}

// ---- results
// --------------------------------------------------------------------------------------

namespace {
// The stretches inside [from, to), merged and in time order.
std::vector<std::pair<std::uint64_t, std::uint64_t>> merged_inside(
    std::vector<std::pair<std::uint64_t, std::uint64_t>> spans, std::uint64_t from,
    std::uint64_t to) {
    std::sort(spans.begin(), spans.end());
    std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
    for (auto [s, e] : spans) {
        s = std::max(s, from);
        e = std::min(e, to);
        if (e <= s) continue;
        if (!out.empty() && s <= out.back().second) {
            out.back().second = std::max(out.back().second, e);
        } else {
            out.emplace_back(s, e);
        }
    }
    return out;
}
}  // namespace

std::uint64_t CriticalPath::replayed_end(std::uint64_t t, std::size_t w) const {
    if (t >= cursor_ && t >= last_gpu_end_) {
        return std::max(cursor_r_[w] + (t - cursor_), last_gpu_end_r_[w] + (t - last_gpu_end_));
    }
    if (t == last_gpu_end_) return last_gpu_end_r_[w];
    return warp(t)[w];
}

CriticalPathSummary CriticalPath::summarize(std::size_t first, std::size_t last,
                                            const PathWindow& window) const {
    CriticalPathSummary out = counts_;
    out.available =
        host_started_ && (last_gpu_end_ > 0 || counts_.launch_edges + counts_.unlaunched > 0);
    if (!out.available) return out;
    last = std::min(last, steps_.size());
    std::vector<std::size_t> closed;
    for (std::size_t i = first; i < last; ++i) {
        if (steps_[i].end != UINT64_MAX && steps_[i].host_done) closed.push_back(i);
    }
    Times total{};
    double measured_total = 0;
    std::uint64_t span_from = 0;  // the measured window, for the stretches left out
    std::uint64_t span_to = 0;
    if (closed.empty()) {
        // The window asked for, else the whole input: from the first thing seen to the last
        // thing to finish.
        out.per_step = false;
        const std::uint64_t from = window.from != 0 ? window.from : first_ns_;
        const std::uint64_t to =
            window.to != UINT64_MAX ? window.to : std::max(cursor_, last_gpu_end_);
        const Times from_r = warp(from);
        for (std::size_t w = 0; w < kWhatIfs; ++w) {
            const std::uint64_t start_r = window.from > first_ns_ ? from_r[w] : first_ns_;
            total[w] = sub(window.to != UINT64_MAX ? replayed_end(to, w)
                                                   : std::max(cursor_r_[w], last_gpu_end_r_[w]),
                           start_r);
        }
        measured_total = static_cast<double>(sub(to, from));
        span_from = from;
        span_to = to;
        out.steps = 0;
    } else {
        // Over the steps: a step completes when the host ends it and the GPU work launched by
        // then has run; the steps' span is from the first's start to the last's completion.
        out.per_step = true;
        Times gpu{};
        std::uint64_t gpu_measured = 0;
        for (std::size_t i = 0; i <= closed.back(); ++i) {
            for (std::size_t w = 0; w < kWhatIfs; ++w)
                gpu[w] = std::max(gpu[w], steps_[i].gpu_end_r[w]);
            gpu_measured = std::max(gpu_measured, steps_[i].gpu_end);
        }
        const StepAcc& a = steps_[closed.front()];
        const StepAcc& z = steps_[closed.back()];
        for (std::size_t w = 0; w < kWhatIfs; ++w) {
            total[w] = sub(std::max(z.host_end_r[w], gpu[w]), a.host_start_r[w]);
        }
        measured_total = static_cast<double>(sub(std::max(z.end, gpu_measured), a.start));
        span_from = a.start;
        span_to = std::max(z.end, gpu_measured);
        out.steps = closed.size();
    }
    // Stretches left out (one-off costs): their replayed length, under each what-if, is not the
    // window's. Merged first, so a stretch inside another counts once.
    for (const auto& [xs, xe] : merged_inside(window.exclude, span_from, span_to)) {
        const Times end_r = warp(xe);
        const Times start_r = warp(xs);
        for (std::size_t w = 0; w < kWhatIfs; ++w)
            total[w] = sub(total[w], sub(end_r[w], start_r[w]));
        measured_total -= static_cast<double>(xe - xs);
    }
    out.window_ns = std::max(0.0, measured_total);
    const double n = out.per_step ? static_cast<double>(out.steps) : 1.0;
    out.measured_ns = static_cast<double>(total[0]) / n;
    for (std::size_t w = 0; w < kWhatIfs; ++w) {
        out.saving_ns[w] =
            std::max(0.0, static_cast<double>(total[0]) - static_cast<double>(total[w])) / n;
    }
    // Each what-if shrinks a stretch left out by its own amount, which can break the replays'
    // order: removing causes together saves at least what removing any one of them does.
    if (!window.exclude.empty()) {
        auto& sv = out.saving_ns;
        const auto at = [](WhatIf w) { return static_cast<std::size_t>(w); };
        for (WhatIf w :
             {WhatIf::kNoInputWait, WhatIf::kNoSync, WhatIf::kPinnedCopies, WhatIf::kCudaGraph}) {
            sv[at(WhatIf::kHostNeverLate)] = std::max(sv[at(WhatIf::kHostNeverLate)], sv[at(w)]);
        }
        for (std::size_t w = 1; w < kWhatIfs; ++w)
            sv[at(WhatIf::kEveryCause)] = std::max(sv[at(WhatIf::kEveryCause)], sv[w]);
    }
    out.replay_error_ns = std::fabs(static_cast<double>(total[0]) - measured_total);
    double traced_time = 0;
    const std::size_t stride =
        std::max<std::size_t>(1, (closed.size() + kPathRows - 1) / kPathRows);
    for (std::size_t k = 0; k < closed.size(); ++k) {
        const StepAcc& s = steps_[closed[k]];
        if (!s.traced) {
            out.untraced_steps += s.untraceable ? 1 : 0;
            continue;
        }
        if (k % stride == 0) out.step_paths.emplace_back(closed[k], s.path);
        ++out.traced_steps;
        traced_time += static_cast<double>(s.end - s.start);
        for (std::size_t p = 0; p < kPathParts; ++p)
            out.path_ns[p] += static_cast<double>(s.path[p]);
    }
    if (out.traced_steps > 0) {
        for (auto& v : out.path_ns) v /= static_cast<double>(out.traced_steps);
        out.path_step_ns = traced_time / static_cast<double>(out.traced_steps);
    }
    return out;
}

}  // namespace gpudiag::detail
