// SPDX-License-Identifier: Apache-2.0
// The on-disk layout of .gpudiag recordings (see recording.hpp for the overview) and the codecs
// for its fixed headers and small structured payloads.
#pragma once

#include <gpudiag/event.hpp>
#include <gpudiag/source_info.hpp>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpudiag::detail::record {

// Events are stored as their in-memory bytes, so the format is defined as little-endian and
// this build must be little-endian too (every platform gpudiag targets is).
static_assert(std::endian::native == std::endian::little,
              ".gpudiag stores Events raw and is little-endian; a big-endian port needs a codec");

inline constexpr char kFileMagic[8] = {'G', 'P', 'U', 'D', 'I', 'A', 'G', '\0'};
inline constexpr char kTrailerMagic[8] = {'G', 'P', 'U', 'D', 'E', 'N', 'D', '\0'};
inline constexpr char kChunkMagic[4] = {'G', 'D', 'C', 'K'};
inline constexpr std::size_t kFileHeaderBytes = 32;
inline constexpr std::size_t kChunkHeaderBytes = 48;
inline constexpr std::size_t kTrailerBytes = 32;
inline constexpr std::size_t kEventBytes = sizeof(Event);
/// A reader refuses larger chunks as corrupt: the writer never makes one (16 MiB events chunks
/// at most, strings chunks split at the chunk size, strings capped at kMaxStringBytes), and the
/// cap keeps a hostile length from costing more memory than this.
inline constexpr std::uint32_t kMaxChunkPayload = 64u << 20;
/// Longer strings are cut to this length by the writer (kernel names run to a few KiB).
inline constexpr std::size_t kMaxStringBytes = 1u << 20;

enum class ChunkType : std::uint16_t {
    kSourceInfo = 1,
    kStrings = 2,
    kEvents = 3,
    kSummary = 4,
    kIndex = 5,
};
const char* chunk_type_name(std::uint16_t type) noexcept;

struct FileHeader {
    std::uint16_t version = 0;
    std::uint16_t header_bytes = kFileHeaderBytes;
    std::uint16_t event_bytes = kEventBytes;
    std::uint16_t chunk_header_bytes = kChunkHeaderBytes;
    std::uint32_t flags = 0;
    std::uint32_t writer_version = 0;  ///< major << 16 | minor << 8 | patch
};
void encode_file_header(const FileHeader& h, unsigned char out[kFileHeaderBytes]) noexcept;
/// Fields of a header whose magic matched; `crc_ok` says whether its CRC did too.
FileHeader decode_file_header(const unsigned char in[kFileHeaderBytes], bool& crc_ok) noexcept;

struct ChunkHeader {
    std::uint16_t type = 0;
    std::uint16_t flags = 0;
    std::uint32_t payload_bytes = 0;
    std::uint32_t payload_crc = 0;
    std::uint32_t event_count = 0;
    std::uint32_t sequence = 0;  ///< chunk number from 0: a gap shows chunks lost to damage
    std::uint64_t first_ns = 0;  ///< events chunks: earliest start
    std::uint64_t last_ns = 0;   ///< events chunks: latest end
};
void encode_chunk_header(const ChunkHeader& h, unsigned char out[kChunkHeaderBytes]) noexcept;
/// Nullopt unless the magic and the header CRC match.
std::optional<ChunkHeader> decode_chunk_header(const unsigned char in[kChunkHeaderBytes]) noexcept;

struct Trailer {
    std::uint64_t index_offset = 0;
    std::uint64_t trailer_offset = 0;  ///< where the trailer itself starts (a consistency check)
};
void encode_trailer(const Trailer& t, unsigned char out[kTrailerBytes]) noexcept;
std::optional<Trailer> decode_trailer(const unsigned char in[kTrailerBytes]) noexcept;

std::uint32_t crc32(const void* data, std::size_t size) noexcept;

/// Appends little-endian fields to a byte string.
class ByteBuilder {
public:
    explicit ByteBuilder(std::string& out) : out_(out) {}
    void u8(std::uint8_t v) { out_.push_back(static_cast<char>(v)); }
    void u16(std::uint16_t v) { raw(&v, sizeof v); }
    void u32(std::uint32_t v) { raw(&v, sizeof v); }
    void u64(std::uint64_t v) { raw(&v, sizeof v); }
    void i32(std::int32_t v) { raw(&v, sizeof v); }
    void i64(std::int64_t v) { raw(&v, sizeof v); }
    void str(std::string_view s) {
        u32(static_cast<std::uint32_t>(s.size()));
        out_.append(s.data(), s.size());
    }
    void raw(const void* p, std::size_t n) { out_.append(static_cast<const char*>(p), n); }

private:
    std::string& out_;
};

/// Reads little-endian fields with bounds checks; after any overrun ok() is false and every
/// further read yields zero/empty, so decoders check once at the end.
class ByteCursor {
public:
    ByteCursor(const unsigned char* data, std::size_t size) : p_(data), left_(size) {}
    std::uint8_t u8() { return get<std::uint8_t>(); }
    std::uint16_t u16() { return get<std::uint16_t>(); }
    std::uint32_t u32() { return get<std::uint32_t>(); }
    std::uint64_t u64() { return get<std::uint64_t>(); }
    std::int32_t i32() { return get<std::int32_t>(); }
    std::int64_t i64() { return get<std::int64_t>(); }
    std::string_view str() {
        const std::uint32_t n = u32();
        if (!ok_ || n > left_) {
            ok_ = false;
            return {};
        }
        std::string_view s(reinterpret_cast<const char*>(p_), n);
        p_ += n;
        left_ -= n;
        return s;
    }
    [[nodiscard]] bool ok() const { return ok_; }
    [[nodiscard]] std::size_t left() const { return left_; }

private:
    template <typename T>
    T get() {
        T v{};
        if (!ok_ || left_ < sizeof(T)) {
            ok_ = false;
            return v;
        }
        std::memcpy(&v, p_, sizeof(T));
        p_ += sizeof(T);
        left_ -= sizeof(T);
        return v;
    }
    const unsigned char* p_;
    std::size_t left_;
    bool ok_ = true;
};

// Structured payloads. Each starts with its own u16 version; later versions only append fields,
// and readers ignore bytes after the fields they know.
void encode_source_info(const SourceInfo& info, std::string& out);
bool decode_source_info(const unsigned char* data, std::size_t size, SourceInfo& info);
void encode_summary(const SourceSummary& summary, std::string& out);
bool decode_summary(const unsigned char* data, std::size_t size, SourceSummary& summary);

/// One run of consecutive events chunks (the writer merges neighbours to keep the index small).
struct IndexEntry {
    std::uint64_t offset = 0;  ///< of the run's first chunk header
    std::uint64_t events = 0;
    std::uint64_t first_ns = 0;
    std::uint64_t last_ns = 0;
    std::uint32_t chunks = 0;
};
struct Index {
    std::uint64_t source_info_offset = 0;
    std::uint64_t summary_offset = 0;  ///< 0: none
    std::uint64_t events = 0;
    std::uint64_t chunks = 0;  ///< chunks before the index
    std::vector<IndexEntry> entries;
};
inline constexpr std::size_t kIndexEntryBytes = 40;
void encode_index(const Index& index, std::string& out);
bool decode_index(const unsigned char* data, std::size_t size, Index& index);

}  // namespace gpudiag::detail::record
