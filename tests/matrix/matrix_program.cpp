// SPDX-License-Identifier: Apache-2.0
// The entry-point matrix's C++ workload (tests/matrix/cells.py): a training-style loop with one
// planted problem, marked through gpudiag::Session or the C API, or (built with
// GPUDIAG_MATRIX_PLAIN) through nothing at all, for `gpudiag run -- ./program`.
//
//     matrix_program MODE [--c-api] [--device cpu|cuda] [--record PATH] [--report PATH]
//                    [--truth PATH]
//
// MODE: input90, input40 (the loop waits for its next batch about 90 % / 40 % of each step),
// keepup (a producer thread keeps batches ready), sync (each step waits for its result to come
// back: the device's, with --device cuda), growth (each step keeps 1 MiB of host memory, or 16
// MiB of device memory with --device cuda), crash (std::abort half-way), crash_early
// (std::abort before the first step), clean.
//
// The compute is real CPU work, timed here first; the planted input wait is a sleep sized from
// it, so the shares hold on a loaded machine. --report writes the session's report (JSON) at
// the end, --truth what the loop measured of itself (JSON). With --device cuda the GPU work goes
// through the CUDA driver API, dlopen'ed (no CUDA at build time); exit 77 when there is none.
#ifndef GPUDIAG_MATRIX_PLAIN
#    include <gpudiag/gpudiag.h>
#    include <gpudiag/gpudiag.hpp>
#    include <gpudiag/session.hpp>
#endif
#if defined(GPUDIAG_MATRIX_NVTX) && __has_include(<nvtx3/nvToolsExt.h>)
#    include <nvtx3/nvToolsExt.h>
#    define MATRIX_HAVE_NVTX 1
#endif

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Options {
    std::string mode;
    bool c_api = false;
    bool cuda = false;
    std::string record, report, truth;
};

// ---- what the loop tells gpudiag ----------------------------------------------------------------

class Markers {
public:
    virtual ~Markers() = default;
    virtual bool start() = 0;
    virtual void step_begin(std::uint64_t step) = 0;
    virtual void step_end(std::uint64_t step) = 0;
    virtual void input_wait_begin() = 0;
    virtual void input_wait_end() = 0;
    // Stops the session and writes its report (JSON) to `path` when one is given.
    virtual bool finish(const std::string& path) = 0;
};

bool write_file(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary);
    out << text;
    return static_cast<bool>(out);
}

#ifndef GPUDIAG_MATRIX_PLAIN
class SessionMarkers final : public Markers {
public:
    explicit SessionMarkers(const std::string& record) { options_.record_path = record; }
    bool start() override {
        auto created = gpudiag::Session::create(options_);
        if (!created) return fail(created.status().to_string());
        session_ = std::move(*created);
        auto started = session_->start();
        return started ? true : fail(started.to_string());
    }
    void step_begin(std::uint64_t step) override { session_->step_begin(step); }
    void step_end(std::uint64_t step) override { session_->step_end(step); }
    void input_wait_begin() override { session_->input_wait_begin(); }
    void input_wait_end() override { session_->input_wait_end(); }
    bool finish(const std::string& path) override {
        if (auto stopped = session_->stop(); !stopped) return fail(stopped.to_string());
        auto report = session_->report();
        if (!report) return fail(report.status().to_string());
        return path.empty() || write_file(path, gpudiag::render_json(*report));
    }

private:
    static bool fail(const std::string& why) {
        std::fprintf(stderr, "matrix_program: %s\n", why.c_str());
        return false;
    }
    gpudiag::SessionOptions options_;
    std::unique_ptr<gpudiag::Session> session_;
};

