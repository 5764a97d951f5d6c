// SPDX-License-Identifier: Apache-2.0
#include "service_workload.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

namespace gpudiag::soak {
namespace {

// Where each kind of block lives: one segment per use, far apart, so addresses never collide.
constexpr std::uint64_t kInputSegment = 0x7f0000000000ull;
constexpr std::uint64_t kActivationSegment = 0x7f1000000000ull;
constexpr std::uint64_t kLeakSegment = 0x7f2000000000ull;
constexpr std::uint64_t kInputBytes = std::uint64_t{4} << 20;
constexpr std::uint64_t kActivationBytes = std::uint64_t{16} << 20;
constexpr std::uint64_t kSlots = 8;  // a shard's requests take turns over these (no overlap)
constexpr std::uint64_t kSecond = 1000000000ull;
constexpr std::uint32_t kPid = 31337;
constexpr std::uint32_t kStream = 7;

const char* const kKernelNames[] = {
    "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_tn",
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>",
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float>",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps>>",
    "flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::half_t>>",
    "void at::native::(anonymous namespace)::layer_norm_kernel<float>",
};

}  // namespace

void ServiceWorkloadTruth::add(const ServiceWorkloadTruth& o) {
    const bool had = events > 0;
    events += o.events;
    requests += o.requests;
    kernels += o.kernels;
    samples += o.samples;
    allocations += o.allocations;
    frees += o.frees;
    leaked_blocks += o.leaked_blocks;
    leaked_bytes += o.leaked_bytes;
    if (o.events == 0) return;
    first_ns = had ? std::min(first_ns, o.first_ns) : o.first_ns;
    last_ns = std::max(last_ns, o.last_ns);
}

ServiceWorkload::ServiceWorkload(ServiceWorkloadOptions options,
                                 std::function<StringId(std::string_view)> intern)
    : options_(std::move(options)),
      rng_(0),
      arrivals_(0),
      end_ns_(static_cast<std::uint64_t>(options_.hours * 3600.0 * 1e9)) {
    options_.shards = std::clamp<std::uint32_t>(options_.shards, 1, kMaxShards);
    options_.shard = std::min(options_.shard, options_.shards - 1);
    options_.leak_every = std::max<std::uint64_t>(options_.leak_every, 1);
    options_.devices = std::max<std::uint16_t>(options_.devices, 1);
    arrivals_ = options_.seed * 0x9E3779B97F4A7C15ull;
    rng_ = arrivals_ ^ (0xD1B54A32D192ED03ull * (options_.shard + 1));
    busy_until_.assign(options_.devices, 0);
    input_site_ = intern("service/server.py:41 handle_request");
    activation_site_ = intern("service/model.py:120 forward");
    leak_site_ = intern(options_.leak_site);
    for (const char* name : kKernelNames) kernel_names_.push_back(intern(name));
}

SourceInfo ServiceWorkload::source() const {
    SourceInfo info;
    info.producer = "simulated";
    info.description = "GENERATED inference service, " + std::to_string(options_.hours) +
                       " h of service time compressed (tests/soak/service_workload.hpp)";
    info.simulated = true;
    info.pid = kPid;
    for (std::uint16_t d = 0; d < options_.devices; ++d) {
        DeviceInfo dev;
        dev.ordinal = d;
        dev.name = "simulated GPU";
        dev.total_memory_bytes = std::uint64_t{80} << 30;
        info.devices.push_back(dev);
    }
    return info;
}

std::uint64_t ServiceWorkload::split_mix(std::uint64_t& state) {
    // SplitMix64: small, fast, the same on every machine.
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void ServiceWorkload::account(std::vector<Event>& out, std::size_t before) {
    for (std::size_t i = before; i < out.size(); ++i) {
        out[i].start_ns += options_.epoch_ns;
        out[i].end_ns += options_.epoch_ns;
        truth_.first_ns = truth_.events == 0 && i == before
                              ? out[i].start_ns
                              : std::min(truth_.first_ns, out[i].start_ns);
        truth_.last_ns = std::max(truth_.last_ns, out[i].end_ns);
    }
    truth_.events += out.size() - before;
}

Event ServiceWorkload::memory_event(EventKind kind, std::uint16_t device, std::uint64_t t,
                                    std::uint64_t address, std::uint64_t bytes,
                                    StringId site) const {
    Event e;
    e.kind = kind;
    e.device = device;
    e.process = kPid;
    e.thread = kPid;
    e.stream = kStream;
    e.start_ns = e.end_ns = t;
    e.flags = static_cast<std::uint8_t>(MemoryKind::kDevice);
    e.memory.address = address;
    e.memory.bytes = bytes;
    e.memory.aux = bytes;
    e.memory.site = site;
    return e;
}

// NVML and allocator samples of every whole second of this shard up to `t_ns`.
void ServiceWorkload::emit_samples_until(std::uint64_t t_ns, std::vector<Event>& out) {
    while (next_second_ * kSecond <= t_ns && next_second_ * kSecond < end_ns_) {
        const std::uint64_t second = next_second_;
        next_second_ += 1;
        if (second % options_.shards != options_.shard) continue;
        const std::uint64_t t = second * kSecond;
        const double hour = static_cast<double>(second) / 3600.0;
        // The leak lives inside a segment the allocator reserved at start-up, so neither its
        // reserved figure nor NVML's (reserved plus the CUDA context) moves: only block-level
        // accounting can see it, as in a service whose cache is already large enough.
        const double reserved = static_cast<double>(2 * kSegmentBytes + kLeakSegmentBytes);
        constexpr double kContextBytes = 600.0 * (1 << 20);
        for (std::uint16_t d = 0; d < options_.devices; ++d) {
            const struct {
                CounterKind kind;
                double value;
            } samples[] = {
                {CounterKind::kGpuUtilizationPercent,
                 55 + 20 * std::sin(hour * 0.26) + 5 * uniform()},
                {CounterKind::kDeviceMemoryUsedBytes, reserved + kContextBytes},
                {CounterKind::kSmClockMhz, 1980 - 30 * uniform()},
                {CounterKind::kTemperatureC, 61 + 4 * std::sin(hour * 0.26)},
                {CounterKind::kPowerWatts, 420 + 60 * uniform()},
                {CounterKind::kFrameworkReservedBytes, reserved},
            };
            for (const auto& s : samples) {
                Event e;
                e.kind = EventKind::kCounter;
                e.device = d;
                e.process = kPid;
                e.start_ns = e.end_ns = t;
                e.counter.counter = s.kind;
                e.counter.value = s.value;
                out.push_back(e);
                ++truth_.samples;
            }
        }
    }
}

bool ServiceWorkload::next(std::vector<Event>& out) {
    const std::size_t before = out.size();
    if (!started_) {
        started_ = true;
        // The allocator's segments, reserved at start-up by shard 0 (one set per device).
        if (options_.shard == 0) {
            for (std::uint16_t d = 0; d < options_.devices; ++d) {
                const std::uint64_t dev_base = std::uint64_t{d} << 36;
                for (const auto& [base, bytes] : {std::pair{kInputSegment, kSegmentBytes},
                                                  std::pair{kActivationSegment, kSegmentBytes},
                                                  std::pair{kLeakSegment, kLeakSegmentBytes}}) {
                    Event e = memory_event(EventKind::kSegmentAlloc, d, 0, base + dev_base, bytes,
                                           kNoString);
                    e.memory.aux = kSegmentPoolLarge;
                    out.push_back(e);
                }
            }
        }
    }
    // Requests of the whole run arrive with exponential gaps (the same draws in every shard);
    // this shard takes every n-th.
    std::uint64_t index = 0;
    for (;;) {
        const double gap = -std::log(1.0 - arrival_uniform()) / options_.requests_per_second;
        t_ns_ += static_cast<std::uint64_t>(gap * 1e9);
        if (t_ns_ >= end_ns_) break;
        index = request_++;
        if (index % options_.shards == options_.shard) break;
    }
    if (t_ns_ >= end_ns_) {
        emit_samples_until(end_ns_, out);
        account(out, before);
        return out.size() > before;
    }
    emit_samples_until(t_ns_, out);
    const auto device = static_cast<std::uint16_t>(index % options_.devices);
    const std::uint64_t dev_base = std::uint64_t{device} << 36;
    // Each shard has a region of every segment; its requests take turns over the slots of it, a
    // request's blocks going back before the slot comes round again.
    const std::uint64_t slot = (index / options_.shards) % kSlots;
    const std::uint64_t region = kSegmentBytes / kMaxShards;
    const std::uint64_t input =
        kInputSegment + dev_base + options_.shard * region + slot * kInputBytes;
    const std::uint64_t activation =
        kActivationSegment + dev_base + options_.shard * region + slot * kActivationBytes;
    std::uint64_t t = t_ns_;
    out.push_back(memory_event(EventKind::kBlockAlloc, device, t, input, kInputBytes, input_site_));
    out.push_back(memory_event(EventKind::kBlockAlloc, device, t + 1000, activation,
                               kActivationBytes, activation_site_));
    truth_.allocations += 2;
    t += 2000;
    // The forward pass queues on the shard's stream of the device: kernels never overlap there.
    std::uint64_t& busy_until = busy_until_[device];
    std::uint64_t k_t = std::max(t, busy_until);
    for (std::uint32_t k = 0; k < options_.kernels_per_request; ++k) {
        Event e;
        e.kind = EventKind::kKernel;
        e.device = device;
        e.stream = kStream + options_.shard;
        e.process = kPid;
        e.start_ns = k_t;
        e.end_ns = k_t + 200'000 + random() % 2'800'000;  // 0.2-3 ms: a forward pass of ~20 ms
        e.kernel.name = kernel_names_[k % kernel_names_.size()];
        e.kernel.correlation = static_cast<std::uint32_t>(index * options_.kernels_per_request + k);
        e.kernel.grid_size = 1024;
        e.kernel.block_size = 256;
        k_t = e.end_ns + 2000;
        out.push_back(e);
        ++truth_.kernels;
    }
    busy_until = k_t;
    t = std::max(t, k_t);
    if ((index + 1) % options_.leak_every == 0) {
        // The planted leak: one block kept for good, at its own site, in the shard's region of
        // the leak segment (never reused).
        const std::uint64_t leak_region = kLeakSegmentBytes / options_.shards;
        const std::uint64_t address =
            kLeakSegment + dev_base + options_.shard * leak_region + leak_cursor_;
        leak_cursor_ =
            std::min(leak_cursor_ + options_.leak_bytes, leak_region - options_.leak_bytes);
        out.push_back(memory_event(EventKind::kBlockAlloc, device, t, address, options_.leak_bytes,
                                   leak_site_));
        ++truth_.allocations;
        ++truth_.leaked_blocks;
        truth_.leaked_bytes += options_.leak_bytes;
        t += 1000;
    }
    out.push_back(memory_event(EventKind::kBlockFree, device, t, activation, kActivationBytes,
                               activation_site_));
    out.push_back(
        memory_event(EventKind::kBlockFree, device, t + 1000, input, kInputBytes, input_site_));
    truth_.frees += 2;
    ++truth_.requests;
    account(out, before);
    return true;
}

}  // namespace gpudiag::soak
