// SPDX-License-Identifier: Apache-2.0
#include "api/callback_thread.hpp"

#include "support/quiet_thread.hpp"

namespace gpudiag::detail {
namespace {

thread_local const void* t_callbacks_of = nullptr;

}  // namespace

CallbackThread::~CallbackThread() {
    stop();
    if (thread_.joinable()) thread_.detach();  // destroyed from its own task: it ends at once
}

void CallbackThread::start(const void* owner, const char* name) {
    {
        std::lock_guard<std::mutex> lock(mutex_);  // a start after a failed one begins afresh
        stopping_ = false;
        finished_ = false;
    }
    owner_ = owner;
    thread_ = quiet_thread(name, [this] { run(); });
}

bool CallbackThread::post(Task task) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || queue_.size() >= kMaxQueued) {
        ++dropped_;
        return false;
    }
    queue_.push_back(std::move(task));
    wake_.notify_one();
    return true;
}

void CallbackThread::stop(std::chrono::milliseconds limit) {
    ask_to_stop();
    if (!thread_.joinable() || on_own_thread()) return;
    if (limit != std::chrono::milliseconds::max()) {
        std::unique_lock<std::mutex> lock(mutex_);
        if (!wake_.wait_for(lock, limit, [this] { return finished_; })) {
            lock.unlock();
            thread_.detach();
            return;
        }
    }
    thread_.join();
}

bool CallbackThread::stop_within(std::chrono::milliseconds limit) {
    ask_to_stop();
    if (!thread_.joinable() || on_own_thread()) return false;
    {
        std::unique_lock<std::mutex> lock(mutex_);
        if (!wake_.wait_for(lock, limit, [this] { return finished_; })) return false;
    }
    thread_.join();
    return true;
}

void CallbackThread::ask_to_stop() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!stopping_) {
            stopping_ = true;
            dropped_ += queue_.size();
            queue_.clear();
        }
    }
    wake_.notify_all();
}

bool CallbackThread::run_after_current_task(Task last) {
    if (!on_own_thread()) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    after_task_ = std::move(last);
    return true;
}

// A session has two of these: which one a call comes from is the thread's identity, not its owner.
bool CallbackThread::on_own_thread() const noexcept {
    return thread_.joinable() && std::this_thread::get_id() == thread_.get_id();
}

bool CallbackThread::on_thread_of(const void* owner) noexcept {
    return owner != nullptr && t_callbacks_of == owner;
}

std::uint64_t CallbackThread::dropped() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return dropped_;
}

std::uint64_t CallbackThread::threw() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return threw_;
}

void CallbackThread::run() {
    t_callbacks_of = owner_;
    for (;;) {
        Task task;
        {
            std::unique_lock<std::mutex> lock(mutex_);
            wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
            if (stopping_) break;
            task = std::move(queue_.front());
            queue_.pop_front();
        }
        try {
            task();
        } catch (...) {
            // A user callback must not take the thread (and the process) down.
            std::lock_guard<std::mutex> lock(mutex_);
            ++threw_;
        }
        Task last;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            last = std::move(after_task_);
        }
        if (last) {
            last();  // may destroy this object: nothing of it is touched after
            return;
        }
    }
    {
        std::lock_guard<std::mutex> lock(mutex_);
        finished_ = true;
    }
    wake_.notify_all();
}

}  // namespace gpudiag::detail
