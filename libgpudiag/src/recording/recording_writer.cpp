// SPDX-License-Identifier: Apache-2.0
// RecordingWriter: appends chunks to a .gpudiag file with bounded memory.
//
// Crash safety comes from the layout, not from fsync: each chunk goes out in one writev() of
// header + payload, so a killed process leaves a file of complete chunks plus at most one partial
// chunk, which readers detect (payload past end of file) and report as truncation. After a failed
// write (disk full) the writer cuts the file back to its last complete chunk and refuses further
// events, counting them as dropped. The index is bounded too: when it reaches kMaxIndexEntries,
// neighbouring entries merge pairwise (each then covers twice as many chunks).
#include <gpudiag/recording.hpp>
#include <gpudiag/version.hpp>

#include "recording/file_layout.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <new>

namespace gpudiag {
namespace {

using namespace detail::record;

constexpr std::size_t kMinChunkBytes = std::size_t{64} << 10;
constexpr std::size_t kMaxChunkBytes = std::size_t{16} << 20;
constexpr std::size_t kMaxIndexEntries = 16384;  // 640 KiB of index at most
// Kept free under RecordingWriterOptions::max_file_bytes for what close() writes: the summary,
// the index (kMaxIndexEntries at 40 bytes) and the trailer.
constexpr std::uint64_t kCloseReserveBytes = std::uint64_t{1} << 20;
constexpr std::uint64_t kMinFileCapBytes = std::uint64_t{4} << 20;

}  // namespace

struct RecordingWriter::Impl {
    explicit Impl(RecordingWriterOptions opts) : options(opts) {
        options.chunk_bytes = std::clamp(options.chunk_bytes, kMinChunkBytes, kMaxChunkBytes);
        capacity_events = options.chunk_bytes / kEventBytes;
        if (options.max_file_bytes != 0) {
            options.max_file_bytes = std::max(options.max_file_bytes, kMinFileCapBytes);
        }
    }

    RecordingWriterOptions options;
    std::size_t capacity_events = 0;
    int fd = -1;
    std::string path;
    Status error;            // the first problem, reported by close()
    bool io_failed = false;  // after a failed write nothing more is written
    bool began = false;
    bool summary_written = false;
    const StringTable* strings = nullptr;
    StringId next_string = StringTable::kOverflowString + 1;  // ids 0 and 1 are fixed
    std::unique_ptr<Event[]> buffer;
    std::size_t buffered = 0;
    std::uint64_t offset = 0;
    std::uint32_t sequence = 0;
    std::uint64_t events_written = 0;
    std::uint64_t events_dropped = 0;
    std::uint64_t strings_cut = 0;
    std::uint64_t events_capped = 0;   // dropped at max_file_bytes (also in events_dropped)
    std::uint64_t capped_from_ns = 0;  // the first of them
    std::string scratch;
    Index index;
    std::uint32_t chunks_per_entry = 1;

    void fail(Status s) {
        if (error.is_ok()) error = std::move(s);
    }

    // Writes one chunk; on failure cuts the file back to the last complete chunk.
    bool write_chunk(ChunkType type, const void* payload, std::size_t bytes,
                     std::uint32_t event_count, std::uint64_t first_ns, std::uint64_t last_ns) {
        if (io_failed || fd < 0) return false;
        ChunkHeader h;
        h.type = static_cast<std::uint16_t>(type);
        h.payload_bytes = static_cast<std::uint32_t>(bytes);
        h.payload_crc = crc32(payload, bytes);
        h.event_count = event_count;
        h.sequence = sequence;
        h.first_ns = first_ns;
        h.last_ns = last_ns;
        unsigned char header[kChunkHeaderBytes];
        encode_chunk_header(h, header);
        if (!write_all(header, sizeof header, payload, bytes)) return false;
        ++sequence;
        return true;
    }

    // Two buffers in as few writev() calls as the kernel allows.
    bool write_all(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) {
        iovec iov[2] = {{const_cast<void*>(a), a_bytes}, {const_cast<void*>(b), b_bytes}};
        int iovcnt = b_bytes > 0 ? 2 : 1;
        iovec* cur = iov;
        std::size_t written = 0;
        const std::size_t total = a_bytes + b_bytes;
        while (written < total) {
            const ssize_t n = ::writev(fd, cur, iovcnt);
            if (n < 0) {
                if (errno == EINTR) continue;
                const int err = errno;
                io_failed = true;
                if (::ftruncate(fd, static_cast<off_t>(offset)) != 0) {
                    // The partial chunk stays; readers report the file as truncated there.
                }
                fail(io_error(fmt::format(
                    "{}: write failed after {} bytes ({}); the recording keeps what was written "
                    "before",
                    path, offset, std::strerror(err))));
                return false;
            }
            written += static_cast<std::size_t>(n);
            auto left = static_cast<std::size_t>(n);
            while (iovcnt > 0 && left >= cur->iov_len) {
                left -= cur->iov_len;
                ++cur;
                --iovcnt;
            }
            if (iovcnt > 0) {
                cur->iov_base = static_cast<char*>(cur->iov_base) + left;
                cur->iov_len -= left;
            }
        }
        offset += total;
        return true;
    }

