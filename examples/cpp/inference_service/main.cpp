// SPDX-License-Identifier: Apache-2.0
// inference_service: a request loop on the CUDA runtime, diagnosed by gpudiag while it runs.
//
//   inference_service [--requests N] [--request-ms MS] [--leak-kib K] [--fragment]
//                     [--record FILE] [--window-s S] [--no-deep] [--json] [--replay INPUT]
//                     [--http HOST:PORT]
//
// --requests N   serves N requests (0: until SIGTERM or SIGINT)
// --request-ms   each request's own work takes this long (a model's forward pass, simulated)
// --leak-kib K   plants the classic slow service leak: each request cudaMallocs K KiB in
//                RequestCache::remember and never frees it
// --fragment     interleaves long-lived small cache entries with large working buffers in the
//                service's arena, so free memory splinters and a 1 GiB request fails although
//                about 2.9 GiB are free
// --record FILE  keeps gpudiag's flight recorder on: the last S seconds (--window-s, 600 by
//                default) on disk beside FILE, dumps on SIGUSR1, on a failed allocation and when
//                the memory watch fires; FILE is written at the end
// --no-deep      leaves CUPTI's callback subscriber alone (on a GPU, sites are then not named)
// --replay INPUT feeds a recording or trace through the session instead of serving
// --http HOST:PORT  answers /metrics, /report, /healthz, POST /dump and /capture/pause|resume
//                there while it serves (127.0.0.1:0: any free port, printed; docs/http.md)
// Memory comes from DeviceArena, a small caching allocator that reports its segment and blocks to
// gpudiag (as PyTorch's does), and from plain cudaMalloc, which gpudiag sees through CUPTI.
// The CUDA runtime is loaded at run time (device_memory.hpp): without it or a GPU the service
// says so and runs the same loop on simulated device memory, reported to gpudiag with
// Session::record_allocation, so the report shows the same leak.
#include <gpudiag/gpudiag.hpp>
#include <gpudiag/session.hpp>

#include "device_arena.hpp"
#include "device_memory.hpp"

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace service {

/// Keeps a buffer per request "for reuse" and never evicts one: the planted leak. Out of line,
/// not inlined and exported (ENABLE_EXPORTS), so that on a GPU gpudiag's deep capture names
/// remember() as the site of the cudaMalloc.
class RequestCache {
public:
    explicit RequestCache(DeviceMemory& memory) : memory_(memory) {}
    ~RequestCache() {
        for (void* p : kept_) memory_.release(p);
    }
    RequestCache(const RequestCache&) = delete;
    RequestCache& operator=(const RequestCache&) = delete;

    __attribute__((noinline)) void remember(std::size_t bytes);

private:
    DeviceMemory& memory_;
    std::vector<void*> kept_;
};

void RequestCache::remember(std::size_t bytes) {
    if (void* p = memory_.allocate(bytes, "service::RequestCache::remember"); p != nullptr) {
        kept_.push_back(p);
    }
}

}  // namespace service

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kArenaBytes = std::size_t{3} << 30;

struct Args {
    int requests = 200;
    int request_ms = 2;
    std::size_t leak_kib = 0;
    bool fragment = false;
    std::string record;
    double window_s = 600;
    bool deep = true;
    bool json = false;
    std::string replay;
    std::string http;
};

Args parse(int argc, char** argv) {
    Args a;
    for (int i = 1; i < argc; ++i) {
        std::string s = argv[i];
        auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : ""; };
        if (s == "--requests")
            a.requests = std::atoi(next());
        else if (s == "--request-ms")
            a.request_ms = std::atoi(next());
        else if (s == "--leak-kib")
            a.leak_kib = std::strtoull(next(), nullptr, 10);
        else if (s == "--fragment")
            a.fragment = true;
        else if (s == "--record")
            a.record = next();
        else if (s == "--window-s")
            a.window_s = std::atof(next());
        else if (s == "--no-deep")
            a.deep = false;
        else if (s == "--json")
            a.json = true;
        else if (s == "--replay")
            a.replay = next();
        else if (s == "--http")
            a.http = next();
        else
            std::fprintf(stderr, "ignoring unknown argument %s\n", s.c_str());
    }
    return a;
}

// The signal handlers' view of the service: a dump request and a graceful stop.
std::atomic<gpudiag::Session*> g_session{nullptr};
static_assert(std::atomic<gpudiag::Session*>::is_always_lock_free);
volatile std::sig_atomic_t g_stop_requested = 0;

extern "C" void on_dump_signal(int) {
    if (gpudiag::Session* s = g_session.load()) s->request_dump();  // async-signal-safe
}
extern "C" void on_stop_signal(int) {
    g_stop_requested = 1;
}

void install_signal_handlers() {
    struct sigaction sa {};
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_dump_signal;
    sigaction(SIGUSR1, &sa, nullptr);
    sa.sa_handler = on_stop_signal;
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
}

int print_report(gpudiag::Session& session, bool json) {
    auto report = session.report();
    if (!report) {
        std::fprintf(stderr, "gpudiag: %s\n", report.status().to_string().c_str());
        return 1;
    }
    std::fputs((json ? gpudiag::render_json(*report) : gpudiag::render_text(*report)).c_str(),
               stdout);
    return 0;
}

