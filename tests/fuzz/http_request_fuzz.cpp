// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for a session's HTTP control: raw bytes as a connection's request, through
// cpp-httplib's parser (as the server runs it) into the router, over a real CPU-only session.
// Beyond "no crash": every request gets a well-formed HTTP/1.1 answer, and nothing but /healthz,
// /metrics and /report ever answers 200 to a GET.
#include <gpudiag/gpudiag.hpp>

#include "api/http_router.hpp"
#include "api/http_server.hpp"

#include <unistd.h>

#include <algorithm>
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

// The request line's method and target as httplib reads them: split at spaces, each piece trimmed
// of spaces and tabs, empty pieces skipped ("GET  \t/report HTTP/1.1" asks for /report).
struct RequestLine {
    std::string_view method;
    std::string_view target;
};
RequestLine request_line(std::string_view request) {
    std::string_view line = request.substr(0, request.find('\n'));
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    RequestLine out;
    int piece = 0;
    while (!line.empty() && piece < 2) {
        const std::size_t end = std::min(line.find(' '), line.size());
        std::string_view token = line.substr(0, end);
        line.remove_prefix(std::min(end + 1, line.size()));
        while (!token.empty() && (token.front() == ' ' || token.front() == '\t')) {
            token.remove_prefix(1);
        }
        while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) {
            token.remove_suffix(1);
        }
        if (token.empty()) continue;
        (piece++ == 0 ? out.method : out.target) = token;
    }
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static Fixture* fixture = new Fixture;  // one session for the whole run
    const std::string_view request(reinterpret_cast<const char*>(data), size);
    const std::string answer = detail::HttpServer::serve_bytes(*fixture->router, request);
    if (!detail::http_control_built()) return 0;
    // Some answer to anything that is a request line at all; none to a connection that is empty.
    if (!answer.empty() && answer.rfind("HTTP/1.1 ", 0) != 0) __builtin_trap();
    const RequestLine line = request_line(request);
    if (answer.rfind("HTTP/1.1 200", 0) == 0 && line.method == "GET") {
        // Only an origin-form target ("/path?query") names a route.
        if (line.target.empty() || line.target.front() != '/') __builtin_trap();
        const std::string_view path = line.target.substr(0, line.target.find('?'));
        const bool plain = path.find_first_not_of("abcdefghijklmnopqrstuvwxyz/") == path.npos;
        if (plain && path != "/healthz" && path != "/metrics" && path != "/report") {
            __builtin_trap();
        }
    }
    return 0;
}
