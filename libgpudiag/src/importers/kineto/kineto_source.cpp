// SPDX-License-Identifier: Apache-2.0
// The Kineto importer as an EventSource: load (inflate), parse, order by start, replay into the
// sink. The events are not copied into sorted order: the replay gathers each batch through the
// start order, which saves a second copy of them (and faulting its pages in).
#include "importers/open_source.hpp"
#include "importers/kineto/kineto_parser.hpp"
#include "importers/kineto/start_order.hpp"
#include "importers/kineto/trace_buffer.hpp"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <new>
#include <vector>

namespace gpudiag::detail {
namespace {

class KinetoSource final : public EventSource {
public:
    KinetoSource(std::string path, AnalysisOptions options)
        : path_(std::move(path)), options_(std::move(options)) {}

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
    Status run_impl(EventSink& sink, StringTable& strings) {
        bool gzip_truncated = false;
        auto buffer = load_trace_file(path_, &gzip_truncated, options_.progress);
        if (!buffer) return buffer.status();
        KinetoParseResult parsed;
        Status status = parse_kineto_events(*buffer, path_, strings, parsed);
        if (!status.is_ok()) {
            if (gzip_truncated) {
                return corrupt_data(path_ + ": the gzip stream is cut short and what precedes the "
                                            "cut is not a readable trace (" + status.message() + ")");
            }
            return status;
        }
        buffer = TraceBuffer();  // the events hold everything needed; give the text back
        if (gzip_truncated) {
            parsed.summary.truncated = true;
            parsed.summary.notes.insert(parsed.summary.notes.begin(),
                                        "the gzip stream is cut short (file truncated?)");
        }
        if (parsed.gpu_activities == 0) {
            parsed.summary.notes.push_back(
                parsed.device_vendor == "mtia"
                    ? "MTIA trace: its device events (mtia_ccp_events) are not kernels or copies, "
                      "so GPU timeline figures are not available; host-side figures still are"
                    : "no GPU kernels, copies or memsets in this trace (CPU-only profile?): GPU "
                      "timeline figures are not available");
        }
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

    std::string path_;
    AnalysisOptions options_;
};

}  // namespace

Result<std::unique_ptr<EventSource>> open_kineto_source(const std::string& path,
                                                        const AnalysisOptions& options) {
    return std::unique_ptr<EventSource>(std::make_unique<KinetoSource>(path, options));
}

}  // namespace gpudiag::detail
