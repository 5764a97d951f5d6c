// SPDX-License-Identifier: Apache-2.0
// Session: live diagnosis inside a running program (a training loop, an inference service).
//
//     gpudiag::SessionOptions options;
//     options.record_path = "run.gpudiag";
//     auto session = gpudiag::Session::create(options);
//     if (session) {
//         (void)(*session)->start();
//         for (int step = 0; step < n; ++step) {
//             (*session)->step_begin(step);
//             ... work ...
//             (*session)->step_end(step);
//         }
//         (void)(*session)->stop();
//         auto report = (*session)->report();
//         if (report) std::puts(gpudiag::render_text(*report).c_str());
//     }
#pragma once

#include <gpudiag/analyze.hpp>
#include <gpudiag/capture.hpp>
#include <gpudiag/event.hpp>
#include <gpudiag/export.hpp>
#include <gpudiag/report.hpp>
#include <gpudiag/status.hpp>
#include <gpudiag/whatif.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpudiag {

/// What gpudiag may cost the program it runs in (SessionOptions::cost_budget). Its own CPU time
/// (its threads, and its work on the program's threads) is measured over each `period_ms`; past
/// either share it takes in fewer event kinds, one rung a period (API call records first, then GPU
/// activity as a whole), and takes them back, one rung at a time, once its cost has stayed under
/// half the budget for 6 periods (longer each time it had to step down again soon after). Each
/// change is a note in the report, and the time each kind was not taken is in the report's
/// coverage: a finding never rests on data that was not observed. docs/api.md has the ladder.
struct CostBudget {
    /// The most of the program's CPU time gpudiag may take (0.01 = 1 %); 0 = no limit. It never
    /// steps down while it takes under 0.25 % of one core: an idle program makes any share large.
    double cpu_share = 0.01;
    /// The most of a step's time gpudiag's CPU time per step may be (0.005 = 0.5 %), where the
    /// program marks steps (step_begin/step_end); 0 = no limit.
    double step_share = 0.005;
    /// How long each measurement runs (at least one flush period). 0 turns the budget off.
    std::uint32_t period_ms = 10000;
};

struct SessionOptions {
    /// Write a .gpudiag recording here as events arrive ("" = none).
    std::string record_path;
    /// The recording file never grows past this many bytes (0 = no cap; at least 4 MiB): later
    /// events are counted, and the recording says from when it misses them.
    std::uint64_t record_max_bytes = 0;
    /// For services left on: keep only the last `record_window_s` seconds of events instead of
    /// everything, on disk as they arrive in <stem>-window<ext> beside record_path (it survives
    /// a crash, kill -9 or the OOM killer: at most the last flush_period_ms are lost; it holds
    /// one to two windows, each file at most about `record_window_bytes`, and begins with the
    /// state from before it: live allocations and latest levels). It becomes record_path at
    /// stop(); dumps are written beside it
    /// (<stem>-dump-<pid>-<UTC yyyymmddThhmmss>-<n>-<why>, created exclusively) when a memory
    /// watch fires (at most one per 30 s), when an allocation fails, and on dump() /
    /// request_dump(). No dump is refused for want of room: the first of each reason and the 4
    /// latest of each are kept, the oldest others deleted to stay within 8 windows' bytes. A
    /// recording or window file a previous run left is kept as <stem>-previous-<its time> or
    /// <stem>-window-previous-<its time> (the 3 latest), never overwritten. 0 = off. Needs
    /// record_path.
    double record_window_s = 0;
    std::uint64_t record_window_bytes = std::uint64_t{256} << 20;
    /// Capture GPU activity through CUPTI when available (off: framework events and NVML only).
    bool capture_gpu = true;
    /// Opt-in CUPTI callback subscriber for allocation call sites. Takes CUPTI's single
    /// subscriber slot: torch.profiler GPU tracing may then be unavailable in this process.
    bool deep = false;
    /// Sample NVML (utilization, clocks, throttling, power, temperature, ECC) this often; 0 = off.
    double nvml_hz = 2.0;
    /// Events the hand-off holds before it drops (and counts) new ones. Power of two.
    std::uint32_t queue_capacity = 1u << 16;
    /// How often buffered events are flushed to the analyses, in milliseconds.
    std::uint32_t flush_period_ms = 250;
    /// Call `on_report` with a fresh report this often (0 = never): for services left on.
    std::uint32_t report_period_ms = 0;
    std::function<void(const Report&)> on_report;
    /// How long stop() waits for a watch or report callback still running: past it stop()
    /// returns (the report says so) and the session's destructor waits for the callback.
    std::uint32_t stop_callback_wait_ms = 10000;
    /// What gpudiag may cost; past it, it steps down to fewer event kinds (see CostBudget).
    CostBudget cost_budget;
    AnalysisOptions analysis;
    /// Free-form facts about the program for the report, e.g. {"expandable_segments", "true"}.
    std::vector<std::pair<std::string, std::string>> properties;
    /// Answer HTTP here from start() to stop() (docs/http.md): GET /metrics, /report, /healthz,
    /// POST /dump, /capture/pause, /capture/resume. "127.0.0.1:0" = loopback, any free port
    /// (http_status() says which); "" = off. An address other than loopback needs a token. Not
    /// serving is not an error: start() succeeds and http_status() says why.
    std::string http;
    /// What every request must carry as `Authorization: Bearer <token>`; "" = the
    /// GPUDIAG_HTTP_TOKEN environment variable, when set (else none: loopback only).
    std::string http_token;
    /// A collective (Flight Recorder calls handed over by record_flight_recorder()) still in
    /// flight this many seconds after the session first saw it writes one window dump (reason
    /// "collective", once per process group and sequence id; needs record_window_s) and a report
    /// note; the report's "collectives_in_flight" section lists those in flight either way.
    /// 0 = off, the default: how long a collective may rightly take (a barrier behind a
    /// checkpoint save, the first call's connection setup) only the program knows; set it below
    /// the job's own watchdog timeout (torch's default: 10 minutes), so the window is written
    /// before the job is killed.
    double collective_timeout_s = 0;
};

