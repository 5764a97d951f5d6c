// SPDX-License-Identifier: Apache-2.0
// live_replay: gpudiag's CPU cost on real workloads, projected on CPU. Each trace of the corpus
// (or each path given) is replayed through the live path (cupti_replay.hpp) at its own pace, and
// the session's own "cost" section says what gpudiag's threads and its work on other threads
// took; per step and as a share of the trace's own step time (of its window where it has no
// steps). --write FILE writes docs/overhead.md (the table and how it was made); --check exits
// non-zero when an event was lost.
//
// --steps-only hands over, of the host events, only the steps: what a live session of a program
// that marks its steps receives without a profiler running (no CPU operators, no allocator events).
//
//     live_replay [--speed S] [--steps-only] [--write FILE] [--check] [trace ...]
#include "cupti_replay.hpp"

#include <gpudiag/capture.hpp>
#include <gpudiag/report.hpp>
#include <gpudiag/session.hpp>

#include <fmt/format.h>

#include <sys/utsname.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace gpudiag;
namespace fs = std::filesystem;

struct Row {
    std::string workload;
    std::uint64_t events = 0;   // handed to the live path (records + host events)
    std::uint64_t records = 0;  // of which CUPTI records
    double span_s = 0;          // the trace's window
    double steps = 0;           // the live report's
    double step_ns = 0;         // mean step time
    double cpu_ns = 0;          // the cost section's: gpudiag's threads + elsewhere
    double report_cpu_ns = 0;   // one report() on the caller's thread
    double wall_s = 0;          // the replay's
    std::uint64_t dropped = 0;
    std::string skipped;     // why there is no row
    std::string unrecorded;  // calls CUPTI would not record for gpudiag, most first
};

double figure(const Report& r, const char* section, const char* key) {
    const Section* s = r.section(section);
    const Figure* f = s != nullptr ? s->figure(key) : nullptr;
    return f != nullptr ? f->value : 0.0;
}

std::uint64_t thread_cpu_ns() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ULL +
           static_cast<std::uint64_t>(ts.tv_nsec);
}

std::string load_average() {
    std::ifstream in("/proc/loadavg");
    std::string a, b, c;
    in >> a >> b >> c;
    return a + " " + b + " " + c;
}

std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
    }
    return "unknown CPU";
}

Row replay_one(const replay::ReplayLibrary& lib, const std::string& path, double speed,
               bool host_events) {
    Row row;
    row.workload = fs::path(path).filename().string();
    auto trace = replay::TraceReplay::load(path);
    if (!trace) {
        row.skipped = trace.status().to_string();
        return row;
    }
    const replay::ReplayCounts& c = trace->counts();
    if (c.records() == 0) {
        row.skipped = "no GPU activity to replay";
        return row;
    }
    SessionOptions o;
    o.nvml_hz = 0;  // the replay carries no NVML samples
    auto session = Session::create(o);
    if (!session || !(*session)->start().is_ok()) {
        row.skipped = "the session did not start";
        return row;
    }
    replay::ReplayOptions ro;
    ro.speed = speed;
    ro.host_events = host_events;
    const auto wall0 = std::chrono::steady_clock::now();
    Status fed = trace->run(**session, lib, ro);
    (void)(*session)->stop();
    row.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    const std::uint64_t cpu0 = thread_cpu_ns();
    auto report = (*session)->report();
    row.report_cpu_ns = static_cast<double>(thread_cpu_ns() - cpu0);
    if (!fed.is_ok() || !report) {
        row.skipped = !fed.is_ok() ? fed.to_string() : report.status().to_string();
        return row;
    }
    row.events = c.records() + (host_events ? c.host_events : c.host_steps);
    for (const auto& [name, n] : trace->unrecorded_calls()) {
        if (row.unrecorded.size() > 80) break;
        row.unrecorded += fmt::format("{}{} {}", row.unrecorded.empty() ? "" : ", ", name, n);
    }
    row.records = c.records();
    row.span_s = static_cast<double>(c.span_ns()) / 1e9;
    row.steps = figure(*report, "timeline", "steps");
    row.step_ns = figure(*report, "timeline", "step_time_ns");
    row.cpu_ns = figure(*report, "cost", "cpu_ns");
    row.dropped = (*session)->status().dropped +
                  static_cast<std::uint64_t>(figure(*report, "cost", "dropped"));
    return row;
}

