// SPDX-License-Identifier: Apache-2.0
// RecordingReader: streams a .gpudiag file one chunk at a time and survives damage.
//
// The walk over chunks distinguishes three kinds of trouble, because they call for different
// answers:
//  * a chunk whose header is valid but whose payload fails its CRC: the header (itself CRC'd) is
//    trusted for the length, the chunk is skipped and named in a note, its events are counted as
//    dropped;
//  * bytes that are not a valid chunk header (a flipped header byte, garbage): the reader scans
//    forward for the next chunk magic whose header CRC checks out and resumes there; chunk
//    sequence numbers tell how many chunks were lost;
//  * a file that ends before its trailer (the writer crashed, was killed, or the disk filled):
//    everything up to the last complete chunk is delivered and the summary says truncated.
// Memory: one payload buffer (at most kMaxChunkPayload, allocated only once the bytes are known
// to exist) and a 64 KiB scan window.
#include <gpudiag/recording.hpp>

#include "core/event_strings.hpp"
#include "recording/file_layout.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <new>
#include <unordered_map>

namespace gpudiag {
namespace {

using namespace detail::record;

// Random-access bytes: a file (pread) or a buffer in memory.
class ByteInput {
public:
    virtual ~ByteInput() = default;
    [[nodiscard]] virtual std::uint64_t size() const noexcept = 0;
    /// Reads exactly `n` bytes at `offset` (the caller keeps within size()). On failure returns
    /// false and sets `error`.
    virtual bool read_at(std::uint64_t offset, void* dst, std::size_t n, std::string& error) = 0;
};

class FileInput final : public ByteInput {
public:
    FileInput(int fd, std::uint64_t size) : fd_(fd), size_(size) {}
    ~FileInput() override { ::close(fd_); }
    FileInput(const FileInput&) = delete;
    FileInput& operator=(const FileInput&) = delete;

    [[nodiscard]] std::uint64_t size() const noexcept override { return size_; }
    bool read_at(std::uint64_t offset, void* dst, std::size_t n, std::string& error) override {
        auto* out = static_cast<char*>(dst);
        while (n > 0) {
            const ssize_t got = ::pread(fd_, out, n, static_cast<off_t>(offset));
            if (got < 0) {
                if (errno == EINTR) continue;
                error = fmt::format("read failed at byte {} ({})", offset, std::strerror(errno));
                return false;
            }
            if (got == 0) {
                error = fmt::format("the file shrank while being read (at byte {})", offset);
                return false;
            }
            out += got;
            offset += static_cast<std::uint64_t>(got);
            n -= static_cast<std::size_t>(got);
        }
        return true;
    }

private:
    int fd_;
    std::uint64_t size_;
};

class MemoryInput final : public ByteInput {
public:
    MemoryInput(const void* data, std::size_t size)
        : data_(static_cast<const unsigned char*>(data)), size_(size) {}
    [[nodiscard]] std::uint64_t size() const noexcept override { return size_; }
    bool read_at(std::uint64_t offset, void* dst, std::size_t n, std::string& error) override {
        if (offset > size_ || n > size_ - offset) {
            error = "read past the end of the buffer";
            return false;
        }
        if (n > 0) std::memcpy(dst, data_ + offset, n);
        return true;
    }

private:
    const unsigned char* data_;
    std::size_t size_;
};

// Bounds on what a hostile strings chunk can make the reader allocate: a single id may jump at
// most this far past the table's end, all jumps together at most the total (16 MiB of id slots),
// and at most kMaxRemappedStrings ids are translated.
constexpr std::uint64_t kMaxStringIdGap = std::uint64_t{1} << 16;
constexpr std::uint64_t kMaxTotalStringIdGap = std::uint64_t{1} << 20;
constexpr std::size_t kMaxRemappedStrings = std::size_t{1} << 20;

// Notes about damage, bounded: a hostile file with a million bad chunks gets 32 notes and a count.
class Notes {
public:
    static constexpr std::size_t kMax = 32;
    void add(std::string note) {
        if (notes_.size() < kMax) {
            notes_.push_back(std::move(note));
        } else {
            ++suppressed_;
        }
    }
    void append_to(std::vector<std::string>& out) const {
        out.insert(out.end(), notes_.begin(), notes_.end());
        if (suppressed_ > 0) {
            out.push_back(
                fmt::format("{} more problem(s) of the same kinds were not listed", suppressed_));
        }
    }

private:
    std::vector<std::string> notes_;
    std::uint64_t suppressed_ = 0;
};

std::string describe_chunk(const ChunkHeader& h, std::uint64_t offset) {
    return fmt::format("{} chunk #{} at byte {}", chunk_type_name(h.type), h.sequence, offset);
}

// Rewrites the string id of `e` through `remap` (writer id -> id in the caller's table).
void remap_strings(Event& e, const std::unordered_map<StringId, StringId>& remap) {
    if (StringId* id = detail::string_id_of(e)) {
        if (auto it = remap.find(*id); it != remap.end()) *id = it->second;
    }
}

std::string version_string(std::uint32_t packed) {
    return fmt::format("{}.{}.{}", packed >> 16, (packed >> 8) & 0xFF, packed & 0xFF);
}

Status convert_exception() {
    try {
        throw;
    } catch (const std::bad_alloc&) {
        return resource_exhausted("out of memory while reading a recording");
    } catch (const std::exception& e) {
        return internal_error(std::string("reading a recording failed: ") + e.what());
    } catch (...) {
        return internal_error("reading a recording failed with an unknown exception");
    }
}

}  // namespace

struct RecordingReader::Impl {
    std::unique_ptr<ByteInput> input;
    std::string name;
    FileHeader header;
    std::vector<std::string> header_notes;
    std::function<void(std::uint64_t, std::uint64_t)> progress;
    SourceSummary last_summary;
    std::unique_ptr<Event[]> payload;  // Event-aligned so events chunks are used in place
    std::size_t payload_capacity = 0;  // bytes
    std::vector<unsigned char> window;

