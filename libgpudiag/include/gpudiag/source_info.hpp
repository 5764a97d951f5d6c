// SPDX-License-Identifier: Apache-2.0
// What a stream of events came from: the program, the machine, the devices, and what was lost.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gpudiag {

struct DeviceInfo {
    std::uint16_t ordinal = 0;
    std::string name;  ///< e.g. "NVIDIA H200"
    std::uint64_t total_memory_bytes = 0;
    std::string uuid;
    std::string pci_bus_id{};  ///< e.g. "00000000:18:00.0", "" when unknown
    /// A MIG instance: the GPU it is a slice of, and its GPU and compute instance ids there
    /// ("" and -1 for a whole GPU). `uuid` is then the instance's ("MIG-...").
    std::string parent_uuid{};
    int gpu_instance = -1;
    int compute_instance = -1;
};

/// Describes a source of events. Importers fill what the input says; capture fills what it saw.
struct SourceInfo {
    std::string producer;     ///< "gpudiag-capture", "kineto", "torch-snapshot", "simulated", ...
    std::string description;  ///< file name(s) or program command line
    bool simulated = false;   ///< events were generated, not observed: reports say so
    std::int32_t rank = -1;   ///< distributed rank, -1 when not distributed
    std::int32_t world_size = 0;
    std::uint32_t pid = 0;
    std::string hostname;
    std::int64_t wall_clock_offset_ns = 0;  ///< add to event timestamps for Unix-epoch time
    std::vector<DeviceInfo> devices;
    /// Free-form facts that analyses may use, e.g. {"expandable_segments", "true"}.
    std::vector<std::pair<std::string, std::string>> properties;

    /// The value of a property, or `fallback`.
    [[nodiscard]] std::string property(const std::string& key, std::string fallback = {}) const {
        for (const auto& [k, v] : properties) {
            if (k == key) return v;
        }
        return fallback;
    }
};

/// How complete the stream was.
struct SourceSummary {
    std::uint64_t events = 0;        ///< events delivered
    std::uint64_t dropped = 0;       ///< events lost to full buffers (capture) or skipped (import)
    bool truncated = false;          ///< the input ended early (killed writer, cut file)
    std::vector<std::string> notes;  ///< plain-language remarks about what was lost and why
    /// Events lost to damage in the input (recording chunks that failed their checks): the file
    /// lost them, not the capture, so they are not in `dropped`.
    std::uint64_t damaged = 0;
    /// What of the input could not be read, in plain language, one entry per gap: where the input
    /// stopped being readable and what is therefore missing. Empty when all of it was read.
    std::vector<std::string> missing{};
};

}  // namespace gpudiag
