// SPDX-License-Identifier: Apache-2.0
#include "api/http_server.hpp"

#include "support/quiet_thread.hpp"

#include <fmt/format.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <system_error>

#if GPUDIAG_HAVE_HTTP
#    include <httplib.h>
#endif

namespace gpudiag::detail {
namespace {

bool parse_port(std::string_view text, int& port) {
    if (text.empty() || text.size() > 5) return false;
    int v = 0;
    for (char c : text) {
        if (c < '0' || c > '9') return false;
        v = v * 10 + (c - '0');
    }
    if (v > 65535) return false;
    port = v;
    return true;
}

bool is_loopback(const std::string& host) {
    in_addr v4{};
    if (::inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
    in6_addr v6{};
    return ::inet_pton(AF_INET6, host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

}  // namespace

Result<HttpEndpoint> parse_http_endpoint(std::string_view spec) noexcept {
    try {
        const auto bad = [&](const char* why) {
            return invalid_argument("http address \"" + std::string(spec) + "\": " + why +
                                    " (expected host:port, e.g. 127.0.0.1:0)");
        };
        const std::size_t colon = spec.rfind(':');
        if (colon == std::string_view::npos) return bad("no port");
        HttpEndpoint out;
        if (!parse_port(spec.substr(colon + 1), out.port)) return bad("the port is not 0-65535");
        std::string_view host = spec.substr(0, colon);
        if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
            host = host.substr(1, host.size() - 2);
        }
        out.host = host == "localhost" ? "127.0.0.1" : std::string(host);
        in_addr v4{};
        in6_addr v6{};
        if (::inet_pton(AF_INET, out.host.c_str(), &v4) != 1 &&
            ::inet_pton(AF_INET6, out.host.c_str(), &v6) != 1) {
            return bad("the host must be an IP address or localhost");
        }
        out.loopback = is_loopback(out.host);
        return out;
    } catch (...) {
        return resource_exhausted("out of memory reading the http address");
    }
}

#if GPUDIAG_HAVE_HTTP

namespace {

using Clock = std::chrono::steady_clock;

// A connection as httplib reads and writes it, within a byte budget and a deadline: httplib
// bounds each line and (with Debian's patches) the header count, the budget the whole request.
class BoundedStream : public httplib::Stream {
public:
    BoundedStream(int fd, Clock::time_point deadline, std::size_t budget)
        : fd_(fd), deadline_(deadline), budget_(budget) {}

    bool is_readable() const override { return wait(POLLIN); }
    bool is_writable() const override { return wait(POLLOUT); }

    ssize_t read(char* ptr, size_t size) override {
        if (used_ >= budget_ || !wait(POLLIN)) return -1;
        const std::size_t n = std::min(size, budget_ - used_);
        ssize_t got = -1;
        do {
            got = ::recv(fd_, ptr, n, 0);
        } while (got < 0 && errno == EINTR);
        if (got > 0) used_ += static_cast<std::size_t>(got);
        return got;
    }

    ssize_t write(const char* ptr, size_t size) override {
        if (!wait(POLLOUT)) return -1;
        ssize_t sent = -1;
        do {
            sent = ::send(fd_, ptr, size, MSG_NOSIGNAL);  // a closed peer is no SIGPIPE
        } while (sent < 0 && errno == EINTR);
        return sent;
    }

    void get_remote_ip_and_port(std::string& ip, int& port) const override {
        address(::getpeername, ip, port);
    }
    void get_local_ip_and_port(std::string& ip, int& port) const override {
        address(::getsockname, ip, port);
    }
    socket_t socket() const override { return fd_; }

private:
    bool wait(short events) const {
        for (;;) {
            const auto left =
                std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
            if (left.count() <= 0) return false;
            pollfd p{fd_, events, 0};
            const int n = ::poll(&p, 1, static_cast<int>(left.count()));
            if (n > 0) return (p.revents & (events | POLLHUP)) != 0;
            if (n == 0 || errno != EINTR) return false;
        }
    }

    void address(int (*get)(int, sockaddr*, socklen_t*), std::string& ip, int& port) const {
        sockaddr_storage addr{};
        socklen_t len = sizeof addr;
        ip.clear();
        port = 0;
        if (get(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return;
        char text[INET6_ADDRSTRLEN] = {};
        if (addr.ss_family == AF_INET) {
            const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
            ::inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
            port = ntohs(a->sin_port);
        } else if (addr.ss_family == AF_INET6) {
            const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
            ::inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof text);
            port = ntohs(a->sin6_port);
        }
        ip = text;
    }

    int fd_;
    Clock::time_point deadline_;
    std::size_t budget_;
    std::size_t used_ = 0;
};

// A fixed byte string as a connection: the fuzzer's and the tests' requests.
class BytesStream : public httplib::Stream {
public:
    explicit BytesStream(std::string_view in) : in_(in) {}
    bool is_readable() const override { return true; }
    bool is_writable() const override { return true; }
    ssize_t read(char* ptr, size_t size) override {
        const std::size_t n = std::min(size, in_.size() - at_);
        std::memcpy(ptr, in_.data() + at_, n);
        at_ += n;
        return static_cast<ssize_t>(n);
    }
    ssize_t write(const char* ptr, size_t size) override {
        out_.append(ptr, size);
        return static_cast<ssize_t>(size);
    }
    void get_remote_ip_and_port(std::string& ip, int& port) const override {
        ip = "127.0.0.1";
        port = 0;
    }
    void get_local_ip_and_port(std::string& ip, int& port) const override {
        ip = "127.0.0.1";
        port = 0;
    }
    socket_t socket() const override { return -1; }
    [[nodiscard]] const std::string& written() const { return out_; }

private:
    std::string_view in_;
    std::size_t at_ = 0;
    std::string out_;
};

// httplib's server, used only for its request parsing and response writing: every request goes
// to the router, through the pre-routing hook.
class RouterServer : public httplib::Server {
public:
    explicit RouterServer(HttpRouter& router) {
        set_payload_max_length(HttpServer::kMaxBodyBytes);
        set_pre_routing_handler([&router](const httplib::Request& req, httplib::Response& res) {
            HttpRequest in;
            in.method = req.method;
            // Only an origin-form target ("/path?query") names a route, whatever path httplib
            // makes of another (0.11 read "?/report" as /report).
            const bool origin_form = !req.target.empty() && req.target.front() == '/';
            in.path = origin_form ? req.path : req.target;
            for (const auto& [key, value] : req.params) in.params.emplace_back(key, value);
            in.authorization = req.get_header_value("Authorization");
            HttpResponse out = router.handle(in);
            res.status = out.status;
            for (const auto& [key, value] : out.headers) res.set_header(key.c_str(), value);
            res.set_content(out.body, out.content_type.c_str());
            return HandlerResponse::Handled;
        });
    }

    bool serve(httplib::Stream& stream) {
        std::string remote_ip;
        std::string local_ip;
        int remote_port = 0;
        int local_port = 0;
        stream.get_remote_ip_and_port(remote_ip, remote_port);
        stream.get_local_ip_and_port(local_ip, local_port);
        bool closed = false;
        return process_request(stream, remote_ip, remote_port, local_ip, local_port,
                               /*close_connection=*/true, closed, nullptr);
    }
};

// httplib's Server constructor sets SIGPIPE to ignored for the whole process: the program's
// own disposition is put back (our sockets send with MSG_NOSIGNAL instead).
std::unique_ptr<RouterServer> make_router_server(HttpRouter& router) {
    struct sigaction before {};
    const bool saved = ::sigaction(SIGPIPE, nullptr, &before) == 0;
    auto server = std::make_unique<RouterServer>(router);
    if (saved) ::sigaction(SIGPIPE, &before, nullptr);
    return server;
}

int bind_socket(const HttpEndpoint& at, int& port, std::string& why) {
    sockaddr_storage addr{};
    socklen_t len = 0;
    int family = AF_INET;
    if (at.host.find(':') == std::string::npos) {
        auto* a = reinterpret_cast<sockaddr_in*>(&addr);
        a->sin_family = AF_INET;
        a->sin_port = htons(static_cast<std::uint16_t>(at.port));
        ::inet_pton(AF_INET, at.host.c_str(), &a->sin_addr);
        len = sizeof(sockaddr_in);
    } else {
        family = AF_INET6;
        auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
        a->sin6_family = AF_INET6;
        a->sin6_port = htons(static_cast<std::uint16_t>(at.port));
        ::inet_pton(AF_INET6, at.host.c_str(), &a->sin6_addr);
        len = sizeof(sockaddr_in6);
    }
    const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        why = std::string("socket(): ") + std::strerror(errno);
        return -1;
    }
    const int yes = 1;
    (void)::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(fd, 8) != 0) {
        why = fmt::format("cannot listen on {}:{} ({})", at.host, at.port, std::strerror(errno));
        ::close(fd);
        return -1;
    }
    sockaddr_storage bound{};
    socklen_t bound_len = sizeof bound;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_len);
    port = family == AF_INET ? ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port)
                             : ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
    return fd;
}

}  // namespace

