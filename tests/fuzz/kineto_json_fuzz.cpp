// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the Kineto importer: gzip inflation, JSON parsing (with the cut-off
// recovery path) and the timeline analysis of whatever events come out.
#include "kineto/kineto_parser.hpp"
#include "kineto/trace_buffer.hpp"

#include <gpudiag/analyze.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>

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
