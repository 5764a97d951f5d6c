// SPDX-License-Identifier: Apache-2.0
// The HTTP control of a session (SessionOptions::http), without the transport: a parsed request
// in, a response out. The HTTP library parses (api/http_server.cpp); this decides: who may ask
// (the bearer token, compared in constant time), how often (a token bucket; dumps spaced), and
// what each path answers. Reports behind /metrics and /report are rebuilt at most once a
// kReportMaxAge, so a scraper cannot make the session build reports back to back.
#pragma once

#include <gpudiag/report.hpp>
#include <gpudiag/status.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpudiag::detail {

struct HttpRequest {
    std::string method;
    std::string path;                                         ///< without the query
    std::vector<std::pair<std::string, std::string>> params;  ///< the query, decoded
    std::string authorization;                                ///< the header's value, "" if none
};

struct HttpResponse {
    int status = 200;
    std::string content_type = "application/json";
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;  ///< Retry-After, WWW-Authenticate
};

/// What the router asks of its session. Every call may be made from the HTTP thread while the
/// program runs; none may throw.
class HttpControl {
public:
    struct Health {
        bool running = false;
        bool paused = false;
        std::string capture_level;
        long pid = 0;
    };
    virtual ~HttpControl() = default;
    virtual Result<Report> live_report() noexcept = 0;
    /// Writes the window now; the file written.
    virtual Result<std::string> dump_now() noexcept = 0;
    virtual Status pause(std::string_view reason) noexcept = 0;
    virtual Status resume() noexcept = 0;
    virtual Health health() noexcept = 0;
};

class HttpRouter {
public:
    using Clock = std::function<std::uint64_t()>;  ///< nanoseconds, monotonic

    static constexpr std::uint64_t kReportMaxAgeNs = 1'000'000'000;  // a scrape a second is plenty
    // 50 requests a second, bursts of 100: far above any scraper or operator, far below what
    // would cost the program noticeable CPU (reports are cached; the rest is a few microseconds).
    static constexpr double kRequestsPerSecond = 50;
    static constexpr double kBurst = 100;
    // A dump writes up to a window's bytes to disk: one per 10 s at most over HTTP.
    static constexpr std::uint64_t kDumpSpacingNs = 10'000'000'000;

    /// `token` empty: no authorization asked (the server binds to loopback only then).
    HttpRouter(HttpControl& control, std::string token, Clock clock = {});

    HttpResponse handle(const HttpRequest& request) noexcept;

    /// The bearer token check, in time independent of where `presented` differs.
    static bool token_matches(std::string_view presented, std::string_view token) noexcept;

private:
    HttpResponse route(const HttpRequest& request);
    bool admit();
    HttpResponse report_response(const HttpRequest& request, bool prometheus);
    HttpResponse dump_response();
    HttpResponse capture_response(const HttpRequest& request, bool pause);
    HttpResponse health_response();
    Result<std::shared_ptr<const Report>> cached_report();

    HttpControl& control_;
    std::string token_;
    Clock clock_;
    std::mutex mutex_;  // guards what follows
    double tokens_ = kBurst;
    std::uint64_t refilled_ns_ = 0;
    std::uint64_t last_dump_ns_ = 0;
    bool dumped_ = false;
    std::shared_ptr<const Report> report_;
    std::uint64_t report_ns_ = 0;
};

}  // namespace gpudiag::detail
