// SPDX-License-Identifier: Apache-2.0
// A session's HTTP control (SessionOptions::http): requests as bytes through cpp-httplib's
// parser into the router, over a real CPU-only session; then a live session on loopback.
#include <gpudiag/gpudiag.hpp>

#include "api/http_router.hpp"
#include "api/http_server.hpp"
#include "session_test_support.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <vector>

namespace gpudiag {
namespace {

using testing::cpu_options;
using testing::make;

// The router's view of a real session: what SessionHttpControl does, through the public API.
class RealSession : public detail::HttpControl {
public:
    explicit RealSession(Session& s) : s_(s) {}
    Result<Report> live_report() noexcept override {
        ++reports;
        return s_.report();
    }
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
        h.capture_level = capture_level_name(s_.status().level);
        h.pid = static_cast<long>(::getpid());
        return h;
    }
    std::atomic<int> reports{0};

private:
    Session& s_;
};

struct Reply {
    int status = 0;
    std::string head;
    std::string body;
};

Reply parse_reply(const std::string& raw) {
    Reply r;
    const auto end = raw.find("\r\n\r\n");
    if (raw.rfind("HTTP/1.1 ", 0) != 0 || end == std::string::npos) return r;
    r.status = std::stoi(raw.substr(9, 3));
    r.head = raw.substr(0, end);
    r.body = raw.substr(end + 4);
    return r;
}

class HttpRouterTest : public ::testing::Test {
protected:
    void SetUp() override {
        session_ = make();
        ASSERT_NE(session_, nullptr);
        ASSERT_TRUE(session_->start().is_ok());
        for (std::uint64_t step = 0; step < 5; ++step) {
            session_->step_begin(step);
            session_->step_end(step);
        }
        control_ = std::make_unique<RealSession>(*session_);
    }

    Reply ask(detail::HttpRouter& router, const std::string& request) {
        return parse_reply(detail::HttpServer::serve_bytes(router, request));
    }

