// SPDX-License-Identifier: Apache-2.0
// inference_service: a request loop on the CUDA runtime, diagnosed by gpudiag while it runs.
//
//   inference_service [--requests N] [--leak-kib K] [--fragment] [--record FILE] [--json]
//                     [--replay INPUT]
//
// --leak-kib K   keeps K KiB per request alive forever (the classic slow service leak)
// --fragment     interleaves long-lived small cache entries with large working buffers in the
//                service's arena, so free memory splinters and a 1 GiB request fails although
//                about 3 GiB are free
// Memory comes from DeviceArena, a small caching allocator that reports its segment and blocks to
// gpudiag (as PyTorch's does), next to plain cudaMalloc that gpudiag sees through CUPTI.
// Without a GPU it says so, shows gpudiag's capture status, and still runs the whole loop on a
// recording or trace instead (--replay: a .gpudiag recording, a Kineto trace, a memory snapshot;
// by default the demo recording bundled with gpudiag's sources, which is simulated):
// its events go through the session as a service's would, and the report says it was a replay.
#include <gpudiag/gpudiag.hpp>
#include <gpudiag/session.hpp>

#include "device_arena.hpp"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Args {
    int requests = 200;
    std::size_t leak_kib = 0;
    bool fragment = false;
    std::string record;
    bool json = false;
    std::string replay = GPUDIAG_EXAMPLE_DEMO_RECORDING;
};

Args parse(int argc, char** argv) {
    Args a;
    for (int i = 1; i < argc; ++i) {
        std::string s = argv[i];
        auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : ""; };
        if (s == "--requests")
            a.requests = std::atoi(next());
        else if (s == "--leak-kib")
            a.leak_kib = std::strtoull(next(), nullptr, 10);
        else if (s == "--fragment")
            a.fragment = true;
        else if (s == "--record")
            a.record = next();
        else if (s == "--json")
            a.json = true;
        else if (s == "--replay")
            a.replay = next();
        else
            std::fprintf(stderr, "ignoring unknown argument %s\n", s.c_str());
    }
    return a;
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

// No GPU: the same session, watch and report, fed from a recording instead of CUDA.
int replay_without_gpu(const Args& args) {
    if (args.replay.empty()) return 0;
    std::printf(
        "replaying %s through the session instead (recorded elsewhere: not this machine's GPU)\n",
        args.replay.c_str());
    gpudiag::SessionOptions options;
    options.capture_gpu = false;
    auto session = gpudiag::Session::create(options);
    if (!session || !(*session)->start().is_ok()) {
        std::fprintf(stderr, "gpudiag: cannot start a session\n");
        return 1;
    }
    (void)(*session)->watch_memory(std::size_t{1} << 30, [](std::uint64_t bytes) {
        std::printf("watch: device memory in use passed 1 GiB (%.2f GiB)\n",
                    static_cast<double>(bytes) / (1 << 30));
    });
    if (auto replayed = (*session)->replay(args.replay); !replayed.is_ok()) {
        std::fprintf(stderr, "gpudiag: %s\n", replayed.to_string().c_str());
        return 1;
    }
    (void)(*session)->stop();
    return print_report(**session, args.json);
}

}  // namespace

int main(int argc, char** argv) {
    Args args = parse(argc, argv);
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        auto status = gpudiag::probe_capture();
        std::printf("no CUDA device: nothing to serve. gpudiag capture level: %s\n",
                    gpudiag::capture_level_name(status.level));
        for (const auto& r : status.reasons) std::printf("  - %s\n", r.c_str());
        return replay_without_gpu(args);
    }

    gpudiag::SessionOptions options;
    options.record_path = args.record;
    options.record_window_s = 600;  // a service: keep the last 10 minutes, written at stop
    auto session = gpudiag::Session::create(options);
    if (!session) {
        std::fprintf(stderr, "gpudiag: %s\n", session.status().to_string().c_str());
        return 1;
    }
    if (auto started = (*session)->start(); !started.is_ok()) {
        // The service still runs; it only goes without the diagnosis.
        std::fprintf(stderr, "gpudiag: %s\n", started.to_string().c_str());
    }
    (void)(*session)->watch_memory(std::size_t{1} << 30, [](std::uint64_t bytes) {
        std::printf("watch: device memory in use passed 1 GiB (%.2f GiB)\n",
                    static_cast<double>(bytes) / (1 << 30));
    });

    DeviceArena arena(**session, std::size_t{3} << 30);
    if (!arena.ok()) {
        std::fprintf(stderr, "cannot reserve the 3 GiB arena on this GPU\n");
        return 1;
    }
    cudaStream_t stream;
    cudaStreamCreate(&stream);
    constexpr std::size_t kMiB = std::size_t{1} << 20;
    for (int r = 0; r < args.requests; ++r) {
        (*session)->step_begin(static_cast<std::uint64_t>(r));
        (*session)->phase_begin("request");
        void* activations = arena.allocate(64 * kMiB, "Model::forward activations");
        if (activations) cudaMemsetAsync(activations, 0, 64 * kMiB, stream);
        if (args.leak_kib > 0) {
            // The planted leak: a per-request buffer that is never released.
            (void)arena.allocate(args.leak_kib << 10, "RequestCache::remember (never evicted)");
        }
        cudaStreamSynchronize(stream);
        if (activations) arena.release(activations, "Model::forward activations");
        (*session)->phase_end();
        (*session)->step_end(static_cast<std::uint64_t>(r));
    }
    int failures = 0;
    if (args.fragment) {
        // Working buffers with a small long-lived cache entry after each: freeing the buffers
        // leaves holes of 96 MiB between pinned entries.
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
        if (arena.allocate(std::size_t{1} << 30, "Model::load_adapter") == nullptr) ++failures;
    }
    (void)(*session)->stop();
    if (int failed = print_report(**session, args.json); failed != 0) return failed;
    cudaStreamDestroy(stream);
    if (failures > 0)
        std::printf("%d request(s) failed to allocate (see gpudiag's explanation)\n", failures);
    return 0;
}
