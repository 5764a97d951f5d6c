// SPDX-License-Identifier: Apache-2.0
// The transport of a session's HTTP control (SessionOptions::http): a socket of our own and one
// thread, gpudiag-http, that takes one connection at a time and one request per connection,
// parsed by cpp-httplib (never by hand) and answered by the HttpRouter. Bounds: a request of at
// most kMaxRequestBytes (line, headers and body together), a connection of at most
// kConnectionDeadline, one connection served at a time (the kernel's backlog holds the next few).
// The program's threads are never involved; the HTTP thread takes the session's locks only
// inside the calls the router makes (a report, a dump), as Session::report() does.
#pragma once

#include "api/http_router.hpp"

#include <gpudiag/status.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

namespace gpudiag::detail {

/// Where to listen: "127.0.0.1:0", "[::1]:9000", "localhost:8080", "0.0.0.0:9400". Only IP
/// literals and "localhost": a host process never waits on a name lookup for this.
struct HttpEndpoint {
    std::string host;  ///< an IP literal
    int port = 0;
    bool loopback = false;
};
Result<HttpEndpoint> parse_http_endpoint(std::string_view spec) noexcept;

/// True when this build has the HTTP control (cpp-httplib was found).
bool http_control_built() noexcept;

class HttpServer {
public:
    static constexpr std::size_t kMaxRequestBytes = 16 * 1024;
    static constexpr std::size_t kMaxBodyBytes = 4 * 1024;
    static constexpr std::chrono::seconds kConnectionDeadline{3};

    /// Binds and starts the thread. Errors: kInvalidArgument (the address), kFailedPrecondition
    /// (not loopback and no token), kUnavailable (built without cpp-httplib), kIoError (the
    /// bind: the port taken, ...), kResourceExhausted (no thread).
    static Result<std::unique_ptr<HttpServer>> start(std::string_view address, std::string token,
                                                     HttpControl& control) noexcept;
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    /// Stops taking connections and waits for the thread (at most one connection's deadline).
    void stop() noexcept;
    [[nodiscard]] const std::string& host() const noexcept { return host_; }
    [[nodiscard]] int port() const noexcept { return port_; }

    /// One raw request through the same parser and router, the raw response back: for the
    /// fuzzer and tests. Reads at most kMaxRequestBytes of `request`.
    static std::string serve_bytes(HttpRouter& router, std::string_view request) noexcept;

    struct Impl;

private:
    explicit HttpServer(std::unique_ptr<Impl> impl) noexcept;
    std::unique_ptr<Impl> impl_;
    std::string host_;
    int port_ = 0;
};

}  // namespace gpudiag::detail
