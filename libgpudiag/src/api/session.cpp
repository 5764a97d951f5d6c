// SPDX-License-Identifier: Apache-2.0
// Session: live capture -> bounded channel -> worker thread -> analysis pipeline (analyses, and
// the recording writer or window riding along).
//
// Threads: application threads only push into the channel (never block, never allocate). One
// worker thread owns the sinks: every flush period it flushes the capture backend (with no lock
// held, since CUPTI may call back into us during a flush), drains the channel into the analyzers
// and the recording, checks memory watches, and makes periodic reports. report() and stop() drain
// synchronously under the same sink lock.
#include <gpudiag/recording.hpp>
#include <gpudiag/session.hpp>

#include "analysis/health/stack_rules.hpp"
#include "analysis/memory/memory_ledger.hpp"
#include "analysis/pipeline/analysis_pipeline.hpp"
#include "api/callback_thread.hpp"
#include "api/collective_watch.hpp"
#include "api/dump_files.hpp"
#include "api/flight_recorder_feed.hpp"
#include "api/http_server.hpp"
#include "api/live_capture.hpp"
#include "api/replay_sink.hpp"
#include "api/session_cost.hpp"
#include "api/whatif_file.hpp"
#include "capture/capture_levels.hpp"
#include "core/allocation_site.hpp"
#include "core/clock.hpp"
#include "core/event_channel.hpp"
#include "core/producers.hpp"
#include "importers/open_source.hpp"
#include "recording/recording_window.hpp"
#include "support/own_cpu.hpp"
#include "support/quiet_thread.hpp"

#include <fmt/format.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace gpudiag {
namespace {

std::uint32_t current_tid() noexcept {
    thread_local const auto tid = static_cast<std::uint32_t>(::syscall(SYS_gettid));
    return tid;
}

// The session's memory watches. Levels and hysteresis are the memory ledger's
// (MemoryLedger::add_watch, on the ledger of the session's memory analysis); this class keeps the
// user's callbacks, registers them once the ledger exists (watches may be added before start),
// and queues crossings so that the worker calls them with no lock held: a callback may call
// report() or unwatch_memory(). Every member is guarded by the session's sink lock.
class SessionWatches {
public:
    using Callback = std::function<void(std::uint64_t)>;

    WatchId add(std::uint64_t level_bytes, Callback callback) {
        WatchId id = next_id_++;
        Entry& entry = entries_[id];
        entry.level_bytes = level_bytes;
        entry.callback = std::move(callback);
        if (ledger_ != nullptr) register_entry(id, entry);
        return id;
    }

    bool remove(WatchId id) {
        auto it = entries_.find(id);
        if (it == entries_.end()) return false;
        if (ledger_ != nullptr && it->second.ledger_id != 0) {
            ledger_->remove_watch(it->second.ledger_id);
        }
        entries_.erase(it);
        return true;
    }

    // Null when the session runs without memory analysis: watches then never fire.
    void attach(detail::MemoryLedger* ledger) {
        ledger_ = ledger;
        if (ledger_ == nullptr) return;
        for (auto& [id, entry] : entries_) register_entry(id, entry);
    }

    bool record_action(WatchId id, std::string action, bool ok, std::uint64_t freed,
                       std::string detail) {
        auto it = entries_.find(id);
        if (it == entries_.end() || ledger_ == nullptr || it->second.ledger_id == 0) return false;
        return ledger_->record_watch_action(it->second.ledger_id, std::move(action), ok, freed,
                                            std::move(detail));
    }

    // The crossings since the last call, each with its watch's callback.
    std::vector<std::pair<Callback, std::uint64_t>> take_due() {
        std::vector<std::pair<Callback, std::uint64_t>> out;
        for (const auto& [id, bytes] : due_) {
            auto it = entries_.find(id);
            if (it != entries_.end()) out.emplace_back(it->second.callback, bytes);
        }
        due_.clear();
        return out;
    }

private:
    struct Entry {
        std::uint64_t level_bytes = 0;
        Callback callback;
        int ledger_id = 0;
    };
    // Hysteresis keeps crossings rare; the cap only guards against a pathological flood
    // between two worker ticks.
    static constexpr std::size_t kMaxQueuedCrossings = 1024;

    void register_entry(WatchId id, Entry& entry) {
        MemoryWatch spec;
        spec.device = -1;
        spec.metric = MemoryMetric::kDeviceUsed;
        spec.level_bytes = entry.level_bytes;
        spec.hysteresis_fraction = 0.05;  // re-arm below 95 % of the level
        entry.ledger_id = ledger_->add_watch(spec, [this, id](const MemoryWatchCrossing& c) {
            if (due_.size() < kMaxQueuedCrossings) due_.emplace_back(id, c.value_bytes);
        });
    }

    std::map<WatchId, Entry> entries_;
    std::vector<std::pair<WatchId, std::uint64_t>> due_;
    detail::MemoryLedger* ledger_ = nullptr;
    WatchId next_id_ = 1;
};

// Sessions still running when the process exits (a program that returns from main, or a Python
// interpreter that shuts down, without stop()). An exit handler stops them while the libraries
// they use are still loaded: capture first (its last buffers into the recording), then the
// recording is finished, so it is complete rather than cut off mid-chunk.
class RunningSessions {
public:
    static RunningSessions& instance() {
        static auto* sessions = new RunningSessions;  // leaked: used from the exit handler
        return *sessions;
    }

    void add(Session::Impl* impl) {
        std::lock_guard<std::mutex> lock(mutex_);
        running_.push_back(Entry{impl, ::getpid()});
        if (!handler_registered_) handler_registered_ = std::atexit(&stop_all_at_exit) == 0;
        if (!fork_handlers_registered_) {
            fork_handlers_registered_ =
                ::pthread_atfork(&before_fork, &after_fork_in_parent, &after_fork_in_child) == 0;
        }
    }

    void remove(Session::Impl* impl) {
        std::lock_guard<std::mutex> lock(mutex_);
        running_.erase(std::remove_if(running_.begin(), running_.end(),
                                      [impl](const Entry& e) { return e.impl == impl; }),
                       running_.end());
    }

private:
    static void stop_all_at_exit() noexcept;
    // The list's lock is held across fork() so that the child finds it free and the list whole.
    static void before_fork() noexcept { instance().mutex_.lock(); }
    static void after_fork_in_parent() noexcept { instance().mutex_.unlock(); }
    static void after_fork_in_child() noexcept;

    // A forked child inherits the list and the handler but none of the sessions' threads, and
    // shares their recordings' files: it stops only sessions it started itself.
    struct Entry {
        Session::Impl* impl;
        pid_t pid;
    };
    std::mutex mutex_;
    std::vector<Entry> running_;
    bool handler_registered_ = false;
    bool fork_handlers_registered_ = false;
};

// What the worker could not take in: batches a sink failed on for lack of host memory (or for an
// unexpected error), so the report says what it misses instead of the process going down.
}  // namespace

struct Session::Impl final : detail::EventQueue {
    Impl(SessionOptions o, std::unique_ptr<detail::EventChannel> c)
        : options(std::move(o)), channel_owner(std::move(c)), channel(*channel_owner) {}

    ~Impl() override {
        (void)stop();
        // After stop() from a callback: the worker was joined, the callback may still be
        // running; wait for it before any member goes.
        if (worker.joinable()) worker.join();
        watch_callbacks.stop();
        report_callbacks.stop();
    }

    // API calls made from the session's own callbacks run on its callback thread.
    bool on_callback_thread() const noexcept { return detail::CallbackThread::on_thread_of(this); }
    bool forked_away() const noexcept { return forked_copy.load(std::memory_order_relaxed); }

    Status record_memory(EventKind kind, int device, std::uint64_t address, std::uint64_t bytes,
                         std::string_view site) noexcept {
        Status why = Status::ok();
        if (device < 0 || device >= static_cast<int>(kNoDevice)) {
            why = invalid_argument("device must be a device ordinal (0, 1, ...)");
        } else if (address == 0) {
            why = invalid_argument("address is 0");
        } else if (stopped.load() || forked_away()) {
            why = failed_precondition("the session has stopped: the report is final");
        }
        if (!why.is_ok()) {
            refused_allocations.fetch_add(1, std::memory_order_relaxed);
            return why;
        }
        Event e;
        e.kind = kind;
        e.device = static_cast<std::uint16_t>(device);
        e.flags = static_cast<std::uint8_t>(MemoryKind::kDevice);
        e.memory.address = address;
        e.memory.bytes = bytes;
        e.memory.site = site_name(site);
        e.start_ns = e.end_ns = detail::monotonic_now_ns();
        e.process = pid;
        e.thread = current_tid();
        if (try_push(e)) return Status::ok();
        return resource_exhausted(
            "the session's hand-off is full: the event was dropped and "
            "counted");
    }

