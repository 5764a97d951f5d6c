// SPDX-License-Identifier: Apache-2.0
// Session: live capture -> bounded channel -> worker thread -> analyzers (+ recording writer).
//
// Threads: application threads only push into the channel (never block, never allocate). One
// worker thread owns the sinks: every flush period it flushes the capture backend (with no lock
// held, since CUPTI may call back into us during a flush), drains the channel into the analyzers
// and the recording, checks memory watches, and makes periodic reports. report() and stop() drain
// synchronously under the same sink lock.
#include <gpudiag/recording.hpp>
#include <gpudiag/session.hpp>

#include "analysis/memory/memory_analyzer.hpp"
#include "analysis/registry.hpp"
#include "capture/capture_backend.hpp"
#include "capture/stack_verdict.hpp"
#include "core/clock.hpp"
#include "core/event_channel.hpp"
#include "core/input_coverage.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
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
    }

    void remove(Session::Impl* impl) {
        std::lock_guard<std::mutex> lock(mutex_);
        running_.erase(std::remove_if(running_.begin(), running_.end(),
                                      [impl](const Entry& e) { return e.impl == impl; }),
                       running_.end());
    }

private:
    static void stop_all_at_exit() noexcept;

    // A forked child inherits the list and the handler but none of the sessions' threads, and
    // shares their recordings' files: it stops only sessions it started itself.
    struct Entry {
        Session::Impl* impl;
        pid_t pid;
    };
    std::mutex mutex_;
    std::vector<Entry> running_;
    bool handler_registered_ = false;
};

}  // namespace

struct Session::Impl final : detail::EventQueue {
    Impl(SessionOptions o, std::unique_ptr<detail::EventChannel> c)
        : options(std::move(o)), channel_owner(std::move(c)), channel(*channel_owner) {}

    ~Impl() override { (void)stop(); }

    bool try_push(const Event& e) noexcept override { return channel.try_push(e); }

    bool push_marker(EventKind kind, RangeCategory category, StringId name,
                     std::uint64_t id) noexcept {
        Event e;
        e.kind = kind;
        e.process = pid;
        e.thread = current_tid();
        e.start_ns = e.end_ns = detail::monotonic_now_ns();
        e.range.name = name;
        e.range.category = category;
        e.range.id = id;
        return channel.try_push(e);
    }

    SourceInfo source_info() const {
        SourceInfo info;
        info.producer = "gpudiag-capture";
        info.pid = pid;
        char host[256] = {};
        if (::gethostname(host, sizeof host - 1) == 0) info.hostname = host;
        info.properties = options.properties;
        // Which driver, framework, cuDNN and CUPTI this process runs on (the stack verdict).
        CaptureStatus capture = backend ? backend->status() : probe_capture();
        detail::add_stack_properties(capture.stack, info.properties);
        return info;
    }

    Status start() {
        std::lock_guard<std::mutex> lifecycle(lifecycle_mutex);
        if (running.load()) return failed_precondition("the session is already running");
        if (stopped_once) {
            return failed_precondition("a session runs once; create a new one to capture again");
        }
        if (!options.record_path.empty()) {
            writer = std::make_unique<RecordingWriter>();
            Status opened = writer->open(options.record_path);
            if (!opened.is_ok()) {
                writer.reset();
                return opened;
            }
        }
        analyzers = detail::make_analyzers(options.analysis);
        for (auto& a : analyzers) fanout_sinks.push_back(a.get());
        if (writer) fanout_sinks.push_back(writer.get());
        {
            std::lock_guard<std::mutex> lock(sink_mutex);
            watches.attach(memory_ledger());
        }
        SourceInfo info = source_info();
        for (EventSink* s : fanout_sinks) s->begin(info, strings);

        backend = detail::make_capture_backend(options);
        if (backend) {
            Status s = backend->start(*this, strings);
            if (!s.is_ok()) degraded_reason = s.to_string();
        }
        started_ns = detail::monotonic_now_ns();
        running.store(true);
        worker = std::thread([this] { worker_loop(); });
        RunningSessions::instance().add(this);
        return Status::ok();
    }