    // Strings interned since the last strings chunk, in chunks of at most chunk_bytes.
    void write_new_strings() {
        if (strings == nullptr || io_failed) return;
        const auto end = static_cast<StringId>(strings->size());
        while (next_string < end && !io_failed) {
            scratch.clear();
            scratch.resize(4);  // count, patched below
            ByteBuilder b(scratch);
            std::uint32_t count = 0;
            StringId id = next_string;
            for (; id < end; ++id) {
                std::string_view text = strings->lookup(id);
                if (text.empty()) continue;  // a gap left by bind(): nothing to tell readers
                if (text.size() > kMaxStringBytes) {
                    text = text.substr(0, kMaxStringBytes);
                    ++strings_cut;
                }
                if (count > 0 && scratch.size() + 8 + text.size() > options.chunk_bytes) break;
                b.u32(id);
                b.str(text);
                ++count;
            }
            std::memcpy(scratch.data(), &count, sizeof count);
            if (count > 0 &&
                !write_chunk(ChunkType::kStrings, scratch.data(), scratch.size(), 0, 0, 0)) {
                return;
            }
            next_string = id;
        }
    }

    void add_index_entry(std::uint64_t chunk_offset, std::uint64_t events, std::uint64_t first,
                         std::uint64_t last) {
        auto& entries = index.entries;
        if (!entries.empty() && entries.back().chunks < chunks_per_entry) {
            IndexEntry& e = entries.back();
            e.chunks += 1;
            e.events += events;
            e.first_ns = std::min(e.first_ns, first);
            e.last_ns = std::max(e.last_ns, last);
            return;
        }
        if (entries.size() >= kMaxIndexEntries) {
            // Merge neighbours pairwise: half the entries, each covering twice the chunks.
            std::size_t out = 0;
            for (std::size_t i = 0; i < entries.size(); i += 2, ++out) {
                IndexEntry merged = entries[i];
                if (i + 1 < entries.size()) {
                    const IndexEntry& n = entries[i + 1];
                    merged.chunks += n.chunks;
                    merged.events += n.events;
                    merged.first_ns = std::min(merged.first_ns, n.first_ns);
                    merged.last_ns = std::max(merged.last_ns, n.last_ns);
                }
                entries[out] = merged;
            }
            entries.resize(out);
            chunks_per_entry *= 2;
            add_index_entry(chunk_offset, events, first, last);
            return;
        }
        entries.push_back(IndexEntry{chunk_offset, events, first, last, 1});
    }

    // The bytes the next strings chunks will take (at most: their text and framing).
    [[nodiscard]] std::uint64_t pending_string_bytes() const {
        if (strings == nullptr) return 0;
        std::uint64_t bytes = 0;
        const auto end = static_cast<StringId>(strings->size());
        for (StringId id = next_string; id < end; ++id) {
            bytes += 8 + std::min<std::size_t>(strings->lookup(id).size(), kMaxStringBytes);
        }
        return bytes + (bytes / options.chunk_bytes + 1) * (kChunkHeaderBytes + 4);
    }

    // True when the buffered events (and the names they need) would take the file past
    // max_file_bytes: from then on events are counted, not written.
    bool over_cap() {
        if (options.max_file_bytes == 0) return false;
        if (events_capped == 0) {
            const std::uint64_t need =
                pending_string_bytes() + kChunkHeaderBytes + buffered * kEventBytes;
            if (offset + need + kCloseReserveBytes <= options.max_file_bytes) return false;
            capped_from_ns = ~std::uint64_t{0};
            for (std::size_t i = 0; i < buffered; ++i) {
                capped_from_ns = std::min(capped_from_ns, buffer[i].start_ns);
            }
        }
        events_capped += buffered;
        events_dropped += buffered;
        buffered = 0;
        return true;
    }

