// SPDX-License-Identifier: Apache-2.0
#include "support/quiet_thread.hpp"

#include "support/own_cpu.hpp"

#include <pthread.h>
#include <signal.h>

#include <utility>

namespace gpudiag::detail {
namespace {

// Restores the calling thread's signal mask when the new thread exists (or failed to).
class BlockedForChildren {
public:
    BlockedForChildren() {
        sigset_t all;
        sigfillset(&all);
        for (int sync : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS}) sigdelset(&all, sync);
        blocked_ = pthread_sigmask(SIG_BLOCK, &all, &previous_) == 0;
    }
    ~BlockedForChildren() {
        if (blocked_) pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
    }
    BlockedForChildren(const BlockedForChildren&) = delete;
    BlockedForChildren& operator=(const BlockedForChildren&) = delete;

private:
    sigset_t previous_{};
    bool blocked_ = false;
};

}  // namespace

std::thread quiet_thread(const char* name, std::function<void()> body) {
    BlockedForChildren blocked;  // a new thread inherits its creator's mask
    return std::thread([name, body = std::move(body)] {
        pthread_setname_np(pthread_self(), name);
        own_thread_started();  // its CPU time is gpudiag's cost (support/own_cpu.hpp)
        struct Ending {
            ~Ending() { own_thread_ending(); }
        } ending;
        body();
    });
}

}  // namespace gpudiag::detail
