// SPDX-License-Identifier: Apache-2.0
#include "core/pipelined_sink.hpp"

#include <system_error>

namespace gpudiag::detail {

PipelinedSink::PipelinedSink(EventSink& inner, std::size_t buffers)
    : inner_(inner), buffers_(buffers == 0 ? 1 : buffers) {
    for (std::size_t i = 0; i < buffers_.size(); ++i) free_.push_back(i);
    try {
        worker_ = std::thread([this] { work(); });
    } catch (const std::system_error&) {
        // No thread to be had: every call goes straight through.
    }
}

PipelinedSink::~PipelinedSink() {
    if (!worker_.joinable()) return;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
    }
    changed_.notify_all();
    worker_.join();
}

void PipelinedSink::work() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
        changed_.wait(lock, [this] { return !queue_.empty() || stopping_; });
        if (queue_.empty()) return;  // stopping, and nothing left to hand over
        const std::size_t b = queue_.front();
        queue_.pop_front();
        busy_ = true;
        const bool failed = failure_ != nullptr;  // after a failure, batches are only dropped
        lock.unlock();
        std::exception_ptr failure;
        try {
            if (!failed) inner_.consume(buffers_[b]);
        } catch (...) {
            failure = std::current_exception();
        }
        lock.lock();
        if (failure) failure_ = failure;
        busy_ = false;
        buffers_[b].clear();
        free_.push_back(b);
        changed_.notify_all();
    }
}

void PipelinedSink::drain() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return queue_.empty() && !busy_; });
}

void PipelinedSink::rethrow_failure() {
    std::exception_ptr failure;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        failure = failure_;
    }
    if (failure) std::rethrow_exception(failure);
}

void PipelinedSink::begin(const SourceInfo& info, const StringTable& strings) {
    drain();
    inner_.begin(info, strings);
}

void PipelinedSink::consume(std::span<const Event> events) {
    if (!worker_.joinable()) {
        inner_.consume(events);
        return;
    }
    rethrow_failure();
    if (events.empty()) return;
    std::size_t b = 0;
    {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [this] { return !free_.empty(); });
        b = free_.back();
        free_.pop_back();
    }
    // Filled outside the lock: the buffer is the producer's until it is queued.
    try {
        buffers_[b].assign(events.begin(), events.end());
    } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        free_.push_back(b);
        throw;
    }
    {
        std::lock_guard<std::mutex> lock(mutex_);
        queue_.push_back(b);
    }
    changed_.notify_all();
}

void PipelinedSink::end(const SourceSummary& summary) {
    drain();
    rethrow_failure();
    inner_.end(summary);
}

}  // namespace gpudiag::detail
