// SPDX-License-Identifier: Apache-2.0
// OwnDeviceMemory: the device memory this process holds through the CUDA driver, per device, as
// CUPTI's memory records tell it (allocations outside pools, and stream-ordered pools' sizes).
// The activity decoder adds to it; the NVML sampler reads it to recognise this process in NVML's
// process list when a PID namespace hides the PID NVML uses (OwnPidFinder).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>

namespace gpudiag::detail {

class OwnDeviceMemory {
public:
    static constexpr std::size_t kMaxDevices = 64;

    struct Reading {
        std::int64_t bytes = 0;     ///< live bytes: allocations minus releases
        std::uint64_t changes = 0;  ///< how many times `bytes` changed: equal readings are settled
        bool known = true;          ///< false once a change could not be counted
    };

    /// Thread-safety: safe (the decoder writes, the sampler reads).
    void add(std::uint16_t device, std::int64_t delta) noexcept;
    /// No device's total can be trusted any more (a pool's or a handle's size was forgotten).
    void forget_all() noexcept;
    [[nodiscard]] Reading read(std::uint16_t device) const noexcept;

private:
    mutable std::mutex mutex_;
    std::array<Reading, kMaxDevices> devices_{};
};

/// The process' one instance: CUPTI's records are process-wide too.
OwnDeviceMemory& own_device_memory() noexcept;

}  // namespace gpudiag::detail