std::string table(const std::vector<Row>& rows) {
    std::ostringstream out;
    out << "| workload | events | events/s of the trace | steps | step time | gpudiag CPU per step "
           "| share of step time | one report() |\n"
        << "|---|---:|---:|---:|---:|---:|---:|---:|\n";
    for (const Row& r : rows) {
        if (!r.skipped.empty()) continue;
        const double rate = r.span_s > 0 ? static_cast<double>(r.events) / r.span_s : 0;
        std::string per_step = "–";
        std::string share;
        std::string step_time = "–";
        if (r.steps > 0 && r.step_ns > 0) {
            per_step = fmt::format("{:.0f} µs", r.cpu_ns / r.steps / 1e3);
            share = fmt::format("{:.3f} %", 100.0 * r.cpu_ns / r.steps / r.step_ns);
            step_time = fmt::format("{:.1f} ms", r.step_ns / 1e6);
        } else if (r.span_s < 0.1) {
            share = fmt::format("– (a {:.1f} ms window: the session's fixed cost)", r.span_s * 1e3);
        } else {
            share =
                fmt::format("{:.3f} % of the window (no steps)", 100.0 * r.cpu_ns / 1e9 / r.span_s);
        }
        out << fmt::format("| {} | {} | {:.0f} | {:.0f} | {} | {} | {} | {:.1f} ms |\n", r.workload,
                           r.events, rate, r.steps, step_time, per_step, share,
                           r.report_cpu_ns / 1e6);
    }
    return out.str();
}

// docs/overhead.md: the table and how it was made.
std::string document(const std::string& table, const char* parser, double speed, bool host_events,
                     const std::string& load_before, const std::string& load_after) {
    std::string d;
    d += "# What gpudiag costs: CPU-side projections from real workloads\n\n";
    d +=
        "**These are CPU-side projections, not GPU measurements.** No GPU was used: each trace of "
        "the corpus (`../shared/corpus`) was replayed through gpudiag's live path on CPU by "
        "`bench/live_replay` (written by `live_replay --write docs/overhead.md`). The figures on a "
        "GPU come from `tests/gpu/device_check.sh` the day a GPU runs it.\n\n";
    d += "## How it was measured\n\n";
    d += "* Each trace is read by gpudiag's importers and laid out as the CUPTI 13.0 activity "
         "records a live session receives for it (kernels, copies, memsets, synchronisations, "
         "whitelisted runtime/driver calls, memory records), handed to a running `Session` through "
         "a stand-in libcupti whose buffers are walked by ";
    d += fmt::format("the real libcupti's parser ({}), ", parser);
    d += "then decoded by `ActivityDecoder` on gpudiag's control thread, handed over and analysed "
         "by the session's worker, as in a live run.\n";
    d += speed > 0 ? fmt::format(
                         "* Pace: the trace's own (speed {}): events are handed over when "
                         "the trace says they happened.\n",
                         speed)
                   : std::string("* Pace: as fast as the path takes them.\n");
    d += host_events ? "* Host events of the trace (steps, CPU operators, allocator events) are "
                       "handed over through `Session::record`, as a framework integration would.\n"
                     : "* Of the host events, only the steps are handed over: what a live session "
                       "of a program that marks its steps receives without a profiler running "
                       "(no CPU operators, no allocator events).\n";
    d += "* CPU time: the session's own `cost` section (`cpu_ns`): the CPU clocks of gpudiag's "
         "threads (`CLOCK_THREAD_CPUTIME_ID`) from `start()` to `stop()`, plus its work on other "
         "threads (buffer callbacks, the hand-off, sampled). It includes the session's fixed cost "
         "(starting its threads and CUPTI, the final flush), which dominates the shortest traces. "
         "`one report()` is one report's assembly on the caller's thread, measured apart.\n";
    d += "* Per step: that CPU time over the steps of the live report, as a share of the mean step "
         "time; a trace without steps shows the share of its window (first to last event).\n";
    d += "* Events: what was handed to the live path (CUPTI records and host events); events/s: "
         "those over the trace's window. Runtime calls outside gpudiag's whitelist are not "
         "recorded live and not counted.\n";
    d += fmt::format(
        "* Machine: {} cores of {}, shared with other builds and tests while it ran: "
        "load average {} before, {} after (1, 5, 15 minutes). CPU time, not wall "
        "time, is measured, but a loaded machine still inflates it (caches, "
        "frequency).\n\n",
        std::thread::hardware_concurrency(), cpu_model(), load_before, load_after);
    d += "## Results\n\n" + table;
    d += "\nTraces that have no GPU activity to replay, or that gpudiag reads only as a job of "
         "several files (`param_dlrm_kineto_8ranks.tar.gz`), have no row.\n";
    return d;
}