    // Where a walk over the chunks stands.
    struct Walk {
        std::uint64_t pos = kFileHeaderBytes;
        bool clean_end = false;
        bool truncated = false;
        bool io_failed = false;
        std::string io_error;
        std::uint32_t next_sequence = 0;
        std::uint64_t chunks = 0;
        std::uint64_t lost_events = 0;
        Notes notes;
    };

    enum class Step { kChunk, kEnd };

    Status open_input(std::unique_ptr<ByteInput> in, std::string display_name) {
        input.reset();
        header_notes.clear();
        last_summary = SourceSummary{};
        name = std::move(display_name);
        const std::uint64_t size = in->size();
        if (size == 0) {
            return corrupt_data(name +
                                ": the file is empty (the writer may have been stopped "
                                "before it wrote anything)");
        }
        unsigned char head[kFileHeaderBytes] = {};
        std::string err;
        const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(size, kFileHeaderBytes));
        if (!in->read_at(0, head, n, err)) return io_error(name + ": " + err);
        if (n < sizeof kFileMagic || std::memcmp(head, kFileMagic, sizeof kFileMagic) != 0) {
            return corrupt_data(name +
                                ": not a gpudiag recording (it does not start with the "
                                "GPUDIAG magic)");
        }
        if (n < kFileHeaderBytes) {
            return corrupt_data(fmt::format(
                "{}: cut short inside its 32-byte file header ({} bytes): no events to read", name,
                n));
        }
        bool crc_ok = false;
        const FileHeader h = decode_file_header(head, crc_ok);
        const bool layout_ok = h.header_bytes == kFileHeaderBytes && h.event_bytes == kEventBytes &&
                               h.chunk_header_bytes == kChunkHeaderBytes;
        if (crc_ok && h.version > kRecordingFormatVersion) {
            return unsupported(fmt::format(
                "{}: recording format version {} (written by gpudiag {}); this gpudiag reads "
                "versions up to {}: upgrade gpudiag",
                name, h.version, version_string(h.writer_version), kRecordingFormatVersion));
        }
        if (crc_ok && !layout_ok) {
            return unsupported(fmt::format(
                "{}: recording with {}-byte events and {}/{}-byte headers; this gpudiag reads "
                "64-byte events and 32/48",
                name, h.event_bytes, h.header_bytes, h.chunk_header_bytes));
        }
        if (!crc_ok) {
            if (h.version != kRecordingFormatVersion || !layout_ok) {
                return corrupt_data(name + ": the file header is damaged (checksum mismatch)");
            }
            header_notes.push_back(
                "the file header failed its checksum but its fields are "
                "plausible; reading on");
        } else if (h.version == 0) {
            return corrupt_data(name + ": the file header gives format version 0");
        }
        header = h;
        input = std::move(in);
        return Status::ok();
    }

