// SPDX-License-Identifier: Apache-2.0
// The CUDA injection entry point: CUDA_INJECTION64_PATH=/path/libgpudiag.so makes the CUDA
// driver load gpudiag during cuInit and call InitializeInjection(), so `gpudiag run -- ./app`
// diagnoses an unmodified program. The session records to $GPUDIAG_RECORD with this process'
// pid in the name ("%p" places it, else it goes before the extension: every rank and child
// reads the same variable; default gpudiag-<pid>.gpudiag) and, when the program exits, writes
// the text report to
// $GPUDIAG_REPORT (default: stderr; a path ending in .json gets the JSON report).
// Other settings: GPUDIAG_DEEP=1 (allocation call sites), GPUDIAG_NVML_HZ (default 2).
//
// Rules: no CUDA call here (we are inside the driver's initialisation); idempotent; a forked
// child (DataLoader workers) has no gpudiag threads, so it is marked disabled and never touches
// the parent's session; the exit handler runs before CUDA's own teardown, which registered its
// atexit handler earlier (handlers run in reverse order).
#include <gpudiag/report.hpp>
#include <gpudiag/session.hpp>

#include "api/dump_signal.hpp"
#include "api/record_path.hpp"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace gpudiag::detail {
namespace {

std::atomic<bool> g_initialised{false};
std::atomic<bool> g_in_forked_child{false};

void on_fork_child() noexcept {
    g_in_forked_child.store(true);
}

std::string env_or(const char* name, const std::string& fallback) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

Session* g_session = nullptr;  // leaked on purpose: destroyed by no static destructor

void write_report(const Report& report) noexcept {
    try {
        std::string path = env_or("GPUDIAG_REPORT", "");
        bool json = path.size() > 5 && path.compare(path.size() - 5, 5, ".json") == 0;
        std::string text = json ? render_json(report) : render_text(report);
        std::FILE* out = path.empty() ? stderr : std::fopen(path.c_str(), "w");
        if (out == nullptr) {
            std::fprintf(stderr, "gpudiag: cannot write the report to %s\n", path.c_str());
            out = stderr;
        }
        std::fputs(text.c_str(), out);
        if (out != stderr) std::fclose(out);
    } catch (...) {
    }
}

void finish_at_exit() noexcept {
    if (g_in_forked_child.load() || g_session == nullptr) return;
    try {
        (void)g_session->stop();
        auto report = g_session->report();
        if (report.is_ok()) {
            write_report(*report);
        } else {
            std::fprintf(stderr, "gpudiag: no report: %s\n", report.status().to_string().c_str());
        }
    } catch (...) {
    }
}

int initialise() noexcept {
    if (g_in_forked_child.load()) return 0;
    if (g_initialised.exchange(true)) return 1;  // once per process
    try {
        SessionOptions defaults;
        defaults.record_path = "gpudiag.gpudiag";
        auto options = session_options_from_environment(std::move(defaults));
        if (!options.is_ok()) {
            std::fprintf(stderr, "gpudiag: injection disabled: %s\n",
                         options.status().to_string().c_str());
            return 0;
        }
        options->record_path = per_process_record_path(options->record_path, getpid());
        options->properties.emplace_back("capture", "cuda_injection");
        auto session = Session::create(std::move(*options));
        if (!session.is_ok()) {
            std::fprintf(stderr, "gpudiag: injection disabled: %s\n",
                         session.status().to_string().c_str());
            return 0;
        }
        Status st = (*session)->start();
        if (!st.is_ok()) {
            std::fprintf(stderr, "gpudiag: injection disabled: %s\n", st.to_string().c_str());
            return 0;
        }
        g_session = session->release();
        if (const char* spec = std::getenv("GPUDIAG_DUMP_SIGNAL"); spec != nullptr && *spec) {
            const int signum = parse_dump_signal(spec);
            Status installed = signum == 0 ? invalid_argument(std::string("GPUDIAG_DUMP_SIGNAL=") +
                                                              spec + ": not a usable signal")
                                           : install_dump_signal(*g_session, signum);
            if (!installed.is_ok()) {
                std::fprintf(stderr, "gpudiag: no dump signal: %s\n",
                             installed.to_string().c_str());
            }
        }
        (void)pthread_atfork(nullptr, nullptr, &on_fork_child);
        (void)std::atexit(&finish_at_exit);
        return 1;
    } catch (...) {
        return 0;
    }
}

}  // namespace
}  // namespace gpudiag::detail

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) noexcept {
    return gpudiag::detail::initialise();
}
