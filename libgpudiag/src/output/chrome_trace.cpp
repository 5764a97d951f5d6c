// SPDX-License-Identifier: Apache-2.0
// Chrome trace export: replays each input through the timeline analysis (for the idle gaps and
// their causes) and a writer sink at once, streaming JSON to the output file in 1 MiB pieces.
// An input that gives nothing to draw is refused, with what it held: an empty trace would open
// as a blank timeline, which reads as "nothing happened".
#include <gpudiag/trace_export.hpp>

#include "analysis/timeline/timeline_analyzer.hpp"
#include "importers/open_source.hpp"
#include "output/chrome_host_tracks.hpp"
#include "output/chrome_trace_writer.hpp"
#include "support/json_writer.hpp"

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <new>
#include <set>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace gpudiag {
namespace {

using detail::ChromeTraceWriter;
using detail::HostTracks;

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

const char* gap_name(detail::IdleKind kind, detail::IdleCause cause) {
    if (kind == detail::IdleKind::kKernelWait) return "idle: kernel wait";
    if (kind == detail::IdleKind::kOther) return "idle: other";
    switch (cause) {
        case detail::IdleCause::kInput: return "idle: host wait (input)";
        case detail::IdleCause::kSync: return "idle: host wait (sync)";
        case detail::IdleCause::kCopy: return "idle: host wait (copy)";
        case detail::IdleCause::kLaunch: return "idle: host wait (launch)";
        case detail::IdleCause::kCpu: return "idle: host wait (CPU work)";
    }
    return "idle";
}

// Chrome's reserved colour names, so the causes stand apart in chrome://tracing.
const char* gap_colour(detail::IdleKind kind, detail::IdleCause cause) {
    if (kind == detail::IdleKind::kKernelWait) return "good";
    if (kind == detail::IdleKind::kOther) return "grey";
    switch (cause) {
        case detail::IdleCause::kInput: return "terrible";
        case detail::IdleCause::kSync: return "bad";
        case detail::IdleCause::kCopy: return "yellow";
        case detail::IdleCause::kLaunch: return "olive";
        case detail::IdleCause::kCpu: return "rail_animation";
    }
    return "grey";
}

// Feeds the timeline analysis (for gaps) and writes every event it sees: GPU work and memory
// here, the host's side through HostTracks. Tallies the input's events by kind, to say what an
// input held when it gave nothing to draw.
class ExportSink final : public EventSink {
public:
    ExportSink(ChromeTraceWriter& writer, std::size_t input_index, const AnalysisOptions& options,
               HostTracks::Counts& counts)
        : writer_(writer),
          analyzer_(options),
          host_(writer, counts),
          gpu_pid_base_(kGpuPidBase + input_index * 1024),
          drawn_before_(writer.drawn()) {
        analyzer_.set_gap_observer([this](const detail::TimelineAnalyzer::Gap& g) {
            writer_.complete(gap_name(g.kind, g.cause), "idle", gpu_pid(g.device), 0, g.start_ns,
                             g.end_ns, gap_colour(g.kind, g.cause));
        });
    }

    void begin(const SourceInfo& info, const StringTable& strings) override {
        strings_ = &strings;
        rank_ = info.rank;
        analyzer_.begin(info, strings);
        host_.begin(info.rank, strings);
    }

    void consume(std::span<const Event> events) override {
        if (!events.empty()) writer_.set_origin_if_unset(events.front().start_ns);
        analyzer_.consume(events);  // may write gaps
        for (const Event& e : events) {
            ++kinds_[static_cast<std::uint8_t>(e.kind)];
            write(e);
        }
        if (status_.is_ok()) status_ = writer_.maybe_flush();
    }

    void end(const SourceSummary& summary) override {
        analyzer_.end(summary);
        host_.finish();
        lost_ = summary.dropped + summary.damaged;
        for (std::uint16_t d : devices_) {
            std::string label = "GPU " + std::to_string(d) +
                                (rank_ >= 0 ? " (rank " + std::to_string(rank_) + ")" : "");
            writer_.process_name(gpu_pid(d), label, static_cast<int>(gpu_pid(d) - kGpuPidBase));
            if (active_devices_.count(d) != 0) {
                writer_.thread_name(gpu_pid(d), 0, "idle gaps (by cause)");
            }
        }
        for (const auto& [d, stream] : streams_) {
            writer_.thread_name(gpu_pid(d), stream + 1, "stream " + std::to_string(stream));
        }
        if (status_.is_ok()) status_ = writer_.maybe_flush();
    }

    [[nodiscard]] const Status& status() const { return status_; }
    /// Whether the input gave the trace a slice or a counter sample.
    [[nodiscard]] bool drew() const { return writer_.drawn() > drawn_before_; }
    /// What the input held, for an input that drew nothing.
    [[nodiscard]] std::string held() const;

private:
    std::uint64_t gpu_pid(std::uint16_t device) const { return gpu_pid_base_ + (device & 1023); }