    // Events are taken from start() to stop(): before, nothing would analyse them; after, the
    // report is final. A caller learns its event was not recorded (record() returns false).
    bool try_push(const Event& e) noexcept override {
        const detail::SampledCpu cost;  // the program's threads hand events over: our cost too
        if (forked_away() || !accepting.load(std::memory_order_relaxed)) return false;
        // Left out to keep the cost budget: counted, and taken as handled (not a full buffer).
        if (detail::reduction_drops(kinds_off.load(std::memory_order_relaxed), e.kind)) {
            shed_events.fetch_add(1, std::memory_order_relaxed);
            return true;
        }
        return channel.try_push(e);
    }

    // Step times for the budget's share of a step: a step_end() matching the latest
    // step_begin() is timed; with steps overlapping (a service's requests) the timed ones give
    // the mean and every end counts a step.
    void step_began(std::uint64_t step) noexcept {
        step_begin_id.store(step, std::memory_order_relaxed);
        step_begin_ns.store(detail::monotonic_now_ns(), std::memory_order_relaxed);
    }
    void step_ended(std::uint64_t step) noexcept {
        steps_ended.fetch_add(1, std::memory_order_relaxed);
        if (step_begin_id.load(std::memory_order_relaxed) != step) return;
        const std::uint64_t began = step_begin_ns.exchange(0, std::memory_order_relaxed);
        const std::uint64_t now = detail::monotonic_now_ns();
        if (began == 0 || began > now) return;
        step_ns_total.fetch_add(now - began, std::memory_order_relaxed);
        steps_timed.fetch_add(1, std::memory_order_relaxed);
    }

    bool push_marker(EventKind kind, RangeCategory category, StringId name,
                     std::uint64_t id) noexcept {
        if (forked_away()) return false;
        Event e;
        e.kind = kind;
        e.process = pid;
        e.thread = current_tid();
        e.start_ns = e.end_ns = detail::monotonic_now_ns();
        e.range.name = name;
        e.range.category = category;
        e.range.id = id;
        return try_push(e);
    }

    SourceInfo source_info() const {
        SourceInfo info;
        info.producer = detail::kProducerCapture;
        info.pid = pid;
        char host[256] = {};
        if (::gethostname(host, sizeof host - 1) == 0) info.hostname = host;
        info.properties = options.properties;
        // Which driver, framework, cuDNN and CUPTI this process runs on (the stack verdict).
        CaptureStatus capture = backend ? backend->status() : probe_capture();
        detail::add_stack_properties(capture.stack, info.properties);
        if (backend) info.devices = backend->devices();  // each GPU named: model, UUID, PCI
        return info;
    }

    Status start() {
        if (forked_away()) return forked_error();
        std::lock_guard<std::mutex> lifecycle(lifecycle_mutex);
        if (running.load()) return failed_precondition("the session is already running");
        if (stopped_once) {
            return failed_precondition("a session runs once; create a new one to capture again");
        }
        if (!options.record_path.empty()) {
            // A restarted service must not overwrite the evidence of the run before.
            auto kept = detail::DumpFiles::keep_previous(options.record_path);
            if (!kept) return kept.status();
            previous_recording = *kept;
        }
        if (!options.record_path.empty() && options.record_window_s > 0) {
            // The window is written at stop (and dumps beside it): a path that cannot be written
            // fails now, not silently at the end.
            if (Status w = can_create(options.record_path); !w.is_ok()) return w;
            // A window file a crashed run left is its evidence: kept aside, like the recording.
            auto kept = detail::DumpFiles::keep_previous(
                detail::RecordingWindow::window_path(options.record_path));
            if (!kept) return kept.status();
            previous_window = *kept;
            window = std::make_unique<detail::RecordingWindow>(
                options.record_path, options.record_window_s, options.record_window_bytes,
                std::chrono::milliseconds(std::max<std::uint32_t>(options.flush_period_ms, 1)));
            if (Status opened = window->open(); !opened.is_ok()) {
                window.reset();
                return opened;
            }
            dumps = std::make_unique<detail::DumpFiles>(options.record_path, dump_budget_bytes(),
                                                        static_cast<long>(pid));
        } else if (!options.record_path.empty()) {
            RecordingWriterOptions w;
            w.max_file_bytes = options.record_max_bytes;
            writer = std::make_unique<RecordingWriter>(w);
            Status opened = writer->open(options.record_path);
            if (!opened.is_ok()) {
                writer.reset();
                return opened;
            }
        }
        // Every sink gets every batch; one that fails (host memory exhausted) loses that batch
        // alone, counted, and the others keep theirs.
        pipeline = std::make_unique<detail::AnalysisPipeline>(
            options.analysis, detail::AnalyzerBounds::live(),
            detail::AnalysisPipeline::Failures::kIsolate);
        if (writer) pipeline->add_sink(writer.get());
        if (window) pipeline->add_sink(window.get());
        collectives = std::make_unique<detail::CollectiveWatch>(
            strings, static_cast<std::uint64_t>(options.collective_timeout_s * 1e9),
            collective_rank.load());
        pipeline->add_sink(collectives.get());
        if (EventSink* extra = detail::extra_session_sink_for_tests()) pipeline->add_sink(extra);
        {
            std::lock_guard<std::mutex> lock(sink_mutex);
            watches.attach(pipeline->memory_ledger());
        }
        pipeline->begin(source_info(), strings);

        accepting.store(true);
        backend = detail::make_session_capture(options);
        if (backend) {
            Status s = backend->start(*this, strings);
            if (!s.is_ok()) degraded_reason = s.to_string();
        }
        started_ns = detail::monotonic_now_ns();
        cpu_at_start = detail::own_cpu();
        process_cpu_at_start = detail::process_cpu_ns();
        {
            std::lock_guard<std::mutex> lock(sink_mutex);
            (void)governor.observe(cost_sample());  // the first period begins
        }
        running.store(true);
        try {
            watch_callbacks.start(this, "gpudiag-watch");
            report_callbacks.start(this, "gpudiag-report");
            worker = detail::quiet_thread("gpudiag-worker", [this] { worker_loop(); });
        } catch (const std::system_error& e) {
            undo_start();
            return resource_exhausted(std::string("could not start gpudiag's threads (") +
                                      e.what() +
                                      "): the session is not running; start() may "
                                      "be called again");
        }
        RunningSessions::instance().add(this);
        start_http();
        return Status::ok();
    }

    // SessionOptions::http, once the session runs (defined below SessionHttpControl).
    void start_http() noexcept;
    void stop_http() noexcept {
        std::unique_ptr<detail::HttpServer> server;
        {
            std::lock_guard<std::mutex> lock(http_mutex);
            server = std::move(http);
            if (server) http_state.serving = false;
        }
        if (server) server->stop();  // unlocked: a request in flight may read http_status()
    }

    // A start() whose threads could not be made leaves nothing behind: a later start() begins
    // afresh.
    void undo_start() {
        running.store(false);
        accepting.store(false);
        if (backend) backend->stop();
        watch_callbacks.stop();
        report_callbacks.stop();
        {
            std::lock_guard<std::mutex> lock(sink_mutex);
            watches.attach(nullptr);
            struct Discard final : EventSink {
                void consume(std::span<const Event> /*events*/) override {}
            } discard;
            while (channel.drain(discard) > 0) {
            }
        }
        backend.reset();
        pipeline.reset();
        writer.reset();
        window.reset();
        dumps.reset();
        collectives.reset();
        degraded_reason.clear();
    }

