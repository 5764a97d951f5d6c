// SPDX-License-Identifier: Apache-2.0
// A C++17 consumer: every public header (the umbrella) compiles as C++17, and the parts that do
// not need std::span work: a session, its report in text, JSON and Prometheus, names, errors.
#include <gpudiag/gpudiag.hpp>

#include <cstdio>
#include <string>

static_assert(__cplusplus == 201703L, "linking gpudiag switched this program away from C++17");
static_assert(!GPUDIAG_HAS_SPAN, "C++17 has no std::span");

int main() {
    gpudiag::SessionOptions options;
    options.capture_gpu = false;
    options.nvml_hz = 0;
    auto session = gpudiag::Session::create(options);
    if (!session) {
        std::fprintf(stderr, "create: %s\n", session.status().to_string().c_str());
        return 1;
    }
    if (gpudiag::Status s = (*session)->start(); !s) {
        std::fprintf(stderr, "start: %s\n", s.to_string().c_str());
        return 1;
    }
    (*session)->step_begin(1);
    (*session)->step_end(1);
    (void)(*session)->stop();
    auto report = (*session)->report();
    if (!report) {
        std::fprintf(stderr, "report: %s\n", report.status().to_string().c_str());
        return 1;
    }
    std::string json = gpudiag::render_json(*report, /*compact=*/true);
    auto again = gpudiag::parse_report_json(json);
    if (!again || json.find('\n') != json.size() - 1) {
        std::fprintf(stderr, "compact JSON did not read back\n");
        return 1;
    }
    if (gpudiag::render_prometheus(*report).find("# TYPE gpudiag_findings gauge") ==
        std::string::npos) {
        std::fprintf(stderr, "no Prometheus exposition\n");
        return 1;
    }
    if (std::string(gpudiag::enum_name(gpudiag::InputFormat::kKinetoJson)) != "kineto_json" ||
        gpudiag::format_figure(2.5e6, "ns") != "2.5 ms") {
        std::fprintf(stderr, "names or formatting differ\n");
        return 1;
    }
    std::puts("C++17 consumer ok");
    return 0;
}
