// SPDX-License-Identifier: Apache-2.0
#include "api/dump_signal.hpp"

#include <fmt/format.h>

#include <atomic>
#include <cctype>
#include <csignal>
#include <cstdlib>
#include <string>

namespace gpudiag::detail {
namespace {

std::atomic<Session*> g_dump_session{nullptr};

extern "C" void on_dump_signal(int) {
    if (Session* s = g_dump_session.load(std::memory_order_relaxed)) s->request_dump();
}

}  // namespace

int parse_dump_signal(std::string_view spec) noexcept {
    std::string name;
    for (char c : spec) name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (name.rfind("SIG", 0) == 0) name.erase(0, 3);
    int signum = 0;
    if (name == "USR1") {
        signum = SIGUSR1;
    } else if (name == "USR2") {
        signum = SIGUSR2;
    } else if (name == "HUP") {
        signum = SIGHUP;
    } else if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos &&
               name.size() <= 3) {
        signum = std::atoi(name.c_str());
    }
    // Only signals meant for a program to use: the real-time ones, USR1/USR2 and HUP.
    const bool usable = signum == SIGUSR1 || signum == SIGUSR2 || signum == SIGHUP ||
                        (signum >= SIGRTMIN && signum <= SIGRTMAX);
    return usable ? signum : 0;
}

Status install_dump_signal(Session& session, int signum) noexcept {
    if (parse_dump_signal(fmt::to_string(signum)) == 0) {
        return invalid_argument(fmt::format(
            "signal {} cannot ask for dumps (use USR1, USR2, HUP or a real-time one)", signum));
    }
    struct sigaction current {};
    if (::sigaction(signum, nullptr, &current) != 0) return io_error("sigaction failed");
    if (current.sa_handler != SIG_DFL && current.sa_handler != SIG_IGN &&
        current.sa_handler != &on_dump_signal) {
        return failed_precondition(
            fmt::format("the program handles signal {} itself; it is left to it", signum));
    }
    g_dump_session.store(&session, std::memory_order_relaxed);
    struct sigaction action {};
    action.sa_handler = &on_dump_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    if (::sigaction(signum, &action, nullptr) != 0) return io_error("sigaction failed");
    return Status::ok();
}

}  // namespace gpudiag::detail