/// Session::http_status(): whether the session answers HTTP, and where.
struct HttpStatus {
    bool serving = false;
    std::string address;  ///< the address bound ("127.0.0.1")
    int port = 0;         ///< the port bound (the one picked, for a port of 0)
    std::string reason;   ///< why not serving ("" when serving, or when not asked to)
};

/// `defaults` with the GPUDIAG_* environment variables that are set applied over them
/// (GPUDIAG_RECORD, GPUDIAG_WINDOW_S, GPUDIAG_NVML_HZ, ...: session_environment_variables() lists
/// them), for services that cannot change code; `gpudiag run -- ./service` reads the same. Errors:
/// kInvalidArgument naming the variable and what it accepts (nothing is silently ignored).
GPUDIAG_API Result<SessionOptions> session_options_from_environment(
    SessionOptions defaults = {}) noexcept;
/// Each variable session_options_from_environment() reads, with the option it sets.
GPUDIAG_API std::vector<std::pair<std::string, std::string>> session_environment_variables();

/// Identifies a watch registered with Session::watch_memory.
using WatchId = std::uint64_t;

/// Never takes its host process down. Every call is noexcept and may be made from the session's
/// callbacks. Host memory running out in the worker costs events, counted, and the report says
/// it is partial. After fork() the child's copy is off: running() is false, calls return
/// kFailedPrecondition or do nothing, and destroying it touches nothing of the parent's (its
/// recording, threads, CUPTI); create a new session in the child to capture it. Bounded: a
/// session's memory does not grow with run length (caps on names, phases, live allocations and
/// steps; the report says when one was reached).
class GPUDIAG_API Session {
public:
    /// Creates a session (nothing is captured until start()). Errors: kInvalidArgument for bad
    /// options.
    static Result<std::unique_ptr<Session>> create(SessionOptions options) noexcept;
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    /// Starts capture at the highest available level. Errors: kFailedPrecondition when already
    /// started or once stopped; kIoError when the recording cannot be created (with a window,
    /// when record_path's folder cannot be written); kResourceExhausted when gpudiag's threads
    /// cannot be made (nothing is left running: start() may be called again). A missing GPU is
    /// not an error: status() says what is captured. gpudiag's threads block every asynchronous
    /// signal and are named gpudiag-*.
    Status start() noexcept;
    /// Flushes, stops capture and closes the recording. May be called from the session's own
    /// report and watch callbacks: the session is stopped when it returns, and the worker ends
    /// once the callback returns. Errors: kFailedPrecondition when not started, or (from a
    /// callback) while another thread is stopping the session.
    Status stop() noexcept;
    [[nodiscard]] bool running() const noexcept;

