// SPDX-License-Identifier: Apache-2.0
// The string id an event holds, by kind: the one place that knows which payload field it is in
// (readers that remap ids between string tables, replays into a session).
#pragma once

#include <gpudiag/event.hpp>

namespace gpudiag::detail {

/// The event's string id field (a name, site or text), or nullptr for kinds that hold none.
/// Every kind holds at most one.
inline StringId* string_id_of(Event& e) noexcept {
    if (is_memory_event(e.kind)) return &e.memory.site;
    switch (e.kind) {
        case EventKind::kKernel: return &e.kernel.name;
        case EventKind::kApiCall: return &e.api.name;
        case EventKind::kRangeBegin:
        case EventKind::kRangeEnd:
        case EventKind::kRange:
        case EventKind::kStepBegin:
        case EventKind::kStepEnd: return &e.range.name;
        case EventKind::kOutOfMemory: return &e.oom.site;
        case EventKind::kAnnotation:
        case EventKind::kCapturePaused:
        case EventKind::kCaptureResumed: return &e.annotation.text;
        default: return nullptr;
    }
}

}  // namespace gpudiag::detail
