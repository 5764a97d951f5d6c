// SPDX-License-Identifier: Apache-2.0
// Builders for synthetic event streams: the same event kinds a live capture or an importer
// produces, laid out so each test can state exactly what the GPU and the host did.
#pragma once

#include <gpudiag/analyze.hpp>
#include <gpudiag/event.hpp>
#include <gpudiag/string_table.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace gpudiag::testing {

constexpr std::uint64_t kUs = 1000;
constexpr std::uint64_t kMs = 1000 * kUs;

class SyntheticTimeline {
public:
    explicit SyntheticTimeline(std::uint64_t origin = 1'000'000 * kMs) : t0_(origin) {}

    /// A kernel on `stream` of device 0, launched by a cudaLaunchKernel call at `launch`.
    void kernel(std::uint64_t start, std::uint64_t dur, std::uint64_t launch,
                const std::string& name = "void gemm_kernel<float>(float*)",
                std::uint32_t stream = 7, std::uint64_t launch_dur = 5 * kUs) {
        std::uint32_t corr = next_corr_++;
        api(launch, launch_dur, "cudaLaunchKernel", corr);
        Event e = at(start, dur);
        e.kind = EventKind::kKernel;
        e.device = 0;
        e.stream = stream;
        e.thread = 0;
        e.kernel.name = strings.intern(name);
        e.kernel.correlation = corr;
        events.push_back(e);
    }
    void copy(std::uint64_t start, std::uint64_t dur, std::uint64_t launch, std::uint64_t bytes,
              MemoryKind src, CopyDirection dir = CopyDirection::kHostToDevice,
              std::uint64_t launch_dur = 5 * kUs) {
        std::uint32_t corr = next_corr_++;
        api(launch, launch_dur, "cudaMemcpyAsync", corr);
        Event e = at(start, dur);
        e.kind = EventKind::kMemcpy;
        e.device = 0;
        e.stream = 7;
        e.thread = 0;
        e.copy.bytes = bytes;
        e.copy.correlation = corr;
        e.copy.direction = dir;
        e.copy.src_kind = src;
        e.copy.dst_kind = MemoryKind::kDevice;
        events.push_back(e);
    }
    void api(std::uint64_t start, std::uint64_t dur, const std::string& name,
             std::uint32_t corr = 0) {
        Event e = at(start, dur);
        e.kind = EventKind::kApiCall;
        e.api.name = strings.intern(name);
        e.api.correlation = corr == 0 ? next_corr_++ : corr;
        e.api.domain = ApiDomain::kRuntime;
        events.push_back(e);
    }
    void range(std::uint64_t start, std::uint64_t dur, RangeCategory category,
               const std::string& name, std::uint64_t id = 0) {
        Event e = at(start, dur);
        e.kind = EventKind::kRange;
        e.range.name = strings.intern(name);
        e.range.category = category;
        e.range.id = id;
        events.push_back(e);
    }
    void step(std::int64_t number, std::uint64_t start, std::uint64_t dur) {
        range(start, dur, RangeCategory::kStep, "ProfilerStep#" + std::to_string(number),
              static_cast<std::uint64_t>(number));
    }
    /// GPU capture yielded (kCapturePaused) or came back (kCaptureResumed), as the live CUPTI
    /// source marks it.
    void capture_paused(std::uint64_t at_time, const std::string& reason = "torch.profiler") {
        Event e = at(at_time, 0);
        e.kind = EventKind::kCapturePaused;
        e.annotation.text = strings.intern(reason);
        events.push_back(e);
    }
    void capture_resumed(std::uint64_t at_time) {
        Event e = at(at_time, 0);
        e.kind = EventKind::kCaptureResumed;
        events.push_back(e);
    }
    /// A step marked at both ends as a live session marks it (Session::step_begin/step_end).
    void marked_step(std::int64_t number, std::uint64_t start, std::uint64_t dur) {
        Event b = at(start, 0);
        b.kind = EventKind::kStepBegin;
        b.range.category = RangeCategory::kStep;
        b.range.id = static_cast<std::uint64_t>(number);
        Event e = at(start + dur, 0);
        e.kind = EventKind::kStepEnd;
        e.range = b.range;
        events.push_back(b);
        events.push_back(e);
    }
    void input_wait(std::uint64_t start, std::uint64_t dur) {
        range(start, dur, RangeCategory::kInputWait,
              "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__");
    }

    Result<Report> analyze(AnalysisWindow window = AnalysisWindow::kSteps, std::int32_t rank = -1) {
        AnalysisOptions options;
        options.window = window;
        return analyze_with(options, rank);
    }
    Result<Report> analyze_with(const AnalysisOptions& options, std::int32_t rank = -1) {
        std::stable_sort(events.begin(), events.end(),
                         [](const Event& a, const Event& b) { return a.start_ns < b.start_ns; });
        SourceInfo info;
        info.producer = "simulated";
        info.simulated = true;
        info.rank = rank;
        return analyze_events(events, info, strings, options);
    }
    /// A synchronizing call that returns when the GPU work before it is done.
    void sync(std::uint64_t start, std::uint64_t dur,
              const std::string& name = "cudaStreamSynchronize") {
        api(start, dur, name);
    }
    /// An annotation, as the PyTorch integration records a DataLoader's settings.
    void annotate(std::uint64_t at_time, const std::string& text, std::int64_t value) {
        Event e = at(at_time, 0);
        e.kind = EventKind::kAnnotation;
        e.annotation.text = strings.intern(text);
        e.annotation.value = value;
        events.push_back(e);
    }

    StringTable strings;
    std::vector<Event> events;

private:
    Event at(std::uint64_t start, std::uint64_t dur) const {
        Event e;
        e.start_ns = t0_ + start;
        e.end_ns = t0_ + start + dur;
        e.process = 100;
        e.thread = 100;
        return e;
    }

    std::uint64_t t0_;
    std::uint32_t next_corr_ = 1;
};

inline double timeline_figure(const Report& r, const std::string& key) {
    const Section* s = r.section("timeline");
    const Figure* f = s != nullptr ? s->figure(key) : nullptr;
    return f != nullptr ? f->value : -1.0;
}

}  // namespace gpudiag::testing
