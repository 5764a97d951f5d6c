// SPDX-License-Identifier: Apache-2.0
// Writes the SIMULATED demo recording bundled with the Python package (gpudiag demo): a PyTorch-
// style training run whose input pipeline is too slow, whose batches come from pageable memory,
// which calls .item() every step and which keeps 8 MiB per step alive. Every event is generated
// here, deterministically; the recording says it is simulated and so does every report of it.
// It stands in until a recording made on a real GPU replaces it.
//
//   make_demo_recording OUTPUT.gpudiag
#include <gpudiag/gpudiag.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace {

using namespace gpudiag;

constexpr std::uint32_t kPid = 4242;
constexpr std::uint32_t kMainThread = 4242;
constexpr std::uint32_t kStream = 7;
constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

// A small deterministic generator so the file is the same on every machine.
struct Lcg {
    std::uint64_t state = 0x9E3779B97F4A7C15ull;
    double uniform() {  // [0, 1)
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        return static_cast<double>(state >> 11) / 9007199254740992.0;
    }
    std::uint64_t around(std::uint64_t mean, double spread) {
        return static_cast<std::uint64_t>(static_cast<double>(mean) *
                                          (1.0 - spread + 2.0 * spread * uniform()));
    }
};

class DemoBuilder {
public:
    explicit DemoBuilder(StringTable& strings) : strings_(strings) {}

