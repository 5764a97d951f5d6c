// SPDX-License-Identifier: Apache-2.0
// inference_service: a request loop on the CUDA runtime, diagnosed by gpudiag while it runs.
//
//   inference_service [--requests N] [--leak-kib K] [--fragment] [--record FILE] [--json]
//
// --leak-kib K   keeps K KiB per request alive forever (the classic slow service leak)
// --fragment     interleaves long-lived small buffers with short-lived large ones, so free memory
//                splinters and a late large request fails although the total free would fit
// Without a GPU it says so and exits 0 after showing gpudiag's capture status.
#include <gpudiag/gpudiag.hpp>
#include <gpudiag/session.hpp>

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
};

Args parse(int argc, char** argv) {
    Args a;
    for (int i = 1; i < argc; ++i) {
        std::string s = argv[i];
        auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : ""; };
        if (s == "--requests") a.requests = std::atoi(next());
        else if (s == "--leak-kib") a.leak_kib = std::strtoull(next(), nullptr, 10);
        else if (s == "--fragment") a.fragment = true;
        else if (s == "--record") a.record = next();
        else if (s == "--json") a.json = true;
        else std::fprintf(stderr, "ignoring unknown argument %s\n", s.c_str());
    }
    return a;
}

__attribute__((noinline)) void* allocate(std::size_t bytes) {
    void* p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) return nullptr;
    return p;
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
        return 0;
    }

    gpudiag::SessionOptions options;
    options.record_path = args.record;
    auto session = gpudiag::Session::create(options);
    if (!session) {
        std::fprintf(stderr, "gpudiag: %s\n", session.status().to_string().c_str());
        return 1;
    }
    (void)(*session)->start();
    (void)(*session)->watch_memory(std::size_t{1} << 30, [](std::uint64_t bytes) {
        std::printf("watch: device memory in use passed 1 GiB (%.2f GiB)\n",
                    static_cast<double>(bytes) / (1 << 30));
    });

    std::vector<void*> leaked;
    std::vector<void*> pinned_small;
    cudaStream_t stream;
    cudaStreamCreate(&stream);
    int failures = 0;
    for (int r = 0; r < args.requests; ++r) {
        (*session)->step_begin(static_cast<std::uint64_t>(r));
        (*session)->phase_begin("request");
        void* activations = allocate(std::size_t{8} << 20);  // per-request working memory
        if (activations) cudaMemsetAsync(activations, 0, std::size_t{8} << 20, stream);
        if (args.leak_kib > 0) {
            void* p = allocate(args.leak_kib << 10);
            if (p) leaked.push_back(p);  // never freed: the planted leak
        }
        if (args.fragment) {
            // A small long-lived buffer lands between big short-lived ones.
            if (void* small = allocate(std::size_t{2} << 20)) pinned_small.push_back(small);
        }
        cudaStreamSynchronize(stream);
        if (activations) cudaFree(activations);
        (*session)->phase_end();
        (*session)->step_end(static_cast<std::uint64_t>(r));
    }
    if (args.fragment) {
        void* big = allocate(std::size_t{1} << 40);  // 1 TiB: fails, and gpudiag explains why
        if (!big) ++failures;
        else cudaFree(big);
    }
    (void)(*session)->stop();
    auto report = (*session)->report();
    if (!report) {
        std::fprintf(stderr, "gpudiag: %s\n", report.status().to_string().c_str());
        return 1;
    }
    std::fputs((args.json ? gpudiag::render_json(*report) : gpudiag::render_text(*report)).c_str(),
               stdout);
    for (void* p : leaked) cudaFree(p);
    for (void* p : pinned_small) cudaFree(p);
    cudaStreamDestroy(stream);
    return failures > 0 ? 0 : 0;
}
