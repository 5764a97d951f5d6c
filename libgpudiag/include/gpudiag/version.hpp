// SPDX-License-Identifier: Apache-2.0
// The library version: the single place it is written (CMake and pyproject read it from here).
#pragma once

#include <gpudiag/export.hpp>

#define GPUDIAG_VERSION_MAJOR 0
#define GPUDIAG_VERSION_MINOR 1
#define GPUDIAG_VERSION_PATCH 0
#define GPUDIAG_VERSION_STRING "0.1.0"

namespace gpudiag {

/// The version of the library the program runs with (may differ from the headers it was built
/// against when gpudiag is a shared library).
/// Thread-safety: safe. Callback-safe: yes. Errors: none.
GPUDIAG_API const char* version() noexcept;

}  // namespace gpudiag