    // A file can be created at `path` (its folder exists and is writable, the file is not a
    // folder or read-only).
    static Status can_create(const std::string& path) {
        const std::string folder =
            path.find('/') == std::string::npos ? "." : path.substr(0, path.find_last_of('/') + 1);
        if (::access(folder.c_str(), W_OK) != 0) {
            return io_error(path + ": cannot be written (" + std::strerror(errno) + ")");
        }
        struct stat st {};
        if (::stat(path.c_str(), &st) == 0 &&
            (S_ISDIR(st.st_mode) || ::access(path.c_str(), W_OK) != 0)) {
            return io_error(path + ": cannot be written (a folder, or read-only)");
        }
        return Status::ok();
    }

    Status stop() {
        if (forked_away()) return forked_error();
        std::unique_lock<std::mutex> lifecycle(lifecycle_mutex, std::defer_lock);
        // From a callback, another thread may be inside stop() waiting for this very callback.
        if (on_callback_thread()) {
            if (!lifecycle.try_lock()) {
                return failed_precondition("another thread is stopping or starting the session");
            }
        } else {
            lifecycle.lock();
        }
        Status st = stop_locked();
        RunningSessions::instance().remove(this);
        return st;
    }

    // At process exit (the registry's lock held, so the session cannot be destroyed meanwhile):
    // a thread stuck inside start() or stop() must not hang the exit, so the wait is bounded.
    void stop_at_exit() noexcept {
        try {
            // Polled rather than a timed lock: plain try_lock is what every sanitizer models.
            std::unique_lock<std::mutex> lifecycle(lifecycle_mutex, std::defer_lock);
            auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
            while (!lifecycle.try_lock()) {
                if (std::chrono::steady_clock::now() >= deadline) return;
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
            (void)stop_locked(/*at_exit=*/true);
        } catch (...) {
        }
    }

    static Status forked_error() {
        return failed_precondition(
            "this process was forked from the one that started the session: the session is the "
            "parent's; create a new one here to capture this process");
    }

    // From a callback the stop is complete when stop() returns, except that the callback thread
    // ends only after the callback returns; the destructor joins it.
    Status stop_locked(bool at_exit = false) {
        if (!running.load()) return failed_precondition("the session is not running");
        stop_http();                   // no request sees a half-stopped session
        if (backend) backend->stop();  // delivers its last buffers into the channel
        accepting.store(false);        // from here the report is final
        {
            std::lock_guard<std::mutex> lock(wake_mutex);
            running.store(false);
        }
        wake.notify_all();
        if (worker.joinable()) {
            // The worker runs no user code; at exit its wait is bounded all the same.
            if (at_exit && !worker_finished_within(std::chrono::seconds(5))) {
                worker.detach();
            } else {
                worker.join();
            }
        }
        end_sinks();
        stop_callbacks(at_exit);
        stopped_once = true;
        stopped.store(true);
        return Status::ok();
    }

    // After the sinks: a running callback may be waiting for them (report()). At exit a callback
    // stuck for good (one waiting for a Python interpreter that is gone) is let go; otherwise
    // stop() waits stop_callback_wait_ms for it and returns, saying so, and the destructor waits
    // the rest.
    void stop_callbacks(bool at_exit) {
        if (at_exit) {
            watch_callbacks.stop(std::chrono::milliseconds(5000));
            report_callbacks.stop(std::chrono::milliseconds(5000));
            return;
        }
        if (on_callback_thread()) {  // the caller's own callback cannot be waited for
            watch_callbacks.stop_within(std::chrono::milliseconds(0));
            report_callbacks.stop_within(std::chrono::milliseconds(0));
            return;
        }
        const std::chrono::milliseconds wait(options.stop_callback_wait_ms);
        const auto deadline = std::chrono::steady_clock::now() + wait;
        const bool watch_ended = watch_callbacks.stop_within(wait);
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            std::max(deadline - std::chrono::steady_clock::now(),
                     std::chrono::steady_clock::duration::zero()));
        const bool report_ended = report_callbacks.stop_within(left);
        if (watch_ended && report_ended) return;
        std::lock_guard<std::mutex> lock(sink_mutex);
        stop_abandoned = fmt::format(
            "stop() waited {} ms for the program's {} callback, still running, and returned "
            "without it; the session is destroyed only once it returns.",
            wait.count(), watch_ended ? "report" : "watch");
    }

    void end_sinks() {
        std::lock_guard<std::mutex> lock(sink_mutex);
        drain_locked();
        final_summary = summary();
        final_cost = measure_cost();
        pipeline->end(final_summary);
        ended = true;
        ended_ns = detail::monotonic_now_ns();
        if (writer) {
            Status closed = writer->close();
            if (!closed.is_ok()) degraded_reason = closed.to_string();
        }
        if (window) {
            Status written = window->finish(final_summary);
            if (!written.is_ok()) degraded_reason = written.to_string();
        }
    }

    SourceSummary summary() const {
        SourceSummary s;
        auto stats = channel.stats();
        s.events = stats.pushed;
        s.dropped = stats.dropped;  // the hand-off's refusals, from every source
        std::uint64_t untimed = 0;
        if (backend) {
            CaptureStatus capture = backend->status();
            s.dropped += capture.dropped;  // lost before the hand-off (CUPTI, NVTX)
            untimed = capture.kernels_without_timing;
        }
        if (s.dropped > 0) {
            s.notes.push_back(fmt::format(
                "{} events were dropped because the hand-off or capture buffers were full; raise "
                "SessionOptions::queue_capacity or flush more often.",
                s.dropped));
        }
        if (untimed > 0) {
            s.notes.push_back(fmt::format(
                "{} kernels were seen without timing (CUPTI's device timestamp buffer was full): "
                "they are missing from GPU busy time.",
                untimed));
        }
        if (!degraded_reason.empty()) s.notes.push_back("Capture degraded: " + degraded_reason);
        add_loss_coverage(s);
        detail::add_budget_losses(governor, detail::monotonic_now_ns(), s.missing);
        return s;
    }

    // Events the report never saw make it partial: a share of drops that could hide a finding,
    // and anything the worker could not take in.
    void add_loss_coverage(SourceSummary& s) const {
        const std::uint64_t offered = s.events + s.dropped;
        if (s.dropped > 0 && s.dropped * kDropsThatMakeAPartialReport >= offered) {
            s.missing.push_back(fmt::format(
                "{} of {} events ({:.1f} %) were dropped before analysis (full buffers): the "
                "report describes the rest",
                s.dropped, offered,
                100.0 * static_cast<double>(s.dropped) / static_cast<double>(offered)));
        }
        if (pipeline) pipeline->add_failure_losses(s.missing);
    }

    void note_intake_failure(std::size_t events, bool out_of_memory, const char* what) noexcept {
        if (pipeline) pipeline->note_failure(events, out_of_memory, what);
    }

    // At most one channel's worth per call: everything queued when the call began, never more,
    // so producers that keep the channel full cannot hold sink_mutex for good (report(), stop()
    // and the periodic reports would starve behind the worker).
    void drain_locked() {
        std::size_t budget = channel.capacity();
        while (budget > 0) {
            const std::size_t n = channel.drain(*pipeline, std::min<std::size_t>(budget, 4096));
            if (n == 0) break;
            budget -= n;
        }
    }

    bool worker_finished_within(std::chrono::seconds limit) {
        std::unique_lock<std::mutex> lock(wake_mutex);
        return wake.wait_for(lock, limit, [this] { return worker_finished; });
    }

    void worker_loop() {
        run_worker();
        {
            std::lock_guard<std::mutex> lock(wake_mutex);
            worker_finished = true;
        }
        wake.notify_all();
    }

    void run_worker() {
        auto period =
            std::chrono::milliseconds(std::max<std::uint32_t>(options.flush_period_ms, 1));
        auto next_report =
            std::chrono::steady_clock::now() + std::chrono::milliseconds(options.report_period_ms);
        while (running.load()) {
            {
                std::unique_lock<std::mutex> lock(wake_mutex);
                wake.wait_for(lock, period, [this] { return !running.load(); });
            }
            // No exception may leave this thread (the runtime would end the process): a tick that
            // fails is counted and the next one tries again.
            try {
                worker_tick(next_report);
            } catch (const std::bad_alloc&) {
                note_intake_failure(0, true, "out of host memory");
            } catch (const std::exception& e) {
                note_intake_failure(0, false, e.what());
            } catch (...) {
                note_intake_failure(0, false, "an unknown error");
            }
        }
    }

