// SPDX-License-Identifier: Apache-2.0
// OwnDeviceMemory.
#include "capture/platform/own_device_memory.hpp"

namespace gpudiag::detail {

void OwnDeviceMemory::add(std::uint16_t device, std::int64_t delta) noexcept {
    if (device >= kMaxDevices || delta == 0) return;
    std::lock_guard<std::mutex> lock(mutex_);
    Reading& r = devices_[device];
    r.bytes += delta;
    ++r.changes;
}

void OwnDeviceMemory::forget_all() noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Reading& r : devices_) {
        r.known = false;
        ++r.changes;
    }
}

OwnDeviceMemory::Reading OwnDeviceMemory::read(std::uint16_t device) const noexcept {
    if (device >= kMaxDevices) return Reading{0, 0, false};
    std::lock_guard<std::mutex> lock(mutex_);
    return devices_[device];
}

OwnDeviceMemory& own_device_memory() noexcept {
    static OwnDeviceMemory instance;
    return instance;
}

}  // namespace gpudiag::detail
