// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for a session's HTTP control: raw bytes as a connection's request, through
// cpp-httplib's parser (as the server runs it) into the router, over a real CPU-only session.
// Beyond "no crash": every request gets a well-formed HTTP/1.1 answer, and nothing but /healthz,
// /metrics and /report ever answers 200 to a GET.
#include <gpudiag/gpudiag.hpp>

#include "api/http_router.hpp"
#include "api/http_server.hpp"

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace {

using namespace gpudiag;

// The router's view of a real session (no window: /dump says why; no CUPTI: pause says why).
class SessionControl : public detail::HttpControl {
public:
    explicit SessionControl(Session& s) : s_(s) {}
    Result<Report> live_report() noexcept override { return s_.report(); }
    Result<std::string> dump_now() noexcept override {
        Status st = s_.dump();
        if (!st.is_ok()) return st;
        return std::string("dumped");
    }
    Status pause(std::string_view reason) noexcept override { return s_.pause_capture(reason); }
    Status resume() noexcept override { return s_.resume_capture(); }
    Health health() noexcept override {
        Health h;
        h.running = s_.running();
        h.pid = static_cast<long>(::getpid());
        return h;
    }

private:
    Session& s_;
};

struct Fixture {
    Fixture() {
        SessionOptions o;
        o.capture_gpu = false;
        o.nvml_hz = 0;
        auto created = Session::create(o);
        if (created.is_ok()) session = std::move(created).value();
        if (!session) __builtin_trap();
        (void)session->start();
        control = std::make_unique<SessionControl>(*session);
        // 20 ms a request: the rate limit refills as fast as it is used, reports stay cached.
        router = std::make_unique<detail::HttpRouter>(*control, "", [this] {
            now_ns += 20'000'000;
            return now_ns;
        });
    }
    std::unique_ptr<Session> session;
    std::unique_ptr<SessionControl> control;
    std::unique_ptr<detail::HttpRouter> router;
    std::uint64_t now_ns = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static Fixture* fixture = new Fixture;  // one session for the whole run
    const std::string_view request(reinterpret_cast<const char*>(data), size);
    const std::string answer = detail::HttpServer::serve_bytes(*fixture->router, request);
    if (!detail::http_control_built()) return 0;
    // Some answer to anything that is a request line at all; none to a connection that is empty.
    if (!answer.empty() && answer.rfind("HTTP/1.1 ", 0) != 0) __builtin_trap();
    if (answer.rfind("HTTP/1.1 200", 0) == 0 && request.rfind("GET ", 0) == 0) {
        const std::string_view path = request.substr(4, request.find_first_of(" ?", 4) - 4);
        const bool plain = path.find_first_not_of("abcdefghijklmnopqrstuvwxyz/") == path.npos;
        if (plain && path != "/healthz" && path != "/metrics" && path != "/report") {
            __builtin_trap();
        }
    }
    return 0;
}
