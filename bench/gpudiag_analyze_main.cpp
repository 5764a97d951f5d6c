// SPDX-License-Identifier: Apache-2.0
// gpudiag_analyze: a small driver over gpudiag::analyze_files for benchmarks and scripts, until
// the Python CLI (`gpudiag analyze`) is available everywhere.
//   gpudiag_analyze [--format text|json] [--window steps|hta|all] [--rank N]
//                   [--chrome-trace OUT.json] FILE...
#include <gpudiag/analyze.hpp>
#include <gpudiag/report.hpp>
#include <gpudiag/trace_export.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

int main(int argc, char** argv) {
    gpudiag::AnalysisOptions options;
    std::string format = "text";
    std::vector<std::string> files;
    std::string chrome_trace;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--format" && i + 1 < argc) {
            format = argv[++i];
        } else if (a == "--window" && i + 1 < argc) {
            std::string w = argv[++i];
            if (w == "hta")
                options.window = gpudiag::AnalysisWindow::kHta;
            else if (w == "all")
                options.window = gpudiag::AnalysisWindow::kAll;
            else
                options.window = gpudiag::AnalysisWindow::kSteps;
        } else if (a == "--chrome-trace" && i + 1 < argc) {
            chrome_trace = argv[++i];
        } else if (a == "--rank" && i + 1 < argc) {
            options.rank = std::atoi(argv[++i]);
        } else if (a == "-h" || a == "--help") {
            std::puts(
                "usage: gpudiag_analyze [--format text|json] [--window steps|hta|all] "
                "[--rank N] [--chrome-trace OUT.json] FILE...");
            return 0;
        } else {
            files.push_back(a);
        }
    }
    if (!chrome_trace.empty()) {
        gpudiag::Status st = gpudiag::export_chrome_trace(files, chrome_trace, options);
        if (!st.is_ok()) {
            std::fprintf(stderr, "gpudiag: %s\n", st.to_string().c_str());
            return 2;
        }
    }
    auto report = gpudiag::analyze_files(files, options);
    if (!report) {
        std::fprintf(stderr, "gpudiag: %s\n", report.status().to_string().c_str());
        return 2;
    }
    std::string out =
        format == "json" ? gpudiag::render_json(*report) : gpudiag::render_text(*report);
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
}