class CApiMarkers final : public Markers {
public:
    explicit CApiMarkers(const std::string& record) : record_(record) {}
    ~CApiMarkers() override { gpudiag_session_destroy(session_); }
    CApiMarkers(const CApiMarkers&) = delete;
    CApiMarkers& operator=(const CApiMarkers&) = delete;
    bool start() override {
        gpudiag_session_options_t options;
        gpudiag_session_options_init(&options);
        options.record_path = record_.empty() ? nullptr : record_.c_str();
        return ok(gpudiag_session_create(&options, &session_)) &&
               ok(gpudiag_session_start(session_));
    }
    void step_begin(std::uint64_t step) override {
        (void)ok(gpudiag_session_step_begin(session_, step));
    }
    void step_end(std::uint64_t step) override {
        (void)ok(gpudiag_session_step_end(session_, step));
    }
    void input_wait_begin() override { (void)ok(gpudiag_session_input_wait_begin(session_)); }
    void input_wait_end() override { (void)ok(gpudiag_session_input_wait_end(session_)); }
    bool finish(const std::string& path) override {
        if (!ok(gpudiag_session_stop(session_))) return false;
        char* json = nullptr;
        if (!ok(gpudiag_session_report(session_, GPUDIAG_FORMAT_JSON, &json))) return false;
        const bool written = path.empty() || write_file(path, json);
        gpudiag_free(json);
        return written;
    }

private:
    static bool ok(gpudiag_status_t status) {
        if (status == GPUDIAG_OK) return true;
        std::fprintf(stderr, "matrix_program: C API status %d: %s\n", static_cast<int>(status),
                     gpudiag_last_error());
        return false;
    }
    std::string record_;
    gpudiag_session_t* session_ = nullptr;
};
#endif

#ifdef GPUDIAG_MATRIX_PLAIN
// A program that does not link gpudiag: with NVTX headers at build time, it names its steps as
// any NVTX-annotated program does (gpudiag reads them under `gpudiag run`); else it says nothing.
class PlainMarkers final : public Markers {
public:
    bool start() override { return true; }
#    ifdef MATRIX_HAVE_NVTX
    void step_begin(std::uint64_t step) override {
        nvtxRangePushA(("step " + std::to_string(step)).c_str());
    }
    void step_end(std::uint64_t /*step*/) override { nvtxRangePop(); }
#    else
    void step_begin(std::uint64_t /*step*/) override {}
    void step_end(std::uint64_t /*step*/) override {}
#    endif
    void input_wait_begin() override {}
    void input_wait_end() override {}
    bool finish(const std::string& /*path*/) override { return true; }
};
#endif

// ---- the device, through the CUDA driver API (dlopen'ed) ----------------------------------------

class Device {
public:
    // False when there is no CUDA driver or device.
    bool open() {
        lib_ = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (lib_ == nullptr) return false;
        auto sym = [this](const char* name) { return dlsym(lib_, name); };
        init_ = reinterpret_cast<int (*)(unsigned)>(sym("cuInit"));
        device_get_ = reinterpret_cast<int (*)(int*, int)>(sym("cuDeviceGet"));
        retain_ = reinterpret_cast<int (*)(void**, int)>(sym("cuDevicePrimaryCtxRetain"));
        set_current_ = reinterpret_cast<int (*)(void*)>(sym("cuCtxSetCurrent"));
        alloc_ = reinterpret_cast<int (*)(std::uint64_t*, std::size_t)>(sym("cuMemAlloc_v2"));
        memset_async_ = reinterpret_cast<int (*)(std::uint64_t, unsigned char, std::size_t, void*)>(
            sym("cuMemsetD8Async"));
        to_host_ =
            reinterpret_cast<int (*)(void*, std::uint64_t, std::size_t)>(sym("cuMemcpyDtoH_v2"));
        if (!init_ || !device_get_ || !retain_ || !set_current_ || !alloc_ || !memset_async_ ||
            !to_host_) {
            return false;
        }
        int device = 0;
        void* context = nullptr;
        return init_(0) == 0 && device_get_(&device, 0) == 0 && retain_(&context, device) == 0 &&
               set_current_(context) == 0 && alloc_(&work_, kWorkBytes) == 0;
    }
    // A few milliseconds of device work, queued (memsets of a large buffer: no kernel to build).
    void queue_work() const {
        for (int i = 0; i < 8; ++i)
            (void)memset_async_(work_, static_cast<unsigned char>(i), kWorkBytes, nullptr);
    }
    // Reads a byte back: waits for the queued work, as .item() does.
    void read_back() const {
        unsigned char byte = 0;
        (void)to_host_(&byte, work_, 1);
    }
    bool keep(std::size_t bytes) {
        std::uint64_t pointer = 0;
        return alloc_(&pointer, bytes) == 0;
    }

private:
    static constexpr std::size_t kWorkBytes = std::size_t{1} << 30;
    void* lib_ = nullptr;
    int (*init_)(unsigned) = nullptr;
    int (*device_get_)(int*, int) = nullptr;
    int (*retain_)(void**, int) = nullptr;
    int (*set_current_)(void*) = nullptr;
    int (*alloc_)(std::uint64_t*, std::size_t) = nullptr;
    int (*memset_async_)(std::uint64_t, unsigned char, std::size_t, void*) = nullptr;
    int (*to_host_)(void*, std::uint64_t, std::size_t) = nullptr;
    std::uint64_t work_ = 0;
};