    void worker_tick(std::chrono::steady_clock::time_point& next_report) {
        if (backend) backend->flush();  // no lock held: CUPTI may re-enter
        std::vector<std::pair<SessionWatches::Callback, std::uint64_t>> due;
        const detail::CaptureReduction* rung = nullptr;
        {
            std::lock_guard<std::mutex> lock(sink_mutex);
            if (ended) return;  // stopped from a callback
            drain_locked();
            rung = keep_budget_locked();
            due = watches.take_due();
            if (window) dump_if_due_locked(!due.empty());
            watch_collectives_locked();
            flush_recording_if_due_locked();
        }
        // The capture itself makes less (or again) too; unlocked, as flush() is.
        if (backend && rung != nullptr) backend->reduce(*rung);
        for (auto& [callback, bytes] : due) {
            (void)watch_callbacks.post(
                [callback = std::move(callback), bytes = bytes] { callback(bytes); });
        }
        if (options.report_period_ms > 0 && options.on_report && running.load() &&
            std::chrono::steady_clock::now() >= next_report) {
            next_report += std::chrono::milliseconds(options.report_period_ms);
            // One periodic report at a time: while a slow callback holds the last one, the next
            // are skipped (counted), not queued.
            if (report_pending.exchange(true)) {
                reports_skipped.fetch_add(1, std::memory_order_relaxed);
            } else if (!report_callbacks.post([this] { periodic_report(); })) {
                report_pending.store(false);
            }
        }
    }

    // On the callback thread.
    void periodic_report() {
        struct Done {
            std::atomic<bool>& pending;
            ~Done() { pending.store(false); }
        } done{report_pending};
        auto r = make_report();
        if (r) options.on_report(*r);
    }

    Result<Report> make_report() {
        if (forked_away()) return forked_error();
        if (backend && running.load()) backend->flush();
        std::lock_guard<std::mutex> lock(sink_mutex);
        if (!analyzers_ready()) return failed_precondition("the session was never started");
        drain_locked();
        const SourceSummary capture = ended ? final_summary : summary();
        Report report = pipeline->assemble(source_info(), capture, capture.events);
        if (auto st = status(); st.level < CaptureLevel::kCuptiActivity) {
            report.notes.push_back(std::string("Capture level: ") + capture_level_name(st.level) +
                                   "; GPU activity was not observed directly.");
            for (const auto& r : st.reasons) report.notes.push_back(r);
        }
        add_cost(report);
        add_collectives(report);
        add_cap_notes(report);
        add_window_notes(report);
        add_callback_notes(report);
        add_http_note(report);
        {
            std::lock_guard<std::mutex> replay_lock(replays_mutex);
            for (const auto& r : replays) report.notes.push_back(r);
        }
        return report;
    }

    bool analyzers_ready() const { return pipeline != nullptr && pipeline->began(); }

    // What the session cost, measured now (or at stop, once stopped).
    detail::SessionCost measure_cost() const {
        detail::SessionCost c;
        c.cpu_at_start = cpu_at_start;
        c.cpu_now = detail::own_cpu();
        c.process_cpu_at_start_ns = process_cpu_at_start;
        c.process_cpu_now_ns = detail::process_cpu_ns();
        c.wall_ns = detail::monotonic_now_ns() - std::min(started_ns, detail::monotonic_now_ns());
        const auto stats = channel.stats();
        c.events = stats.pushed;
        c.dropped = stats.dropped;
        c.queue_bytes = channel.capacity() * sizeof(Event);
        c.names_bytes = strings.bytes();
        c.window_disk_bytes = window ? window->bytes_on_disk() : 0;
        c.budget_on = governor.enabled();
        c.budget = options.cost_budget;
        c.budget_rung = governor.rung();
        c.budget_changes = governor.change_count();
        c.shed_events = shed_events.load(std::memory_order_relaxed);
        return c;
    }

    detail::CostSample cost_sample() const {
        detail::CostSample s;
        s.now_ns = detail::monotonic_now_ns();
        const detail::OwnCpu own = detail::own_cpu();
        s.own_cpu_ns = own.threads_ns + own.elsewhere_ns;
        s.process_cpu_ns = detail::process_cpu_ns();
        s.steps_ended = steps_ended.load(std::memory_order_relaxed);
        s.steps_timed = steps_timed.load(std::memory_order_relaxed);
        s.step_ns = step_ns_total.load(std::memory_order_relaxed);
        return s;
    }

    // SessionOptions::cost_budget, at every worker tick: the governor judges each period and
    // the session takes in what the rung it names allows. Leaving GPU activity out altogether is
    // marked as a pause of capture, so the timeline counts that time unobserved, not idle.
    // Returns the new rung when it changed, for the capture to follow.
    const detail::CaptureReduction* keep_budget_locked() {
        if (!governor.enabled() || !running.load()) return nullptr;
        push_budget_markers_locked();
        const auto change = governor.observe(cost_sample());
        if (!change) return nullptr;
        const auto ladder = detail::capture_reductions();
        const detail::CaptureReduction& from = ladder[change->from];
        const detail::CaptureReduction& to = ladder[change->to];
        if (to.gpu_activity_off && !from.gpu_activity_off) {
            kinds_off.store(to.kinds_off, std::memory_order_relaxed);
            queue_budget_marker_locked(EventKind::kCapturePaused, change->at_ns);
        } else if (from.gpu_activity_off && !to.gpu_activity_off) {
            queue_budget_marker_locked(EventKind::kCaptureResumed, change->at_ns);
            kinds_off.store(to.kinds_off, std::memory_order_relaxed);
        } else {
            kinds_off.store(to.kinds_off, std::memory_order_relaxed);
        }
        return &to;
    }

    void queue_budget_marker_locked(EventKind kind, std::uint64_t at_ns) {
        Event e;
        e.kind = kind;
        e.process = pid;
        e.thread = current_tid();
        e.start_ns = e.end_ns = at_ns;
        e.annotation.text = strings.intern("gpudiag's cost budget (SessionOptions::cost_budget)");
        if (budget_markers.size() < kMaxBudgetMarkers) budget_markers.push_back(e);
        push_budget_markers_locked();
    }

    // In order, past the budget's filter; one the full hand-off refuses is tried again at the
    // next tick, with its own time, so that no unobserved window is lost to a full buffer.
    void push_budget_markers_locked() {
        std::size_t pushed = 0;
        while (pushed < budget_markers.size() && channel.try_push(budget_markers[pushed])) {
            ++pushed;
        }
        budget_markers.erase(budget_markers.begin(),
                             budget_markers.begin() + static_cast<std::ptrdiff_t>(pushed));
    }

    void add_cost(Report& report) const {
        Section cost = detail::cost_section(ended ? final_cost : measure_cost(), report);
        const std::string note = detail::cost_note(cost);
        if (!note.empty()) report.notes.push_back(note);
        for (const auto& change : governor.changes()) {
            report.notes.push_back(detail::budget_change_note(change, started_ns));
        }
        if (const auto more = governor.change_count() - governor.changes().size(); more > 0) {
            report.notes.push_back(fmt::format(
                "gpudiag changed its capture {} more times to keep its cost budget (the first {} "
                "are above).",
                more, governor.changes().size()));
        }
        report.sections.push_back(std::move(cost));
    }

    // A recording written whole goes to disk at least every kRecordingFlushPeriod, not only
    // when a chunk fills: a slow service killed without warning loses seconds, not hours, and
    // `gpudiag run --report-every` reads the run so far.
    // A window goes to disk at every tick: it exists for the crash.
    void flush_recording_if_due_locked() {
        if (window) {
            Status flushed = window->flush();
            if (!flushed.is_ok()) last_dump_error = flushed.to_string();
            return;
        }
        if (!writer) return;
        const auto now = std::chrono::steady_clock::now();
        if (now < next_recording_flush) return;
        next_recording_flush = now + kRecordingFlushPeriod;
        (void)writer->flush();  // a failure is sticky: close() reports it
    }

    // ---- the window of recent events (SessionOptions::record_window_s) ----

    // A dump when asked (request_dump, from a signal handler too), when an allocation failed,
    // or when a watch fired. None is refused for want of a slot: DumpFiles spaces a flapping
    // watch's dumps and deletes old ones to keep within its budget.
    void dump_if_due_locked(bool watch_fired) {
        const char* why = dump_requested.exchange(false)      ? "requested"
                          : window->take_allocation_failure() ? "oom"
                          : watch_fired                       ? "watch"
                                                              : nullptr;
        if (why == nullptr || !dumps->due(why, std::chrono::steady_clock::now())) return;
        Status s = write_window_locked(dumps->next_path(why), why);
        if (!s.is_ok()) last_dump_error = s.to_string();
    }

