// SPDX-License-Identifier: Apache-2.0
#include "api/http_router.hpp"

#include "core/clock.hpp"
#include "support/json_writer.hpp"

#include <algorithm>

namespace gpudiag::detail {
namespace {

constexpr const char* kPrometheusType = "text/plain; version=0.0.4; charset=utf-8";

HttpResponse json_error(int status, std::string_view why) {
    HttpResponse r;
    r.status = status;
    JsonWriter(r.body, false).begin_object().field("error", why).end_object();
    r.body += '\n';
    return r;
}

// A refusal the caller can act on: not now (409), out of memory (503), anything else (500).
HttpResponse status_error(const Status& s) {
    switch (s.code()) {
        case StatusCode::kFailedPrecondition:
        case StatusCode::kUnavailable: return json_error(409, s.message());
        case StatusCode::kResourceExhausted: return json_error(503, s.message());
        default: return json_error(500, s.to_string());
    }
}

std::string_view param(const HttpRequest& request, std::string_view name) {
    for (const auto& [key, value] : request.params) {
        if (key == name) return value;
    }
    return {};
}

}  // namespace

HttpRouter::HttpRouter(HttpControl& control, std::string token, Clock clock)
    : control_(control), token_(std::move(token)), clock_(std::move(clock)) {
    if (!clock_) clock_ = [] { return monotonic_now_ns(); };
    refilled_ns_ = clock_();
}

bool HttpRouter::token_matches(std::string_view presented, std::string_view token) noexcept {
    // Every byte of the token is compared whatever the presented text, so the time taken says
    // nothing of how much of it was right.
    volatile unsigned char differ = presented.size() == token.size() ? 0 : 1;
    for (std::size_t i = 0; i < token.size(); ++i) {
        const unsigned char theirs =
            i < presented.size() ? static_cast<unsigned char>(presented[i]) : 0;
        differ = differ | static_cast<unsigned char>(theirs ^ static_cast<unsigned char>(token[i]));
    }
    return differ == 0 && !token.empty();
}

HttpResponse HttpRouter::handle(const HttpRequest& request) noexcept {
    try {
        if (!token_.empty()) {
            constexpr std::string_view kBearer = "Bearer ";
            const std::string_view given = request.authorization;
            const bool bearer = given.size() > kBearer.size() && given.substr(0, 7) == kBearer;
            if (!token_matches(bearer ? given.substr(kBearer.size()) : std::string_view{},
                               token_)) {
                HttpResponse r =
                    json_error(401, "this endpoint needs Authorization: Bearer <token>");
                r.headers.emplace_back("WWW-Authenticate", "Bearer");
                return r;
            }
        }
        if (!admit()) {
            HttpResponse r = json_error(429, "too many requests: at most 50 a second");
            r.headers.emplace_back("Retry-After", "1");
            return r;
        }
        return route(request);
    } catch (...) {  // std::bad_alloc: say so if there is room to
        HttpResponse r;
        r.status = 503;
        return r;
    }
}

bool HttpRouter::admit() {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::uint64_t now = clock_();
    if (now > refilled_ns_) {
        tokens_ = std::min(
            kBurst, tokens_ + static_cast<double>(now - refilled_ns_) * 1e-9 * kRequestsPerSecond);
        refilled_ns_ = now;
    }
    if (tokens_ < 1) return false;
    tokens_ -= 1;
    return true;
}

HttpResponse HttpRouter::route(const HttpRequest& request) {
    struct Route {
        std::string_view path;
        std::string_view method;
    };
    static constexpr Route kRoutes[] = {{"/healthz", "GET"},        {"/metrics", "GET"},
                                        {"/report", "GET"},         {"/dump", "POST"},
                                        {"/capture/pause", "POST"}, {"/capture/resume", "POST"}};
    const auto* known = std::find_if(std::begin(kRoutes), std::end(kRoutes),
                                     [&](const Route& r) { return r.path == request.path; });
    if (known == std::end(kRoutes)) {
        return json_error(404,
                          "no such path: /healthz, /metrics, /report, /dump, /capture/pause and "
                          "/capture/resume are served");
    }
    const bool head_of_get = known->method == "GET" && request.method == "HEAD";
    if (request.method != known->method && !head_of_get) {
        HttpResponse r =
            json_error(405, std::string(known->path) + " takes " + std::string(known->method));
        r.headers.emplace_back("Allow", std::string(known->method));
        return r;
    }
    if (request.path == "/healthz") return health_response();
    if (request.path == "/metrics") return report_response(request, true);
    if (request.path == "/report") return report_response(request, false);
    if (request.path == "/dump") return dump_response();
    return capture_response(request, request.path == "/capture/pause");
}

Result<std::shared_ptr<const Report>> HttpRouter::cached_report() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (report_ && clock_() - report_ns_ < kReportMaxAgeNs) return report_;
    }
    // Built with no lock of the router's held: the session takes its own (briefly).
    auto fresh = control_.live_report();
    if (!fresh) return fresh.status();
    auto shared = std::make_shared<const Report>(std::move(*fresh));
    std::lock_guard<std::mutex> lock(mutex_);
    report_ = shared;
    report_ns_ = clock_();
    return shared;
}

HttpResponse HttpRouter::report_response(const HttpRequest& request, bool prometheus) {
    auto report = cached_report();
    if (!report) return json_error(503, report.status().to_string());
    HttpResponse r;
    if (prometheus) {
        r.content_type = kPrometheusType;
        r.body = render_prometheus(**report);
    } else {
        const std::string_view compact = param(request, "compact");
        r.body = render_json(**report, compact == "1" || compact == "true");
    }
    if (r.body.empty()) return json_error(503, "out of memory rendering the report");
    return r;
}

HttpResponse HttpRouter::dump_response() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        const std::uint64_t now = clock_();
        if (dumped_ && now - last_dump_ns_ < kDumpSpacingNs) {
            HttpResponse r = json_error(429, "one dump every 10 s at most over HTTP");
            r.headers.emplace_back("Retry-After", "10");
            return r;
        }
        dumped_ = true;
        last_dump_ns_ = now;
    }
    auto path = control_.dump_now();
    if (!path) return status_error(path.status());
    HttpResponse r;
    JsonWriter(r.body, false).begin_object().field("path", *path).end_object();
    r.body += '\n';
    return r;
}

HttpResponse HttpRouter::capture_response(const HttpRequest& request, bool pause) {
    std::string_view reason = param(request, "reason");
    if (reason.empty()) reason = "paused over HTTP (POST /capture/pause)";
    const Status s = pause ? control_.pause(reason.substr(0, 200)) : control_.resume();
    if (!s.is_ok()) return status_error(s);
    HttpResponse r;
    JsonWriter(r.body, false).begin_object().field("paused", pause).end_object();
    r.body += '\n';
    return r;
}

HttpResponse HttpRouter::health_response() {
    const HttpControl::Health h = control_.health();
    HttpResponse r;
    JsonWriter(r.body, false)
        .begin_object()
        .field("ok", true)
        .field("running", h.running)
        .field("paused", h.paused)
        .field("capture_level", h.capture_level)
        .field("pid", static_cast<std::int64_t>(h.pid))
        .end_object();
    r.body += '\n';
    return r;
}

}  // namespace gpudiag::detail
