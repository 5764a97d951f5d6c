// SPDX-License-Identifier: Apache-2.0
// quiet_thread: a thread of gpudiag's own inside someone else's process. It takes none of the
// process' asynchronous signals: a service that blocks SIGTERM after starting a session and waits
// for it with sigwait() or a signalfd must get it, not have the kernel deliver it to one of our
// threads, whose unblocked default action kills the process. And it has a name, so `top -H`,
// gdb and /proc/<pid>/task/*/comm say what it is.
#pragma once

#include <functional>
#include <thread>

namespace gpudiag::detail {

/// Starts `body` on a new thread named `name` (at most 15 characters: the kernel's limit) with
/// every asynchronous signal blocked. Synchronous ones (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
/// SIGTRAP, SIGSYS) stay unblocked: they are the thread's own faults. Throws as std::thread does
/// when no thread can be made; the calling thread's signal mask is as it was either way.
std::thread quiet_thread(const char* name, std::function<void()> body);

}  // namespace gpudiag::detail
