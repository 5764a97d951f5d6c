// SPDX-License-Identifier: Apache-2.0
// Public what-if API: a source's events -> allocation history -> replays.
#include <gpudiag/whatif.hpp>

#include "analysis/allocator/allocation_history.hpp"
#include "analysis/allocator/allocator_whatif.hpp"
#include "importers/open_source.hpp"

#include <exception>
#include <new>

namespace gpudiag {

Result<WhatIfResult> whatif_file(const std::string& path, const WhatIfOptions& options) noexcept {
    try {
        auto source = detail::open_event_source(path, AnalysisOptions{});
        if (!source) return source.status();
        StringTable strings;
        detail::AllocationHistory history;
        Status status = (*source)->run(history, strings);
        // What was read before a failure still replays; with nothing read, the failure stands.
        if (!status.is_ok() && history.devices().empty()) return status;
        auto result = detail::run_whatif(history, options);
        if (result && !status.is_ok()) {
            result->notes.push_back("The input ended early (" + status.to_string() +
                                    "); the replay covers the part that could be read.");
        }
        return result;
    } catch (const std::bad_alloc&) {
        return resource_exhausted(path + ": out of host memory while replaying the allocations");
    } catch (const std::exception& e) {
        return internal_error(path + ": " + e.what());
    } catch (...) {
        return internal_error(path + ": unknown failure while replaying the allocations");
    }
}

Result<WhatIfResult> whatif_events(std::span<const Event> events, const SourceInfo& info,
                                   const StringTable& strings,
                                   const WhatIfOptions& options) noexcept {
    try {
        detail::AllocationHistory history;
        history.begin(info, strings);
        history.consume(events);
        history.end(SourceSummary{});
        return detail::run_whatif(history, options);
    } catch (const std::bad_alloc&) {
        return resource_exhausted("out of host memory while replaying the allocations");
    } catch (const std::exception& e) {
        return internal_error(e.what());
    } catch (...) {
        return internal_error("unknown failure while replaying the allocations");
    }
}

}  // namespace gpudiag