    void write(const Event& e) {
        if (host_.on_event(e)) return;
        switch (e.kind) {
            case EventKind::kKernel:
            case EventKind::kMemcpy:
            case EventKind::kMemset: {
                devices_.insert(e.device);
                active_devices_.insert(e.device);
                streams_.insert({e.device, e.stream});
                std::string_view name = e.kind == EventKind::kKernel
                                            ? strings_->lookup(e.kernel.name)
                                        : e.kind == EventKind::kMemcpy ? std::string_view("memcpy")
                                                                       : std::string_view("memset");
                writer_.complete(name, e.kind == EventKind::kKernel ? "kernel" : "memory",
                                 gpu_pid(e.device), std::uint64_t{e.stream} + 1, e.start_ns,
                                 e.end_ns);
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

    ChromeTraceWriter& writer_;
    detail::TimelineAnalyzer analyzer_;
    detail::HostTracks host_;
    std::uint64_t gpu_pid_base_;
    std::uint64_t drawn_before_;
    const StringTable* strings_ = nullptr;
    std::int32_t rank_ = -1;
    std::set<std::uint16_t> devices_;         // GPUs with a track (work, counters, memory)
    std::set<std::uint16_t> active_devices_;  // of them, those with work (and idle gaps)
    std::set<std::pair<std::uint16_t, std::uint32_t>> streams_;
    std::map<std::uint16_t, std::int64_t> block_bytes_;
    std::array<std::uint64_t, 256> kinds_{};
    std::uint64_t lost_ = 0;
    Status status_;
};

std::string ExportSink::held() const {
    std::uint64_t total = 0;
    std::string kinds;
    for (std::size_t k = 0; k < kinds_.size(); ++k) {
        if (kinds_[k] == 0) continue;
        total += kinds_[k];
        kinds += (kinds.empty() ? "" : ", ") + std::to_string(kinds_[k]) + " " +
                 event_kind_name(static_cast<EventKind>(k));
    }
    std::string text = total == 0 ? std::string("holds no events")
                                  : "holds " + std::to_string(total) +
                                        (total == 1 ? " event (" : " events (") + kinds +
                                        "), none of which a timeline shows (it shows GPU work, "
                                        "memory blocks, counters, steps and host ranges)";
    if (lost_ > 0) {
        text += "; " + std::to_string(lost_) +
                " more were lost (dropped by the capture or "
                "damaged in the file)";
    }
    return text;
}

struct FileCloser {
    void operator()(std::FILE* f) const noexcept {
        if (f != nullptr) std::fclose(f);
    }
};

// Removes the output unless the export succeeded: no half-written or empty trace is left behind.
// Only a regular file: an export to /dev/null must not remove /dev/null.
class RemoveUnlessKept {
public:
    explicit RemoveUnlessKept(std::string path) : path_(std::move(path)) {}
    ~RemoveUnlessKept() {
        std::error_code ec;
        if (!kept_ && std::filesystem::is_regular_file(path_, ec))
            std::filesystem::remove(path_, ec);
    }
    RemoveUnlessKept(const RemoveUnlessKept&) = delete;
    RemoveUnlessKept& operator=(const RemoveUnlessKept&) = delete;
    void keep() { kept_ = true; }

private:
    std::string path_;
    bool kept_ = false;
};

// How the begin/end markers paired, so a reader of the trace can tell a slice that is missing
// (a marker lost, a cap reached) from one that never happened.
void write_counts(detail::JsonWriter& json, const HostTracks::Counts& c) {
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

Status nothing_to_draw(const std::vector<std::string>& empty) {
    std::string text;
    for (const std::string& e : empty) text += (text.empty() ? "" : "; ") + e;
    return failed_precondition(
        text +
        ": nothing to draw, so no trace was written (without a GPU, a recording shows only what "
        "the program marked: steps, phases such as gpudiag.phase(), DataLoader waits)");
}

Status export_impl(const std::vector<std::string>& inputs, const std::string& output_path,
                   const AnalysisOptions& options) {
    if (inputs.empty()) return invalid_argument("no input files given");
    if (output_path.empty()) return invalid_argument("no output path given");
    RemoveUnlessKept cleanup(output_path);  // declared first: runs after the file is closed
    std::unique_ptr<std::FILE, FileCloser> out(std::fopen(output_path.c_str(), "wb"));
    if (!out) {
        cleanup.keep();  // not ours: we could not create it
        return io_error(output_path + ": cannot create (" + std::strerror(errno) + ")");
    }
    ChromeTraceWriter writer(out.get());
    HostTracks::Counts counts;
    std::vector<std::string> empty;  // inputs that drew nothing, with what they held
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        auto source = detail::open_event_source(inputs[i], options);
        if (!source) return source.status();
        StringTable strings;
        ExportSink sink(writer, i, options, counts);
        Status st = (*source)->run(sink, strings);
        if (!sink.status().is_ok()) return sink.status();
        if (!st.is_ok()) return Status(st.code(), inputs[i] + ": " + st.message());
        if (!sink.drew()) empty.push_back(inputs[i] + " " + sink.held());
    }
    if (!empty.empty()) return nothing_to_draw(empty);
    Status st = writer.finish([&](detail::JsonWriter& json) { write_counts(json, counts); });
    if (!st.is_ok()) return Status(st.code(), output_path + ": " + st.message());
    if (std::fflush(out.get()) != 0) return io_error(output_path + ": cannot write");
    cleanup.keep();
    return Status::ok();
}

}  // namespace

Status export_chrome_trace(const std::vector<std::string>& inputs, const std::string& output_path,
                           const AnalysisOptions& options) noexcept {
    try {
        return export_impl(inputs, output_path, options);
    } catch (const std::bad_alloc&) {
        return resource_exhausted("out of host memory while exporting");
    } catch (const std::exception& e) {
        return internal_error(std::string("export failed: ") + e.what());
    } catch (...) {
        return internal_error("export failed with an unknown exception");
    }
}

}  // namespace gpudiag
