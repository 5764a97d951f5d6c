// SPDX-License-Identifier: Apache-2.0
// describe_device: how every report names a device (text header, HTML header), never blank.
#include <gpudiag/report.hpp>

#include "support/format.hpp"

#include <fmt/format.h>

#include <exception>

namespace gpudiag {

std::string describe_device(const DeviceInfo& device) noexcept {
    try {
        std::string out = device.name.empty() ? "model not recorded in the input" : device.name;
        if (device.total_memory_bytes > 0) {
            out += ", " + detail::format_bytes(static_cast<double>(device.total_memory_bytes));
        }
        if (!device.uuid.empty()) out += ", " + device.uuid;
        if (!device.pci_bus_id.empty()) out += ", PCI " + device.pci_bus_id;
        if (!device.parent_uuid.empty()) {
            out += fmt::format(", MIG instance GI {} CI {} of {}", device.gpu_instance,
                               device.compute_instance, device.parent_uuid);
        }
        return out;
    } catch (const std::exception&) {
        return {};
    }
}

}  // namespace gpudiag
