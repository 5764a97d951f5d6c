// SPDX-License-Identifier: Apache-2.0
// BatchPipe<T>: hands batches of records to a consumer running on a thread of its own, so that a
// producer makes the next batch while the consumer takes the last one (on two cores, two halves
// of a pipeline overlap instead of adding up).
//
// Batches move, not copy: submit() swaps the producer's vector with an empty one from a small set
// that is reused, and the producer waits when all of them are taken, so memory stays bounded.
// drain() waits until everything submitted has been consumed, which orders what the consumer did
// before whatever the producer does next. When no thread can be started, submit() consumes on
// the spot. An exception the consumer throws comes back to the producer at its next submit() or
// drain(); batches after it are dropped.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <span>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace gpudiag::detail {

template <typename T>
class BatchPipe {
public:
    using Consumer = std::function<void(std::span<const T>)>;

    /// `buffers`: batches in flight at most (queued or being consumed).
    explicit BatchPipe(Consumer consumer, std::size_t buffers = 4)
        : consumer_(std::move(consumer)),
          buffers_(buffers == 0 ? 1 : buffers),
          queue_(buffers_.size()) {
        for (std::size_t i = 0; i < buffers_.size(); ++i) free_.push_back(i);
        try {
            worker_ = std::thread([this] { work(); });
        } catch (const std::system_error&) {
            // No thread to be had: submit() consumes on the spot.
        }
    }
    /// Lets the consumer take what is queued, then stops it.
    ~BatchPipe() {
        if (!worker_.joinable()) return;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stopping_ = true;
        }
        changed_.notify_all();
        worker_.join();
    }
    BatchPipe(const BatchPipe&) = delete;
    BatchPipe& operator=(const BatchPipe&) = delete;

    /// True when a thread of its own runs the consumer.
    [[nodiscard]] bool threaded() const noexcept { return worker_.joinable(); }

    /// Hands `batch` over; it comes back empty (with the capacity of an earlier one).
    void submit(std::vector<T>& batch) {
        if (batch.empty()) return;
        if (!threaded()) {
            consumer_(batch);
            batch.clear();
            return;
        }
        std::unique_lock<std::mutex> lock(mutex_);
        if (failure_) std::rethrow_exception(failure_);
        changed_.wait(lock, [this] { return !free_.empty(); });
        const std::size_t b = free_.back();
        free_.pop_back();
        buffers_[b].swap(batch);
        batch.clear();
        queue_[(head_ + queued_++) % queue_.size()] = b;
        lock.unlock();
        changed_.notify_all();
    }

    /// Waits until every batch submitted has been consumed; rethrows the consumer's failure.
    void drain() {
        if (!threaded()) return;
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [this] { return queued_ == 0 && !busy_; });
        if (failure_) std::rethrow_exception(failure_);
    }

private:
    void work() {
        std::unique_lock<std::mutex> lock(mutex_);
        for (;;) {
            changed_.wait(lock, [this] { return queued_ != 0 || stopping_; });
            if (queued_ == 0) return;  // stopping, and nothing left to hand over
            const std::size_t b = queue_[head_];
            head_ = (head_ + 1) % queue_.size();
            --queued_;
            busy_ = true;
            const bool failed = failure_ != nullptr;
            lock.unlock();
            std::exception_ptr failure;
            try {
                if (!failed) consumer_(buffers_[b]);
            } catch (...) {
                failure = std::current_exception();
            }
            lock.lock();
            if (failure) failure_ = failure;
            busy_ = false;
            buffers_[b].clear();
            free_.push_back(b);  // never reallocates: free_ held every index once
            changed_.notify_all();
        }
    }

    Consumer consumer_;
    std::mutex mutex_;
    std::condition_variable changed_;
    std::vector<std::vector<T>> buffers_;
    std::vector<std::size_t> free_;   // buffers the producer may take
    std::vector<std::size_t> queue_;  // submitted, oldest first: a ring of queued_ from head_
    std::size_t head_ = 0;
    std::size_t queued_ = 0;
    bool busy_ = false;  // the consumer is taking a batch
    bool stopping_ = false;
    std::exception_ptr failure_;
    std::thread worker_;
};

}  // namespace gpudiag::detail
