// SPDX-License-Identifier: Apache-2.0
// Chrome trace export: replays each input through the timeline analysis (for the idle gaps and
// their causes) and a writer sink at once, streaming JSON to the output file in 1 MiB pieces.
#include <gpudiag/trace_export.hpp>

#include "analysis/timeline/timeline_analyzer.hpp"
#include "importers/open_source.hpp"
#include "support/json_writer.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <new>
#include <set>

namespace gpudiag {
namespace {

constexpr std::size_t kFlushBytes = 1 << 20;
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

class ChromeTraceWriter {
public:
    explicit ChromeTraceWriter(std::FILE* out) : out_(out), json_(buffer_, false) {
        json_.begin_object().key("traceEvents").begin_array();
    }

    Status finish() {
        json_.end_array();
        json_.field("displayTimeUnit", "ns");
        json_.key("otherData").begin_object().field("producer", "gpudiag").end_object();
        json_.end_object();
        buffer_ += '\n';
        return flush();
    }

    Status maybe_flush() { return buffer_.size() >= kFlushBytes ? flush() : Status::ok(); }

    void set_origin_if_unset(std::uint64_t ns) {
        if (!has_origin_) {
            origin_ = ns;
            has_origin_ = true;
        }
    }

    void complete(const std::string_view name, const char* cat, std::uint64_t pid,
                  std::uint64_t tid, std::uint64_t start, std::uint64_t end,
                  const char* cname = nullptr) {
        json_.begin_object();
        json_.field("ph", "X").field("name", name).field("cat", cat);
        json_.field("pid", pid).field("tid", tid);
        json_.key("ts").value(us(start));
        json_.key("dur").value(static_cast<double>(end > start ? end - start : 0) / 1000.0);
        if (cname != nullptr) json_.field("cname", cname);
        json_.end_object();
    }
    detail::JsonWriter& json() { return json_; }
    double us(std::uint64_t ns) const {
        return (static_cast<double>(static_cast<std::int64_t>(ns - origin_))) / 1000.0;
    }
    void process_name(std::uint64_t pid, const std::string& name, int sort) {
        json_.begin_object()
            .field("ph", "M")
            .field("name", "process_name")
            .field("pid", pid)
            .field("tid", 0)
            .key("args")
            .begin_object()
            .field("name", name)
            .end_object()
            .end_object();
        json_.begin_object()
            .field("ph", "M")
            .field("name", "process_sort_index")
            .field("pid", pid)
            .field("tid", 0)
            .key("args")
            .begin_object()
            .field("sort_index", sort)
            .end_object()
            .end_object();
    }
    void thread_name(std::uint64_t pid, std::uint64_t tid, const std::string& name) {
        json_.begin_object()
            .field("ph", "M")
            .field("name", "thread_name")
            .field("pid", pid)
            .field("tid", tid)
            .key("args")
            .begin_object()
            .field("name", name)
            .end_object()
            .end_object();
    }
    void counter(std::uint64_t pid, const char* name, std::uint64_t ts, double value) {
        json_.begin_object().field("ph", "C").field("name", name).field("pid", pid);
        json_.key("ts").value(us(ts));
        json_.key("args").begin_object().field("value", value).end_object();
        json_.end_object();
    }

private:
    Status flush() {
        if (!buffer_.empty() &&
            std::fwrite(buffer_.data(), 1, buffer_.size(), out_) != buffer_.size()) {
            return io_error(std::string("cannot write the trace (") + std::strerror(errno) + ")");
        }
        buffer_.clear();
        return Status::ok();
    }

    std::FILE* out_;
    std::string buffer_;
    detail::JsonWriter json_;
    std::uint64_t origin_ = 0;
    bool has_origin_ = false;
};

// Feeds the timeline analysis (for gaps) and writes every event it sees.
class ExportSink final : public EventSink {
public:
    ExportSink(ChromeTraceWriter& writer, std::size_t input_index, const AnalysisOptions& options)
        : writer_(writer), analyzer_(options), gpu_pid_base_(kGpuPidBase + input_index * 1024) {
        analyzer_.set_gap_observer([this](const detail::TimelineAnalyzer::Gap& g) {
            writer_.complete(gap_name(g.kind, g.cause), "idle", gpu_pid(g.device), 0, g.start_ns,
                             g.end_ns, gap_colour(g.kind, g.cause));
        });
    }

    void begin(const SourceInfo& info, const StringTable& strings) override {
        strings_ = &strings;
        rank_ = info.rank;
        analyzer_.begin(info, strings);
    }