    void flush_events() {
        if (buffered > 0 && over_cap()) return;
        write_new_strings();  // names first: a reader must know them before the events
        if (io_failed) {
            events_dropped += buffered;
            buffered = 0;
        }
        if (buffered == 0) return;
        std::uint64_t first = ~std::uint64_t{0};
        std::uint64_t last = 0;
        for (std::size_t i = 0; i < buffered; ++i) {
            first = std::min(first, buffer[i].start_ns);
            last = std::max({last, buffer[i].start_ns, buffer[i].end_ns});
        }
        const std::uint64_t chunk_offset = offset;
        if (write_chunk(ChunkType::kEvents, buffer.get(), buffered * kEventBytes,
                        static_cast<std::uint32_t>(buffered), first, last)) {
            events_written += buffered;
            index.events += buffered;
            add_index_entry(chunk_offset, buffered, first, last);
        } else {
            events_dropped += buffered;
        }
        buffered = 0;
    }

    void write_source_info(const SourceInfo& info) {
        scratch.clear();
        encode_source_info(info, scratch);
        index.source_info_offset = offset;
        write_chunk(ChunkType::kSourceInfo, scratch.data(), scratch.size(), 0, 0, 0);
    }

    void write_summary(const SourceSummary& given) {
        SourceSummary summary = given;
        if (events_capped > 0) {
            summary.missing.push_back(fmt::format(
                "{} events from {} ns on (the session's clock) are not in the recording: it "
                "reached its size cap of {} MiB",
                events_capped, capped_from_ns, options.max_file_bytes >> 20));
        }
        if (strings_cut > 0) {
            summary.notes.push_back(fmt::format(
                "{} string(s) longer than 1 MiB were cut to 1 MiB in the recording", strings_cut));
        }
        scratch.clear();
        encode_summary(summary, scratch);
        const std::uint64_t at = offset;
        if (write_chunk(ChunkType::kSummary, scratch.data(), scratch.size(), 0, 0, 0)) {
            index.summary_offset = at;
        }
        summary_written = true;
    }
};

RecordingWriter::RecordingWriter(RecordingWriterOptions options) noexcept {
    try {
        impl_ = std::make_unique<Impl>(options);
    } catch (...) {
        // impl_ stays null: open() reports it.
    }
}

RecordingWriter::~RecordingWriter() {
    if (impl_ && impl_->fd >= 0) (void)close();
}

Status RecordingWriter::open(const std::string& path) noexcept {
    if (!impl_) return resource_exhausted("out of memory creating a recording writer");
    Impl& w = *impl_;
    if (w.fd >= 0) return failed_precondition(w.path + " is already open in this writer");
    try {
        if (!w.buffer) w.buffer = std::make_unique<Event[]>(w.capacity_events);
        w.path = path;
    } catch (const std::bad_alloc&) {
        return resource_exhausted(
            fmt::format("out of memory for a {}-byte chunk buffer", w.options.chunk_bytes));
    }
    const int create = w.options.exclusive ? O_EXCL : O_TRUNC;
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | create | O_CLOEXEC, 0644);
    if (fd < 0) {
        const int err = errno;
        if (err == ENOENT) return not_found(path + ": the directory does not exist");
        if (err == EEXIST) return io_error(path + ": exists (not overwritten)");
        return io_error(path + ": cannot create (" + std::strerror(err) + ")");
    }
    w.fd = fd;
    FileHeader h;
    h.version = kRecordingFormatVersion;
    h.writer_version =
        (GPUDIAG_VERSION_MAJOR << 16) | (GPUDIAG_VERSION_MINOR << 8) | GPUDIAG_VERSION_PATCH;
    unsigned char header[kFileHeaderBytes];
    encode_file_header(h, header);
    if (!w.write_all(header, sizeof header, nullptr, 0)) {
        Status s = w.error;
        ::close(w.fd);
        w.fd = -1;
        return s;
    }
    return Status::ok();
}

void RecordingWriter::begin(const SourceInfo& info, const StringTable& strings) {
    if (!impl_) return;
    Impl& w = *impl_;
    try {
        if (w.fd < 0) {
            w.fail(failed_precondition("recording writer: begin() before open()"));
            return;
        }
        if (w.began) {
            w.fail(failed_precondition(w.path + ": begin() called twice; a recording holds one "
                                                "source"));
            return;
        }
        w.began = true;
        w.strings = &strings;
        w.write_source_info(info);
    } catch (const std::bad_alloc&) {
        w.fail(resource_exhausted(w.path + ": out of memory writing the source info"));
    } catch (...) {
        w.fail(internal_error(w.path + ": unexpected failure in the recording writer"));
    }
}

