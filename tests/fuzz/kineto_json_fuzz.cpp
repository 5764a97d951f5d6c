// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the Kineto importer: gzip inflation, JSON parsing (with the cut-off
// recovery path), the multi-threaded parse forced onto every input (it must agree with the serial
// one), and the timeline analysis of whatever events come out.
#include "importers/kineto/kineto_parser.hpp"
#include "importers/kineto/trace_buffer.hpp"

#include <gpudiag/analyze.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

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
    if (!detail::parse_kineto_trace(buffer, "fuzz", strings, parsed).is_ok()) return 0;
    for (auto window : {AnalysisWindow::kSteps, AnalysisWindow::kHta}) {
        AnalysisOptions options;
        options.window = window;
        auto report = analyze_events(parsed.events, parsed.info, strings, options);
        if (report.is_ok()) (void)render_json(*report);
    }
    return 0;
}