    void consume(std::span<const Event> events) override {
        if (!events.empty()) writer_.set_origin_if_unset(events.front().start_ns);
        analyzer_.consume(events);  // may write gaps
        for (const Event& e : events) write(e);
        if (status_.is_ok()) status_ = writer_.maybe_flush();
    }

    void end(const SourceSummary& summary) override {
        analyzer_.end(summary);
        for (std::uint16_t d : devices_) {
            std::string label = "GPU " + std::to_string(d) +
                                (rank_ >= 0 ? " (rank " + std::to_string(rank_) + ")" : "");
            writer_.process_name(gpu_pid(d), label, static_cast<int>(gpu_pid(d) - kGpuPidBase));
            writer_.thread_name(gpu_pid(d), 0, "idle gaps (by cause)");
        }
        for (const auto& [d, stream] : streams_) {
            writer_.thread_name(gpu_pid(d), stream + 1, "stream " + std::to_string(stream));
        }
        for (std::uint64_t pid : host_pids_) {
            writer_.process_name(
                pid,
                (rank_ >= 0 ? "rank " + std::to_string(rank_) + " " : std::string()) +
                    "host process " + std::to_string(pid & 0xFFFFFFFF),
                0);
        }
    }

    [[nodiscard]] const Status& status() const { return status_; }

private:
    std::uint64_t gpu_pid(std::uint16_t device) const { return gpu_pid_base_ + (device & 1023); }
    std::uint64_t host_pid(std::uint32_t pid) const {
        return rank_ >= 0 ? (std::uint64_t{static_cast<std::uint32_t>(rank_) + 1} << 32) | pid
                          : pid;
    }

    void write(const Event& e) {
        switch (e.kind) {
            case EventKind::kKernel:
            case EventKind::kMemcpy:
            case EventKind::kMemset: {
                devices_.insert(e.device);
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
            case EventKind::kApiCall:
                host_pids_.insert(host_pid(e.process));
                writer_.complete(strings_->lookup(e.api.name), "cuda_api", host_pid(e.process),
                                 e.thread, e.start_ns, e.end_ns);
                break;
            case EventKind::kRange:
                if (e.device != kNoDevice) break;  // GPU-side copies of user ranges
                host_pids_.insert(host_pid(e.process));
                writer_.complete(strings_->lookup(e.range.name),
                                 e.range.category == RangeCategory::kStep        ? "step"
                                 : e.range.category == RangeCategory::kInputWait ? "input_wait"
                                                                                 : "host",
                                 host_pid(e.process), e.thread, e.start_ns, e.end_ns);
                break;
            case EventKind::kCounter:
                writer_.counter(gpu_pid(e.device == kNoDevice ? 0 : e.device),
                                counter_name(e.counter.counter), e.start_ns, e.counter.value);
                break;
            case EventKind::kBlockAlloc:
            case EventKind::kBlockFree: {
                std::uint16_t d = e.device == kNoDevice ? 0 : e.device;
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
    std::uint64_t gpu_pid_base_;
    const StringTable* strings_ = nullptr;
    std::int32_t rank_ = -1;
    std::set<std::uint16_t> devices_;
    std::set<std::pair<std::uint16_t, std::uint32_t>> streams_;
    std::set<std::uint64_t> host_pids_;
    std::map<std::uint16_t, std::int64_t> block_bytes_;
    Status status_;
};

struct FileCloser {
    void operator()(std::FILE* f) const noexcept {
        if (f != nullptr) std::fclose(f);
    }
};

Status export_impl(const std::vector<std::string>& inputs, const std::string& output_path,
                   const AnalysisOptions& options) {
    if (inputs.empty()) return invalid_argument("no input files given");
    if (output_path.empty()) return invalid_argument("no output path given");
    std::unique_ptr<std::FILE, FileCloser> out(std::fopen(output_path.c_str(), "wb"));
    if (!out) return io_error(output_path + ": cannot create (" + std::strerror(errno) + ")");
    ChromeTraceWriter writer(out.get());
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        auto source = detail::open_event_source(inputs[i], options);
        if (!source) return source.status();
        StringTable strings;
        ExportSink sink(writer, i, options);
        Status st = (*source)->run(sink, strings);
        if (!sink.status().is_ok()) return sink.status();
        if (!st.is_ok()) return Status(st.code(), inputs[i] + ": " + st.message());
    }
    Status st = writer.finish();
    if (!st.is_ok()) return Status(st.code(), output_path + ": " + st.message());
    if (std::fflush(out.get()) != 0) return io_error(output_path + ": cannot write");
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
