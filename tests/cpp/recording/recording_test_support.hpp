// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the recording tests: sample events, a collecting sink, temp files, a walker.
#pragma once

#include <gpudiag/recording.hpp>

#include "recording/file_layout.hpp"
#include "temp_dir.hpp"

#include <unistd.h>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace gpudiag::testing_support {

namespace fs = std::filesystem;

using TempDir = gpudiag::testing::TempDir;

inline std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_file(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Keeps everything a reader delivers.
class CollectingSink final : public EventSink {
public:
    void begin(const SourceInfo& info, const StringTable& strings) override {
        ++begins;
        source = info;
        table = &strings;
    }
    void consume(std::span<const Event> batch) override {
        events.insert(events.end(), batch.begin(), batch.end());
        ++batches;
    }
    void end(const SourceSummary& s) override {
        ++ends;
        summary = s;
    }

    int begins = 0;
    int ends = 0;
    int batches = 0;
    SourceInfo source;
    const StringTable* table = nullptr;
    std::vector<Event> events;
    SourceSummary summary;
};

// A sample stream touching every payload kind that carries a string, with new strings appearing
// as it goes (so strings chunks interleave with events chunks).
inline std::vector<Event> sample_events(StringTable& strings, std::size_t n) {
    std::vector<Event> out;
    out.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
        Event e;
        e.start_ns = 1000 + i * 10;
        e.end_ns = e.start_ns + 5;
        e.process = 42;
        e.thread = static_cast<std::uint32_t>(i % 3);
        const std::string name = "name_" + std::to_string(i / 7);
        switch (i % 5) {
            case 0:
                e.kind = EventKind::kKernel;
                e.device = 0;
                e.stream = 7;
                e.kernel.name = strings.intern("kernel_" + name);
                e.kernel.grid_size = static_cast<std::uint32_t>(i);
                break;
            case 1:
                e.kind = EventKind::kBlockAlloc;
                e.device = 1;
                e.memory.address = 0x7f0000000000ull + i * 512;
                e.memory.bytes = 512;
                e.memory.site = strings.intern("site_" + name);
                break;
            case 2:
                e.kind = EventKind::kRange;
                e.range.name = strings.intern("range_" + name);
                e.range.id = i;
                break;
            case 3:
                e.kind = EventKind::kApiCall;
                e.api.name = strings.intern("cudaLaunchKernel");
                e.api.correlation = static_cast<std::uint32_t>(i);
                break;
            default:
                e.kind = EventKind::kCounter;
                e.counter.counter = CounterKind::kGpuUtilizationPercent;
                e.counter.value = static_cast<double>(i % 100);
                break;
        }
        out.push_back(e);
    }
    return out;
}

inline SourceInfo sample_source() {
    SourceInfo info;
    info.producer = "gpudiag-capture";
    info.description = "python train.py --epochs 3";
    info.simulated = true;
    info.rank = 3;
    info.world_size = 8;
    info.pid = 4242;
    info.hostname = "node-17";
    info.wall_clock_offset_ns = 1'700'000'000'000'000'000;
    info.devices.push_back({0, "NVIDIA H200", 150'000'000'000ull, "GPU-abc"});
    info.devices.push_back({1, "NVIDIA H200 MIG 3g.71gb", 150'000'000'000ull, "MIG-def",
                            "00000000:2a:00.0", "GPU-parent", 2, 1});
    info.properties.emplace_back("expandable_segments", "true");
    info.properties.emplace_back("torch", "2.11");
    return info;
}

struct ChunkLocation {
    std::uint64_t offset;
    detail::record::ChunkHeader header;
};

// The chunks of an intact recording, in file order (the index and anything after it excluded).
inline std::vector<ChunkLocation> list_chunks(const std::string& bytes) {
    using namespace detail::record;
    std::vector<ChunkLocation> out;
    std::uint64_t pos = kFileHeaderBytes;
    while (pos + kChunkHeaderBytes <= bytes.size()) {
        auto h = decode_chunk_header(reinterpret_cast<const unsigned char*>(bytes.data() + pos));
        if (!h) break;
        out.push_back({pos, *h});
        pos += kChunkHeaderBytes + h->payload_bytes;
    }
    return out;
}

inline bool same_bytes(const Event& a, const Event& b) {
    return std::memcmp(&a, &b, sizeof(Event)) == 0;
}

}  // namespace gpudiag::testing_support
