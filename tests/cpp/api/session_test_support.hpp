// SPDX-License-Identifier: Apache-2.0
// What the session tests share: options that behave the same on every machine, a session made
// from them, a put() that waits for the bounded hand-off instead of dropping, and a bounded wait.
#pragma once

#include <gpudiag/session.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

namespace gpudiag::testing {

/// Set in a forked child of a test: LeakSanitizer then skips its check at the child's exit (it
/// would wait for allocator locks that threads of the parent held at the fork).
inline std::atomic<bool> in_forked_child{false};

/// No CUPTI, no NVML, a short flush period; `record_path` as given ("" = none).
inline SessionOptions cpu_options(const std::string& record_path = "") {
    SessionOptions o;
    o.capture_gpu = false;
    o.nvml_hz = 0;
    o.flush_period_ms = 5;
    o.record_path = record_path;
    return o;
}

/// A session from `o`, or nullptr (and a failed expectation) when create() refuses it.
inline std::unique_ptr<Session> make(const SessionOptions& o = cpu_options()) {
    auto s = Session::create(o);
    EXPECT_TRUE(s.is_ok()) << s.status().to_string();
    return s.is_ok() ? std::move(*s) : nullptr;
}

/// Records `e`, waiting for the worker when the hand-off is full (a test needs every event; a
/// real service would drop and count instead).
inline void put(Session& s, const Event& e) {
    while (!s.record(e)) std::this_thread::sleep_for(std::chrono::microseconds(100));
}

/// Polls `done` until it holds or `limit` passes; false on timeout.
template <typename Predicate>
bool wait_for(Predicate done, std::chrono::milliseconds limit = std::chrono::milliseconds(10000)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done()) {
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
}

}  // namespace gpudiag::testing
