// SPDX-License-Identifier: Apache-2.0
// Live capture as the API hands it out: the CaptureOptions a session's options give, the capture
// backend a session runs, and probe_capture(). Capture reports the software stack it finds; the
// stack rules (analysis/health/stack_rules.hpp) judge it here, so that every CaptureStatus the
// API returns carries the verdict (stack_issues).
#pragma once

#include <gpudiag/session.hpp>

#include "capture/capture_backend.hpp"

#include <memory>

namespace gpudiag::detail {

/// What capture needs of a session's options.
CaptureOptions capture_options(const SessionOptions& options);

/// The capture a session runs: the live backend for capture_options(options), whose status()
/// carries the stack verdict.
std::unique_ptr<CaptureBackend> make_session_capture(const SessionOptions& options);

}  // namespace gpudiag::detail
