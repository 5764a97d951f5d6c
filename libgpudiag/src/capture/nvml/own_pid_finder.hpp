// SPDX-License-Identifier: Apache-2.0
// OwnPidFinder: recognises this process in NVML's process list when a PID namespace (a container)
// hides the host PID NVML lists it under.
//
// NVML counts a process' device memory; CUPTI's memory records tell this process its own
// (OwnDeviceMemory). When this process' own memory grows or shrinks by a large step, the listed
// process whose memory moved by the same step is this one. One such match can be a coincidence
// (another program growing by as much in the same seconds), so a PID is taken only after two
// matches and when no other PID ever matched. The host PID is the same on every GPU, so matches
// on any GPU count.
#pragma once

#include "capture/nvml/nvml_api.hpp"
#include "capture/platform/own_device_memory.hpp"

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace gpudiag::detail {

class OwnPidFinder {
public:
    /// A step of this process' own memory smaller than this is not judged: the context, modules
    /// loaded lazily and the driver's page rounding move NVML's figure by tens of MiB.
    static constexpr std::int64_t kMinStepBytes = std::int64_t{256} << 20;
    /// A reading is judged once this process' own memory stayed unchanged for this long before
    /// it (CUPTI delivers memory records at its flush period, 250 ms by default) ...
    static constexpr std::uint64_t kSettledBeforeNs = 1'000'000'000;
    /// ... and for this long after it (an allocation NVML already counts may still be on its way
    /// through CUPTI's buffers at the time of the reading).
    static constexpr std::uint64_t kSettledAfterNs = 500'000'000;
    static constexpr std::uint32_t kMatchesNeeded = 2;

    /// One NVML reading of `device`'s processes, with this process' own memory there at the time.
    void observe(std::uint16_t device, const OwnDeviceMemory::Reading& own, std::uint64_t now_ns,
                 const std::vector<nvml::ProcessInfo>& listed);

    /// The host PID of this process once recognised, else 0.
    [[nodiscard]] std::uint32_t pid() const noexcept;
    /// Steps judged where exactly one PID matched (for the recognised PID, or in all).
    [[nodiscard]] std::uint32_t matches() const noexcept;
    /// Steps judged where several PIDs matched: no match counted.
    [[nodiscard]] std::uint32_t ambiguous() const noexcept { return ambiguous_; }

private:
    using Listed = std::vector<std::pair<std::uint32_t, std::uint64_t>>;  // PID, bytes
    struct Reading {
        std::int64_t own = 0;
        Listed listed;
    };
    struct DeviceState {
        std::uint64_t changes = ~std::uint64_t{0};  // own.changes last seen
        std::uint64_t unchanged_since_ns = 0;
        bool has_pending = false;  // a settled-before reading waiting to be settled after
        std::uint64_t pending_ns = 0;
        Reading pending;
        bool has_anchor = false;  // the last settled reading: steps are measured from it
        Reading anchor;
    };
    void settle(DeviceState& s);
    void judge(const Reading& from, const Reading& to);
    void count_match(std::uint32_t pid);

    std::map<std::uint16_t, DeviceState> devices_;                // as many as the GPUs
    std::vector<std::pair<std::uint32_t, std::uint32_t>> votes_;  // PID, matches
    std::uint32_t ambiguous_ = 0;
};

}  // namespace gpudiag::detail