// ---- the loop's pieces --------------------------------------------------------------------------

// Real CPU work: dot products over a few KiB, `rounds` times.
float compute(std::size_t rounds) {
    static std::vector<float> a(4096, 1.0001F), b(4096, 0.9999F);
    float acc = 0;
    for (std::size_t r = 0; r < rounds; ++r) {
        for (std::size_t i = 0; i < a.size(); ++i) acc += a[i] * b[i];
        a[r % a.size()] = acc * 1e-9F;
    }
    return acc;
}

// A step's compute: about 8 ms on this machine when it is not busy.
constexpr double kComputeS = 0.008;

// Rounds of compute() for kComputeS, from the fastest of a few timed runs (the machine's speed,
// not its load).
std::size_t calibrate() {
    constexpr std::size_t kProbe = 200;
    volatile float sink = compute(kProbe);  // warm
    double best = 1e9;
    for (int i = 0; i < 3; ++i) {
        const auto t0 = Clock::now();
        sink = compute(kProbe);
        best = std::min(best, seconds_since(t0));
    }
    (void)sink;
    return std::max<std::size_t>(1, static_cast<std::size_t>(kComputeS / best * kProbe));
}

// Batches made ahead by a producer thread (a loader whose workers keep up), `depth` deep: the
// loop's wait for one is a queue's hand-over.
class Prefetcher {
public:
    explicit Prefetcher(std::size_t depth) : depth_(depth), thread_([this] { produce(); }) {}
    ~Prefetcher() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            done_ = true;
        }
        changed_.notify_all();
        thread_.join();
    }
    Prefetcher(const Prefetcher&) = delete;
    Prefetcher& operator=(const Prefetcher&) = delete;
    std::vector<float> next() {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [this] { return !ready_.empty(); });
        std::vector<float> batch = std::move(ready_.front());
        ready_.pop_front();
        return batch;
    }
    // Tells the producer a place is free: after the wait, so that the producer's waking (which
    // a busy machine may let run first) is not timed as the loop's wait.
    void refill() { changed_.notify_all(); }

private:
    void produce() {
        for (;;) {
            std::unique_lock<std::mutex> lock(mutex_);
            changed_.wait(lock, [this] { return done_ || ready_.size() < depth_; });
            if (done_) return;
            ready_.emplace_back(1024, 1.0F);
            changed_.notify_all();
        }
    }
    std::size_t depth_;
    std::mutex mutex_;  // guards ready_ and done_
    std::condition_variable changed_;
    std::deque<std::vector<float>> ready_;
    bool done_ = false;
    std::thread thread_;  // last: starts once the rest is built
};

struct Truth {
    double waited_s = 0, total_s = 0;
    int steps_run = 0;
    void write(const std::string& path) const {
        if (path.empty()) return;
        const double share = total_s > 0 ? waited_s / total_s : 0;
        write_file(path, "{\"steps_run\": " + std::to_string(steps_run) +
                             ", \"share\": " + std::to_string(share) + "}\n");
    }
};