    Status stop() {
        std::lock_guard<std::mutex> lifecycle(lifecycle_mutex);
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

    Status stop_locked(bool at_exit = false) {
        if (!running.load()) return failed_precondition("the session is not running");
        bool own_thread = worker.joinable() && worker.get_id() == std::this_thread::get_id();
        if (own_thread && !at_exit) {
            return failed_precondition(
                "stop() cannot run inside the session's own report or "
                "watch callback");
        }
        if (backend) backend->stop();  // delivers its last buffers into the channel
        {
            std::lock_guard<std::mutex> lock(wake_mutex);
            running.store(false);
        }
        wake.notify_all();
        if (worker.joinable()) {
            // exit() called on the worker (a report callback ending the program) cannot join
            // itself, and at exit a worker stuck in a user callback (one waiting for a Python
            // interpreter that is gone) must not hang the process: both are left behind.
            if (own_thread || (at_exit && !worker_finished_within(std::chrono::seconds(5)))) {
                worker.detach();
            } else {
                worker.join();
            }
        }
        std::lock_guard<std::mutex> lock(sink_mutex);
        drain_locked();
        final_summary = summary();
        for (EventSink* s : fanout_sinks) s->end(final_summary);
        ended = true;
        if (writer) {
            Status closed = writer->close();
            if (!closed.is_ok()) degraded_reason = closed.to_string();
        }
        stopped_once = true;
        return Status::ok();
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
            s.notes.push_back(std::to_string(s.dropped) +
                              " events were dropped because the hand-off or capture buffers were "
                              "full; raise SessionOptions::queue_capacity or flush more often.");
        }
        if (untimed > 0) {
            s.notes.push_back(std::to_string(untimed) +
                              " kernels were seen without timing (CUPTI's device timestamp buffer "
                              "was full): they are missing from GPU busy time.");
        }
        if (!degraded_reason.empty()) s.notes.push_back("Capture degraded: " + degraded_reason);
        return s;
    }

    void drain_locked() {
        while (channel.drain(fanout, 4096) > 0) {
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
            if (backend) backend->flush();  // no lock held: CUPTI may re-enter
            std::vector<std::pair<SessionWatches::Callback, std::uint64_t>> due;
            {
                std::lock_guard<std::mutex> lock(sink_mutex);
                drain_locked();
                due = watches.take_due();
            }
            call_watches(due);
            if (options.report_period_ms > 0 && options.on_report &&
                std::chrono::steady_clock::now() >= next_report) {
                next_report += std::chrono::milliseconds(options.report_period_ms);
                auto r = make_report();
                if (r) {
                    try {
                        options.on_report(*r);
                    } catch (...) {
                        // A user callback must not take the worker down.
                    }
                }
            }
        }
    }

    Result<Report> make_report() {
        if (backend && running.load()) backend->flush();
        std::lock_guard<std::mutex> lock(sink_mutex);
        if (!analyzers_ready()) return failed_precondition("the session was never started");
        drain_locked();
        Report report;
        report.source = source_info();
        report.capture = ended ? final_summary : summary();
        report.input = detail::input_coverage(report.capture, report.capture.events, 0, 0);
        for (auto& a : analyzers) a->contribute(report);
        if (auto st = status(); st.level < CaptureLevel::kCuptiActivity) {
            report.notes.push_back(std::string("Capture level: ") + capture_level_name(st.level) +
                                   "; GPU activity was not observed directly.");
            for (const auto& r : st.reasons) report.notes.push_back(r);
        }
        rank_findings(report.findings);
        return report;
    }

    bool analyzers_ready() const { return !fanout_sinks.empty(); }

    detail::MemoryLedger* memory_ledger() {
        for (auto& a : analyzers) {
            if (auto* memory = dynamic_cast<detail::MemoryAnalyzer*>(a.get())) {
                return &memory->ledger();
            }
        }
        return nullptr;
    }

    // Runs on the worker with no lock held (see SessionWatches).
    static void call_watches(std::vector<std::pair<SessionWatches::Callback, std::uint64_t>>& due) {
        for (auto& [callback, bytes] : due) {
            try {
                callback(bytes);
            } catch (...) {
                // A user callback must not take the worker down.
            }
        }
    }

    CaptureStatus status() const {
        CaptureStatus s = backend ? backend->status() : probe_capture();
        s.capturing = running.load();
        auto stats = channel.stats();
        s.events = stats.pushed;
        s.dropped += stats.dropped;
        return s;
    }

    SessionOptions options;
    StringTable strings;
    std::unique_ptr<detail::EventChannel> channel_owner;
    detail::EventChannel& channel;
    std::uint32_t pid = static_cast<std::uint32_t>(::getpid());
    std::unique_ptr<detail::CaptureBackend> backend;
    std::unique_ptr<RecordingWriter> writer;
    std::vector<std::unique_ptr<detail::Analyzer>> analyzers;
    std::vector<EventSink*> fanout_sinks;
    SessionWatches watches;  // guarded by sink_mutex
    struct Fanout final : EventSink {
        explicit Fanout(Impl& impl) : impl_(impl) {}
        void consume(std::span<const Event> events) override {
            for (EventSink* s : impl_.fanout_sinks) s->consume(events);
        }
        Impl& impl_;
    } fanout{*this};