void RecordingWriter::consume(std::span<const Event> events) {
    if (!impl_) return;
    Impl& w = *impl_;
    try {
        if (!w.began || w.io_failed || w.fd < 0) {
            // Out of order calls are the caller's bug: report them, but keep the file usable.
            if (!w.began) {
                w.fail(
                    failed_precondition("recording writer: consume() before open() and "
                                        "begin(); those events were not recorded"));
            }
            w.events_dropped += events.size();
            return;
        }
        while (!events.empty()) {
            const std::size_t n = std::min(events.size(), w.capacity_events - w.buffered);
            std::memcpy(static_cast<void*>(w.buffer.get() + w.buffered), events.data(),
                        n * kEventBytes);
            w.buffered += n;
            events = events.subspan(n);
            if (w.buffered == w.capacity_events) w.flush_events();
            if (w.io_failed) {
                w.events_dropped += events.size();
                return;
            }
        }
    } catch (const std::bad_alloc&) {
        w.fail(resource_exhausted(w.path + ": out of memory writing strings"));
    } catch (...) {
        w.fail(internal_error(w.path + ": unexpected failure in the recording writer"));
    }
}

void RecordingWriter::end(const SourceSummary& summary) {
    if (!impl_) return;
    Impl& w = *impl_;
    try {
        if (w.fd < 0 || w.summary_written) return;
        w.flush_events();
        w.write_summary(summary);
    } catch (const std::bad_alloc&) {
        w.fail(resource_exhausted(w.path + ": out of memory writing the summary"));
    } catch (...) {
        w.fail(internal_error(w.path + ": unexpected failure in the recording writer"));
    }
}

Status RecordingWriter::flush() noexcept {
    if (!impl_) return resource_exhausted("out of memory creating a recording writer");
    Impl& w = *impl_;
    if (w.fd < 0) return failed_precondition("recording writer: flush() while not open");
    try {
        w.flush_events();
    } catch (const std::bad_alloc&) {
        w.fail(resource_exhausted(w.path + ": out of memory writing strings"));
    } catch (...) {
        w.fail(internal_error(w.path + ": unexpected failure in the recording writer"));
    }
    return w.error;
}

Status RecordingWriter::close() noexcept {
    if (!impl_) return resource_exhausted("out of memory creating a recording writer");
    Impl& w = *impl_;
    if (w.fd < 0) {
        return w.error.is_ok() ? failed_precondition("recording writer: close() while not open")
                               : w.error;
    }
    try {
        if (!w.began) {
            // A well-formed file even when no source ever began: readers expect source info.
            w.began = true;
            w.write_source_info(SourceInfo{});
        }
        w.flush_events();
        if (!w.summary_written) {
            SourceSummary s;
            s.events = w.events_written;
            s.dropped = w.events_dropped;
            s.notes.emplace_back("the recording was closed without a summary from its source");
            w.write_summary(s);
        }
        w.index.chunks = w.sequence;
        w.scratch.clear();
        encode_index(w.index, w.scratch);
        const std::uint64_t index_offset = w.offset;
        if (w.write_chunk(ChunkType::kIndex, w.scratch.data(), w.scratch.size(), 0, 0, 0)) {
            unsigned char trailer[kTrailerBytes];
            encode_trailer(Trailer{index_offset, w.offset}, trailer);
            w.write_all(trailer, sizeof trailer, nullptr, 0);
        }
    } catch (const std::bad_alloc&) {
        w.fail(resource_exhausted(w.path + ": out of memory writing the index"));
    } catch (...) {
        w.fail(internal_error(w.path + ": unexpected failure in the recording writer"));
    }
    if (::close(w.fd) != 0 && w.error.is_ok()) {
        w.fail(io_error(w.path + ": close failed (" + std::strerror(errno) + ")"));
    }
    w.fd = -1;
    return w.error;
}

Status RecordingWriter::status() const noexcept {
    if (!impl_) return resource_exhausted("out of memory creating a recording writer");
    return impl_->error;
}

std::uint64_t RecordingWriter::events_written() const noexcept {
    return impl_ ? impl_->events_written : 0;
}

std::uint64_t RecordingWriter::events_dropped() const noexcept {
    return impl_ ? impl_->events_dropped : 0;
}

std::uint64_t RecordingWriter::bytes_written() const noexcept {
    return impl_ ? impl_->offset : 0;
}

Status write_recording(const std::string& path, const SourceInfo& info, const StringTable& strings,
                       std::span<const Event> events, const SourceSummary& summary,
                       const RecordingWriterOptions& options) noexcept {
    RecordingWriter writer(options);
    GPUDIAG_RETURN_IF_ERROR(writer.open(path));
    writer.begin(info, strings);
    writer.consume(events);
    writer.end(summary);
    return writer.close();
}

}  // namespace gpudiag