    // A numbered dump is created exclusively (evidence on disk is never overwritten); a path the
    // caller names, or record_path at stop, is theirs to reuse.
    Status write_window_locked(const std::string& path, const char* why, bool numbered = true) {
        RecordingWriterOptions w;
        w.max_file_bytes = options.record_max_bytes;
        w.exclusive = numbered;
        Status s = window->write(path, ended ? final_summary : summary(), w);
        if (!s.is_ok()) {
            ++dumps_failed;
            return s;
        }
        if (numbered) dumps->written(path, why);
        return s;
    }

    // SessionOptions::collective_timeout_s: a collective in flight past it writes the window
    // once (its (group, seq) is overdue from then on), as request_dump() would.
    void watch_collectives_locked() {
        if (!collectives) return;
        const auto overdue = collectives->newly_overdue(detail::monotonic_now_ns());
        if (overdue.empty()) return;
        if (!window) {
            collective_dump_note =
                "no window was written: the session keeps none (set record_window_s and "
                "record_path)";
            return;
        }
        const std::string path = dumps->next_path("collective");
        Status s = write_window_locked(path, "collective");
        collective_dump_note = s.is_ok() ? "the window was written to " + path
                                         : "writing the window failed: " + s.to_string();
        if (!s.is_ok()) last_dump_error = s.to_string();
    }

    void add_collectives(Report& report) const {
        if (!collectives) return;
        if (!collectives->seen_any()) {
            if (options.collective_timeout_s > 0) {
                report.notes.push_back(
                    "collective_timeout_s is set, but no collective was handed to the session "
                    "(record_flight_recorder(); the torch integration does it once "
                    "torch.distributed is up with TORCH_FR_BUFFER_SIZE set): none was watched.");
            }
            return;
        }
        // After stop() a collective's age is as of the stop: the report no longer grows.
        report.sections.push_back(
            collectives->section(ended ? ended_ns : detail::monotonic_now_ns()));
        for (const auto& line : collectives->overdue_notes()) {
            report.notes.push_back(
                fmt::format("Collective in flight past collective_timeout_s ({:g} s): {}; {}.",
                            options.collective_timeout_s, line, collective_dump_note));
        }
    }

    // A dump to the next numbered file (POST /dump): the file written.
    Result<std::string> dump_numbered() {
        if (forked_away()) return forked_error();
        if (!window) {
            return failed_precondition(
                "the session keeps no window of recent events (set SessionOptions::"
                "record_window_s and record_path)");
        }
        if (backend && running.load()) backend->flush();
        std::lock_guard<std::mutex> lock(sink_mutex);
        if (ended) return failed_precondition("the session has stopped");
        drain_locked();
        std::string path = dumps->next_path("requested");
        if (Status s = write_window_locked(path, "requested"); !s.is_ok()) return s;
        return path;
    }

    // What a live what-if reads (`path`), and how it names it: the recording, flushed now (a
    // reader stops cleanly at its last whole chunk), closed once stopped; a window is written to
    // a file of its own first (`temporary`: the caller removes it, written whole or not).
    Status whatif_input(std::string& path, std::string& label, bool& temporary) {
        if (forked_away()) return forked_error();
        if (options.record_path.empty()) {
            return failed_precondition(
                "a live what-if replays the session's recording, and this session keeps none: "
                "set SessionOptions::record_path (Python: record=PATH; GPUDIAG_RECORD)");
        }
        if (backend && running.load()) backend->flush();
        std::lock_guard<std::mutex> lock(sink_mutex);
        if (!analyzers_ready()) return failed_precondition("the session was never started");
        drain_locked();
        path = options.record_path;
        label = "the session recording " + options.record_path;
        if (ended) return Status::ok();
        if (window) {
            label = fmt::format("the session window ({:.1f} s, recording {})",
                                window->seconds_held(), options.record_path);
            path = fmt::format("{}-whatif-{}-{}.tmp", options.record_path, pid,
                               whatif_files.fetch_add(1));
            temporary = true;
            return window->write(path, summary(), RecordingWriterOptions{});
        }
        return writer ? writer->flush() : Status::ok();
    }

    Status dump(std::string_view path) {
        if (forked_away()) return forked_error();
        if (!window) {
            return failed_precondition(
                "the session keeps no window of recent events (set SessionOptions::"
                "record_window_s and record_path)");
        }
        if (backend && running.load()) backend->flush();
        std::lock_guard<std::mutex> lock(sink_mutex);
        if (ended) return failed_precondition("the session has stopped");
        drain_locked();
        if (path.empty()) return write_window_locked(dumps->next_path("requested"), "requested");
        return write_window_locked(std::string(path), "requested", false);
    }

    void add_window_notes(Report& report) const {
        if (!previous_recording.empty()) {
            report.notes.push_back("The recording a previous run left at " + options.record_path +
                                   " was kept as " + previous_recording + ".");
        }
        if (!previous_window.empty()) {
            report.notes.push_back(
                "The window file a previous run left (it ended without stop(): a crash or a kill) "
                "was kept as " +
                previous_window + ".");
        }
        if (!window) return;
        std::string note = fmt::format(
            "Recording: {} holds the last {:.1f} s of events (a window of {:g} s keeps {:g} s to "
            "{:g} s; {} MiB on disk, written every {} ms, so a crash loses at most the last {} "
            "ms) and goes to {} at stop; {} dumps written",
            window->path(), window->seconds_held(), window->seconds(), window->seconds(),
            2 * window->seconds(), window->bytes_on_disk() >> 20, options.flush_period_ms,
            options.flush_period_ms, options.record_path, dumps->written_count());
        const auto kept = dumps->kept();
        const std::size_t listed = std::min<std::size_t>(kept.size(), 4);
        for (std::size_t i = kept.size() - listed; i < kept.size(); ++i) {
            note += (i == kept.size() - listed ? ", the latest: " : ", ") + kept[i];
        }
        note += ".";
        if (dumps->deleted_count() > 0) {
            note += fmt::format(
                " {} older ones were deleted to keep the first of each reason, the {} latest "
                "and {} MiB at most.",
                dumps->deleted_count(), detail::DumpFiles::kRecentPerReason,
                dump_budget_bytes() >> 20);
        }
        if (dumps->spaced_out() > 0) {
            note += fmt::format(" A watch that fired again within {} s wrote no dump ({} times).",
                                detail::DumpFiles::kWatchDumpSpacing.count(), dumps->spaced_out());
        }
        if (!last_dump_error.empty()) note += " The last failed dump: " + last_dump_error;
        report.notes.push_back(std::move(note));
    }

    // What all of a session's dumps may take on disk: eight windows' worth.
    std::uint64_t dump_budget_bytes() const { return 8 * options.record_window_bytes; }

    CaptureStatus status() const {
        if (forked_away()) {
            CaptureStatus s;
            s.reasons.emplace_back(
                "this process was forked from the one that started the session: nothing is "
                "captured here");
            return s;
        }
        CaptureStatus s = backend ? backend->status() : probe_capture();
        s.capturing = running.load();
        auto stats = channel.stats();
        s.events = stats.pushed;
        s.dropped += stats.dropped;
        return s;
    }

    // A session left on for days must not grow with the names it is given (a phase or site per
    // request): at most 16 MiB of text in 256 Ki names, some 35 MiB in all; distinct phase
    // names are held to far fewer, as each one is a row of the report.
    static constexpr std::size_t kMaxNameBytes = std::size_t{16} << 20;
    static constexpr std::size_t kMaxNames = std::size_t{1} << 18;
    static constexpr std::uint32_t kMaxPhaseNames = 4096;
    static constexpr std::uint64_t kMaxSiteNames =
        16384;  // well under the ledger's 65536 tracked sites