int run(const Options& o, Markers& markers) {
    Device device;
    if (o.cuda && !device.open()) {
        std::fprintf(stderr, "matrix_program: no CUDA driver or device\n");
        return 77;
    }
    // Workers that keep up: a step computes 3x longer, so a hand-over delayed by a busy machine
    // stays a small share of it.
    const double compute_s = o.mode == "keepup" ? 3 * kComputeS : kComputeS;
    const std::size_t rounds = static_cast<std::size_t>(calibrate() * (compute_s / kComputeS));
    volatile float sink = 0;
    const double share = o.mode == "input90" ? 0.9 : o.mode == "input40" ? 0.4 : 0.0;
    const auto wait = std::chrono::duration<double>(compute_s * share / (1.0 - share));
    int steps = std::clamp(static_cast<int>(1.2 / (compute_s + wait.count())), 12, 60);
    // The crash comes after at least 0.7 s: the session writes its events every 250 ms, and an
    // abort loses what it had not yet written.
    if (o.mode == "crash") steps = std::max(steps, static_cast<int>(1.4 / compute_s));
    std::unique_ptr<Prefetcher> prefetcher;
    if (o.mode == "keepup") prefetcher = std::make_unique<Prefetcher>(16);
    std::vector<std::vector<char>> kept;
    Truth truth;
    if (!markers.start()) return 1;
    if (o.mode == "crash_early") std::abort();  // the program's own failure, before any step
    for (int i = 0; i < steps; ++i) {
        const auto step_start = Clock::now();
        markers.step_begin(static_cast<std::uint64_t>(i));
        markers.input_wait_begin();
        if (prefetcher) (void)prefetcher->next();
        if (wait.count() > 0) std::this_thread::sleep_for(wait);
        markers.input_wait_end();
        truth.waited_s += seconds_since(step_start);
        if (prefetcher) prefetcher->refill();
        if (o.cuda) device.queue_work();
        sink = compute(rounds);
        if (o.mode == "sync") {
            if (o.cuda) {
                device.read_back();
            } else {  // the host waits for a result from another thread: nothing a GPU sees
                sink =
                    std::async(std::launch::async, [rounds] { return compute(rounds / 8); }).get();
            }
        } else if (o.mode == "growth") {
            if (o.cuda) {
                (void)device.keep(std::size_t{16} << 20);
            } else {
                kept.emplace_back(std::size_t{1} << 20, static_cast<char>(i));
            }
        }
        markers.step_end(static_cast<std::uint64_t>(i));
        truth.total_s += seconds_since(step_start);
        truth.steps_run = i + 1;
        if (o.mode == "crash" && i + 1 == steps / 2) {
            truth.write(o.truth);
            std::abort();
        }
    }
    (void)sink;
    truth.write(o.truth);
    return markers.finish(o.report) ? 0 : 1;
}

bool parse(int argc, char** argv, Options& o) {
    static const char* const kModes[] = {"input90", "input40", "keepup",      "sync",
                                         "growth",  "crash",   "crash_early", "clean"};
    if (argc < 2) return false;
    o.mode = argv[1];
    if (std::find_if(std::begin(kModes), std::end(kModes),
                     [&](const char* m) { return o.mode == m; }) == std::end(kModes)) {
        return false;
    }
    for (int i = 2; i < argc; ++i) {
        const std::string arg = argv[i];
        const bool has_value = i + 1 < argc;
        if (arg == "--c-api") {
            o.c_api = true;
        } else if (arg == "--device" && has_value) {
            o.cuda = std::string(argv[++i]) == "cuda";
        } else if (arg == "--record" && has_value) {
            o.record = argv[++i];
        } else if (arg == "--report" && has_value) {
            o.report = argv[++i];
        } else if (arg == "--truth" && has_value) {
            o.truth = argv[++i];
        } else {
            return false;
        }
    }
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    if (!parse(argc, argv, o)) {
        std::fprintf(stderr,
                     "usage: %s input90|input40|keepup|sync|growth|crash|crash_early|clean "
                     "[--c-api] [--device cpu|cuda] [--record PATH] [--report PATH] "
                     "[--truth PATH]\n",
                     argv[0]);
        return 2;
    }
#ifdef GPUDIAG_MATRIX_PLAIN
    std::unique_ptr<Markers> markers = std::make_unique<PlainMarkers>();
#else
    std::unique_ptr<Markers> markers;
    if (o.c_api) {
        markers = std::make_unique<CApiMarkers>(o.record);
    } else {
        markers = std::make_unique<SessionMarkers>(o.record);
    }
#endif
    return run(o, *markers);
}
