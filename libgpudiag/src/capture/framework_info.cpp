// SPDX-License-Identifier: Apache-2.0
// The framework report: one process-wide record, the latest call wins.
#include "capture/framework_info.hpp"

#include <mutex>

namespace gpudiag::detail {
namespace {

std::mutex g_framework_mutex;
FrameworkInfo g_framework;
bool g_framework_reported = false;

void record_framework(const FrameworkInfo& info) {
    std::lock_guard<std::mutex> lock(g_framework_mutex);
    g_framework = info;
    g_framework_reported = true;
}

}  // namespace

FrameworkInfo current_framework(bool* reported) {
    std::lock_guard<std::mutex> lock(g_framework_mutex);
    if (reported != nullptr) *reported = g_framework_reported;
    return g_framework;
}

}  // namespace gpudiag::detail

namespace gpudiag {

void set_framework_info(const FrameworkInfo& info) noexcept {
    try {
        detail::record_framework(info);
    } catch (...) {
    }
}

}  // namespace gpudiag