    // The id for phase `name`: past kMaxPhaseNames distinct names, the shared "other phases".
    StringId phase_name(std::string_view name) noexcept {
        StringId id = strings.find(name);
        if (id != kNoString || name.empty()) return id;
        if (phase_names.fetch_add(1, std::memory_order_relaxed) < kMaxPhaseNames) {
            return strings.intern(name);
        }
        phase_names_past_cap.fetch_add(1, std::memory_order_relaxed);
        return strings.intern(kOtherPhases);
    }
    static constexpr std::string_view kOtherPhases = "<other phases: past the cap on names>";

    // The id for allocation site `site`: past kMaxSiteNames distinct sites (a request id in
    // each, say), the numbers that vary are folded, so a leak's site keeps its place in the
    // report instead of vanishing into the table's overflow.
    StringId site_name(std::string_view site) noexcept {
        if (site.empty()) return kNoString;
        StringId id = strings.find(site);
        if (id != kNoString) return id;
        if (site_names.fetch_add(1, std::memory_order_relaxed) < kMaxSiteNames) {
            return strings.intern(site);
        }
        site_names_past_cap.fetch_add(1, std::memory_order_relaxed);
        try {
            return strings.intern(detail::site_without_numbers(site));
        } catch (...) {
            return StringTable::kOverflowString;
        }
    }

    void add_callback_notes(Report& report) const {
        const std::uint64_t skipped = reports_skipped.load(std::memory_order_relaxed);
        const std::uint64_t dropped = watch_callbacks.dropped() + report_callbacks.dropped();
        if (!stop_abandoned.empty()) report.notes.push_back(stop_abandoned);
        if (const auto n = deviceless_memory_events.load(std::memory_order_relaxed); n > 0) {
            report.notes.push_back(fmt::format(
                "{} device-memory events named no device (Event::device left at kNoDevice) and "
                "were refused: the memory analysis books memory per device. "
                "Session::record_allocation() names one.",
                n));
        }
        if (const auto n = refused_allocations.load(std::memory_order_relaxed); n > 0) {
            report.notes.push_back(fmt::format(
                "{} of the program's record_allocation()/record_free() calls were refused (a "
                "negative device, address 0, or after stop()); each call returned why.",
                n));
        }
        if (const std::uint64_t threw = watch_callbacks.threw() + report_callbacks.threw();
            threw > 0) {
            report.notes.push_back(fmt::format(
                "Callbacks: {} of the program's watch or report callbacks ended in an exception; "
                "gpudiag caught it (it never lets one reach its threads' end) and went on.",
                threw));
        }
        if (skipped == 0 && dropped == 0) return;
        report.notes.push_back(fmt::format(
            "Callbacks: {} periodic reports were skipped while the previous one's callback still "
            "ran, and {} callbacks were not run ({} at most wait; or the session stopped). Capture "
            "went on meanwhile: callbacks run on a thread of their own.",
            skipped, dropped, detail::CallbackThread::kMaxQueued));
    }

    void add_http_note(Report& report) const {
        std::lock_guard<std::mutex> lock(http_mutex);
        if (!http_state.reason.empty()) {
            report.notes.push_back("HTTP control (SessionOptions::http = " + options.http +
                                   ") is not served: " + http_state.reason);
        }
    }

    void add_cap_notes(Report& report) const {
        if (const auto past = phase_names_past_cap.load(std::memory_order_relaxed); past > 0) {
            report.notes.push_back(fmt::format(
                "{} phases had names past the first {} distinct ones and were recorded as \"{}\" "
                "(names unique per request or per item are better as one phase name).",
                past, kMaxPhaseNames, kOtherPhases));
        }
        if (const auto past = site_names_past_cap.load(std::memory_order_relaxed); past > 0) {
            report.notes.push_back(fmt::format(
                "{} allocation sites came past the first {} distinct ones: their numbers were "
                "folded into '#' (\"svc.cpp:88 request #\"), so a site that differs per request "
                "is one site.",
                past, kMaxSiteNames));
        }
        if (const auto refused = strings.overflowed(); refused > 0) {
            report.notes.push_back(fmt::format(
                "{} names (kernels, sites, phases) came after the session's name table was full "
                "({} names, {} MiB of text) and show as \"<strings dropped>\".",
                refused, kMaxNames, kMaxNameBytes >> 20));
        }
    }

    SessionOptions options;
    // SessionOptions::http: the server (from start() to stop()) and what http_status() says.
    mutable std::mutex http_mutex;
    std::unique_ptr<detail::HttpControl> http_control;  // set once, before the server starts
    std::unique_ptr<detail::HttpServer> http;           // guarded by http_mutex
    HttpStatus http_state;                              // guarded by http_mutex
    StringTable strings{kMaxNameBytes, kMaxNames};
    std::atomic<std::uint64_t> phase_names{0};
    std::atomic<std::uint64_t> phase_names_past_cap{0};
    std::atomic<std::uint64_t> site_names{0};
    std::atomic<std::uint64_t> site_names_past_cap{0};
    std::unique_ptr<detail::EventChannel> channel_owner;
    detail::EventChannel& channel;
    std::uint32_t pid = static_cast<std::uint32_t>(::getpid());
    std::unique_ptr<detail::CaptureBackend> backend;
    std::unique_ptr<RecordingWriter> writer;
    std::unique_ptr<detail::RecordingWindow> window;  // record_window_s > 0: instead of writer
    static constexpr std::chrono::seconds kRecordingFlushPeriod{5};
    std::chrono::steady_clock::time_point next_recording_flush{};  // guarded by sink_mutex

    std::atomic<bool> dump_requested{false};  // set by request_dump(), from signal handlers too
    static_assert(std::atomic<bool>::is_always_lock_free, "request_dump must be signal-safe");
    // guarded by sink_mutex:
    std::unique_ptr<detail::DumpFiles> dumps;  // with a window: where dumps go, which stay
    std::uint64_t dumps_failed = 0;
    std::string last_dump_error;
    std::string previous_window;     // the window file a previous run left, moved aside
    std::string previous_recording;  // what a previous run left at record_path, moved aside
    std::unique_ptr<detail::AnalysisPipeline> pipeline;    // from start(); feeds writer, window
    std::unique_ptr<detail::CollectiveWatch> collectives;  // guarded by sink_mutex; from start()
    std::string collective_dump_note;                      // guarded by sink_mutex
    std::atomic<int> collective_rank{-1};  // record_flight_recorder()'s rank, once given
    std::mutex feed_mutex;
    detail::FlightRecorderFeed feed;  // guarded by feed_mutex: record_flight_recorder()
    SessionWatches watches;           // guarded by sink_mutex
    static constexpr std::uint64_t kDropsThatMakeAPartialReport = 100;  // 1 % or more

    std::atomic<bool> forked_copy{false};  // set in a forked child (RunningSessions)

    std::mutex lifecycle_mutex;
    std::mutex sink_mutex;
    std::mutex wake_mutex;
    std::condition_variable wake;
    std::atomic<bool> running{false};
    std::atomic<bool> stopped{false};    // stop() ran: calls that record anything are refused
    std::atomic<bool> accepting{false};  // from start() to stop(): try_push takes events
    std::atomic<std::uint64_t> deviceless_memory_events{0};  // refused by record()
    std::atomic<std::uint64_t> refused_allocations{0};       // record_allocation() / _free() failed
    bool worker_finished = false;                            // guarded by wake_mutex
    std::thread worker;
    // User callbacks run off the worker, watches and periodic reports on threads of their own:
    // a slow report callback never delays a watch's.
    detail::CallbackThread watch_callbacks;
    detail::CallbackThread report_callbacks;
    std::string stop_abandoned;  // guarded by sink_mutex: what stop() did not wait for
    std::mutex replays_mutex;
    std::vector<std::string> replays;  // one note per replayed file (bounded below)
    std::atomic<bool> report_pending{false};
    std::atomic<std::uint64_t> reports_skipped{0};
    bool stopped_once = false;
    bool ended = false;
    std::uint64_t ended_ns = 0;  // monotonic, when the sinks ended (stop())
    SourceSummary final_summary;
    std::string degraded_reason;
    std::uint64_t started_ns = 0;
    detail::OwnCpu cpu_at_start;
    std::uint64_t process_cpu_at_start = 0;
    detail::SessionCost final_cost;  // guarded by sink_mutex: measured at stop
    // SessionOptions::cost_budget.
    detail::CostGovernor governor{
        options.cost_budget,
        static_cast<std::uint32_t>(detail::capture_reductions().size() - 1)};  // sink_mutex
    std::atomic<std::uint64_t> kinds_off{0};     // the rung's kinds, left out at try_push
    std::atomic<std::uint64_t> shed_events{0};   // events left out for the budget
    std::atomic<std::uint64_t> whatif_files{0};  // windows written for whatif(), for their names
    static constexpr std::size_t kMaxBudgetMarkers = 64;
    std::vector<Event> budget_markers;  // guarded by sink_mutex: pauses and resumes to push
    std::atomic<std::uint64_t> step_begin_id{0};
    std::atomic<std::uint64_t> step_begin_ns{0};
    std::atomic<std::uint64_t> steps_ended{0};
    std::atomic<std::uint64_t> steps_timed{0};
    std::atomic<std::uint64_t> step_ns_total{0};
};