std::vector<std::string> corpus_traces() {
    std::vector<std::string> out;
    for (const char* dir : {"kineto_traces", "nsight_sqlite"}) {
        const fs::path d = fs::path(GPUDIAG_CORPUS_DIR) / dir;
        std::error_code ec;
        for (const auto& entry : fs::directory_iterator(d, ec)) {
            if (entry.is_regular_file()) out.push_back(entry.path().string());
        }
    }
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    double speed = 1;
    std::string write_to;
    bool check = false;
    bool host_events = true;
    std::vector<std::string> paths;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--speed" && i + 1 < argc) {
            speed = std::stod(argv[++i]);
        } else if (a == "--write" && i + 1 < argc) {
            write_to = argv[++i];
        } else if (a == "--steps-only") {
            host_events = false;
        } else if (a == "--check") {
            check = true;
        } else {
            paths.push_back(a);
        }
    }
    auto lib = replay::select_replay_libraries(GPUDIAG_REPLAY_CUPTI, GPUDIAG_REPLAY_CUDA,
                                               GPUDIAG_REPLAY_NVML);
    if (!lib) {
        std::fprintf(stderr, "%s\n", lib.status().to_string().c_str());
        return 2;
    }
    (void)probe_capture();  // gpudiag takes the replay libcupti before the real parser loads
    if (paths.empty()) paths = corpus_traces();
    const std::string load_before = load_average();
    std::vector<Row> rows;
    int lost = 0;
    for (const std::string& p : paths) {
        rows.push_back(replay_one(*lib, p, speed, host_events));
        const Row& r = rows.back();
        if (!r.skipped.empty()) {
            std::printf("%-70s skipped: %s\n", r.workload.c_str(), r.skipped.c_str());
            continue;
        }
        lost += r.dropped > 0 ? 1 : 0;
        std::printf("%-70s %8llu events, %6.2f s replayed, %8.1f ms gpudiag CPU, %llu dropped\n",
                    r.workload.c_str(), static_cast<unsigned long long>(r.events), r.wall_s,
                    r.cpu_ns / 1e6, static_cast<unsigned long long>(r.dropped));
        if (!r.unrecorded.empty()) std::printf("    not recorded live: %s\n", r.unrecorded.c_str());
        std::fflush(stdout);
    }
    const std::string t = table(rows);
    std::printf(
        "\n%s\nparser: %s\nmachine: %u cores of %s\nload average: %s (before), %s (after)\n",
        t.c_str(), (*lib).parser(), std::thread::hardware_concurrency(), cpu_model().c_str(),
        load_before.c_str(), load_average().c_str());
    if (!write_to.empty()) {
        std::ofstream out(write_to);
        out << document(t, (*lib).parser(), speed, host_events, load_before, load_average());
    }
    return check && lost > 0 ? 1 : 0;
}
