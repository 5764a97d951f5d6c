// SPDX-License-Identifier: Apache-2.0
// The Kineto importer as an EventSource: streamed in pieces into compact runs and replayed in
// start order (kineto_stream.hpp), or, for a trace the stream cannot verify, loaded whole, parsed,
// and replayed through its start order (the events are then not copied into sorted order: each
// batch is gathered through the order, which saves a second copy of them).
#include "importers/kineto/kineto_parser.hpp"
#include "importers/kineto/kineto_stream.hpp"
#include "importers/kineto/start_order.hpp"
#include "importers/kineto/trace_buffer.hpp"
#include "importers/open_source.hpp"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <new>
#include <optional>
#include <vector>

namespace gpudiag::detail {
namespace {

class KinetoSource final : public EventSource {
public:
    /// `path`: what messages and the report call the trace; `opener`: its content, from the
    /// start, as often as asked; `whole_from_stream`: read it whole through `opener` (an archive
    /// member) rather than by `path` when it has to be read whole.
    KinetoSource(std::string path, StreamOpener opener, bool whole_from_stream,
                 AnalysisOptions options)
        : path_(std::move(path)),
          open_(std::move(opener)),
          whole_from_stream_(whole_from_stream),
          options_(std::move(options)) {}

    Status run(EventSink& sink, StringTable& strings) override {
        try {
            return run_impl(sink, strings);
        } catch (const std::bad_alloc&) {
            return resource_exhausted(path_ + ": out of host memory while reading the trace");
        } catch (const std::exception& e) {
            return internal_error(path_ + ": " + e.what());
        }
    }

private:
    // The stream first (bounded memory); the whole-document parse, bounded by kMaxWholeText,
    // for what the stream cannot verify.
    Status run_impl(EventSink& sink, StringTable& strings) {
        KinetoStreamResult result;
        switch (stream(result)) {
            case StreamOutcome::kRead:
            case StreamOutcome::kPartial: return deliver(result, sink, strings);
            case StreamOutcome::kRefused: return result.refusal;
            case StreamOutcome::kUnclosed:
                // Most likely cut short; read whole when small enough, as an unusual layout that
                // the serial parse reads in full also ends up here.
                if (result.text_bytes > kMaxWholeText) return deliver(result, sink, strings);
                return run_whole(sink, strings, result.why);
            case StreamOutcome::kDeclined: break;
        }
        return run_whole(sink, strings, result.why);
    }

    // The bounded-memory reading (kineto_stream.hpp).
    StreamOutcome stream(KinetoStreamResult& result) {
        // A small gzip trace is inflated whole by libdeflate, twice as fast as zlib's streaming
        // inflate; its pieces are then cut from memory. Past the limit, zlib streams it.
        std::optional<TraceBuffer> small;
        if (!whole_from_stream_) small = inflate_small_gzip(path_, kWholeInflateLimit);
        auto in =
            small ? Result<std::unique_ptr<ByteStream>>(memory_stream(small->data(), small->size()))
                  : open_();
        if (!in) {
            result.why = in.status().message();
            return StreamOutcome::kDeclined;  // the whole-file reading reports why
        }
        KinetoStreamOptions options;
        options.progress = options_.progress;
        return stream_kineto_trace(**in, path_, options, result);
    }

    Status deliver(KinetoStreamResult& result, EventSink& sink, StringTable& strings) {
        publish_stream_names(result, strings);
        note_missing_gpu_work(result.parse);
        sink.begin(result.parse.info, strings);
        result.runs.replay(sink);
        sink.end(result.parse.summary);
        return Status::ok();
    }

    static void note_missing_gpu_work(KinetoParseResult& parsed) {
        if (parsed.gpu_activities != 0) return;
        if (parsed.summary.truncated && parsed.device_vendor != "mtia") {
            parsed.summary.missing.emplace_back(
                "no GPU kernels, copies or memsets were read: the profiler writes GPU activity "
                "after the CPU operators, so a trace cut short loses it first; GPU timeline "
                "figures are not available");
            return;
        }
        parsed.summary.notes.push_back(
            parsed.device_vendor == "mtia"
                ? "MTIA trace: its device events (mtia_ccp_events) are not kernels or copies, "
                  "so GPU timeline figures are not available (host figures are, where the trace "
                  "has steps or DataLoader waits)"
                : "no GPU kernels, copies or memsets in this trace (CPU-only profile?): GPU "
                  "timeline figures are not available");
    }