    /// Step and phase markers. Thread-safety: safe. Callback-safe: yes (never blocks; dropped and
    /// counted when the hand-off is full).
    void step_begin(std::uint64_t step) noexcept;
    void step_end(std::uint64_t step) noexcept;
    void phase_begin(std::string_view name) noexcept;
    void phase_end() noexcept;
    /// The loop is about to wait for / has received its next batch of input.
    void input_wait_begin() noexcept;
    void input_wait_end() noexcept;
    /// The loop waited for a batch it got, from `since_ns` (now_ns() before the fetch) to now.
    /// For fetches that may deliver nothing (the end of an epoch, a worker's error), which are
    /// not waits for input: record the wait once the batch is there, and nothing otherwise.
    void input_waited(std::uint64_t since_ns) noexcept;

    /// Records an event from a framework integration (torch allocator, DataLoader, counters).
    /// Timestamps of 0 are filled with now(). Returns false when dropped (the hand-off full) or
    /// refused: after stop() (the report is final), or a device-memory event that names no
    /// device (Event::device left at kNoDevice; counted, and the report says so). An event of a
    /// kind the cost budget leaves out for now returns true: it is counted, and the report says
    /// for how long that kind was not observed.
    bool record(const Event& event) noexcept;
    /// The program's own device allocation (a cudaMalloc of its own, an arena's block) and its
    /// free, for what CUPTI does not see or when it is off: `device` is the ordinal, `site` where
    /// in the program it happened ("engine.cpp:88 bind_output"; empty when unknown), `bytes` at
    /// the free may be 0 (the allocation's size is known). Thread-safety: safe. Errors:
    /// kInvalidArgument for a negative device or address 0; kFailedPrecondition after stop();
    /// kResourceExhausted when the hand-off is full (the event is dropped and counted).
    Status record_allocation(int device, std::uint64_t address, std::uint64_t bytes,
                             std::string_view site = {}) noexcept;
    Status record_free(int device, std::uint64_t address, std::uint64_t bytes = 0) noexcept;
    /// Hands this process's own PyTorch Flight Recorder dump to the session (the bytes
    /// `_dump_fr_trace_json()` / `_dump_nccl_trace()` return: JSON or pickle), as kCollective
    /// events: the calls new since the previous dump, or further along (see
    /// SessionOptions::collective_timeout_s). Meant to be called again and again (every second
    /// or so); a call in flight that a later dump no longer holds counts as completed. `rank` is
    /// this process's rank in the job (-1: unknown), for the report. Errors:
    /// kFailedPrecondition when not running; kCorruptData for bytes that are no dump;
    /// kResourceExhausted when the hand-off is full (the events not handed over are dropped and
    /// counted).
    Status record_flight_recorder(std::string_view dump, int rank = -1) noexcept;
    /// Interns a string for use in events passed to record().
    StringId intern(std::string_view text) noexcept;
    /// Nanoseconds on the session's clock (CLOCK_MONOTONIC; CUPTI timestamps are mapped to it).
    static std::uint64_t now_ns() noexcept;

    /// Calls `callback(bytes_in_use)` once each time the memory in use on a device rises to
    /// `level_bytes` or above (re-armed when it falls below 95 % of it), where in use is
    /// MemoryMetric::kDeviceUsed: the framework's reserved bytes plus device memory held outside
    /// it, or NVML's figure for the process when larger. Called on the session's callback thread
    /// with no lock held (it may call report(), stop(), or destroy the session: it is then
    /// deleted once the callback returns); it should not block for long. May be called before
    /// start(). Errors: kInvalidArgument for a null callback or a zero level;
    /// kFailedPrecondition after stop().
    Result<WatchId> watch_memory(std::uint64_t level_bytes,
                                 std::function<void(std::uint64_t)> callback) noexcept;
    Status unwatch_memory(WatchId id) noexcept;
    /// Records what the program did about the latest crossing of watch `id` and what it returned
    /// ("empty_cache" and the bytes it freed, "snapshot" and its path, ...): the report's table
    /// of crossings shows it next to what emptying the cache could return at that moment.
    /// Callback-safe: yes. Errors: kNotFound for an unknown watch, or when its latest crossing
    /// already has an action (or it has none).
    Status record_watch_action(WatchId id, std::string_view action, bool ok,
                               std::uint64_t bytes_freed, std::string_view detail) noexcept;

    /// Flushes what is buffered and returns the diagnosis so far (the session keeps running).
    Result<Report> report() noexcept;