struct HttpServer::Impl {
    Impl(HttpControl& control, std::string token)
        : router(control, std::move(token)), server(make_router_server(router)) {}
    ~Impl() {
        if (listen_fd >= 0) ::close(listen_fd);
        if (wake[0] >= 0) ::close(wake[0]);
        if (wake[1] >= 0) ::close(wake[1]);
    }
    Impl(const Impl&) = delete;
    Impl& operator=(const Impl&) = delete;

    // One connection at a time until stop(): a slow client costs at most its deadline.
    void run() noexcept {
        for (;;) {
            pollfd p[2] = {{listen_fd, POLLIN, 0}, {wake[0], POLLIN, 0}};
            const int n = ::poll(p, 2, -1);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 || p[1].revents != 0) return;
            const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
            if (fd < 0) {
                if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                    ::poll(nullptr, 0, 100);  // out of descriptors: the program's need first
                }
                continue;
            }
            serve_connection(fd);
            ::close(fd);
        }
    }

    void serve_connection(int fd) noexcept {
        try {
            BoundedStream stream(fd, Clock::now() + kConnectionDeadline, kMaxRequestBytes);
            (void)server->serve(stream);
        } catch (...) {  // out of memory mid-request: the connection is closed, the next served
        }
    }

    HttpRouter router;
    std::unique_ptr<RouterServer> server;
    int listen_fd = -1;
    int wake[2] = {-1, -1};
    std::thread thread;
};

