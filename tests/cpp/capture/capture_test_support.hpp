// SPDX-License-Identifier: Apache-2.0
// What the capture tests share: choosing the stub CUPTI, NVML and CUDA driver before any loader
// in the library first reads its path, and reading the reasons a capture status gives.
#pragma once

#include <stdlib.h>

#include <algorithm>
#include <string>
#include <vector>

namespace gpudiag::test {

// Points the library's loaders at the stubs (the CUPTI one named by the caller). Call it in a
// namespace-scope initializer: the loaders read these on first use, which may come before main.
inline bool select_stub_libraries(const char* cupti, const char* nvml, const char* cuda) {
    setenv("GPUDIAG_CUPTI_PATH", cupti, 1);
    setenv("GPUDIAG_NVML_PATH", nvml, 1);
    setenv("GPUDIAG_CUDA_PATH", cuda, 1);
    unsetenv("CUDA_VISIBLE_DEVICES");
    return true;
}

// True when one of the strings holds `needle`.
inline bool contains(const std::vector<std::string>& v, const std::string& needle) {
    return std::any_of(v.begin(), v.end(),
                       [&](const std::string& s) { return s.find(needle) != std::string::npos; });
}

// The strings one per line, for a failed expectation's message.
inline std::string joined(const std::vector<std::string>& v) {
    std::string out;
    for (const auto& s : v) out += s + "\n";
    return out;
}

}  // namespace gpudiag::test
