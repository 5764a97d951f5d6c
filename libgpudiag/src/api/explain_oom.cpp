// SPDX-License-Identifier: Apache-2.0
// Public memory API: explain_oom_in_snapshot.
#include <gpudiag/memory.hpp>

#include "analysis/memory/memory_analyzer.hpp"
#include "analysis/memory/oom_explainer.hpp"
#include "importers/open_source.hpp"

#include <fmt/format.h>

#include <exception>
#include <new>
#include <string>

namespace gpudiag {

Result<OomExplanation> explain_oom_in_snapshot(const std::string& path, std::uint64_t request_bytes,
                                               int device) noexcept {
    if (request_bytes == 0)
        return invalid_argument("explain_oom_in_snapshot: the request is 0 bytes");
    if (device < 0 || device >= 0xFFFF) {
        return invalid_argument(
            fmt::format("explain_oom_in_snapshot: device {} is not a device ordinal", device));
    }
    try {
        auto format = detect_format(path);
        if (!format) return format.status();
        if (*format != InputFormat::kTorchSnapshot) {
            return invalid_argument(path + ": not a torch memory snapshot (it is a " +
                                    input_format_name(*format) + ")");
        }
        auto source = detail::open_snapshot_source(path, AnalysisOptions{});
        if (!source) return source.status();
        StringTable strings;
        detail::MemoryAnalyzer analyzer;
        GPUDIAG_RETURN_IF_ERROR((*source)->run(analyzer, strings));
        detail::OomContext ctx;
        ctx.strings = &strings;
        // The analyzer saw the allocator settings and the segments' expandable flags.
        ctx.expandable_segments = analyzer.expandable_segments();
        auto dev = static_cast<std::uint16_t>(device);
        OomExplanation x = detail::explain_oom(request_bytes, dev, analyzer.ledger(), ctx);
        // The what-if replays the snapshot's allocation history under the usual settings: when it
        // answers whether a setting avoids the snapshot's out-of-memory failure, that measured
        // answer leads the advice (closes it when the replay did not reproduce the run). Its
        // answer about the peak reserved says nothing about why this request fails.
        detail::MeasuredAdvice measured = analyzer.allocator_advice_for(dev);
        if (!measured.sentence.empty() && measured.about_oom) {
            x.advice.insert(measured.reproduced ? x.advice.begin() : x.advice.end(),
                            std::move(measured.sentence));
        }
        return x;
    } catch (const std::bad_alloc&) {
        return resource_exhausted(path + ": out of host memory while explaining the OOM");
    } catch (const std::exception& e) {
        return internal_error(path + ": " + e.what());
    } catch (...) {
        return internal_error(path + ": unknown failure while explaining the OOM");
    }
}

}  // namespace gpudiag