    /// Feeds the events of an input gpudiag reads (a recording, a Kineto trace, a memory
    /// snapshot, an Nsight export) through this running session, with their own timestamps,
    /// waiting for the hand-off rather than dropping: a demonstration without a GPU
    /// (examples/cpp/inference_service), or a past run put through live watches and dumps. The
    /// report names the replayed file. Errors: kFailedPrecondition when not running; those of
    /// analyze_files() for the input.
    Status replay(const std::string& path) noexcept;

    /// The allocator what-if (whatif.hpp) over what this session recorded so far, the answer
    /// `gpudiag whatif` gives for its recording: the recording at record_path (flushed first; once
    /// stopped, the closed file), or with record_window_s the window of recent events (replayed
    /// from the blocks live at its start). Works while running and after stop(); the result's
    /// source names the session. It needs the caching allocator's own operations (events of kinds
    /// kBlockAlloc, kBlockFree, kSegmentAlloc, kSegmentFree, kOutOfMemory handed to record(), or a
    /// torch snapshot put through replay()): CUPTI's cudaMalloc-level records are not those.
    /// Errors: kFailedPrecondition when the session was never started, keeps no recording
    /// (record_path ""), or recorded no allocator operations (the message says how to record
    /// them); those of whatif_file() otherwise.
    Result<WhatIfResult> whatif(const WhatIfOptions& options = {}) noexcept;

    /// Writes the window of recent events (SessionOptions::record_window_s) to `path`, or to the
    /// next numbered dump file when empty. Callback-safe: yes. Errors: kFailedPrecondition when
    /// the session keeps no window or is not running; kIoError.
    Status dump(std::string_view path = {}) noexcept;
    /// Asks for a dump of the window at the worker's next tick (within flush_period_ms).
    /// Async-signal-safe: a lock-free atomic store, for a SIGUSR1 handler. Does nothing when
    /// the session keeps no window.
    void request_dump() noexcept;
    /// Capture level, reasons, events and drops.
    [[nodiscard]] CaptureStatus status() const noexcept;
    /// Where the session answers HTTP (SessionOptions::http), or why it does not.
    [[nodiscard]] HttpStatus http_status() const noexcept;

    /// Yields CUPTI to another client (torch.profiler) and takes it back. While paused, NVML,
    /// NVTX and framework events continue.
    Status pause_capture(std::string_view reason) noexcept;
    Status resume_capture() noexcept;

    struct Impl;

private:
    explicit Session(std::unique_ptr<Impl> impl) noexcept;
    std::unique_ptr<Impl> impl_;
};

/// A phase that ends when the scope does (an early return, an exception): for request handlers.
///
///     gpudiag::ScopedPhase phase(session, "handle_request");
class ScopedPhase {
public:
    ScopedPhase(Session& session, std::string_view name) noexcept : session_(session) {
        session_.phase_begin(name);
    }
    ~ScopedPhase() { session_.phase_end(); }
    ScopedPhase(const ScopedPhase&) = delete;
    ScopedPhase& operator=(const ScopedPhase&) = delete;

private:
    Session& session_;
};

/// A device allocation of the program's own that lasts as long as the scope (see
/// Session::record_allocation; failures are counted by the session, not reported here).
class ScopedAllocation {
public:
    ScopedAllocation(Session& session, int device, std::uint64_t address, std::uint64_t bytes,
                     std::string_view site = {}) noexcept
        : session_(session), device_(device), address_(address), bytes_(bytes) {
        (void)session_.record_allocation(device, address, bytes, site);
    }
    ~ScopedAllocation() { (void)session_.record_free(device_, address_, bytes_); }
    ScopedAllocation(const ScopedAllocation&) = delete;
    ScopedAllocation& operator=(const ScopedAllocation&) = delete;

private:
    Session& session_;
    int device_;
    std::uint64_t address_;
    std::uint64_t bytes_;
};

/// A step that ends when the scope does: one per request, batch or iteration.
class ScopedStep {
public:
    ScopedStep(Session& session, std::uint64_t step) noexcept : session_(session), step_(step) {
        session_.step_begin(step_);
    }
    ~ScopedStep() { session_.step_end(step_); }
    ScopedStep(const ScopedStep&) = delete;
    ScopedStep& operator=(const ScopedStep&) = delete;

private:
    Session& session_;
    std::uint64_t step_;
};

}  // namespace gpudiag
