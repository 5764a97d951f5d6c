// SPDX-License-Identifier: Apache-2.0
// The parts of a file's path that names derived from it keep: the recording's window, dumps and
// moved-aside files are all <stem><tag><ext> beside it.
#pragma once

#include <string>
#include <utility>

namespace gpudiag::detail {

/// <stem> and <ext> of a path: "run.gpudiag" -> ("run", ".gpudiag"); no extension (or a dot
/// only in a folder's name, or a hidden file's leading dot) -> ("run", "").
inline std::pair<std::string, std::string> split_extension(const std::string& path) {
    const std::size_t slash = path.find_last_of('/');
    const std::size_t name_start = slash == std::string::npos ? 0 : slash + 1;
    std::size_t dot = path.find_last_of('.');
    if (dot == std::string::npos || dot <= name_start) dot = path.size();
    return {path.substr(0, dot), path.substr(dot)};
}

}  // namespace gpudiag::detail
