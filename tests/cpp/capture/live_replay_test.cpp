// SPDX-License-Identifier: Apache-2.0
// Real traces of the corpus through the live path (bench/live_replay/cupti_replay.hpp): laid out
// as CUPTI 13.0 records, walked by the real libcupti's parser, decoded by ActivityDecoder inside a
// running Session and analysed there. The live report must diagnose each trace as the offline
// analysis of the same file does.
#include "corpus.hpp"
#include "cupti_replay.hpp"

#include <gpudiag/analyze.hpp>
#include <gpudiag/capture.hpp>
#include <gpudiag/report.hpp>
#include <gpudiag/session.hpp>

#include <cupti.h>
#include <dlfcn.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

namespace gpudiag {
namespace {

// Before anything loads a CUDA library: gpudiag must take the replay libcupti, not a real one.
const Result<replay::ReplayLibrary>& library() {
    static const Result<replay::ReplayLibrary> lib = [] {
        auto l = replay::select_replay_libraries(GPUDIAG_REPLAY_CUPTI, GPUDIAG_REPLAY_CUDA,
                                                 GPUDIAG_REPLAY_NVML);
        (void)probe_capture();  // loads it now, before the real parser maps libcupti.so.13
        return l;
    }();
    return lib;
}
const bool kSelected = library().is_ok();

std::string finding_list(const Report& r) {
    std::string out;
    for (const auto& f : r.findings) {
        out += f.id + ":" + std::string(severity_name(f.severity)) + " ";
    }
    return out;
}

struct LiveRun {
    Report report;
    CaptureStatus status;
};

LiveRun run_live(replay::TraceReplay& trace) {
    SessionOptions o;
    o.nvml_hz = 0;  // the replay carries no NVML samples
    o.flush_period_ms = 20;
    auto session = Session::create(o);
    EXPECT_TRUE(session.is_ok());
    if (!session) return {};
    EXPECT_TRUE((*session)->start().is_ok());
    Status fed = trace.run(**session, *library(), replay::ReplayOptions{});
    EXPECT_TRUE(fed.is_ok()) << fed.to_string();
    EXPECT_TRUE((*session)->stop().is_ok());
    LiveRun run;
    run.status = (*session)->status();
    auto report = (*session)->report();
    EXPECT_TRUE(report.is_ok()) << report.status().to_string();
    if (report) run.report = std::move(*report);
    return run;
}

// CUPTI's timestamps reach the session's clock through its calibration (pairs of readings), the
// host events through the replay's own pair: the two may sit a few microseconds apart.
constexpr double kTolerance = 0.01;

// Figures that differ by more than `tolerance` (relative), section by section.
std::vector<std::string> figure_differences(const Report& offline, const Report& live,
                                            double tolerance) {
    std::vector<std::string> out;
    for (const Section& s : offline.sections) {
        const Section* other = live.section(s.id);
        if (other == nullptr) {
            out.push_back("section " + s.id + " missing live");
            continue;
        }
        for (const Figure& f : s.figures) {
            const Figure* g = other->figure(f.key);
            if (g == nullptr) {
                out.push_back(s.id + "." + f.key + " missing live");
                continue;
            }
            const double scale = std::max(std::fabs(f.value), 1e-9);
            if (std::fabs(f.value - g->value) / scale > tolerance) {
                out.push_back(s.id + "." + f.key + ": offline " + std::to_string(f.value) +
                              ", live " + std::to_string(g->value));
            }
        }
    }
    return out;
}

// Figures the live path cannot give as the trace does, each for one reason:
// * overview.events, overview.span_ns: CUPTI records only the runtime/driver calls of gpudiag's
//   whitelist (api_whitelist.cpp); a trace holds every call (cudaStreamIsCapturing, ...).
// * timeline.idle_launch_share, timeline.idle_cpu_share: the timeline counts the host's time in
//   any API call as launching; the calls live capture does not record count as CPU work there.
// * memory.capacity_bytes: offline from the trace's device properties; live from NVML, which
//   the replay does not sample.
// * The timeline's attribution of host waits and synchronisations to steps (sync_calls, sync_ns,
//   *_wait_*, critical_path_*, replay_error_ns, idle and gap figures): it depends on the order in
//   which host markers and CUPTI records reach the analyses, which live is CUPTI's buffering and
//   the machine's load, not the trace's (seen to move between runs on a loaded machine; one
//   88 ms synchronisation of hta_ns_resolution is counted in a step live and not offline). Only
//   the figures of what ran are compared there (kDeterministic).
bool legitimately_differs(const std::string& figure) {
    static const char* const kKeys[] = {"overview.events", "overview.span_ns",
                                        "timeline.idle_launch_share", "timeline.idle_cpu_share",
                                        "memory.capacity_bytes"};
    return std::any_of(std::begin(kKeys), std::end(kKeys),
                       [&](const char* k) { return figure.rfind(k, 0) == 0; });
}

// The timeline's figures of what ran and when, whatever the arrival order.
bool compared(const std::string& figure) {
    if (figure.rfind("timeline.", 0) != 0) return true;
    static const char* const kDeterministic[] = {
        "timeline.steps:",        "timeline.step_time_ns:",       "timeline.kernels:",
        "timeline.busy_ns:",      "timeline.window_span_ns:",     "timeline.compute_share:",
        "timeline.memory_share:", "timeline.communication_share:"};
    return std::any_of(std::begin(kDeterministic), std::end(kDeterministic),
                       [&](const char* k) { return figure.rfind(k, 0) == 0; });
}

struct Case {
    const char* path;  // below the corpus
    /// Findings only the offline report has, for the reasons above: launch_bound (the host's
    /// time in unrecorded calls was its launch share), one_off_stall (measured from calls made
    /// before the first recorded one).
    std::vector<std::string> offline_only;
};

void PrintTo(const Case& c, std::ostream* os) {
    *os << c.path;
}

std::vector<std::string> finding_ids(const Report& r, const std::vector<std::string>& except) {
    std::vector<std::string> out;
    for (const auto& f : r.findings) {
        if (std::find(except.begin(), except.end(), f.id) != except.end()) continue;
        out.push_back(f.id + ":" + severity_name(f.severity));
    }
    std::sort(out.begin(), out.end());
    return out;
}

using NextRecord = CUptiResult (*)(uint8_t*, size_t, CUpti_Activity**);

// The kinds the replay libcupti's parser reads from `words`, in order.
std::vector<std::uint32_t> parsed_kinds(std::vector<std::uint64_t>& words) {
    void* lib = dlopen(GPUDIAG_REPLAY_CUPTI, RTLD_NOW | RTLD_LOCAL);
    auto next = lib != nullptr
                    ? reinterpret_cast<NextRecord>(dlsym(lib, "cuptiActivityGetNextRecord"))
                    : nullptr;
    std::vector<std::uint32_t> kinds;
    if (next == nullptr) return kinds;
    auto* bytes = reinterpret_cast<std::uint8_t*>(words.data());
    CUpti_Activity* record = nullptr;
    while (next(bytes, words.size() * 8, &record) == CUPTI_SUCCESS && record != nullptr) {
        kinds.push_back(static_cast<std::uint32_t>(record->kind));
    }
    return kinds;
}

class LiveReplay : public ::testing::TestWithParam<Case> {};

// The replay's records are what CUPTI's own parser reads: every one, in order, of its kind.
TEST_P(LiveReplay, TheRealParserReadsEveryRecord) {
    ASSERT_TRUE(kSelected) << library().status().to_string();
    const std::string path = testing::corpus_path(GetParam().path);
    GPUDIAG_REQUIRE_FILES(path);
    auto trace = replay::TraceReplay::load(path);
    ASSERT_TRUE(trace.is_ok()) << trace.status().to_string();
    std::vector<std::uint32_t> laid_out;
    std::vector<std::uint64_t> words = trace->all_records(&laid_out);
    EXPECT_EQ(laid_out.size(), trace->counts().records());
    EXPECT_EQ(parsed_kinds(words), laid_out);
    if (std::string(GPUDIAG_REPLAY_REAL_CUPTI).empty()) {
        std::cout << "no libcupti.so.13 at configure time: the stub's parser read them\n";
    } else {
        EXPECT_STREQ(library()->parser(), GPUDIAG_REPLAY_REAL_CUPTI);
    }
}

TEST_P(LiveReplay, TheLiveReportEqualsTheOfflineOne) {
    ASSERT_TRUE(kSelected) << library().status().to_string();
    const std::string path = testing::corpus_path(GetParam().path);
    GPUDIAG_REQUIRE_FILES(path);
    auto offline = analyze_files({path});
    ASSERT_TRUE(offline.is_ok()) << offline.status().to_string();
    auto trace = replay::TraceReplay::load(path);
    ASSERT_TRUE(trace.is_ok()) << trace.status().to_string();
    ASSERT_GT(trace->counts().records(), 0u);
    LiveRun live = run_live(*trace);
    // Everything handed over arrived, through CUPTI's buffers and the session's hand-off.
    EXPECT_EQ(live.status.level, CaptureLevel::kCuptiActivity);
    EXPECT_EQ(live.status.dropped, 0u);
    EXPECT_EQ(live.status.events, trace->counts().records() + trace->counts().host_events);
    EXPECT_EQ(finding_ids(live.report, {}), finding_ids(*offline, GetParam().offline_only))
        << "offline: " << finding_list(*offline) << "\nlive: " << finding_list(live.report);
    for (const std::string& id : GetParam().offline_only) {
        EXPECT_NE(offline->finding(id), nullptr) << id << " is no longer offline-only: drop it";
    }
    std::vector<std::string> differ;
    for (const auto& d : figure_differences(*offline, live.report, kTolerance)) {
        if (compared(d) && !legitimately_differs(d)) differ.push_back(d);
    }
    EXPECT_TRUE(differ.empty()) << ::testing::PrintToString(differ);
}

INSTANTIATE_TEST_SUITE_P(
    Corpus, LiveReplay,
    ::testing::Values(
        Case{"kineto_traces/hta_nccl_data.json.gz", {}},
        Case{"kineto_traces/hta_ns_resolution_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz", {}},
        Case{"kineto_traces/switchtransformers_batch4_seq128.json", {"launch_bound"}},
        Case{"nsight_sqlite/extrap_con_kernel.sqlite", {"one_off_stall"}}));

}  // namespace
}  // namespace gpudiag
