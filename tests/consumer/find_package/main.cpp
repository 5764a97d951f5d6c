// SPDX-License-Identifier: Apache-2.0
// A find_package(gpudiag) consumer: uses the public API end to end and checks the answers.
#include <gpudiag/gpudiag.hpp>

#include <cstdio>
#include <cstring>
#include <vector>

int main() {
    if (std::strcmp(gpudiag::version(), GPUDIAG_VERSION_STRING) != 0) {
        std::fprintf(stderr, "version mismatch: %s vs %s\n", gpudiag::version(),
                     GPUDIAG_VERSION_STRING);
        return 1;
    }
    gpudiag::StringTable strings;
    std::vector<gpudiag::Event> events(2);
    for (int i = 0; i < 2; ++i) {
        events[i].kind = gpudiag::EventKind::kKernel;
        events[i].device = 0;
        events[i].start_ns = 1000u * (i + 1);
        events[i].end_ns = events[i].start_ns + 500;
        events[i].kernel.name = strings.intern("consumer_kernel");
    }
    gpudiag::SourceInfo info;
    info.producer = "consumer-test";
    auto report = gpudiag::analyze_events(events, info, strings);
    if (!report) {
        std::fprintf(stderr, "analyze_events failed: %s\n", report.status().to_string().c_str());
        return 1;
    }
    std::string json = gpudiag::render_json(*report);
    if (json.find("\"consumer-test\"") == std::string::npos) {
        std::fprintf(stderr, "unexpected JSON: %s\n", json.c_str());
        return 1;
    }
    auto missing = gpudiag::analyze_files({"/nonexistent.json"});
    if (missing || missing.status().code() != gpudiag::StatusCode::kNotFound) {
        std::fprintf(stderr, "expected not_found, got %s\n", missing.status().to_string().c_str());
        return 1;
    }
    std::puts("consumer ok");
    return 0;
}
