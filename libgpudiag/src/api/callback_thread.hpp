// SPDX-License-Identifier: Apache-2.0
// CallbackThread: runs a session's user callbacks (watch crossings, periodic reports) on a thread
// of their own, so that a slow callback never holds up the worker that drains capture: while a
// callback runs, events keep flowing; later callbacks wait in a short queue (past it they are
// dropped and counted).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace gpudiag::detail {

class CallbackThread {
public:
    using Task = std::function<void()>;
    static constexpr std::size_t kMaxQueued = 64;

    CallbackThread() = default;
    ~CallbackThread();  ///< as stop(), then join (or let go when destroyed on the thread itself)
    CallbackThread(const CallbackThread&) = delete;
    CallbackThread& operator=(const CallbackThread&) = delete;

    /// Starts the thread, named `name` (at most 15 characters); `owner` is what
    /// on_thread_of() answers for.
    void start(const void* owner, const char* name);
    /// Queues `task`; false (and counted) when kMaxQueued are waiting or the thread stopped.
    bool post(Task task);
    /// Ends the thread once its running task returns; queued tasks are dropped (counted). On the
    /// thread itself (a callback stopping its session) it only marks it: the caller's task
    /// returns, then the thread ends. Elsewhere it waits for the thread, at most `limit` when
    /// given (at exit, a callback stuck for good must not hang the process: it is let go).
    void stop(std::chrono::milliseconds limit = std::chrono::milliseconds::max());
    /// Asks the thread to end (queued tasks dropped) and waits at most `limit` for the running
    /// task; true when the thread has ended. When not, the thread stays joinable: stop() (or the
    /// destructor) waits for it later. On the thread itself: only marks it, returns false.
    bool stop_within(std::chrono::milliseconds limit);
    /// On the thread itself: runs `last` once the running task returns, then the thread ends
    /// without touching this object again, so `last` may destroy it (a session destroyed from
    /// its own callback is deleted there, after the callback). Elsewhere: false, nothing done.
    bool run_after_current_task(Task last);
    /// True on the thread that runs the callbacks of `owner`.
    [[nodiscard]] static bool on_thread_of(const void* owner) noexcept;
    [[nodiscard]] std::uint64_t dropped() const;
    /// Callbacks that ended in an exception (caught: a user callback never takes the process).
    [[nodiscard]] std::uint64_t threw() const;

private:
    void run();
    void ask_to_stop();
    [[nodiscard]] bool on_own_thread() const noexcept;

    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<Task> queue_;  // guarded by mutex_
    bool stopping_ = false;   // guarded by mutex_
    bool finished_ = false;   // guarded by mutex_
    std::uint64_t dropped_ = 0;
    std::uint64_t threw_ = 0;
    Task after_task_;  // guarded by mutex_; set from the thread itself
    const void* owner_ = nullptr;
    std::thread thread_;
};

}  // namespace gpudiag::detail