    std::unique_ptr<Session> session_;
    std::unique_ptr<RealSession> control_;
    std::uint64_t now_ns_ = 1'000'000'000;
    detail::HttpRouter::Clock clock_ = [this] { return now_ns_; };
};

TEST_F(HttpRouterTest, AnswersEachPathAndRefusesTheRest) {
    if (!detail::http_control_built()) GTEST_SKIP() << "built without cpp-httplib";
    detail::HttpRouter router(*control_, "", clock_);
    Reply health = ask(router, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_EQ(health.status, 200);
    EXPECT_NE(health.body.find("\"running\":true"), std::string::npos) << health.body;

    Reply metrics = ask(router, "GET /metrics HTTP/1.1\r\n\r\n");
    EXPECT_EQ(metrics.status, 200);
    EXPECT_NE(metrics.head.find("text/plain; version=0.0.4"), std::string::npos) << metrics.head;
    EXPECT_NE(metrics.body.find("# TYPE gpudiag_capture_events_total counter"), std::string::npos);

    Reply compact = ask(router, "GET /report?compact=1 HTTP/1.1\r\n\r\n");
    EXPECT_EQ(compact.status, 200);
    EXPECT_EQ(compact.body.find('\n'), compact.body.size() - 1) << "compact JSON is one line";
    auto parsed = parse_report_json(compact.body);
    ASSERT_TRUE(parsed.is_ok()) << parsed.status().to_string();
    EXPECT_NE(parsed->section("cost"), nullptr) << "the live report, with what it cost";
    Reply pretty = ask(router, "GET /report HTTP/1.1\r\n\r\n");
    EXPECT_NE(pretty.body.find('\n'), std::string::npos);

    EXPECT_EQ(ask(router, "GET /nothing HTTP/1.1\r\n\r\n").status, 404);
    // Found by http_request_fuzz: httplib 0.11 read the target "?/report" as the path /report.
    EXPECT_EQ(ask(router, "GET ?/report?compact=1 HTTP/1.1\r\n\r\n").status, 404);
    EXPECT_EQ(ask(router, "GET healthz HTTP/1.1\r\n\r\n").status, 404);
    Reply wrong = ask(router, "GET /dump HTTP/1.1\r\n\r\n");
    EXPECT_EQ(wrong.status, 405);
    EXPECT_NE(wrong.head.find("Allow: POST"), std::string::npos);
    EXPECT_EQ(ask(router, "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n").status, 405);
    EXPECT_EQ(ask(router, "garbage\r\n\r\n").status, 400);
    // A body is never read (no path takes one); a request is cut at kMaxRequestBytes, so
    // headers without end are a bad request, not memory taken.
    const std::string big(detail::HttpServer::kMaxRequestBytes, 'x');
    EXPECT_EQ(ask(router, "POST /dump HTTP/1.1\r\nContent-Length: " + std::to_string(big.size()) +
                              "\r\n\r\n" + big)
                  .status,
              409);
    std::string endless = "GET /healthz HTTP/1.1\r\n";
    while (endless.size() <= detail::HttpServer::kMaxRequestBytes)
        endless += "X-Pad: 0123456789\r\n";
    EXPECT_EQ(ask(router, endless + "\r\n").status, 400);
}

TEST_F(HttpRouterTest, ReportsAreBuiltAtMostOnceASecond) {
    if (!detail::http_control_built()) GTEST_SKIP() << "built without cpp-httplib";
    detail::HttpRouter router(*control_, "", clock_);
    for (int i = 0; i < 5; ++i) ASSERT_EQ(ask(router, "GET /metrics HTTP/1.1\r\n\r\n").status, 200);
    EXPECT_EQ(control_->reports.load(), 1);
    now_ns_ += detail::HttpRouter::kReportMaxAgeNs;
    ASSERT_EQ(ask(router, "GET /report HTTP/1.1\r\n\r\n").status, 200);
    EXPECT_EQ(control_->reports.load(), 2);
}

TEST_F(HttpRouterTest, RequestsPastTheRateAreRefusedUntilItRefills) {
    if (!detail::http_control_built()) GTEST_SKIP() << "built without cpp-httplib";
    detail::HttpRouter router(*control_, "", clock_);
    int refused = 0;
    for (int i = 0; i < 150; ++i) {
        const Reply r = ask(router, "GET /healthz HTTP/1.1\r\n\r\n");
        if (r.status == 429) {
            ++refused;
            EXPECT_NE(r.head.find("Retry-After: 1"), std::string::npos);
        }
    }
    EXPECT_EQ(refused, 150 - static_cast<int>(detail::HttpRouter::kBurst));
    now_ns_ += 1'000'000'000;  // a second: 50 more
    EXPECT_EQ(ask(router, "GET /healthz HTTP/1.1\r\n\r\n").status, 200);
}

TEST_F(HttpRouterTest, ATokenIsAskedOfEveryRequestWhenSet) {
    if (!detail::http_control_built()) GTEST_SKIP() << "built without cpp-httplib";
    detail::HttpRouter router(*control_, "s3cret-token", clock_);
    Reply none = ask(router, "GET /healthz HTTP/1.1\r\n\r\n");
    EXPECT_EQ(none.status, 401);
    EXPECT_NE(none.head.find("WWW-Authenticate: Bearer"), std::string::npos);
    EXPECT_EQ(
        ask(router, "GET /metrics HTTP/1.1\r\nAuthorization: Bearer s3cret-toke\r\n\r\n").status,
        401);
    EXPECT_EQ(
        ask(router, "GET /metrics HTTP/1.1\r\nAuthorization: Basic s3cret-token\r\n\r\n").status,
        401);
    EXPECT_EQ(
        ask(router, "GET /metrics HTTP/1.1\r\nAuthorization: Bearer s3cret-token\r\n\r\n").status,
        200);
    EXPECT_TRUE(detail::HttpRouter::token_matches("abc", "abc"));
    EXPECT_FALSE(detail::HttpRouter::token_matches("abd", "abc"));
    EXPECT_FALSE(detail::HttpRouter::token_matches("abcd", "abc"));
    EXPECT_FALSE(detail::HttpRouter::token_matches("", ""));
}

TEST_F(HttpRouterTest, PauseWithoutCuptiAndDumpWithoutAWindowSayWhy) {
    if (!detail::http_control_built()) GTEST_SKIP() << "built without cpp-httplib";
    detail::HttpRouter router(*control_, "", clock_);
    Reply pause = ask(router, "POST /capture/pause?reason=nsys HTTP/1.1\r\n\r\n");
    EXPECT_EQ(pause.status, 409) << pause.body;  // capture_gpu off: no CUPTI to yield
    EXPECT_NE(pause.body.find("CUPTI"), std::string::npos) << pause.body;
    Reply dump = ask(router, "POST /dump HTTP/1.1\r\n\r\n");
    EXPECT_EQ(dump.status, 409);
    EXPECT_NE(dump.body.find("record_window_s"), std::string::npos) << dump.body;
}

TEST(HttpEndpoint, LoopbackAndLiteralsOnly) {
    auto a = detail::parse_http_endpoint("127.0.0.1:0");
    ASSERT_TRUE(a.is_ok());
    EXPECT_TRUE(a->loopback);
    EXPECT_EQ(a->port, 0);
    auto b = detail::parse_http_endpoint("[::1]:9000");
    ASSERT_TRUE(b.is_ok());
    EXPECT_TRUE(b->loopback);
    EXPECT_EQ(b->host, "::1");
    EXPECT_TRUE(detail::parse_http_endpoint("localhost:80")->loopback);
    EXPECT_FALSE(detail::parse_http_endpoint("0.0.0.0:9400")->loopback);
    EXPECT_FALSE(detail::parse_http_endpoint("10.1.2.3:9400")->loopback);
    for (const char* bad : {"127.0.0.1", "127.0.0.1:65536", "example.com:80", ":80", "1.2.3.4:x"}) {
        EXPECT_EQ(detail::parse_http_endpoint(bad).status().code(), StatusCode::kInvalidArgument)
            << bad;
    }
}

// ---- a live session on loopback ----

std::string fetch(int port, const std::string& request) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    std::string out;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
        (void)!::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
        char buf[4096];
        for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) {
            out.append(buf, static_cast<std::size_t>(n));
        }
    }
    ::close(fd);
    return out;
}