bool http_control_built() noexcept {
    return true;
}

Result<std::unique_ptr<HttpServer>> HttpServer::start(std::string_view address, std::string token,
                                                      HttpControl& control) noexcept {
    try {
        auto at = parse_http_endpoint(address);
        if (!at) return at.status();
        if (!at->loopback && token.empty()) {
            return failed_precondition(
                "http: " + at->host +
                " is not a loopback address: serving there needs a token (SessionOptions::"
                "http_token or GPUDIAG_HTTP_TOKEN), sent as Authorization: Bearer <token>");
        }
        auto impl = std::make_unique<Impl>(control, std::move(token));
        std::string why;
        int port = 0;
        impl->listen_fd = bind_socket(*at, port, why);
        if (impl->listen_fd < 0) return io_error("http: " + why);
        if (::pipe2(impl->wake, O_CLOEXEC) != 0) return io_error("http: pipe2() failed");
        Impl* raw = impl.get();
        impl->thread = quiet_thread("gpudiag-http", [raw] { raw->run(); });
        std::unique_ptr<HttpServer> server(new HttpServer(std::move(impl)));
        server->host_ = at->host;
        server->port_ = port;
        return server;
    } catch (const std::system_error& e) {
        return resource_exhausted(std::string("http: no thread for the server (") + e.what() + ")");
    } catch (...) {
        return resource_exhausted("http: out of memory starting the server");
    }
}

void HttpServer::stop() noexcept {
    if (!impl_ || !impl_->thread.joinable()) return;
    const char byte = 1;
    (void)!::write(impl_->wake[1], &byte, 1);
    impl_->thread.join();
}

std::string HttpServer::serve_bytes(HttpRouter& router, std::string_view request) noexcept {
    try {
        auto server = make_router_server(router);
        BytesStream stream(request.substr(0, kMaxRequestBytes));
        (void)server->serve(stream);
        return stream.written();
    } catch (...) {
        return {};
    }
}

#else  // built without cpp-httplib

struct HttpServer::Impl {};

bool http_control_built() noexcept {
    return false;
}

Result<std::unique_ptr<HttpServer>> HttpServer::start(std::string_view /*address*/,
                                                      std::string /*token*/,
                                                      HttpControl& /*control*/) noexcept {
    return unavailable(
        "http: this build of gpudiag has no HTTP control (configured without cpp-httplib: "
        "GPUDIAG_HTTP=OFF, or its sources could not be fetched; CMake's output says which)");
}

void HttpServer::stop() noexcept {}

std::string HttpServer::serve_bytes(HttpRouter& /*router*/, std::string_view /*request*/) noexcept {
    return {};
}

#endif

HttpServer::HttpServer(std::unique_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}

HttpServer::~HttpServer() {
    stop();
}

}  // namespace gpudiag::detail
