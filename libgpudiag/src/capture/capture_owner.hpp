// SPDX-License-Identifier: Apache-2.0
// CaptureOwnership: one gpudiag copy captures CUPTI per process.
//
// A process can hold several gpudiag copies: the libgpudiag.so that `gpudiag run --` injects,
// the Python module's static copy, a program's own static link. Each has its own CUPTI source,
// but CUPTI's buffer callbacks and enabled kinds are process-global, so two would steal each
// other's buffers. Every copy exports a marker (gpudiag_capture_owner_v1); a copy that wants to
// capture claims every marker it can find, its own included, in address order (so two copies
// racing cannot each hold half), and owns capture only when it got them all.
#pragma once

#include <gpudiag/status.hpp>

namespace gpudiag::detail {

/// Claims CUPTI capture for this copy of gpudiag. Errors: kFailedPrecondition naming the copy
/// that owns it ("another gpudiag copy in this process owns CUPTI capture (...)"). Claiming
/// again while owning succeeds. Thread-safety: safe. Callback-safe: no (walks loaded objects).
Status claim_capture_ownership() noexcept;

/// Gives up what claim_capture_ownership() took (nothing when it owns nothing).
void release_capture_ownership() noexcept;

}  // namespace gpudiag::detail
