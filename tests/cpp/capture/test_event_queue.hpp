// SPDX-License-Identifier: Apache-2.0
// A simple EventQueue for capture tests: a vector behind a mutex, with an optional capacity.
#pragma once

#include <gpudiag/event.hpp>

#include "core/event_queue.hpp"

#include <algorithm>
#include <cstddef>
#include <mutex>
#include <vector>

namespace gpudiag::test {

class TestEventQueue final : public detail::EventQueue {
public:
    explicit TestEventQueue(std::size_t capacity = 1u << 20) : capacity_(capacity) {}

    bool try_push(const Event& event) noexcept override {
        std::lock_guard<std::mutex> lock(mutex_);
        if (events_.size() >= capacity_) {
            ++refused_;
            return false;
        }
        events_.push_back(event);
        return true;
    }

    std::vector<Event> events() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return events_;
    }
    std::vector<Event> of_kind(EventKind kind) const {
        std::vector<Event> out;
        for (const Event& e : events()) {
            if (e.kind == kind) out.push_back(e);
        }
        return out;
    }
    std::vector<Event> counters(CounterKind kind) const {
        std::vector<Event> out;
        for (const Event& e : events()) {
            if (e.kind == EventKind::kCounter && e.counter.counter == kind) out.push_back(e);
        }
        return out;
    }
    std::size_t refused() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return refused_;
    }
    void clear() {
        std::lock_guard<std::mutex> lock(mutex_);
        events_.clear();
    }

private:
    mutable std::mutex mutex_;
    std::size_t capacity_;
    std::vector<Event> events_;
    std::size_t refused_ = 0;
};

}  // namespace gpudiag::test