namespace {

// What the HTTP control asks of a session, on its gpudiag-http thread: what Session's own
// calls do (report(), dump(), pause_capture()), with the same locks and nothing more.
class SessionHttpControl final : public detail::HttpControl {
public:
    explicit SessionHttpControl(Session::Impl& impl) : impl_(impl) {}

    Result<Report> live_report() noexcept override {
        try {
            return impl_.make_report();
        } catch (const std::bad_alloc&) {
            return resource_exhausted("out of memory building the report");
        } catch (...) {
            return internal_error("report failed");
        }
    }
    // The path in full: the one asking may not know the program's working directory.
    Result<std::string> dump_now() noexcept override {
        try {
            auto path = impl_.dump_numbered();
            if (!path) return path;
            std::error_code ec;
            const auto full = std::filesystem::absolute(*path, ec);
            return ec ? *path : full.string();
        } catch (...) {
            return resource_exhausted("out of memory writing the dump");
        }
    }
    Status pause(std::string_view reason) noexcept override {
        if (!impl_.backend) return failed_precondition("the session has not started capture");
        return impl_.backend->pause(reason);
    }
    Status resume() noexcept override {
        if (!impl_.backend) return failed_precondition("the session has not started capture");
        return impl_.backend->resume();
    }
    Health health() noexcept override {
        Health h;
        try {
            const CaptureStatus st = impl_.status();
            h.running = impl_.running.load();
            h.paused = st.paused;
            h.capture_level = capture_level_name(st.level);
            h.pid = static_cast<long>(impl_.pid);
        } catch (...) {
        }
        return h;
    }

private:
    Session::Impl& impl_;
};

}  // namespace

void Session::Impl::start_http() noexcept {
    if (options.http.empty()) return;
    try {
        std::string token = options.http_token;
        if (const char* env = std::getenv("GPUDIAG_HTTP_TOKEN"); token.empty() && env != nullptr) {
            token = env;
        }
        if (!http_control) http_control = std::make_unique<SessionHttpControl>(*this);
        auto server = detail::HttpServer::start(options.http, std::move(token), *http_control);
        std::lock_guard<std::mutex> lock(http_mutex);
        if (!server) {
            http_state = HttpStatus{};
            http_state.reason = server.status().message();
            return;
        }
        http = std::move(*server);
        http_state.serving = true;
        http_state.address = http->host();
        http_state.port = http->port();
        http_state.reason.clear();
    } catch (...) {
        std::lock_guard<std::mutex> lock(http_mutex);
        http_state.reason = "out of memory starting the HTTP control";
    }
}

void RunningSessions::stop_all_at_exit() noexcept {
    RunningSessions& r = instance();
    try {
        std::lock_guard<std::mutex> lock(r.mutex_);
        pid_t self = ::getpid();
        for (const auto& entry : r.running_) {
            if (entry.pid == self) entry.impl->stop_at_exit();
        }
        r.running_.clear();
    } catch (...) {
    }
}

void RunningSessions::after_fork_in_child() noexcept {
    RunningSessions& r = instance();
    for (const auto& entry : r.running_) {
        entry.impl->forked_copy.store(true, std::memory_order_relaxed);
        entry.impl->running.store(false);
    }
    r.running_.clear();
    r.mutex_.unlock();
}

Session::Session(std::unique_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}
// A forked child holds a copy of the session but none of its threads; its recording file, CUPTI
// state, and the locks and condition its threads held at the fork are the parent's. Nothing of
// it is stopped, joined, flushed, closed or destroyed there: the copy is let go.
Session::~Session() {
    if (!impl_) return;
    if (impl_->forked_away()) {
        (void)impl_.release();
        return;
    }
    // Destroyed from its own callback: the callback's frames and the thread running it still use
    // the session, so it is stopped and deleted on that thread once the callback returns.
    if (impl_->on_callback_thread()) {
        Impl* impl = impl_.release();
        (void)impl->stop();
        auto last = [impl] { delete impl; };
        if (!impl->watch_callbacks.run_after_current_task(last) &&
            !impl->report_callbacks.run_after_current_task(last)) {
            delete impl;
        }
    }
}

Result<std::unique_ptr<Session>> Session::create(SessionOptions options) noexcept {
    try {
        if (options.queue_capacity < 64 ||
            (options.queue_capacity & (options.queue_capacity - 1))) {
            return invalid_argument(fmt::format(
                "queue_capacity must be a power of two >= 64, got {}", options.queue_capacity));
        }
        if (options.nvml_hz < 0 || options.nvml_hz > 1000) {
            return invalid_argument("nvml_hz must be within [0, 1000]");
        }
        if (!(options.record_window_s >= 0) || options.record_window_s > 1e7) {
            return invalid_argument("record_window_s must be within [0, 1e7] seconds");
        }
        if (options.record_window_s > 0 && options.record_path.empty()) {
            return invalid_argument(
                "record_window_s needs record_path: the window is written there at stop, and "
                "its dumps beside it");
        }
        if (!(options.collective_timeout_s >= 0) || options.collective_timeout_s > 1e7) {
            return invalid_argument("collective_timeout_s must be within [0, 1e7] seconds");
        }
        if (options.report_period_ms > 0 && !options.on_report) {
            return invalid_argument("report_period_ms is set but on_report is empty");
        }
        const CostBudget& budget = options.cost_budget;
        if (!(budget.cpu_share >= 0 && budget.cpu_share <= 1) ||
            !(budget.step_share >= 0 && budget.step_share <= 1)) {
            return invalid_argument(
                "cost_budget.cpu_share and cost_budget.step_share must be within [0, 1] (0 = no "
                "limit)");
        }
        auto channel = detail::EventChannel::create(options.queue_capacity);
        if (!channel) return channel.status();
        return std::unique_ptr<Session>(
            new Session(std::make_unique<Impl>(std::move(options), std::move(*channel))));
    } catch (const std::bad_alloc&) {
        return resource_exhausted("out of memory creating the session");
    } catch (...) {
        return internal_error("creating the session failed");
    }
}

Status Session::start() noexcept {
    try {
        return impl_->start();
    } catch (const std::exception& e) {
        return internal_error(std::string("start failed: ") + e.what());
    } catch (...) {
        return internal_error("start failed");
    }
}

Status Session::stop() noexcept {
    try {
        return impl_->stop();
    } catch (const std::exception& e) {
        return internal_error(std::string("stop failed: ") + e.what());
    } catch (...) {
        return internal_error("stop failed");
    }
}

bool Session::running() const noexcept {
    return impl_->running.load();
}

void Session::step_begin(std::uint64_t step) noexcept {
    impl_->step_began(step);
    impl_->push_marker(EventKind::kStepBegin, RangeCategory::kStep, kNoString, step);
}
void Session::step_end(std::uint64_t step) noexcept {
    impl_->step_ended(step);
    impl_->push_marker(EventKind::kStepEnd, RangeCategory::kStep, kNoString, step);
}
void Session::phase_begin(std::string_view name) noexcept {
    if (impl_->forked_away()) return;  // interning takes a lock the parent may have held
    impl_->push_marker(EventKind::kRangeBegin, RangeCategory::kPhase, impl_->phase_name(name), 0);
}
void Session::phase_end() noexcept {
    impl_->push_marker(EventKind::kRangeEnd, RangeCategory::kPhase, kNoString, 0);
}
void Session::input_wait_begin() noexcept {
    if (impl_->forked_away()) return;
    impl_->push_marker(EventKind::kRangeBegin, RangeCategory::kInputWait,
                       impl_->strings.intern("input wait"), 0);
}
void Session::input_wait_end() noexcept {
    impl_->push_marker(EventKind::kRangeEnd, RangeCategory::kInputWait, kNoString, 0);
}
void Session::input_waited(std::uint64_t since_ns) noexcept {
    if (impl_->forked_away()) return;
    Event e;
    e.kind = EventKind::kRange;
    e.process = impl_->pid;
    e.thread = current_tid();
    e.end_ns = detail::monotonic_now_ns();
    e.start_ns = std::min(since_ns, e.end_ns);
    e.range.name = impl_->strings.intern("input wait");
    e.range.category = RangeCategory::kInputWait;
    impl_->try_push(e);
}