    void run(int steps) {
        std::uint64_t t = 1'000'000'000;  // 1 s into the process
        counter(t, CounterKind::kPowerLimitWatts, 700);
        segment(t, 0x7f00'0000'0000, 2048 * kMiB, "torch/nn/modules/module.py:1130 _call_impl");
        std::uint64_t leak_address = 0x7f00'0000'0000 + 1536 * kMiB;
        for (int s = 0; s < steps; ++s) {
            std::uint64_t step_start = t;
            // The loop waits for the next batch: a single-process DataLoader decoding images.
            std::uint64_t wait = rng_.around(38'000'000, 0.3);
            range(t, t + wait, RangeCategory::kInputWait,
                  "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__");
            t += wait;
            // x.cuda(): 48 MiB from pageable memory, a synchronous staged copy at ~3 GB/s.
            std::uint64_t copy_ns = 48 * kMiB * 1'000'000'000 / (3ull << 30);
            std::uint32_t corr = next_corr_++;
            api(t, t + copy_ns + 30'000, "cudaMemcpyAsync", corr);
            copy(t + 20'000, t + 20'000 + copy_ns, 48 * kMiB, corr);
            t += copy_ns + 30'000;
            // Forward and backward: the activations live for the step.
            std::uint64_t act = 0x7f00'0000'0000 + 512 * kMiB;
            block(EventKind::kBlockAlloc, t, act, 768 * kMiB, "model.py:41 forward");
            std::uint64_t gpu_t = t + 10'000;
            phase_kernels(t, gpu_t, "forward", 90, 220'000);
            phase_kernels(t, gpu_t, "backward", 180, 240'000);
            phase_kernels(t, gpu_t, "optimizer", 40, 60'000);
            // loss.item(): the host blocks until the GPU has drained the queue.
            std::uint32_t sync_corr = next_corr_++;
            std::uint64_t sync_end = std::max(t, gpu_t) + 15'000;
            api(t, sync_end, "cudaStreamSynchronize", sync_corr);
            t = sync_end;
            block(EventKind::kBlockFree, t, act, 768 * kMiB, "model.py:41 forward");
            // The leak: the loss tensor kept with its graph, 8 MiB per step.
            block(EventKind::kBlockAlloc, t + 1'000, leak_address, 8 * kMiB,
                  "train.py:88 train_step (history.append(loss))");
            leak_address += 8 * kMiB;
            t += 200'000;
            step(step_start, t, s);
            counter(t, CounterKind::kGpuUtilizationPercent, 55 + 10 * rng_.uniform());
            counter(t, CounterKind::kTemperatureC, 61 + 3 * rng_.uniform());
            counter(t, CounterKind::kPowerWatts, 380 + 40 * rng_.uniform());
            counter(t, CounterKind::kThrottleReasons, 0);
        }
        std::stable_sort(events_.begin(), events_.end(),
                         [](const Event& a, const Event& b) { return a.start_ns < b.start_ns; });
    }

    const std::vector<Event>& events() const { return events_; }

private:
    Event host(std::uint64_t start, std::uint64_t end) {
        Event e;
        e.process = kPid;
        e.thread = kMainThread;
        e.start_ns = start;
        e.end_ns = end;
        e.flags = kEventFlagSynthetic;
        return e;
    }

    void range(std::uint64_t start, std::uint64_t end, RangeCategory category, const char* name) {
        Event e = host(start, end);
        e.kind = EventKind::kRange;
        e.range.category = category;
        e.range.name = strings_.intern(name);
        events_.push_back(e);
    }

    void step(std::uint64_t start, std::uint64_t end, int number) {
        Event e = host(start, end);
        e.kind = EventKind::kRange;
        e.range.category = RangeCategory::kStep;
        e.range.name = strings_.intern("ProfilerStep#" + std::to_string(number));
        e.range.id = static_cast<std::uint64_t>(number);
        events_.push_back(e);
    }

    void api(std::uint64_t start, std::uint64_t end, const char* name, std::uint32_t corr) {
        Event e = host(start, end);
        e.kind = EventKind::kApiCall;
        e.api.name = strings_.intern(name);
        e.api.correlation = corr;
        e.api.domain = ApiDomain::kRuntime;
        events_.push_back(e);
    }

    void copy(std::uint64_t start, std::uint64_t end, std::uint64_t bytes, std::uint32_t corr) {
        Event e = host(start, end);
        e.kind = EventKind::kMemcpy;
        e.device = 0;
        e.stream = kStream;
        e.copy.bytes = bytes;
        e.copy.correlation = corr;
        e.copy.direction = CopyDirection::kHostToDevice;
        e.copy.src_kind = MemoryKind::kPageable;
        e.copy.dst_kind = MemoryKind::kDevice;
        events_.push_back(e);
    }

    // `count` launches of ~6 us on the host; kernels of about `kernel_ns` queue on the stream.
    void phase_kernels(std::uint64_t& host_t, std::uint64_t& gpu_t, const char* phase, int count,
                       std::uint64_t kernel_ns) {
        std::uint64_t phase_start = host_t;
        const char* names[] = {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64",
                               ("void at::native::vectorized_elementwise_kernel<4, "
                                "at::native::GeluCUDAKernelImpl>"),
                               "cudnn::batchnorm_fwtr_nhwc_semiPersist",
                               "void at::native::reduce_kernel<512, 1>"};
        for (int k = 0; k < count; ++k) {
            std::uint32_t corr = next_corr_++;
            std::uint64_t launch = rng_.around(6'000, 0.3);
            api(host_t, host_t + launch, "cudaLaunchKernel", corr);
            std::uint64_t start = std::max(gpu_t, host_t + launch + 3'000);
            std::uint64_t dur = rng_.around(kernel_ns, 0.5);
            Event e = host(start, start + dur);
            e.kind = EventKind::kKernel;
            e.device = 0;
            e.stream = kStream;
            e.kernel.name = strings_.intern(names[k % 4]);
            e.kernel.correlation = corr;
            e.kernel.grid_size = 1024;
            e.kernel.block_size = 256;
            events_.push_back(e);
            gpu_t = start + dur + 2'000;
            host_t += launch + 1'500;
        }
        range(phase_start, host_t, RangeCategory::kPhase, phase);
    }

    void segment(std::uint64_t t, std::uint64_t address, std::uint64_t bytes, const char* site) {
        Event e = host(t, t);
        e.kind = EventKind::kSegmentAlloc;
        e.device = 0;
        e.stream = kStream;
        e.flags = static_cast<std::uint8_t>(MemoryKind::kDevice) | kEventFlagSynthetic;
        e.memory.address = address;
        e.memory.bytes = bytes;
        e.memory.aux = bytes;
        e.memory.site = strings_.intern(site);
        events_.push_back(e);
    }

    void block(EventKind kind, std::uint64_t t, std::uint64_t address, std::uint64_t bytes,
               const char* site) {
        Event e = host(t, t);
        e.kind = kind;
        e.device = 0;
        e.stream = kStream;
        e.flags = static_cast<std::uint8_t>(MemoryKind::kDevice) | kEventFlagSynthetic;
        e.memory.address = address;
        e.memory.bytes = bytes;
        e.memory.aux = bytes;
        e.memory.site = strings_.intern(site);
        events_.push_back(e);
    }

    void counter(std::uint64_t t, CounterKind kind, double value) {
        Event e = host(t, t);
        e.kind = EventKind::kCounter;
        e.device = 0;
        e.counter.counter = kind;
        e.counter.value = value;
        events_.push_back(e);
    }

    StringTable& strings_;
    std::vector<Event> events_;
    Lcg rng_;
    std::uint32_t next_corr_ = 1;
};

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s OUTPUT.gpudiag\n", argv[0]);
        return 2;
    }
    StringTable strings;
    DemoBuilder builder(strings);
    builder.run(40);
    SourceInfo info;
    info.producer = "gpudiag demo generator";
    info.description = "simulated ResNet-style training run (40 steps)";
    info.simulated = true;
    info.pid = kPid;
    info.hostname = "simulated";
    info.devices.push_back({0, "NVIDIA H200 (simulated)", std::uint64_t{141} << 30, ""});
    info.properties = {{"expandable_segments", "false"},
                       {"dataloader.num_workers", "0"},
                       {"dataloader.pin_memory", "false"}};
    SourceSummary summary;
    summary.events = builder.events().size();
    summary.notes.push_back(
        "Every event of this recording was generated by "
        "tools/make_demo/make_demo_recording.cpp; none was observed on a GPU.");
    Status s = write_recording(argv[1], info, strings, builder.events(), summary);
    if (!s.is_ok()) {
        std::fprintf(stderr, "%s\n", s.to_string().c_str());
        return 1;
    }
    std::printf("wrote %zu simulated events to %s\n", builder.events().size(), argv[1]);
    return 0;
}