    bool read_bytes(Walk& walk, std::uint64_t offset, void* dst, std::size_t n) {
        std::string err;
        if (input->read_at(offset, dst, n, err)) return true;
        walk.io_failed = true;
        walk.io_error = name + ": " + err;
        return false;
    }

    // Makes the payload buffer hold `bytes` (bounded by kMaxChunkPayload by the caller).
    unsigned char* payload_buffer(std::size_t bytes) {
        if (payload_capacity < bytes) {
            const std::size_t events = (bytes + kEventBytes - 1) / kEventBytes;
            payload = std::make_unique<Event[]>(events);
            payload_capacity = events * kEventBytes;
        }
        return reinterpret_cast<unsigned char*>(payload.get());
    }

    // Reads a chunk's payload into the buffer and checks its CRC.
    bool read_payload(Walk& walk, const ChunkHeader& h, std::uint64_t offset, bool& crc_ok) {
        unsigned char* buf = payload_buffer(h.payload_bytes);
        if (!read_bytes(walk, offset + kChunkHeaderBytes, buf, h.payload_bytes)) return false;
        crc_ok = crc32(buf, h.payload_bytes) == h.payload_crc;
        return true;
    }

    // The offset of the next valid chunk header (or the final trailer) after `from`; size when
    // none. Reads through a fixed window.
    std::uint64_t resync(Walk& walk, std::uint64_t from) {
        const std::uint64_t size = input->size();
        constexpr std::size_t kWindow = 64 * 1024;
        if (window.size() < kWindow) window.resize(kWindow);
        std::uint64_t base = from;
        while (base < size) {
            const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(kWindow, size - base));
            if (!read_bytes(walk, base, window.data(), n)) return size;
            for (std::size_t i = 0; i < n; ++i) {
                const unsigned char c = window[i];
                if (c != static_cast<unsigned char>(kChunkMagic[0])) continue;  // 'G' starts both
                if (i + 4 <= n && std::memcmp(&window[i], kChunkMagic, 4) != 0 &&
                    std::memcmp(&window[i], kTrailerMagic, 4) != 0) {
                    continue;
                }
                const std::uint64_t at = base + i;
                if (is_chunk_start(walk, at) || is_final_trailer(walk, at)) return at;
                if (walk.io_failed) return size;
            }
            base += n;
        }
        return size;
    }

    bool is_chunk_start(Walk& walk, std::uint64_t at) {
        if (input->size() - at < kChunkHeaderBytes) return false;
        unsigned char hb[kChunkHeaderBytes];
        if (!read_bytes(walk, at, hb, sizeof hb)) return false;
        return decode_chunk_header(hb).has_value();
    }

    bool is_final_trailer(Walk& walk, std::uint64_t at) {
        if (input->size() - at != kTrailerBytes) return false;
        unsigned char tb[kTrailerBytes];
        if (!read_bytes(walk, at, tb, sizeof tb)) return false;
        const auto t = decode_trailer(tb);
        return t && t->trailer_offset == at;
    }

    // Advances to the next complete chunk with a valid header. kEnd at the trailer, at the end
    // of the file (truncated) or on an I/O error (walk.io_failed).
    Step next(Walk& walk, ChunkHeader& out, std::uint64_t& chunk_offset) {
        const std::uint64_t size = input->size();
        for (;;) {
            if (walk.io_failed) return Step::kEnd;
            if (walk.pos >= size) {
                walk.truncated = true;
                walk.notes.add(fmt::format(
                    "the recording ends at byte {} without its closing index: the writer stopped "
                    "before close() (crash, kill or full disk); everything up to the last "
                    "complete chunk was read",
                    size));
                return Step::kEnd;
            }
            const std::uint64_t left = size - walk.pos;
            if (is_final_trailer(walk, walk.pos)) {
                walk.clean_end = true;
                return Step::kEnd;
            }
            if (left < kChunkHeaderBytes) {
                walk.truncated = true;
                walk.notes.add(fmt::format(
                    "the recording is cut short inside a chunk header at byte {} (the writer "
                    "stopped mid-write); everything before it was read",
                    walk.pos));
                return Step::kEnd;
            }
            unsigned char hb[kChunkHeaderBytes];
            if (!read_bytes(walk, walk.pos, hb, sizeof hb)) return Step::kEnd;
            if (auto h = decode_chunk_header(hb)) {
                if (h->payload_bytes > kMaxChunkPayload) {
                    walk.notes.add(fmt::format(
                        "chunk at byte {} claims {} payload bytes, above the 64 MiB limit: "
                        "treated as damage",
                        walk.pos, h->payload_bytes));
                } else if (h->payload_bytes > left - kChunkHeaderBytes) {
                    // A chunk longer than the rest of the file: the last one, cut short by a
                    // writer that stopped mid-write, unless valid chunks follow (then its length
                    // is damaged, and the walk resumes at the next one below).
                    const std::uint64_t resume = resync(walk, walk.pos + 1);
                    if (walk.io_failed) return Step::kEnd;
                    if (resume >= size) {
                        walk.truncated = true;
                        walk.lost_events += h->event_count;
                        walk.notes.add(fmt::format(
                            "the last {} is cut short ({} of {} bytes): the writer stopped "
                            "mid-write; everything before it was read",
                            describe_chunk(*h, walk.pos), left - kChunkHeaderBytes,
                            h->payload_bytes));
                        return Step::kEnd;
                    }
                    walk.lost_events += h->event_count;
                    walk.notes.add(fmt::format(
                        "{} claims {} payload bytes, more than the file holds after it, yet valid "
                        "chunks follow: its length is damaged; skipped to byte {}",
                        describe_chunk(*h, walk.pos), h->payload_bytes, resume));
                    walk.pos = resume;
                    continue;
                } else {
                    if (h->sequence > walk.next_sequence) {
                        walk.notes.add(fmt::format("{} chunk(s) before byte {} were lost to damage",
                                                   h->sequence - walk.next_sequence, walk.pos));
                    }
                    walk.next_sequence = h->sequence + 1;
                    chunk_offset = walk.pos;
                    walk.pos += kChunkHeaderBytes + h->payload_bytes;
                    ++walk.chunks;
                    out = *h;
                    return Step::kChunk;
                }
            }
            // Not a chunk: find the next one.
            const std::uint64_t damaged_at = walk.pos;
            const std::uint64_t resume = resync(walk, walk.pos + 1);
            if (walk.io_failed) return Step::kEnd;
            if (resume >= size) {
                walk.truncated = true;
                walk.notes.add(fmt::format(
                    "bytes {}..{} hold no valid chunk (damaged, or an unfinished write); reading "
                    "stopped there",
                    damaged_at, size));
                return Step::kEnd;
            }
            walk.notes.add(fmt::format(
                "bytes {}..{} are damaged (no valid chunk header); skipped to the next chunk",
                damaged_at, resume));
            walk.pos = resume;
        }
    }

    Status read(EventSink& sink, StringTable& strings) {
        Walk walk;
        bool begun = false;
        SourceSummary writer_summary;
        std::unordered_map<StringId, StringId> remap;
        std::uint64_t delivered = 0;
        std::uint64_t unknown_chunks = 0;
        std::uint64_t bad_strings = 0;
        std::uint64_t unmapped_strings = 0;
        std::uint64_t id_gap_budget = kMaxTotalStringIdGap;
        const std::uint64_t size = input->size();
        std::vector<std::string> remarks;  // notes that do not mean anything is missing

        auto begin_once = [&](const SourceInfo* info) {
            if (begun) return;
            begun = true;
            if (info != nullptr) {
                sink.begin(*info, strings);
                return;
            }
            SourceInfo fallback;
            fallback.producer = "unknown";
            fallback.description = name;
            walk.notes.add(
                "the recording's source info is missing or damaged; events are read "
                "without it");
            sink.begin(fallback, strings);
        };

        ChunkHeader h;
        std::uint64_t at = 0;
        while (next(walk, h, at) == Step::kChunk) {
            bool crc_ok = false;
            if (!read_payload(walk, h, at, crc_ok)) break;
            if (!crc_ok) {
                walk.lost_events += h.event_count;
                walk.notes.add(fmt::format(
                    "{} failed its CRC check and was skipped{}", describe_chunk(h, at),
                    h.event_count > 0 ? fmt::format(" ({} events lost)", h.event_count) : ""));
                continue;
            }
            const unsigned char* data = reinterpret_cast<const unsigned char*>(payload.get());
            switch (static_cast<ChunkType>(h.type)) {
                case ChunkType::kSourceInfo: {
                    if (begun) {
                        remarks.push_back("extra " + describe_chunk(h, at) + " ignored");
                        break;
                    }
                    SourceInfo info;
                    if (decode_source_info(data, h.payload_bytes, info)) {
                        begin_once(&info);
                    } else {
                        walk.notes.add(describe_chunk(h, at) + " could not be decoded");
                    }
                    break;
                }
                case ChunkType::kStrings: {
                    ByteCursor c(data, h.payload_bytes);
                    const std::uint32_t count = c.u32();
                    for (std::uint32_t i = 0; i < count && c.ok(); ++i) {
                        const StringId id = c.u32();
                        const std::string_view text = c.str();
                        if (!c.ok()) break;
                        if (id <= StringTable::kOverflowString || text.empty()) {
                            ++bad_strings;  // the writer never writes these
                            continue;
                        }
                        // Writers assign ids densely, so a big jump past the table's end is
                        // damage or hostility; binding it would grow the id array by the jump.
                        const std::uint64_t table_size = strings.size();
                        const std::uint64_t gap = id > table_size ? id - table_size : 0;
                        const bool plausible = gap <= kMaxStringIdGap && id_gap_budget >= gap;
                        if (plausible && strings.bind(id, text)) {
                            id_gap_budget -= gap;
                        } else if (remap.size() < kMaxRemappedStrings || remap.count(id) != 0) {
                            // The caller's table already uses this id, or the id is implausible:
                            // intern instead and translate the events' ids.
                            remap[id] = strings.intern(text);
                        } else {
                            ++unmapped_strings;
                        }
                    }
                    if (!c.ok()) {
                        walk.notes.add(describe_chunk(h, at) +
                                       " is malformed; strings after "
                                       "the damage are missing");
                    }
                    break;
                }
                case ChunkType::kEvents: {
                    if (h.payload_bytes % kEventBytes != 0 ||
                        h.payload_bytes / kEventBytes != h.event_count) {
                        walk.lost_events += h.event_count;
                        walk.notes.add(describe_chunk(h, at) +
                                       " has a payload that is not a whole number of events; "
                                       "skipped");
                        break;
                    }
                    begin_once(nullptr);
                    if (!remap.empty()) {
                        for (std::uint32_t i = 0; i < h.event_count; ++i) {
                            remap_strings(payload[i], remap);
                        }
                    }
                    sink.consume(std::span<const Event>(payload.get(), h.event_count));
                    delivered += h.event_count;
                    break;
                }
                case ChunkType::kSummary: {
                    SourceSummary s;
                    if (decode_summary(data, h.payload_bytes, s)) {
                        writer_summary = std::move(s);
                    } else {
                        walk.notes.add(describe_chunk(h, at) + " could not be decoded");
                    }
                    break;
                }
                case ChunkType::kIndex: break;  // for quick inspection; a full read needs none
                default: ++unknown_chunks; break;
            }
            if (progress) progress(walk.pos, size);
        }
        begin_once(nullptr);

        // What the capture dropped is the writer's to say; what damage or a cut took from the
        // file is this read's, and is counted and worded apart (never as capture drops).
        SourceSummary summary;
        summary.events = delivered;
        summary.dropped = writer_summary.dropped;
        summary.damaged = writer_summary.damaged + walk.lost_events;
        summary.truncated = writer_summary.truncated || walk.truncated || walk.io_failed;
        summary.notes = header_notes;
        summary.notes.insert(summary.notes.end(), writer_summary.notes.begin(),
                             writer_summary.notes.end());
        summary.notes.insert(summary.notes.end(), remarks.begin(), remarks.end());
        summary.missing = writer_summary.missing;
        walk.notes.append_to(summary.missing);
        if (unknown_chunks > 0) {
            summary.notes.push_back(
                fmt::format("{} chunk(s) of a type this gpudiag does not know were skipped "
                            "(written by a newer version)",
                            unknown_chunks));
        }
        if (bad_strings > 0) {
            summary.notes.push_back(
                fmt::format("{} string(s) with reserved ids were ignored", bad_strings));
        }
        if (unmapped_strings > 0) {
            summary.notes.push_back(
                fmt::format("{} string(s) could not be matched to ids (too many conflicts); "
                            "some names may be missing",
                            unmapped_strings));
        }
        if (walk.io_failed) summary.missing.push_back("stopped by a read error: " + walk.io_error);
        last_summary = summary;
        sink.end(summary);
        if (walk.io_failed) return io_error(walk.io_error);
        return Status::ok();
    }

    // Reads and decodes one small structured chunk (source info, summary, index) at `offset`.
    template <typename Decode>
    bool read_structured(Walk& walk, std::uint64_t offset, ChunkType type, Decode decode) {
        const std::uint64_t size = input->size();
        if (offset < kFileHeaderBytes || offset >= size || size - offset < kChunkHeaderBytes) {
            return false;
        }
        unsigned char hb[kChunkHeaderBytes];
        if (!read_bytes(walk, offset, hb, sizeof hb)) return false;
        auto h = decode_chunk_header(hb);
        if (!h || h->type != static_cast<std::uint16_t>(type) ||
            h->payload_bytes > kMaxChunkPayload ||
            h->payload_bytes > size - offset - kChunkHeaderBytes) {
            return false;
        }
        bool crc_ok = false;
        if (!read_payload(walk, *h, offset, crc_ok) || !crc_ok) return false;
        return decode(reinterpret_cast<const unsigned char*>(payload.get()), h->payload_bytes);
    }

    // From the trailer and index; false when the file has no usable ones.
    bool info_from_index(Walk& walk, RecordingInfo& info) {
        const std::uint64_t size = input->size();
        if (size < kFileHeaderBytes + kTrailerBytes + kChunkHeaderBytes) return false;
        const std::uint64_t trailer_at = size - kTrailerBytes;
        if (!is_final_trailer(walk, trailer_at)) return false;
        unsigned char tb[kTrailerBytes];
        if (!read_bytes(walk, trailer_at, tb, sizeof tb)) return false;
        const auto trailer = decode_trailer(tb);
        if (!trailer) return false;
        Index index;
        if (!read_structured(
                walk, trailer->index_offset, ChunkType::kIndex,
                [&](const unsigned char* d, std::size_t n) { return decode_index(d, n, index); })) {
            return false;
        }
        if (!read_structured(walk, index.source_info_offset, ChunkType::kSourceInfo,
                             [&](const unsigned char* d, std::size_t n) {
                                 return decode_source_info(d, n, info.source);
                             })) {
            return false;
        }
        if (index.summary_offset != 0 &&
            !read_structured(walk, index.summary_offset, ChunkType::kSummary,
                             [&](const unsigned char* d, std::size_t n) {
                                 return decode_summary(d, n, info.summary);
                             })) {
            return false;
        }
        info.events = index.events;
        info.chunks = index.chunks;
        bool any = false;
        for (const IndexEntry& e : index.entries) {
            if (e.events == 0) continue;
            info.first_ns = any ? std::min(info.first_ns, e.first_ns) : e.first_ns;
            info.last_ns = std::max(info.last_ns, e.last_ns);
            any = true;
        }
        info.closed_cleanly = true;
        return true;
    }

    // By walking chunk headers; decodes source info and summary, trusts events chunk headers.
    void info_by_walking(Walk& walk, RecordingInfo& info) {
        ChunkHeader h;
        std::uint64_t at = 0;
        bool have_source = false;
        bool any = false;
        while (next(walk, h, at) == Step::kChunk) {
            const auto type = static_cast<ChunkType>(h.type);
            if (type == ChunkType::kEvents) {
                info.events += h.event_count;
                if (h.event_count > 0) {
                    info.first_ns = any ? std::min(info.first_ns, h.first_ns) : h.first_ns;
                    info.last_ns = std::max(info.last_ns, h.last_ns);
                    any = true;
                }
            } else if (type == ChunkType::kSourceInfo || type == ChunkType::kSummary) {
                bool crc_ok = false;
                if (!read_payload(walk, h, at, crc_ok)) break;
                const auto* d = reinterpret_cast<const unsigned char*>(payload.get());
                bool decoded = false;
                if (crc_ok && type == ChunkType::kSourceInfo && !have_source) {
                    SourceInfo s;
                    decoded = decode_source_info(d, h.payload_bytes, s);
                    if (decoded) {
                        info.source = std::move(s);
                        have_source = true;
                    }
                } else if (crc_ok && type == ChunkType::kSummary) {
                    SourceSummary s;
                    decoded = decode_summary(d, h.payload_bytes, s);
                    if (decoded) info.summary = std::move(s);
                }
                if (!decoded) walk.notes.add(describe_chunk(h, at) + " is damaged");
            }
            if (type != ChunkType::kIndex) ++info.chunks;
        }
        info.closed_cleanly = walk.clean_end;
    }

    Result<RecordingInfo> info() {
        RecordingInfo info;
        info.format_version = header.version;
        info.flags = header.flags;
        info.writer_version = version_string(header.writer_version);
        info.file_bytes = input->size();
        Walk walk;
        if (!info_from_index(walk, info)) {
            if (walk.io_failed) return io_error(walk.io_error);
            RecordingInfo fresh;
            fresh.format_version = info.format_version;
            fresh.flags = info.flags;
            fresh.writer_version = info.writer_version;
            fresh.file_bytes = info.file_bytes;
            info = std::move(fresh);
            walk = Walk{};
            info_by_walking(walk, info);
            if (walk.io_failed) return io_error(walk.io_error);
        }
        info.truncated = walk.truncated || info.summary.truncated;
        info.notes = header_notes;
        walk.notes.append_to(info.notes);
        return info;
    }
};