namespace {

// Device memory is booked per device: an event of it that names none cannot be placed.
bool needs_a_device(EventKind kind) noexcept {
    const auto k = static_cast<std::uint8_t>(kind);
    return k >= static_cast<std::uint8_t>(EventKind::kDeviceAlloc) &&
           k <= static_cast<std::uint8_t>(EventKind::kBlockFree);
}

}  // namespace

bool Session::record(const Event& event) noexcept {
    if (needs_a_device(event.kind) && event.device == kNoDevice) {
        impl_->deviceless_memory_events.fetch_add(1, std::memory_order_relaxed);
        return false;
    }
    Event e = event;
    if (e.start_ns == 0) e.start_ns = detail::monotonic_now_ns();
    if (e.end_ns < e.start_ns) e.end_ns = e.start_ns;
    if (e.process == 0) e.process = impl_->pid;
    if (e.thread == 0) e.thread = current_tid();
    return impl_->try_push(e);
}

Status Session::record_allocation(int device, std::uint64_t address, std::uint64_t bytes,
                                  std::string_view site) noexcept {
    return impl_->record_memory(EventKind::kDeviceAlloc, device, address, bytes, site);
}

Status Session::record_free(int device, std::uint64_t address, std::uint64_t bytes) noexcept {
    return impl_->record_memory(EventKind::kDeviceFree, device, address, bytes, {});
}

Status Session::record_flight_recorder(std::string_view dump, int rank) noexcept {
    if (impl_->forked_away()) return Session::Impl::forked_error();
    if (!running()) return failed_precondition("record_flight_recorder needs a running session");
    try {
        if (rank >= 0 && impl_->collective_rank.exchange(rank) != rank) {
            std::lock_guard<std::mutex> lock(impl_->sink_mutex);  // once: a rank does not change
            if (impl_->collectives) impl_->collectives->set_rank(rank);
        }
        std::lock_guard<std::mutex> lock(impl_->feed_mutex);
        auto events = impl_->feed.take(dump, impl_->strings, detail::monotonic_now_ns());
        if (!events) return events.status();
        std::size_t dropped = 0;
        for (Event& e : *events) {
            e.process = impl_->pid;
            if (!impl_->try_push(e)) ++dropped;
        }
        if (dropped == 0) return Status::ok();
        return resource_exhausted(
            fmt::format("{} of {} collective events were dropped: the session's hand-off is full",
                        dropped, events->size()));
    } catch (const std::bad_alloc&) {
        return resource_exhausted("out of memory reading the Flight Recorder dump");
    } catch (...) {
        return internal_error("record_flight_recorder failed");
    }
}

StringId Session::intern(std::string_view text) noexcept {
    if (impl_->forked_away()) return kNoString;
    return impl_->strings.intern(text);
}

std::uint64_t Session::now_ns() noexcept {
    return detail::monotonic_now_ns();
}

Result<WatchId> Session::watch_memory(std::uint64_t level_bytes,
                                      std::function<void(std::uint64_t)> callback) noexcept {
    if (!callback) return invalid_argument("watch_memory needs a callback");
    if (level_bytes == 0) return invalid_argument("watch_memory needs a level above 0");
    if (impl_->forked_away()) return Session::Impl::forked_error();
    if (impl_->stopped.load()) {
        return failed_precondition("the session has stopped: a watch would never fire");
    }
    try {
        std::lock_guard<std::mutex> lock(impl_->sink_mutex);
        return impl_->watches.add(level_bytes, std::move(callback));
    } catch (...) {
        return resource_exhausted("out of memory adding a watch");
    }
}

Status Session::unwatch_memory(WatchId id) noexcept {
    if (impl_->forked_away()) return Session::Impl::forked_error();
    try {
        std::lock_guard<std::mutex> lock(impl_->sink_mutex);
        if (impl_->watches.remove(id)) return Status::ok();
        return not_found(fmt::format("no watch with id {}", id));
    } catch (...) {
        return internal_error("unwatch_memory failed");
    }
}

Status Session::record_watch_action(WatchId id, std::string_view action, bool ok,
                                    std::uint64_t bytes_freed, std::string_view detail) noexcept {
    if (impl_->forked_away()) return Session::Impl::forked_error();
    try {
        std::lock_guard<std::mutex> lock(impl_->sink_mutex);
        if (impl_->watches.record_action(id, std::string(action), ok, bytes_freed,
                                         std::string(detail))) {
            return Status::ok();
        }
        return not_found(fmt::format("watch {} has no crossing waiting for its action", id));
    } catch (...) {
        return resource_exhausted("out of memory recording a watch action");
    }
}

Result<Report> Session::report() noexcept {
    try {
        return impl_->make_report();
    } catch (const std::bad_alloc&) {
        return resource_exhausted("out of memory building the report");
    } catch (const std::exception& e) {
        return internal_error(std::string("report failed: ") + e.what());
    } catch (...) {
        return internal_error("report failed");
    }
}

Status Session::dump(std::string_view path) noexcept {
    try {
        return impl_->dump(path);
    } catch (const std::bad_alloc&) {
        return resource_exhausted("out of memory writing the dump");
    } catch (...) {
        return internal_error("dump failed");
    }
}

Result<WhatIfResult> Session::whatif(const WhatIfOptions& options) noexcept {
    std::string path;
    bool temporary = false;
    try {
        std::string label;
        Status input = impl_->whatif_input(path, label, temporary);
        auto result =
            input.is_ok() ? detail::whatif_path(path, options, label) : Result<WhatIfResult>(input);
        std::error_code ignored;
        if (temporary) std::filesystem::remove(path, ignored);
        return result;
    } catch (...) {
        std::error_code ignored;
        if (temporary) std::filesystem::remove(path, ignored);
        return resource_exhausted("out of memory replaying the session's allocations");
    }
}

Status Session::replay(const std::string& path) noexcept {
    try {
        if (!running()) return failed_precondition("replay needs a running session");
        auto source = detail::open_event_source(path, impl_->options.analysis);
        if (!source) return source.status();
        StringTable strings;
        detail::ReplaySink sink(*this);
        Status read = (*source)->run(sink, strings);
        const SourceInfo& from = sink.source();
        std::lock_guard<std::mutex> lock(impl_->replays_mutex);
        if (impl_->replays.size() < 16) {
            impl_->replays.push_back(fmt::format(
                "Replayed into this session: {} ({} events{}{}), not this process's own activity.",
                path, sink.events(), from.producer.empty() ? "" : ", recorded by " + from.producer,
                from.simulated ? ", simulated" : ""));
        }
        return read;
    } catch (const std::bad_alloc&) {
        return resource_exhausted("out of memory replaying " + path);
    } catch (...) {
        return internal_error("replay failed");
    }
}

void Session::request_dump() noexcept {
    impl_->dump_requested.store(true, std::memory_order_relaxed);
}

CaptureStatus Session::status() const noexcept {
    try {
        return impl_->status();
    } catch (...) {
        return CaptureStatus{};
    }
}

HttpStatus Session::http_status() const noexcept {
    try {
        std::lock_guard<std::mutex> lock(impl_->http_mutex);
        return impl_->http_state;
    } catch (...) {
        return HttpStatus{};
    }
}

Status Session::pause_capture(std::string_view reason) noexcept {
    if (impl_->forked_away()) return Session::Impl::forked_error();
    if (!impl_->backend) return failed_precondition("the session has not started capture");
    return impl_->backend->pause(reason);
}

Status Session::resume_capture() noexcept {
    if (impl_->forked_away()) return Session::Impl::forked_error();
    if (!impl_->backend) return failed_precondition("the session has not started capture");
    return impl_->backend->resume();
}

}  // namespace gpudiag