void watch(gpudiag::Session& session, std::uint64_t level) {
    auto said = session.watch_memory(level, [](std::uint64_t bytes) {
        std::printf("watch: device memory in use passed the watch level (%.2f GiB)\n",
                    static_cast<double>(bytes) / (1 << 30));
    });
    if (!said) std::fprintf(stderr, "gpudiag: watch: %s\n", said.status().to_string().c_str());
}

// The same session, watch and report, fed from a recording or trace instead of the service.
int replay(const Args& args) {
    std::printf("replaying %s through the session (recorded elsewhere: not this machine's GPU)\n",
                args.replay.c_str());
    gpudiag::SessionOptions options;
    options.capture_gpu = false;
    auto session = gpudiag::Session::create(options);
    if (!session) {
        std::fprintf(stderr, "gpudiag: %s\n", session.status().to_string().c_str());
        return 1;
    }
    if (auto started = (*session)->start(); !started.is_ok()) {
        std::fprintf(stderr, "gpudiag: %s\n", started.to_string().c_str());
        return 1;
    }
    watch(**session, std::uint64_t{1} << 30);
    if (auto replayed = (*session)->replay(args.replay); !replayed.is_ok()) {
        std::fprintf(stderr, "gpudiag: %s\n", replayed.to_string().c_str());
        return 1;
    }
    (void)(*session)->stop();
    return print_report(**session, args.json);
}

void serve_one(gpudiag::Session& session, DeviceMemory& memory, DeviceArena& arena,
               service::RequestCache& cache, const Args& args, std::uint64_t r) {
    gpudiag::ScopedStep step(session, r);
    gpudiag::ScopedPhase phase(session, "request");
    void* activations = arena.allocate(64 * kMiB, "Model::forward activations");
    memory.touch(activations, 64 * kMiB);
    if (args.leak_kib > 0) cache.remember(args.leak_kib << 10);
    if (args.request_ms > 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(args.request_ms));
    if (activations) arena.release(activations, "Model::forward activations");
}

// Working buffers with a small long-lived cache entry after each: freeing the buffers leaves
// holes of 96 MiB between pinned entries, and a 1 GiB request then fails. Returns the failures.
int fragment(DeviceArena& arena) {
    std::vector<void*> working;
    for (int i = 0; i < 24; ++i) {
        working.push_back(arena.allocate(96 * kMiB, "Batcher::assemble working buffer"));
        (void)arena.allocate(2 * kMiB, "KvCache::insert (long-lived)");
    }
    for (void* p : working) {
        if (p) arena.release(p, "Batcher::assemble working buffer");
    }
    std::printf("arena free: %.2f GiB; requesting 1 GiB\n",
                static_cast<double>(arena.free_bytes()) / (1 << 30));
    return arena.allocate(std::size_t{1} << 30, "Model::load_adapter") == nullptr ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a service's log: each line as it happens
    Args args = parse(argc, argv);
    if (!args.replay.empty()) return replay(args);

    gpudiag::SessionOptions options;
    options.record_path = args.record;
    if (!args.record.empty()) options.record_window_s = args.window_s;
    options.deep = args.deep;  // on a GPU: the call site of each cudaMalloc
    options.http = args.http;  // an operator's (or a scraper's) way in, on loopback
    auto session = gpudiag::Session::create(options);
    if (!session) {
        std::fprintf(stderr, "gpudiag: %s\n", session.status().to_string().c_str());
        return 1;
    }
    if (auto started = (*session)->start(); !started.is_ok()) {
        // The service still runs; it only goes without the diagnosis.
        std::fprintf(stderr, "gpudiag: %s\n", started.to_string().c_str());
    }
    g_session.store(session->get());
    install_signal_handlers();
    gpudiag::CaptureStatus capture = (*session)->status();
    std::printf("gpudiag capture level: %s\n", gpudiag::capture_level_name(capture.level));
    for (const auto& r : capture.reasons) std::printf("  - %s\n", r.c_str());
    if (!args.http.empty()) {
        const gpudiag::HttpStatus http = (*session)->http_status();
        if (http.serving) {
            std::printf("gpudiag HTTP control: http://%s:%d\n", http.address.c_str(), http.port);
        } else {
            std::printf("gpudiag HTTP control: not served (%s)\n", http.reason.c_str());
        }
    }

    DeviceMemory memory(**session);
    std::printf("%s\n", memory.description().c_str());
    if (!memory.on_gpu()) {
        std::printf(
            "no GPU to serve on: running the same requests on simulated device memory, "
            "reported to gpudiag through Session::record_allocation\n");
    }
    // Fires once the leak holds 64 MiB beside the arena (and writes a dump, in window mode).
    watch(**session, kArenaBytes + 64 * kMiB);

    DeviceArena arena(**session, memory, kArenaBytes);
    if (!arena.ok()) {
        std::fprintf(stderr, "cannot reserve the 3 GiB arena on this GPU\n");
        return 1;
    }
    service::RequestCache cache(memory);
    for (std::uint64_t r = 0; !g_stop_requested; ++r) {
        if (args.requests > 0 && r >= static_cast<std::uint64_t>(args.requests)) break;
        serve_one(**session, memory, arena, cache, args, r);
    }
    int failures = args.fragment ? fragment(arena) : 0;
    (void)(*session)->stop();
    g_session.store(nullptr);
    if (int failed = print_report(**session, args.json); failed != 0) return failed;
    if (failures > 0)
        std::printf("%d request(s) failed to allocate (see gpudiag's explanation)\n", failures);
    return 0;
}
