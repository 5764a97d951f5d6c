// SPDX-License-Identifier: Apache-2.0
#include "api/record_path.hpp"

#include <fmt/format.h>

namespace gpudiag::detail {

std::string per_process_record_path(std::string_view requested, long pid) {
    std::string path(requested);
    const std::string id = fmt::to_string(pid);
    if (auto at = path.find("%p"); at != std::string::npos) {
        for (; at != std::string::npos; at = path.find("%p", at + id.size()))
            path.replace(at, 2, id);
        return path;
    }
    std::size_t name = path.rfind('/');
    name = name == std::string::npos ? 0 : name + 1;
    std::size_t dot = path.rfind('.');
    if (dot == std::string::npos || dot <= name) return path + "-" + id;  // no extension
    return path.insert(dot, "-" + id);
}

}  // namespace gpudiag::detail
