// SPDX-License-Identifier: Apache-2.0
// The what-if over a file, for whatif_file() and a live session's Session::whatif(), which reads
// its own recording (or a copy of its window) and names it as the session's.
#pragma once

#include <gpudiag/whatif.hpp>

#include <string>

namespace gpudiag::detail {

/// Replays the allocation history in `path`; `label` names the input in the result and in
/// errors ("" = the path). Errors: as whatif_file().
Result<WhatIfResult> whatif_path(const std::string& path, const WhatIfOptions& options,
                                 const std::string& label);

}  // namespace gpudiag::detail
