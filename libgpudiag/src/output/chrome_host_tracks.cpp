// SPDX-License-Identifier: Apache-2.0
#include "output/chrome_host_tracks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

namespace gpudiag::detail {
namespace {

constexpr std::size_t kNone = SIZE_MAX;
constexpr const char* kUnended = " (no end recorded)";

std::uint64_t thread_key(std::uint32_t process, std::uint32_t thread) {
    return (std::uint64_t{process} << 32) | thread;
}

// Failed allocations the caller may still retry (a caching allocator frees its cache and tries
// again) are no out-of-memory error yet: only definite ones are marked.
bool definite_oom(const Event& e) {
    return (e.flags & (kEventFlagRetryable | kEventFlagRetrySucceeded)) == 0;
}

}  // namespace

void HostTracks::begin(std::int32_t rank, const StringTable& strings) {
    rank_ = rank;
    strings_ = &strings;
}

std::uint64_t HostTracks::pid_of(std::uint32_t process) const {
    return rank_ >= 0 ? (std::uint64_t{static_cast<std::uint32_t>(rank_) + 1} << 32) | process
                      : process;
}

bool HostTracks::on_event(const Event& e) {
    last_ns_ = std::max({last_ns_, e.start_ns, e.end_ns});
    switch (e.kind) {
        case EventKind::kRangeBegin: range_begin(e); return true;
        case EventKind::kRangeEnd: range_end(e); return true;
        case EventKind::kStepBegin: step_begin(e); return true;
        case EventKind::kStepEnd: step_end(e); return true;
        case EventKind::kCapturePaused:
        case EventKind::kCaptureResumed: capture(e); return true;
        case EventKind::kRange:
            if (e.device != kNoDevice) return true;  // GPU-side copies of user ranges
            note_thread(e.process, e.thread);
            writer_.complete(strings_->lookup(e.range.name), enum_name(e.range.category),
                             pid_of(e.process), e.thread, e.start_ns, e.end_ns);
            return true;
        case EventKind::kApiCall:
            note_thread(e.process, e.thread);
            writer_.complete(strings_->lookup(e.api.name), "cuda_api", pid_of(e.process), e.thread,
                             e.start_ns, e.end_ns);
            return true;
        case EventKind::kAnnotation:
            note_thread(e.process, e.thread);
            writer_.instant(strings_->lookup(e.annotation.text), "annotation", pid_of(e.process),
                            e.thread, e.start_ns, {{"value", e.annotation.value}});
            return true;
        case EventKind::kOutOfMemory:
            if (!definite_oom(e)) return true;
            note_thread(e.process, e.thread);
            writer_.instant(e.device == kNoDevice
                                ? std::string("out of memory")
                                : fmt::format("out of memory on GPU {}", e.device),
                            "out_of_memory", pid_of(e.process), e.thread, e.start_ns,
                            {{"requested_bytes", static_cast<std::int64_t>(e.oom.requested_bytes)},
                             {"free_bytes", static_cast<std::int64_t>(e.oom.free_bytes)}});
            return true;
        default: return false;
    }
}

void HostTracks::note_process(std::uint32_t process) {
    (void)process_of(process);
}

HostTracks::Process* HostTracks::process_of(std::uint32_t process) {
    auto it = processes_.find(process);
    if (it != processes_.end()) return &it->second;
    if (processes_.size() >= kMaxNamedTracks) return nullptr;
    return &processes_[process];
}

// A track with something on it: named at the end, in order of its first slice.
void HostTracks::note_thread(std::uint32_t process, std::uint32_t thread) {
    Process* p = process_of(process);
    if (p == nullptr || named_threads_.size() >= kMaxNamedTracks) return;
    if (named_threads_.insert(thread_key(process, thread)).second) p->threads.push_back(thread);
}

HostTracks::Thread* HostTracks::thread_of(const Event& e, bool create) {
    const std::uint64_t key = thread_key(e.process, e.thread);
    if (auto it = threads_.find(key); it != threads_.end()) return &it->second;
    if (!create) return nullptr;
    if (threads_.size() >= kMaxThreads) {
        // Threads with nothing open keep nothing worth keeping (a pool's finished workers).
        std::erase_if(threads_, [](const auto& kv) {
            return kv.second.open.empty() && kv.second.ignored_begins == 0;
        });
        if (threads_.size() >= kMaxThreads) return nullptr;
    }
    return &threads_[key];
}

void HostTracks::range_begin(const Event& e) {
    if (e.device != kNoDevice) return;
    Thread* t = thread_of(e, true);
    if (t == nullptr) {
        ++counts_.ranges_past_thread_cap;
        return;
    }
    if (t->ignored_begins > 0 || t->open.size() >= kMaxOpen) {
        ++t->ignored_begins;
        ++counts_.ranges_past_depth_cap;
        return;
    }
    const bool repeat =
        !t->open.empty() && strings_->lookup(t->open.back().name) == strings_->lookup(e.range.name);
    t->open.push_back({e.start_ns, e.range.id, e.range.name, e.range.category, repeat});
}

void HostTracks::range_end(const Event& e) {
    if (e.device != kNoDevice) return;
    Thread* t = thread_of(e, false);
    if (t != nullptr && t->ignored_begins > 0) {
        --t->ignored_begins;  // ends the innermost begin, which was past the cap
        return;
    }
    if (t == nullptr) {
        ++counts_.range_ends_unpaired;
        return;
    }
    // An NVTX end names its range by id; a gpudiag marker (id 0) ends the innermost one.
    std::size_t k = kNone;
    for (std::size_t i = t->open.size(); i-- > 0;) {
        if (t->open[i].id == e.range.id) {
            k = i;
            break;
        }
        if (e.range.id == 0 && k == kNone) k = i;
    }
    if (k == kNone) {
        ++counts_.range_ends_unpaired;
        return;
    }
    Open o = t->open[k];
    t->open.erase(t->open.begin() + static_cast<std::ptrdiff_t>(k));
    ++counts_.ranges_paired;
    if (o.repeat) {
        ++counts_.range_repeats;
        return;
    }
    draw_range(e.process, e.thread, o, std::max(e.start_ns, o.start), true);
}

void HostTracks::draw_range(std::uint32_t process, std::uint32_t thread, const Open& o,
                            std::uint64_t end, bool ended) {
    std::string name(o.name != kNoString ? strings_->lookup(o.name)
                                         : std::string_view(enum_name(o.category)));
    if (!ended) name += kUnended;
    note_thread(process, thread);
    writer_.complete(name, enum_name(o.category), pid_of(process), thread, o.start, end);
}

void HostTracks::step_begin(const Event& e) {
    Process* p = process_of(e.process);
    if (p == nullptr) return;
    // The same step marked twice (two threads, two sources) is drawn once.
    for (const OpenStep& s : p->steps) {
        if (s.number == e.range.id) return;
    }
    if (p->steps.size() >= kMaxOpenSteps) {
        ++counts_.steps_past_open_cap;
        return;
    }
    p->steps.push_back({e.range.id, e.start_ns});
}

// Closes the open step of the same number, or else the latest one (as the timeline does).
void HostTracks::step_end(const Event& e) {
    Process* p = process_of(e.process);
    if (p == nullptr || p->steps.empty()) {
        ++counts_.step_ends_unpaired;
        return;
    }
    auto it = std::find_if(p->steps.rbegin(), p->steps.rend(),
                           [&](const OpenStep& s) { return s.number == e.range.id; });
    auto at = it != p->steps.rend() ? std::next(it).base() : std::prev(p->steps.end());
    OpenStep s = *at;
    p->steps.erase(at);
    ++counts_.steps_paired;
    draw_step(e.process, s, std::max(e.start_ns, s.start), true);
}

void HostTracks::draw_step(std::uint32_t process, const OpenStep& s, std::uint64_t end,
                           bool ended) {
    std::string name = fmt::format("step {}{}", s.number, ended ? "" : kUnended);
    writer_.complete(name, "step", pid_of(process), kStepsTid, s.start, end, nullptr,
                     {{"step", static_cast<std::int64_t>(s.number)}});
    processes_[process].drew_steps = true;
}

// GPU capture's unobserved windows: without them a paused stretch would read as an idle GPU.
void HostTracks::capture(const Event& e) {
    Process* p = process_of(e.process);
    if (p == nullptr) return;
    if (e.kind == EventKind::kCapturePaused) {
        if (p->paused_since == UINT64_MAX) {
            p->paused_since = e.start_ns;
            p->pause_reason = e.annotation.text;
        }
    } else if (p->paused_since != UINT64_MAX) {
        draw_pause(e.process, *p, std::max(e.start_ns, p->paused_since));
    }
}

void HostTracks::draw_pause(std::uint32_t process, Process& p, std::uint64_t end) {
    std::string name = "GPU capture paused";
    std::string_view reason = strings_->lookup(p.pause_reason);
    if (!reason.empty()) name += ": " + std::string(reason);
    writer_.complete(name, "capture", pid_of(process), kCaptureTid, p.paused_since, end, "grey");
    p.paused_since = UINT64_MAX;
    p.drew_capture = true;
}

void HostTracks::finish() {
    // Thread by thread in id order: the same input always gives the same file.
    std::vector<std::uint64_t> keys;
    keys.reserve(threads_.size());
    for (const auto& [key, t] : threads_) keys.push_back(key);
    std::sort(keys.begin(), keys.end());
    for (std::uint64_t key : keys) {
        for (const Open& o : threads_[key].open) {
            ++counts_.range_begins_unended;
            if (o.repeat) continue;
            draw_range(static_cast<std::uint32_t>(key >> 32), static_cast<std::uint32_t>(key), o,
                       std::max(last_ns_, o.start), false);
        }
    }
    threads_.clear();
    for (auto& [process, p] : processes_) {
        std::vector<OpenStep> open = std::move(p.steps);
        p.steps.clear();
        for (const OpenStep& s : open) {
            ++counts_.step_begins_unended;
            draw_step(process, s, std::max(last_ns_, s.start), false);
        }
        if (p.paused_since != UINT64_MAX) {
            draw_pause(process, p, std::max(last_ns_, p.paused_since));
        }
    }
    for (const auto& [process, p] : processes_) name_tracks(process, p);
}

// Track names and their order within the process: steps first, then GPU capture, then the
// threads in the order they first drew something.
void HostTracks::name_tracks(std::uint32_t process, const Process& p) {
    const std::uint64_t pid = pid_of(process);
    writer_.process_name(pid,
                         rank_ >= 0 ? fmt::format("rank {} host process {}", rank_, process)
                                    : fmt::format("host process {}", process),
                         0);
    if (p.drew_steps) {
        writer_.thread_name(pid, kStepsTid, "steps");
        writer_.thread_sort_index(pid, kStepsTid, 0);
    }
    if (p.drew_capture) {
        writer_.thread_name(pid, kCaptureTid, "GPU capture");
        writer_.thread_sort_index(pid, kCaptureTid, 1);
    }
    std::int64_t sort = 2;
    for (std::uint32_t thread : p.threads) {
        writer_.thread_name(
            pid, thread,
            thread == process && process != 0 ? "main thread" : fmt::format("thread {}", thread));
        writer_.thread_sort_index(pid, thread, sort++);
    }
}

}  // namespace gpudiag::detail
