// SPDX-License-Identifier: Apache-2.0
// Chrome trace export. Layout in the viewer: one process per GPU ("GPU 0", pid 1'000'000 + device)
// with a track per stream; host processes by pid with a track per thread; steps as async slices;
// memory in use (block/driver/pool allocations) and sampled metrics as counter tracks.
#include <gpudiag/chrome_trace.hpp>

#include "api/chrome_trace_writer.hpp"
#include "core/event_source.hpp"

#include <algorithm>
#include <exception>
#include <memory>
#include <new>

namespace gpudiag {
namespace detail {
namespace {

constexpr std::uint64_t kGpuPidBase = 1'000'000;
constexpr std::size_t kFlushBytes = std::size_t{1} << 20;

const char* copy_direction_name(CopyDirection d) {
    switch (d) {
        case CopyDirection::kHostToDevice: return "HtoD";
        case CopyDirection::kDeviceToHost: return "DtoH";
        case CopyDirection::kDeviceToDevice: return "DtoD";
        case CopyDirection::kHostToHost: return "HtoH";
        case CopyDirection::kPeerToPeer: return "PtoP";
        case CopyDirection::kUnknown: break;
    }
    return "?";
}

const char* memory_kind_name(MemoryKind k) {
    switch (k) {
        case MemoryKind::kDevice: return "device";
        case MemoryKind::kPageable: return "pageable";
        case MemoryKind::kPinned: return "pinned";
        case MemoryKind::kManaged: return "managed";
        case MemoryKind::kArray: return "array";
        case MemoryKind::kUnknown: break;
    }
    return "unknown";
}

const char* counter_name(CounterKind k) {
    switch (k) {
        case CounterKind::kGpuUtilizationPercent: return "GPU utilization %";
        case CounterKind::kMemoryUtilizationPercent: return "memory utilization %";
        case CounterKind::kDeviceMemoryUsedBytes: return "device memory used (NVML)";
        case CounterKind::kDeviceMemoryTotalBytes: return "device memory total";
        case CounterKind::kProcessMemoryUsedBytes: return "process memory used (NVML)";
        case CounterKind::kForeignProcessMemoryBytes: return "other processes' memory";
        case CounterKind::kSmClockMhz: return "SM clock MHz";
        case CounterKind::kSmClockMaxMhz: return "SM clock max MHz";
        case CounterKind::kTemperatureC: return "temperature C";
        case CounterKind::kPowerWatts: return "power W";
        case CounterKind::kPowerLimitWatts: return "power limit W";
        case CounterKind::kThrottleReasons: return "throttle reasons";
        case CounterKind::kEccCorrectedErrors: return "ECC corrected";
        case CounterKind::kEccUncorrectedErrors: return "ECC uncorrected";
        case CounterKind::kFrameworkAllocatedBytes: return "torch allocated";
        case CounterKind::kFrameworkReservedBytes: return "torch reserved";
        case CounterKind::kFrameworkAllocRetries: return "torch alloc retries";
        case CounterKind::kFrameworkOoms: return "torch OOMs";
        case CounterKind::kFrameworkInactiveSplitBytes: return "torch inactive split";
        case CounterKind::kDroppedRecords: return "dropped records";
        case CounterKind::kUnknown: break;
    }
    return "counter";
}

// Allocation kinds that add to memory in use, and the frees that take it back.
bool is_allocation(EventKind k) {
    return k == EventKind::kDeviceAlloc || k == EventKind::kPoolAlloc ||
           k == EventKind::kBlockAlloc;
}
bool is_release(EventKind k) {
    return k == EventKind::kDeviceFree || k == EventKind::kPoolFree || k == EventKind::kBlockFree;
}

}  // namespace

ChromeTraceWriter::ChromeTraceWriter(std::FILE* out) : out_(out), json_(buffer_, false) {
    json_.begin_object();
    json_.field("displayTimeUnit", "ns");
    json_.key("traceEvents").begin_array();
}

std::string_view ChromeTraceWriter::text(StringId id) const {
    return strings_ != nullptr ? strings_->lookup(id) : std::string_view();
}

void ChromeTraceWriter::begin(const SourceInfo& /*info*/, const StringTable& strings) {
    strings_ = &strings;
    ++source_index_;
}

void ChromeTraceWriter::end(const SourceSummary& /*summary*/) { flush_if_large(); }

void ChromeTraceWriter::consume(std::span<const Event> events) {
    for (const auto& e : events) {
        if (!have_origin_ && e.start_ns != 0) {
            origin_ns_ = e.start_ns;
            have_origin_ = true;
        }
        write(e);
    }
    flush_if_large();
}

void ChromeTraceWriter::name_gpu(std::uint16_t device) {
    if (gpu_named_[device]) return;
    gpu_named_[device] = true;
    json_.begin_object();
    json_.field("ph", "M").field("name", "process_name");
    json_.field("pid", kGpuPidBase + device).field("tid", std::uint64_t{0});
    json_.key("args").begin_object().field("name", "GPU " + std::to_string(device)).end_object();
    json_.end_object();
    ++written_;
}

void ChromeTraceWriter::complete(const char* name_prefix, std::string_view name,
                                 const char* category, std::uint64_t pid, std::uint64_t tid,
                                 const Event& e) {
    json_.begin_object();
    std::string full = name_prefix;
    full += name;
    json_.field("ph", "X").field("name", full).field("cat", category);
    json_.field("pid", pid).field("tid", tid);
    json_.field("ts", static_cast<double>(e.start_ns - std::min(e.start_ns, origin_ns_)) / 1e3);
    json_.field("dur", static_cast<double>(e.duration_ns()) / 1e3);
    if (e.kind == EventKind::kMemcpy || e.kind == EventKind::kMemset) {
        json_.key("args").begin_object().field("bytes", e.copy.bytes).end_object();
    }
    json_.end_object();
    ++written_;
}

void ChromeTraceWriter::counter(std::string_view name, std::uint64_t pid, std::uint64_t ts_ns,
                                double value) {
    json_.begin_object();
    json_.field("ph", "C").field("name", name).field("pid", pid);
    json_.field("ts", static_cast<double>(ts_ns - std::min(ts_ns, origin_ns_)) / 1e3);
    json_.key("args").begin_object().field("value", value).end_object();
    json_.end_object();
    ++written_;
}

void ChromeTraceWriter::memory(const Event& e) {
    if (!is_allocation(e.kind) && !is_release(e.kind)) return;
    const std::uint64_t key = (static_cast<std::uint64_t>(e.device) << 48) ^ e.memory.address;
    double& in_use = in_use_[e.device];
    if (is_allocation(e.kind)) {
        if (live_.size() >= kMaxTrackedAllocations && live_.find(key) == live_.end()) {
            tracking_full_ = true;
            return;
        }
        auto [it, inserted] = live_.try_emplace(key, e.memory.bytes);
        if (!inserted) {  // an address reused without a free we saw: replace, do not double-count
            in_use -= static_cast<double>(it->second);
            it->second = e.memory.bytes;
        }
        in_use += static_cast<double>(e.memory.bytes);
    } else {
        auto it = live_.find(key);
        if (it == live_.end()) return;  // allocated before the trace began
        in_use -= static_cast<double>(it->second);
        live_.erase(it);
    }
    if (e.device != kNoDevice) name_gpu(e.device);
    counter("memory in use", kGpuPidBase + e.device, e.start_ns, in_use);
}

void ChromeTraceWriter::write(const Event& e) {
    const std::uint64_t gpu_pid = kGpuPidBase + e.device;
    const std::uint64_t host_pid = e.process;
    switch (e.kind) {
        case EventKind::kKernel:
            name_gpu(e.device);
            complete("", text(e.kernel.name), "kernel", gpu_pid, e.stream, e);
            return;
        case EventKind::kMemcpy: {
            name_gpu(e.device);
            std::string name = std::string("Memcpy ") + copy_direction_name(e.copy.direction) +
                               " (" + memory_kind_name(e.copy.src_kind) + " -> " +
                               memory_kind_name(e.copy.dst_kind) + ")";
            complete("", name, "memcpy", gpu_pid, e.stream, e);
            return;
        }
        case EventKind::kMemset:
            name_gpu(e.device);
            complete("", "Memset", "memset", gpu_pid, e.stream, e);
            return;
        case EventKind::kSync:
            complete("", "synchronize", "sync", host_pid, e.thread, e);
            return;
        case EventKind::kApiCall:
            complete("", text(e.api.name), "cuda_api", host_pid, e.thread, e);
            return;
        case EventKind::kRange:
            complete("", text(e.range.name), "range", host_pid, e.thread, e);
            return;
        case EventKind::kRangeBegin:
        case EventKind::kRangeEnd:
            json_.begin_object();
            json_.field("ph", e.kind == EventKind::kRangeBegin ? "B" : "E");
            if (e.kind == EventKind::kRangeBegin) json_.field("name", text(e.range.name));
            json_.field("pid", host_pid).field("tid", std::uint64_t{e.thread});
            json_.field("ts",
                        static_cast<double>(e.start_ns - std::min(e.start_ns, origin_ns_)) / 1e3);
            json_.end_object();
            ++written_;
            return;
        case EventKind::kStepBegin:
        case EventKind::kStepEnd:
            // Async slices: a step may begin and end on different threads.
            json_.begin_object();
            json_.field("ph", e.kind == EventKind::kStepBegin ? "b" : "e");
            json_.field("name", "step " + std::to_string(e.range.id)).field("cat", "step");
            json_.field("id", e.range.id).field("pid", host_pid).field("tid", std::uint64_t{0});
            json_.field("ts",
                        static_cast<double>(e.start_ns - std::min(e.start_ns, origin_ns_)) / 1e3);
            json_.end_object();
            ++written_;
            return;
        case EventKind::kCounter:
            counter(counter_name(e.counter.counter),
                    e.device == kNoDevice ? host_pid : gpu_pid, e.start_ns, e.counter.value);
            return;
        case EventKind::kOutOfMemory:
        case EventKind::kAnnotation: {
            json_.begin_object();
            json_.field("ph", "i").field("s", "g");
            json_.field("name", e.kind == EventKind::kOutOfMemory
                                    ? std::string("out of memory")
                                    : std::string(text(e.annotation.text)));
            json_.field("pid", host_pid).field("tid", std::uint64_t{e.thread});
            json_.field("ts",
                        static_cast<double>(e.start_ns - std::min(e.start_ns, origin_ns_)) / 1e3);
            json_.key("args").begin_object();
            if (e.kind == EventKind::kOutOfMemory) {
                json_.field("requested_bytes", e.oom.requested_bytes);
                json_.field("free_bytes", e.oom.free_bytes);
            } else {
                json_.field("value", e.annotation.value);
            }
            json_.end_object().end_object();
            ++written_;
            return;
        }
        default:
            memory(e);
            return;
    }
}

void ChromeTraceWriter::flush_if_large() {
    if (buffer_.size() < kFlushBytes) return;
    if (std::fwrite(buffer_.data(), 1, buffer_.size(), out_) != buffer_.size()) {
        write_failed_ = true;
    }
    buffer_.clear();
}

bool ChromeTraceWriter::finish() {
    json_.end_array();
    json_.key("otherData").begin_object();
    json_.field("producer", "gpudiag");
    if (tracking_full_) {
        json_.field("memory_note", "memory counters stopped: too many live allocations to track");
    }
    if (!note_.empty()) json_.field("note", note_);
    json_.end_object();
    json_.end_object();
    buffer_ += '\n';
    if (std::fwrite(buffer_.data(), 1, buffer_.size(), out_) != buffer_.size()) {
        write_failed_ = true;
    }
    buffer_.clear();
    if (std::fflush(out_) != 0) write_failed_ = true;
    return !write_failed_;
}

}  // namespace detail

namespace {

Result<std::uint64_t> export_all(const std::vector<std::string>& paths, const std::string& out_path,
                                 const AnalysisOptions& options) {
    if (paths.empty()) return invalid_argument("no input files given");
    // Open every input before creating the output, so a bad input leaves no half-written file.
    std::vector<std::unique_ptr<detail::EventSource>> sources;
    for (const auto& path : paths) {
        auto source = detail::open_event_source(path, options);
        if (!source) return Status(source.status().code(), source.status().message());
        sources.push_back(std::move(*source));
    }
    std::FILE* out = std::fopen(out_path.c_str(), "wb");
    if (out == nullptr) return io_error(out_path + ": cannot create the output file");
    detail::ChromeTraceWriter writer(out);
    Status first_error;
    for (std::size_t i = 0; i < sources.size(); ++i) {
        StringTable strings;
        Status s = sources[i]->run(writer, strings);
        if (!s.is_ok() && first_error.is_ok()) {
            first_error = Status(s.code(), paths[i] + ": " + s.message());
        }
    }
    if (!first_error.is_ok()) writer.set_note("stopped early: " + first_error.to_string());
    const bool ok = writer.finish();
    const bool closed = std::fclose(out) == 0;
    if (!ok || !closed) return io_error(out_path + ": write failed (disk full?)");
    if (!first_error.is_ok() && writer.events_written() == 0) return first_error;
    return writer.events_written();
}

}  // namespace

Result<std::uint64_t> export_chrome_trace(const std::vector<std::string>& paths,
                                          const std::string& out_path,
                                          const AnalysisOptions& options) noexcept {
    try {
        return export_all(paths, out_path, options);
    } catch (const std::bad_alloc&) {
        return resource_exhausted("out of host memory while exporting");
    } catch (const std::exception& e) {
        return internal_error(std::string("export failed: ") + e.what());
    } catch (...) {
        return internal_error("export failed with an unknown exception");
    }
}

}  // namespace gpudiag
