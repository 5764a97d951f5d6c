// SPDX-License-Identifier: Apache-2.0
// ParseThreadBudget: the helper threads all trace parses in the process may use at once. A C++
// service that analyses traces from several request threads must not multiply its threads by
// four; a parse that finds the budget spent runs on its own thread instead.
#pragma once

#include <atomic>

namespace gpudiag::detail {

class ParseThreadBudget {
public:
    /// Helper threads (beyond the caller's) all parses together may run: enough to keep four
    /// cores busy on one large trace, which is where the parse stops scaling (inflate and the
    /// skeleton walk stay serial).
    static constexpr unsigned kProcessHelpers = 3;

    explicit ParseThreadBudget(unsigned helpers) noexcept : available_(helpers) {}

    /// The process-wide budget used by the Kineto parser.
    static ParseThreadBudget& process() noexcept {
        static ParseThreadBudget budget(kProcessHelpers);
        return budget;
    }

    /// Takes up to `wanted` helpers; returns how many were granted (possibly 0).
    unsigned acquire(unsigned wanted) noexcept {
        unsigned have = available_.load(std::memory_order_relaxed);
        for (;;) {
            unsigned take = wanted < have ? wanted : have;
            if (take == 0) return 0;
            if (available_.compare_exchange_weak(have, have - take, std::memory_order_acquire,
                                                 std::memory_order_relaxed)) {
                return take;
            }
        }
    }

    void release(unsigned granted) noexcept {
        available_.fetch_add(granted, std::memory_order_release);
    }

    [[nodiscard]] unsigned available() const noexcept {
        return available_.load(std::memory_order_relaxed);
    }

    /// Helpers held for one parse, given back when it ends.
    class Lease {
    public:
        Lease(ParseThreadBudget& budget, unsigned wanted) noexcept
            : budget_(budget), granted_(budget.acquire(wanted)) {}
        ~Lease() { budget_.release(granted_); }
        Lease(const Lease&) = delete;
        Lease& operator=(const Lease&) = delete;
        [[nodiscard]] unsigned granted() const noexcept { return granted_; }

    private:
        ParseThreadBudget& budget_;
        unsigned granted_;
    };

private:
    std::atomic<unsigned> available_;
};

}  // namespace gpudiag::detail
