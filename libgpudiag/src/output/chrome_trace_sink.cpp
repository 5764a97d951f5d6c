// SPDX-License-Identifier: Apache-2.0
// ChromeTraceSink: one input's events as Chrome / Perfetto trace events.
#include "output/chrome_trace_sink.hpp"

#include "analysis/timeline/host_cause.hpp"

#include <fmt/format.h>

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace gpudiag::detail {
namespace {

// GPU tracks get their own process ids, clear of real pids, one block per input (rank).
constexpr std::uint64_t kGpuPidBase = 1u << 30;

const char* counter_name(CounterKind k) {
    switch (k) {
        case CounterKind::kFrameworkAllocatedBytes: return "torch allocated bytes";
        case CounterKind::kFrameworkReservedBytes: return "torch reserved bytes";
        case CounterKind::kDeviceMemoryUsedBytes: return "device memory used bytes";
        case CounterKind::kProcessMemoryUsedBytes: return "process memory used bytes";
        case CounterKind::kGpuUtilizationPercent: return "GPU utilization %";
        case CounterKind::kMemoryUtilizationPercent: return "memory utilization %";
        case CounterKind::kSmClockMhz: return "SM clock MHz";
        case CounterKind::kTemperatureC: return "temperature C";
        case CounterKind::kPowerWatts: return "power W";
        default: return "counter";
    }
}

const char* gap_name(IdleKind kind, HostCause cause) {
    if (kind == IdleKind::kKernelWait) return "idle: kernel wait";
    if (kind == IdleKind::kOther) return "idle: other";
    return host_cause_gap_name(cause);
}

// Chrome's reserved colour names, so the causes stand apart in chrome://tracing; in HostCause
// order (input, sync, copy, launch, cpu).
constexpr std::array<const char*, kHostCauses> kCauseColours = {"terrible", "bad", "yellow",
                                                                "olive", "rail_animation"};

const char* gap_colour(IdleKind kind, HostCause cause) {
    if (kind == IdleKind::kKernelWait) return "good";
    if (kind == IdleKind::kOther) return "grey";
    const auto c = static_cast<std::size_t>(cause);
    return c < kCauseColours.size() ? kCauseColours[c] : "grey";
}

}  // namespace

ChromeTraceSink::ChromeTraceSink(ChromeTraceWriter& writer, std::size_t input_index,
                                 const AnalysisOptions& options, HostTracks::Counts& counts)
    : writer_(writer),
      analyzer_(options),
      host_(writer, counts),
      gpu_pid_base_(kGpuPidBase + input_index * 1024),
      drawn_before_(writer.drawn()) {
    analyzer_.set_gap_observer([this](const TimelineAnalyzer::Gap& g) {
        writer_.complete(gap_name(g.kind, g.cause), "idle", gpu_pid(g.device), 0, g.start_ns,
                         g.end_ns, gap_colour(g.kind, g.cause));
    });
}

void ChromeTraceSink::begin(const SourceInfo& info, const StringTable& strings) {
    strings_ = &strings;
    rank_ = info.rank;
    analyzer_.begin(info, strings);
    host_.begin(info.rank, strings);
}

void ChromeTraceSink::consume(std::span<const Event> events) {
    if (!events.empty()) writer_.set_origin_if_unset(events.front().start_ns);
    analyzer_.consume(events);  // may write gaps
    for (const Event& e : events) {
        ++kinds_[static_cast<std::uint8_t>(e.kind)];
        write(e);
    }
    if (status_.is_ok()) status_ = writer_.maybe_flush();
}

void ChromeTraceSink::end(const SourceSummary& summary) {
    analyzer_.end(summary);
    host_.finish();
    lost_ = summary.dropped + summary.damaged;
    for (std::uint16_t d : devices_) {
        std::string label =
            rank_ >= 0 ? fmt::format("GPU {} (rank {})", d, rank_) : fmt::format("GPU {}", d);
        writer_.process_name(gpu_pid(d), label, static_cast<int>(gpu_pid(d) - kGpuPidBase));
        if (active_devices_.count(d) != 0) {
            writer_.thread_name(gpu_pid(d), 0, "idle gaps (by cause)");
        }
    }
    for (const auto& [d, stream] : streams_) {
        writer_.thread_name(gpu_pid(d), stream + 1, fmt::format("stream {}", stream));
    }
    if (status_.is_ok()) status_ = writer_.maybe_flush();
}

void ChromeTraceSink::write(const Event& e) {
    if (host_.on_event(e)) return;
    switch (e.kind) {
        case EventKind::kKernel:
        case EventKind::kMemcpy:
        case EventKind::kMemset: {
            devices_.insert(e.device);
            active_devices_.insert(e.device);
            streams_.insert({e.device, e.stream});
            std::string_view name = e.kind == EventKind::kKernel   ? strings_->lookup(e.kernel.name)
                                    : e.kind == EventKind::kMemcpy ? std::string_view("memcpy")
                                                                   : std::string_view("memset");
            writer_.complete(name, e.kind == EventKind::kKernel ? "kernel" : "memory",
                             gpu_pid(e.device), std::uint64_t{e.stream} + 1, e.start_ns, e.end_ns);
            break;
        }
        case EventKind::kCounter:
            // A host-side counter (one the program recorded) belongs to its process.
            if (e.device == kNoDevice) {
                host_.note_process(e.process);
                writer_.counter(host_.pid_of(e.process), counter_name(e.counter.counter),
                                e.start_ns, e.counter.value);
                break;
            }
            devices_.insert(e.device);
            writer_.counter(gpu_pid(e.device), counter_name(e.counter.counter), e.start_ns,
                            e.counter.value);
            break;
        case EventKind::kBlockAlloc:
        case EventKind::kBlockFree: {
            std::uint16_t d = e.device == kNoDevice ? 0 : e.device;
            devices_.insert(d);
            std::int64_t& live = block_bytes_[d];
            std::int64_t delta = static_cast<std::int64_t>(e.memory.bytes);
            live += e.kind == EventKind::kBlockAlloc ? delta : -delta;
            writer_.counter(gpu_pid(d), "allocated bytes (blocks)", e.start_ns,
                            static_cast<double>(live));
            break;
        }
        default: break;
    }
}

std::string ChromeTraceSink::held() const {
    std::uint64_t total = 0;
    std::string kinds;
    for (std::size_t k = 0; k < kinds_.size(); ++k) {
        if (kinds_[k] == 0) continue;
        total += kinds_[k];
        kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", kinds_[k],
                             event_kind_name(static_cast<EventKind>(k)));
    }
    std::string text = "holds no events";
    if (total > 0) {
        text = fmt::format(
            "holds {} {} ({}), none of which a timeline shows (it shows GPU work, memory blocks, "
            "counters, steps and host ranges)",
            total, total == 1 ? "event" : "events", kinds);
    }
    if (lost_ > 0) {
        text += fmt::format("; {} more were lost (dropped by the capture or damaged in the file)",
                            lost_);
    }
    return text;
}

void write_marker_counts(JsonWriter& json, const HostTracks::Counts& c) {
    json.key("range_markers").begin_object();
    json.field("paired", c.ranges_paired).field("ends_without_begin", c.range_ends_unpaired);
    json.field("begins_without_end", c.range_begins_unended);
    json.field("past_depth_cap", c.ranges_past_depth_cap);
    json.field("past_thread_cap", c.ranges_past_thread_cap);
    json.field("repeats_not_drawn", c.range_repeats).end_object();
    json.key("step_markers").begin_object();
    json.field("paired", c.steps_paired).field("ends_without_begin", c.step_ends_unpaired);
    json.field("begins_without_end", c.step_begins_unended);
    json.field("past_open_cap", c.steps_past_open_cap).end_object();
}

}  // namespace gpudiag::detail
