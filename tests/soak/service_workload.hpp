// SPDX-License-Identifier: Apache-2.0
// ServiceWorkload: the GENERATED event stream of an inference service running for hours, time-
// compressed (the events carry the service's timestamps; they are produced as fast as the
// consumer takes them), for soak tests of an always-on session. Nothing here was observed on a
// GPU: the source it describes says simulated, and so does every report of it.
//
// Per request (a Poisson-like stream at `requests_per_second`):
//   the framework allocator hands out blocks for the input and the activations (kBlockAlloc) in
//   segments it reserved at start-up, the kernels of the forward pass run on the GPU (kKernel),
//   and the blocks go back (kBlockFree);
// every second of service time: NVML samples per device (utilisation, memory used, SM clock,
//   temperature, power: kCounter), and the allocator's reserved/allocated bytes;
// planted: every `leak_every`-th request keeps one block of `leak_bytes` at `leak_site`, never
//   freed: a leak of leak_bytes * requests_per_second / leak_every * 3600 bytes per hour, at
//   one known site. truth() gives the exact figures the stream holds.
//
// Deterministic for a seed. Sharded: shard k of n generates requests k, k+n, k+2n ... (and the
// samples of seconds k, k+n, ...), so n producer threads together emit exactly one run; the
// truths of the shards add up to the run's.
#pragma once

#include <gpudiag/event.hpp>
#include <gpudiag/source_info.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace gpudiag::soak {

struct ServiceWorkloadOptions {
    double hours = 48;
    double requests_per_second = 20;
    std::uint32_t kernels_per_request = 12;
    std::uint16_t devices = 1;
    /// One block of leak_bytes kept every leak_every requests: by default 20 requests/s / 500 *
    /// 256 KiB = 36 MiB per hour, 1.7 GiB over 48 hours (a slow leak).
    std::uint64_t leak_every = 500;
    std::uint64_t leak_bytes = std::uint64_t{256} << 10;
    std::string leak_site = "service/cache.py:88 remember_embeddings";
    std::uint64_t seed = 1;
    /// Service time 0 on the events' clock (never 0 itself: a session fills timestamps of 0
    /// with its own now()).
    std::uint64_t epoch_ns = 1'000'000'000'000ull;
    std::uint32_t shard = 0;   ///< this generator's shard ...
    std::uint32_t shards = 1;  ///< ... of this many (at most kMaxShards)
};

/// What the stream holds, exactly: what a soak test checks the analysis against.
struct ServiceWorkloadTruth {
    std::uint64_t events = 0;
    std::uint64_t requests = 0;
    std::uint64_t kernels = 0;
    std::uint64_t samples = 0;      ///< counter events
    std::uint64_t allocations = 0;  ///< kBlockAlloc, leaked ones included
    std::uint64_t frees = 0;        ///< kBlockFree
    std::uint64_t leaked_blocks = 0;
    std::uint64_t leaked_bytes = 0;
    std::uint64_t first_ns = 0;
    std::uint64_t last_ns = 0;
    /// The planted leak's rate over the run, in bytes per hour of service time.
    [[nodiscard]] double leak_bytes_per_hour() const {
        const double hours = static_cast<double>(last_ns - first_ns) / 3.6e12;
        return hours > 0 ? static_cast<double>(leaked_bytes) / hours : 0;
    }
    void add(const ServiceWorkloadTruth& other);
};

class ServiceWorkload {
public:
    /// `intern` turns names into string ids (Session::intern, StringTable::intern).
    ServiceWorkload(ServiceWorkloadOptions options,
                    std::function<StringId(std::string_view)> intern);

    /// The source such a stream comes from, labelled as generated.
    [[nodiscard]] SourceInfo source() const;

    /// Appends the next request's events (with the samples due before it) to `out`, in time
    /// order within the request; false once the run is over (nothing appended).
    bool next(std::vector<Event>& out);

    /// What the events emitted so far hold.
    [[nodiscard]] const ServiceWorkloadTruth& truth() const noexcept { return truth_; }
    [[nodiscard]] const ServiceWorkloadOptions& options() const noexcept { return options_; }

    static constexpr std::uint32_t kMaxShards = 16;
    /// The allocator's segments (reserved at start-up): inputs, activations, and the leak's.
    static constexpr std::uint64_t kSegmentBytes = std::uint64_t{2} << 30;
    static constexpr std::uint64_t kLeakSegmentBytes = std::uint64_t{8} << 30;

private:
    void emit_samples_until(std::uint64_t t_ns, std::vector<Event>& out);
    Event memory_event(EventKind kind, std::uint16_t device, std::uint64_t t, std::uint64_t address,
                       std::uint64_t bytes, StringId site) const;
    void account(std::vector<Event>& out, std::size_t before);
    static std::uint64_t split_mix(std::uint64_t& state);
    std::uint64_t random() { return split_mix(rng_); }
    double uniform() { return static_cast<double>(random() >> 11) / 9007199254740992.0; }
    double arrival_uniform() {
        return static_cast<double>(split_mix(arrivals_) >> 11) / 9007199254740992.0;
    }

    ServiceWorkloadOptions options_;
    ServiceWorkloadTruth truth_;
    std::uint64_t rng_;       // this shard's draws (durations, sample noise)
    std::uint64_t arrivals_;  // the run's arrival times: the same in every shard
    std::uint64_t end_ns_;
    std::uint64_t request_ = 0;      // next request index (of the whole run)
    std::uint64_t t_ns_ = 0;         // service time of the current request
    std::uint64_t next_second_ = 0;  // next sampling second (of the whole run)
    std::uint64_t leak_cursor_ = 0;  // where the next leaked block goes in the leak segment
    bool started_ = false;
    StringId input_site_;
    StringId activation_site_;
    StringId leak_site_;
    std::vector<StringId> kernel_names_;
    std::vector<std::uint64_t> busy_until_;  // per device: when this shard's stream is free again
};

}  // namespace gpudiag::soak