RecordingReader::RecordingReader() noexcept {
    try {
        impl_ = std::make_unique<Impl>();
    } catch (...) {
        // impl_ stays null: open() reports it.
    }
}

RecordingReader::~RecordingReader() = default;

Status RecordingReader::open(const std::string& path) noexcept {
    if (!impl_) return resource_exhausted("out of memory creating a recording reader");
    try {
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            const int err = errno;
            if (err == ENOENT) return not_found(path + ": no such file");
            return io_error(path + ": cannot open (" + std::strerror(err) + ")");
        }
        struct stat st {};
        if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            ::close(fd);
            return io_error(path + ": not a regular file");
        }
        (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
        auto input = std::make_unique<FileInput>(fd, static_cast<std::uint64_t>(st.st_size));
        return impl_->open_input(std::move(input), path);
    } catch (...) {
        return convert_exception();
    }
}

Status RecordingReader::open_buffer(const void* data, std::size_t size) noexcept {
    if (!impl_) return resource_exhausted("out of memory creating a recording reader");
    if (data == nullptr && size > 0) return invalid_argument("open_buffer: null data");
    try {
        return impl_->open_input(std::make_unique<MemoryInput>(data, size), "<buffer>");
    } catch (...) {
        return convert_exception();
    }
}

void RecordingReader::set_progress(
    std::function<void(std::uint64_t, std::uint64_t)> progress) noexcept {
    if (impl_) impl_->progress = std::move(progress);
}

Status RecordingReader::read(EventSink& sink, StringTable& strings) noexcept {
    if (!impl_ || !impl_->input)
        return failed_precondition("recording reader: read() before open()");
    try {
        return impl_->read(sink, strings);
    } catch (...) {
        return convert_exception();
    }
}

Result<RecordingInfo> RecordingReader::info() noexcept {
    if (!impl_ || !impl_->input)
        return failed_precondition("recording reader: info() before open()");
    try {
        return impl_->info();
    } catch (...) {
        return convert_exception();
    }
}

const SourceSummary& RecordingReader::last_summary() const noexcept {
    static const SourceSummary kEmpty;
    return impl_ ? impl_->last_summary : kEmpty;
}

Result<RecordingInfo> read_recording_info(const std::string& path) noexcept {
    RecordingReader reader;
    if (Status s = reader.open(path); !s) return s;
    return reader.info();
}

Status read_recording(const std::string& path, EventSink& sink, StringTable& strings) noexcept {
    RecordingReader reader;
    GPUDIAG_RETURN_IF_ERROR(reader.open(path));
    return reader.read(sink, strings);
}

}  // namespace gpudiag
