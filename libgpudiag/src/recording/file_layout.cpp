// SPDX-License-Identifier: Apache-2.0
// Codecs for the fixed headers and structured payloads of .gpudiag recordings.
#include "recording/file_layout.hpp"

#include <libdeflate.h>

namespace gpudiag::detail::record {
namespace {

template <typename T>
void put(unsigned char* out, std::size_t at, T v) noexcept {
    std::memcpy(out + at, &v, sizeof v);
}
template <typename T>
T get(const unsigned char* in, std::size_t at) noexcept {
    T v;
    std::memcpy(&v, in + at, sizeof v);
    return v;
}

constexpr std::uint16_t kSourceInfoVersion = 1;
constexpr std::uint16_t kSummaryVersion = 2;  // 2: adds `missing`
constexpr std::uint16_t kIndexVersion = 1;
constexpr std::size_t kIndexHeaderBytes = 40;

}  // namespace

std::uint32_t crc32(const void* data, std::size_t size) noexcept {
    return libdeflate_crc32(0, data, size);
}

const char* chunk_type_name(std::uint16_t type) noexcept {
    switch (static_cast<ChunkType>(type)) {
        case ChunkType::kSourceInfo: return "source info";
        case ChunkType::kStrings: return "strings";
        case ChunkType::kEvents: return "events";
        case ChunkType::kSummary: return "summary";
        case ChunkType::kIndex: return "index";
    }
    return "unknown";
}

// magic[8] version:u16 header_bytes:u16 event_bytes:u16 chunk_header_bytes:u16 flags:u32
// writer_version:u32 reserved:u32 crc32(bytes 0..27):u32
void encode_file_header(const FileHeader& h, unsigned char out[kFileHeaderBytes]) noexcept {
    std::memset(out, 0, kFileHeaderBytes);
    std::memcpy(out, kFileMagic, sizeof kFileMagic);
    put(out, 8, h.version);
    put(out, 10, h.header_bytes);
    put(out, 12, h.event_bytes);
    put(out, 14, h.chunk_header_bytes);
    put(out, 16, h.flags);
    put(out, 20, h.writer_version);
    put(out, 28, crc32(out, 28));
}

FileHeader decode_file_header(const unsigned char in[kFileHeaderBytes], bool& crc_ok) noexcept {
    FileHeader h;
    h.version = get<std::uint16_t>(in, 8);
    h.header_bytes = get<std::uint16_t>(in, 10);
    h.event_bytes = get<std::uint16_t>(in, 12);
    h.chunk_header_bytes = get<std::uint16_t>(in, 14);
    h.flags = get<std::uint32_t>(in, 16);
    h.writer_version = get<std::uint32_t>(in, 20);
    crc_ok = get<std::uint32_t>(in, 28) == crc32(in, 28);
    return h;
}

// magic[4] type:u16 flags:u16 payload_bytes:u32 payload_crc:u32 event_count:u32 sequence:u32
// first_ns:u64 last_ns:u64 reserved:u32 crc32(bytes 0..43):u32
void encode_chunk_header(const ChunkHeader& h, unsigned char out[kChunkHeaderBytes]) noexcept {
    std::memset(out, 0, kChunkHeaderBytes);
    std::memcpy(out, kChunkMagic, sizeof kChunkMagic);
    put(out, 4, h.type);
    put(out, 6, h.flags);
    put(out, 8, h.payload_bytes);
    put(out, 12, h.payload_crc);
    put(out, 16, h.event_count);
    put(out, 20, h.sequence);
    put(out, 24, h.first_ns);
    put(out, 32, h.last_ns);
    put(out, 44, crc32(out, 44));
}

std::optional<ChunkHeader> decode_chunk_header(const unsigned char in[kChunkHeaderBytes]) noexcept {
    if (std::memcmp(in, kChunkMagic, sizeof kChunkMagic) != 0) return std::nullopt;
    if (get<std::uint32_t>(in, 44) != crc32(in, 44)) return std::nullopt;
    ChunkHeader h;
    h.type = get<std::uint16_t>(in, 4);
    h.flags = get<std::uint16_t>(in, 6);
    h.payload_bytes = get<std::uint32_t>(in, 8);
    h.payload_crc = get<std::uint32_t>(in, 12);
    h.event_count = get<std::uint32_t>(in, 16);
    h.sequence = get<std::uint32_t>(in, 20);
    h.first_ns = get<std::uint64_t>(in, 24);
    h.last_ns = get<std::uint64_t>(in, 32);
    return h;
}

// magic[8] index_offset:u64 trailer_offset:u64 reserved:u32 crc32(bytes 0..27):u32
void encode_trailer(const Trailer& t, unsigned char out[kTrailerBytes]) noexcept {
    std::memset(out, 0, kTrailerBytes);
    std::memcpy(out, kTrailerMagic, sizeof kTrailerMagic);
    put(out, 8, t.index_offset);
    put(out, 16, t.trailer_offset);
    put(out, 28, crc32(out, 28));
}

std::optional<Trailer> decode_trailer(const unsigned char in[kTrailerBytes]) noexcept {
    if (std::memcmp(in, kTrailerMagic, sizeof kTrailerMagic) != 0) return std::nullopt;
    if (get<std::uint32_t>(in, 28) != crc32(in, 28)) return std::nullopt;
    Trailer t;
    t.index_offset = get<std::uint64_t>(in, 8);
    t.trailer_offset = get<std::uint64_t>(in, 16);
    return t;
}

void encode_source_info(const SourceInfo& info, std::string& out) {
    ByteBuilder b(out);
    b.u16(kSourceInfoVersion);
    b.str(info.producer);
    b.str(info.description);
    b.u8(info.simulated ? 1 : 0);
    b.i32(info.rank);
    b.i32(info.world_size);
    b.u32(info.pid);
    b.str(info.hostname);
    b.i64(info.wall_clock_offset_ns);
    b.u32(static_cast<std::uint32_t>(info.devices.size()));
    for (const DeviceInfo& d : info.devices) {
        b.u16(d.ordinal);
        b.str(d.name);
        b.u64(d.total_memory_bytes);
        b.str(d.uuid);
    }
    b.u32(static_cast<std::uint32_t>(info.properties.size()));
    for (const auto& [key, value] : info.properties) {
        b.str(key);
        b.str(value);
    }
    // Since gpudiag 0.2: each device's PCI bus id and MIG placement, after the fields readers
    // before it know (they stop at the properties), in the devices' order.
    for (const DeviceInfo& d : info.devices) {
        b.str(d.pci_bus_id);
        b.str(d.parent_uuid);
        b.i32(d.gpu_instance);
        b.i32(d.compute_instance);
    }
}

bool decode_source_info(const unsigned char* data, std::size_t size, SourceInfo& info) {
    ByteCursor c(data, size);
    if (c.u16() < 1) return false;
    info.producer = c.str();
    info.description = c.str();
    info.simulated = c.u8() != 0;
    info.rank = c.i32();
    info.world_size = c.i32();
    info.pid = c.u32();
    info.hostname = c.str();
    info.wall_clock_offset_ns = c.i64();
    // Counts come from the file: loop while bytes remain instead of reserving what they claim.
    const std::uint32_t devices = c.u32();
    for (std::uint32_t i = 0; i < devices && c.ok(); ++i) {
        DeviceInfo d;
        d.ordinal = c.u16();
        d.name = c.str();
        d.total_memory_bytes = c.u64();
        d.uuid = c.str();
        if (c.ok()) info.devices.push_back(std::move(d));
    }
    const std::uint32_t properties = c.u32();
    for (std::uint32_t i = 0; i < properties && c.ok(); ++i) {
        std::string key(c.str());
        std::string value(c.str());
        if (c.ok()) info.properties.emplace_back(std::move(key), std::move(value));
    }
    // Recordings written before these fields end here.
    for (DeviceInfo& d : info.devices) {
        if (!c.ok() || c.left() == 0) break;
        d.pci_bus_id = c.str();
        d.parent_uuid = c.str();
        d.gpu_instance = c.i32();
        d.compute_instance = c.i32();
    }
    return c.ok();
}

void encode_summary(const SourceSummary& summary, std::string& out) {
    ByteBuilder b(out);
    b.u16(kSummaryVersion);
    b.u64(summary.events);
    b.u64(summary.dropped);
    b.u8(summary.truncated ? 1 : 0);
    b.u32(static_cast<std::uint32_t>(summary.notes.size()));
    for (const auto& note : summary.notes) b.str(note);
    // Version 2: what the source knew it missed (readers of version 1 stop before it).
    b.u32(static_cast<std::uint32_t>(summary.missing.size()));
    for (const auto& gap : summary.missing) b.str(gap);
}

bool decode_summary(const unsigned char* data, std::size_t size, SourceSummary& summary) {
    ByteCursor c(data, size);
    const std::uint16_t version = c.u16();
    if (version < 1) return false;
    summary.events = c.u64();
    summary.dropped = c.u64();
    summary.truncated = c.u8() != 0;
    const std::uint32_t notes = c.u32();
    for (std::uint32_t i = 0; i < notes && c.ok(); ++i) {
        std::string note(c.str());
        if (c.ok()) summary.notes.push_back(std::move(note));
    }
    if (version >= 2 && c.ok()) {
        const std::uint32_t gaps = c.u32();
        for (std::uint32_t i = 0; i < gaps && c.ok(); ++i) {
            std::string gap(c.str());
            if (c.ok()) summary.missing.push_back(std::move(gap));
        }
    }
    return c.ok();
}

// version:u16 reserved:u16 entries:u32 source_info_offset:u64 summary_offset:u64 events:u64
// chunks:u64, then per entry offset:u64 events:u64 first_ns:u64 last_ns:u64 chunks:u32 pad:u32
void encode_index(const Index& index, std::string& out) {
    ByteBuilder b(out);
    b.u16(kIndexVersion);
    b.u16(0);
    b.u32(static_cast<std::uint32_t>(index.entries.size()));
    b.u64(index.source_info_offset);
    b.u64(index.summary_offset);
    b.u64(index.events);
    b.u64(index.chunks);
    for (const IndexEntry& e : index.entries) {
        b.u64(e.offset);
        b.u64(e.events);
        b.u64(e.first_ns);
        b.u64(e.last_ns);
        b.u32(e.chunks);
        b.u32(0);
    }
}

bool decode_index(const unsigned char* data, std::size_t size, Index& index) {
    ByteCursor c(data, size);
    if (c.u16() < 1) return false;
    c.u16();
    const std::uint32_t entries = c.u32();
    index.source_info_offset = c.u64();
    index.summary_offset = c.u64();
    index.events = c.u64();
    index.chunks = c.u64();
    if (!c.ok() || size < kIndexHeaderBytes ||
        entries > (size - kIndexHeaderBytes) / kIndexEntryBytes) {
        return false;
    }
    index.entries.resize(entries);
    for (IndexEntry& e : index.entries) {
        e.offset = c.u64();
        e.events = c.u64();
        e.first_ns = c.u64();
        e.last_ns = c.u64();
        e.chunks = c.u32();
        c.u32();
    }
    return c.ok();
}

}  // namespace gpudiag::detail::record