    std::mutex lifecycle_mutex;
    std::mutex sink_mutex;
    std::mutex wake_mutex;
    std::condition_variable wake;
    std::atomic<bool> running{false};
    bool worker_finished = false;  // guarded by wake_mutex
    std::thread worker;
    bool stopped_once = false;
    bool ended = false;
    SourceSummary final_summary;
    std::string degraded_reason;
    std::uint64_t started_ns = 0;
};

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

Session::Session(std::unique_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}
Session::~Session() = default;

Result<std::unique_ptr<Session>> Session::create(SessionOptions options) noexcept {
    try {
        if (options.queue_capacity < 64 ||
            (options.queue_capacity & (options.queue_capacity - 1))) {
            return invalid_argument("queue_capacity must be a power of two >= 64, got " +
                                    std::to_string(options.queue_capacity));
        }
        if (options.nvml_hz < 0 || options.nvml_hz > 1000) {
            return invalid_argument("nvml_hz must be within [0, 1000]");
        }
        if (options.report_period_ms > 0 && !options.on_report) {
            return invalid_argument("report_period_ms is set but on_report is empty");
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
    impl_->push_marker(EventKind::kStepBegin, RangeCategory::kStep, kNoString, step);
}
void Session::step_end(std::uint64_t step) noexcept {
    impl_->push_marker(EventKind::kStepEnd, RangeCategory::kStep, kNoString, step);
}
void Session::phase_begin(std::string_view name) noexcept {
    impl_->push_marker(EventKind::kRangeBegin, RangeCategory::kPhase, impl_->strings.intern(name),
                       0);
}
void Session::phase_end() noexcept {
    impl_->push_marker(EventKind::kRangeEnd, RangeCategory::kPhase, kNoString, 0);
}
void Session::input_wait_begin() noexcept {
    impl_->push_marker(EventKind::kRangeBegin, RangeCategory::kInputWait,
                       impl_->strings.intern("input wait"), 0);
}
void Session::input_wait_end() noexcept {
    impl_->push_marker(EventKind::kRangeEnd, RangeCategory::kInputWait, kNoString, 0);
}

bool Session::record(const Event& event) noexcept {
    Event e = event;
    if (e.start_ns == 0) e.start_ns = detail::monotonic_now_ns();
    if (e.end_ns < e.start_ns) e.end_ns = e.start_ns;
    if (e.process == 0) e.process = impl_->pid;
    if (e.thread == 0) e.thread = current_tid();
    return impl_->channel.try_push(e);
}

StringId Session::intern(std::string_view text) noexcept {
    return impl_->strings.intern(text);
}

std::uint64_t Session::now_ns() noexcept {
    return detail::monotonic_now_ns();
}

Result<WatchId> Session::watch_memory(std::uint64_t level_bytes,
                                      std::function<void(std::uint64_t)> callback) noexcept {
    if (!callback) return invalid_argument("watch_memory needs a callback");
    if (level_bytes == 0) return invalid_argument("watch_memory needs a level above 0");
    try {
        std::lock_guard<std::mutex> lock(impl_->sink_mutex);
        return impl_->watches.add(level_bytes, std::move(callback));
    } catch (...) {
        return resource_exhausted("out of memory adding a watch");
    }
}

Status Session::unwatch_memory(WatchId id) noexcept {
    try {
        std::lock_guard<std::mutex> lock(impl_->sink_mutex);
        if (impl_->watches.remove(id)) return Status::ok();
        return not_found("no watch with id " + std::to_string(id));
    } catch (...) {
        return internal_error("unwatch_memory failed");
    }
}

Status Session::record_watch_action(WatchId id, std::string_view action, bool ok,
                                    std::uint64_t bytes_freed, std::string_view detail) noexcept {
    try {
        std::lock_guard<std::mutex> lock(impl_->sink_mutex);
        if (impl_->watches.record_action(id, std::string(action), ok, bytes_freed,
                                         std::string(detail))) {
            return Status::ok();
        }
        return not_found("watch " + std::to_string(id) + " has no crossing waiting for its action");
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

CaptureStatus Session::status() const noexcept {
    try {
        return impl_->status();
    } catch (...) {
        return CaptureStatus{};
    }
}

Status Session::pause_capture(std::string_view reason) noexcept {
    if (!impl_->backend) return failed_precondition("the session has not started capture");
    return impl_->backend->pause(reason);
}

Status Session::resume_capture() noexcept {
    if (!impl_->backend) return failed_precondition("the session has not started capture");
    return impl_->backend->resume();
}

}  // namespace gpudiag