TEST(HttpSession, ServesOnLoopbackFromStartToStop) {
    if (!detail::http_control_built()) GTEST_SKIP() << "built without cpp-httplib";
    const auto dir = std::filesystem::path(::testing::TempDir()) / "http_session_live";
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    SessionOptions o = cpu_options((dir / "run.gpudiag").string());
    o.record_window_s = 60;
    o.http = "127.0.0.1:0";
    auto s = make(o);
    ASSERT_NE(s, nullptr);
    EXPECT_FALSE(s->http_status().serving) << "not before start()";
    ASSERT_TRUE(s->start().is_ok());
    const HttpStatus h = s->http_status();
    ASSERT_TRUE(h.serving) << h.reason;
    EXPECT_EQ(h.address, "127.0.0.1");
    ASSERT_GT(h.port, 0);

    Reply metrics = parse_reply(fetch(h.port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"));
    EXPECT_EQ(metrics.status, 200);
    EXPECT_NE(metrics.body.find("gpudiag_capture_events_total"), std::string::npos);
    Reply dump = parse_reply(fetch(h.port, "POST /dump HTTP/1.1\r\nContent-Length: 0\r\n\r\n"));
    ASSERT_EQ(dump.status, 200) << dump.body;
    const auto start = dump.body.find("\"path\":\"") + 8;
    const std::string path = dump.body.substr(start, dump.body.find('"', start) - start);
    EXPECT_TRUE(std::filesystem::exists(path)) << dump.body;
    EXPECT_NE(path.find("-dump-"), std::string::npos) << path;
    Reply again = parse_reply(fetch(h.port, "POST /dump HTTP/1.1\r\nContent-Length: 0\r\n\r\n"));
    EXPECT_EQ(again.status, 429) << "dumps over HTTP are spaced";

    ASSERT_TRUE(s->stop().is_ok());
    EXPECT_FALSE(s->http_status().serving);
    EXPECT_EQ(fetch(h.port, "GET /healthz HTTP/1.1\r\n\r\n"), "") << "nothing listens after stop";
    std::filesystem::remove_all(dir);
}

TEST(HttpSession, ANonLoopbackAddressWithoutATokenIsRefusedAndTheSessionRuns) {
    if (!detail::http_control_built()) GTEST_SKIP() << "built without cpp-httplib";
    ::unsetenv("GPUDIAG_HTTP_TOKEN");
    SessionOptions o = cpu_options();
    o.http = "0.0.0.0:0";
    auto s = make(o);
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(s->start().is_ok());
    const HttpStatus h = s->http_status();
    EXPECT_FALSE(h.serving);
    EXPECT_NE(h.reason.find("needs a token"), std::string::npos) << h.reason;
    auto report = s->report();
    ASSERT_TRUE(report.is_ok());
    bool noted = false;
    for (const auto& n : report->notes)
        noted = noted || n.find("needs a token") != std::string::npos;
    EXPECT_TRUE(noted) << "the report says why there is no HTTP control";
    EXPECT_TRUE(s->stop().is_ok());
}

TEST(HttpSession, APortTakenLeavesTheSessionRunningAndSaysSo) {
    if (!detail::http_control_built()) GTEST_SKIP() << "built without cpp-httplib";
    SessionOptions o = cpu_options();
    o.http = "127.0.0.1:0";
    auto first = make(o);
    ASSERT_NE(first, nullptr);
    ASSERT_TRUE(first->start().is_ok());
    ASSERT_TRUE(first->http_status().serving);
    o.http = "127.0.0.1:" + std::to_string(first->http_status().port);
    auto second = make(o);
    ASSERT_NE(second, nullptr);
    ASSERT_TRUE(second->start().is_ok());
    EXPECT_TRUE(second->running());
    EXPECT_FALSE(second->http_status().serving);
    EXPECT_NE(second->http_status().reason.find("cannot listen"), std::string::npos)
        << second->http_status().reason;
    EXPECT_TRUE(second->stop().is_ok());
    EXPECT_TRUE(first->stop().is_ok());
}

}  // namespace
}  // namespace gpudiag
