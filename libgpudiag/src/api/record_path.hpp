// SPDX-License-Identifier: Apache-2.0
// Recording names for injected processes: every process that loads the injection library
// (each rank, each child that initialises CUDA) reads the same GPUDIAG_RECORD, so each writes
// its own file, named with its pid.
#pragma once

#include <string>
#include <string_view>

namespace gpudiag::detail {

/// `requested` with the pid in its name: "%p" is replaced by it; otherwise "-<pid>" goes before
/// the extension ("run.gpudiag" -> "run-4242.gpudiag"), or at the end when there is none.
std::string per_process_record_path(std::string_view requested, long pid);

}  // namespace gpudiag::detail
