// SPDX-License-Identifier: Apache-2.0
// A signal that asks a session for a dump of its window (GPUDIAG_DUMP_SIGNAL under the CUDA
// injection, which `gpudiag run --window` sets): for programs that cannot call request_dump().
#pragma once

#include <gpudiag/session.hpp>
#include <gpudiag/status.hpp>

#include <string_view>

namespace gpudiag::detail {

/// The signal number `spec` names: "USR1", "SIGUSR1", "usr2" or a number. 0 when it names
/// none, or one that must not be taken over (SIGKILL, SIGSEGV, ...).
int parse_dump_signal(std::string_view spec) noexcept;

/// From now on signal `signum` calls `session.request_dump()` (async-signal-safe); the session
/// must outlive the process (the injection's does). Errors: kInvalidArgument for a signal
/// parse_dump_signal() would refuse; kFailedPrecondition when the program already handles it
/// (its handler stays).
Status install_dump_signal(Session& session, int signum) noexcept;

}  // namespace gpudiag::detail
