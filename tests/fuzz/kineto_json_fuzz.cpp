// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the Kineto importer: gzip inflation, JSON parsing (with the cut-off
// recovery path), the multi-threaded parse forced onto every input (it must agree with the serial
// one), the streamed parse in small pieces (it must agree or decline), and the timeline analysis
// of whatever events come out.
#include "importers/kineto/kineto_parser.hpp"
#include "importers/kineto/kineto_stream.hpp"
#include "importers/kineto/trace_buffer.hpp"

#include <gpudiag/analyze.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace gpudiag;
    detail::TraceBuffer buffer;
    if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b) {
        bool truncated = false;
        auto inflated = detail::inflate_gzip(data, size, &truncated);
        if (!inflated.is_ok() || inflated->size() > (1u << 24)) return 0;
        buffer = std::move(*inflated);
    } else {
        buffer = detail::TraceBuffer(size);
        if (size > 0) std::memcpy(buffer.data(), data, size);
        buffer.resize(size);
    }
    {
        // Split parse vs serial parse: same status, same events, same strings, or a bug.
        StringTable serial_strings;
        StringTable split_strings;
        detail::KinetoParseResult serial;
        detail::KinetoParseResult split;
        detail::KinetoParseOptions one_thread;
        one_thread.max_threads = 1;
        detail::KinetoParseOptions forced;
        forced.split_min_bytes = 0;
        forced.max_threads = 3;
        Status a = detail::parse_kineto_events(buffer, "fuzz", serial_strings, serial, one_thread);
        Status b = detail::parse_kineto_events(buffer, "fuzz", split_strings, split, forced);
        bool same = a.code() == b.code() && a.message() == b.message() &&
                    serial.events.size() == split.events.size() &&
                    serial_strings.size() == split_strings.size() &&
                    serial.summary.notes == split.summary.notes &&
                    serial.summary.missing == split.summary.missing &&
                    serial.info.properties == split.info.properties;
        for (std::size_t i = 0; same && i < serial.events.size(); ++i) {
            same = std::memcmp(&serial.events[i], &split.events[i], sizeof(Event)) == 0;
        }
        for (std::size_t id = 0; same && id < serial_strings.size(); ++id) {
            same = serial_strings.lookup(static_cast<StringId>(id)) ==
                   split_strings.lookup(static_cast<StringId>(id));
        }
        if (!same) __builtin_trap();  // a fuzzer finding, never reached by the library itself
    }
    StringTable strings;
    detail::KinetoParseResult parsed;
    const bool whole_ok = detail::parse_kineto_trace(buffer, "fuzz", strings, parsed).is_ok();
    {
        // The streamed parse, in small pieces on two threads: the whole parse's result, or none
        // (and nothing interned) where it cannot verify the input.
        StringTable stream_strings;
        detail::KinetoStreamResult streamed;
        detail::KinetoStreamOptions options;
        options.piece_bytes = 97;
        options.max_threads = 2;
        auto in = detail::memory_stream(buffer.data(), buffer.size());
        const bool ok =
            detail::stream_kineto_events(*in, "fuzz", stream_strings, options, streamed);
        bool same = ok ? whole_ok && !parsed.summary.truncated : stream_strings.size() == 2;
        if (ok && same) {
            struct Collect final : EventSink {
                void consume(std::span<const Event> e) override {
                    seen.insert(seen.end(), e.begin(), e.end());
                }
                std::vector<Event> seen;
            } sink;
            streamed.runs.replay(sink);
            same = sink.seen.size() == parsed.events.size() &&
                   stream_strings.size() == strings.size() &&
                   streamed.parse.summary.notes == parsed.summary.notes &&
                   streamed.parse.info.properties == parsed.info.properties;
            for (std::size_t i = 0; same && i < sink.seen.size(); ++i) {
                same = std::memcmp(&sink.seen[i], &parsed.events[i], sizeof(Event)) == 0;
            }
            for (std::size_t id = 0; same && id < strings.size(); ++id) {
                same = strings.lookup(static_cast<StringId>(id)) ==
                       stream_strings.lookup(static_cast<StringId>(id));
            }
        }
        if (!same) __builtin_trap();
    }
    if (!whole_ok) return 0;
    for (auto window : {AnalysisWindow::kSteps, AnalysisWindow::kHta}) {
        AnalysisOptions options;
        options.window = window;
        auto report = analyze_events(parsed.events, parsed.info, strings, options);
        if (report.is_ok()) (void)render_json(*report);
    }
    return 0;
}
