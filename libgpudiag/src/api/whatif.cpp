// SPDX-License-Identifier: Apache-2.0
// Public what-if API: a source's events -> allocation history -> replays.
#include <gpudiag/whatif.hpp>

#include "analysis/allocator/allocation_history.hpp"
#include "analysis/allocator/allocator_whatif.hpp"
#include "api/whatif_file.hpp"
#include "core/producers.hpp"
#include "importers/open_source.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <new>

namespace gpudiag {
namespace detail {
namespace {

// Allocations to replay: a live session's OOM observer alone records failures, not a history.
bool has_operations(const AllocationHistory& history) {
    return std::any_of(history.devices().begin(), history.devices().end(),
                       [](const DeviceHistory& d) { return d.allocations > 0; });
}

// An input other than a torch snapshot (whose own message names its trace) that holds no
// caching-allocator operations: say what it holds instead and how to record what it lacks,
// never an empty all-clear. A session's CUPTI capture sees cudaMalloc-level calls only.
Status no_allocator_history(const AllocationHistory& history, const std::string& label) {
    std::string holds;
    if (history.outside_allocator_events() > 0) {
        holds = fmt::format(
            ": its {} device-memory events are driver-level (cudaMalloc, memory pools, virtual "
            "memory maps, from CUPTI or record_allocation), not the allocator's own operations",
            history.outside_allocator_events());
    }
    return failed_precondition(fmt::format(
        "{} holds no caching-allocator operations to replay{}. The what-if replays PyTorch's "
        "CUDA caching allocator and needs its block allocations and frees (and its segments, to "
        "check itself): run it on a torch memory snapshot taken with its trace "
        "(torch.cuda.memory._record_memory_history(), then _dump_snapshot(); "
        "gpudiag.session(memory_history=N, oom_snapshot=PATH) writes one at an out-of-memory "
        "error), or on a recording whose session was handed them (Session::record() with "
        "block_alloc, block_free, segment_alloc and segment_free events, or Session::replay() "
        "of such a snapshot)",
        label, holds));
}

}  // namespace

Result<WhatIfResult> whatif_path(const std::string& path, const WhatIfOptions& options,
                                 const std::string& label) {
    const std::string& name = label.empty() ? path : label;
    try {
        auto source = open_event_source(path, AnalysisOptions{});
        if (!source) return source.status();
        StringTable strings;
        AllocationHistory history;
        Status status = (*source)->run(history, strings);
        // What was read before a failure still replays; with nothing read, the failure stands.
        if (!status.is_ok() && history.devices().empty()) return status;
        if (!has_operations(history) && history.info().producer != kProducerTorchSnapshot) {
            return no_allocator_history(history, name);
        }
        auto result = run_whatif(history, options);
        // A recording names no description of its own: the path (or the session) stands for it.
        if (result && (!label.empty() || result->source.empty())) result->source = name;
        if (result && !status.is_ok()) {
            result->notes.push_back("The input ended early (" + status.to_string() +
                                    "); the replay covers the part that could be read.");
        }
        return result;
    } catch (const std::bad_alloc&) {
        return resource_exhausted(name + ": out of host memory while replaying the allocations");
    } catch (const std::exception& e) {
        return internal_error(name + ": " + e.what());
    } catch (...) {
        return internal_error(name + ": unknown failure while replaying the allocations");
    }
}

}  // namespace detail

Result<WhatIfResult> whatif_file(const std::string& path, const WhatIfOptions& options) noexcept {
    try {
        return detail::whatif_path(path, options, std::string());
    } catch (...) {  // copying the path
        return resource_exhausted("out of host memory while replaying the allocations");
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
        if (!detail::has_operations(history) && info.producer != detail::kProducerTorchSnapshot) {
            return detail::no_allocator_history(
                history, info.description.empty() ? "the events" : info.description);
        }
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