    // The whole text in memory, parsed at once: for traces the stream cannot verify (damaged,
    // cut short, unusually laid out), whose recovery needs all of it.
    // `why`: why the stream could not read it, for the refusal of one too large to read whole.
    Status run_whole(EventSink& sink, StringTable& strings, const std::string& why) {
        bool gzip_truncated = false;
        auto buffer = whole_from_stream_ ? load_whole_stream(&gzip_truncated)
                                         : load_trace_file(path_, &gzip_truncated,
                                                           options_.progress, kMaxWholeText);
        if (!buffer) {
            if (buffer.status().code() != StatusCode::kUnsupported || why.empty())
                return buffer.status();
            std::string_view problem = buffer.status().message();
            if (problem.substr(0, path_.size() + 2) == path_ + ": ")
                problem.remove_prefix(path_.size() + 2);
            return unsupported(path_ + ": could not be read as a stream (" + why + "), and " +
                               std::string(problem) + "; gpudiag reads no more than that at once");
        }
        KinetoParseResult parsed;
        Status status = parse_kineto_events(*buffer, path_, strings, parsed);
        if (!status.is_ok()) {
            if (gzip_truncated) {
                return corrupt_data(path_ +
                                    ": the gzip stream is cut short and what precedes the "
                                    "cut is not a readable trace (" +
                                    status.message() + ")");
            }
            return status;
        }
        buffer = TraceBuffer();  // the events hold everything needed; give the text back
        if (gzip_truncated) {
            parsed.summary.truncated = true;
            parsed.summary.missing.insert(parsed.summary.missing.begin(),
                                          "the gzip stream is cut short (file truncated?): "
                                          "whatever followed the last complete event is missing");
        }
        note_missing_gpu_work(parsed);
        const std::vector<Event>& events = parsed.events;
        const std::vector<std::uint64_t> order = start_order(events);  // empty: in order already
        sink.begin(parsed.info, strings);
        constexpr std::size_t kBatch = 4096;
        std::vector<Event> batch;
        if (!order.empty()) batch.reserve(kBatch);
        for (std::size_t i = 0; i < events.size(); i += kBatch) {
            std::size_t count = std::min(kBatch, events.size() - i);
            if (order.empty()) {
                sink.consume(std::span<const Event>(events.data() + i, count));
                continue;
            }
            batch.clear();
            for (std::size_t k = i; k < i + count; ++k) {
                batch.push_back(events[static_cast<std::size_t>(order[k])]);
            }
            sink.consume(batch);
        }
        sink.end(parsed.summary);
        return Status::ok();
    }

    Result<TraceBuffer> load_whole_stream(bool* truncated) {
        auto in = open_();
        if (!in) return in.status();
        auto buffer = load_trace_stream(**in, truncated, kMaxWholeText);
        if (!buffer)
            return Status(buffer.status().code(), path_ + ": " + buffer.status().message());
        return buffer;
    }

    // Gzip traces up to this size once inflated are inflated whole (a bounded, transient buffer).
    static constexpr std::size_t kWholeInflateLimit = std::size_t{64} << 20;
    // The most text read whole, for a trace the stream cannot verify. The whole-document parse
    // needs about three times the text (the text, simdjson's index, the events); past this the
    // trace is refused with the reason the stream gave, rather than risking the host's memory.
    static constexpr std::uint64_t kMaxWholeText = std::uint64_t{256} << 20;

    std::string path_;
    StreamOpener open_;
    bool whole_from_stream_;
    AnalysisOptions options_;
};

}  // namespace

Result<std::unique_ptr<EventSource>> open_kineto_source(const std::string& path,
                                                        const AnalysisOptions& options) {
    StreamOpener opener = [path] { return open_content_stream(path); };
    return std::unique_ptr<EventSource>(
        std::make_unique<KinetoSource>(path, std::move(opener), false, options));
}

Result<std::unique_ptr<EventSource>> open_kineto_stream_source(const std::string& name,
                                                               StreamOpener opener,
                                                               const AnalysisOptions& options) {
    return std::unique_ptr<EventSource>(
        std::make_unique<KinetoSource>(name, std::move(opener), true, options));
}

}  // namespace gpudiag::detail
