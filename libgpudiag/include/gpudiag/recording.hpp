// SPDX-License-Identifier: Apache-2.0
// The .gpudiag recording: gpudiag's own append-only file of events, strings and source facts.
//
// Layout (all integers little-endian; the format is versioned by kRecordingFormatVersion):
//   file header (32 B: magic "GPUDIAG\0", format version, event size, flags, CRC)
//   chunk*      (48 B header: chunk magic "GDCK", type, payload length, event count, first/last
//                timestamp, payload CRC32, header CRC32; then the payload)
//   index chunk + trailer (32 B, magic "GPUDEND\0"), written only by a clean close().
// Chunk types: source info, strings (ids interned since the previous strings chunk), events (raw
// 64-byte Events), summary, index. A reader needs memory for one chunk only, skips a chunk whose
// CRC fails (resynchronising at the next chunk magic), and reads a recording cut short by a crash
// up to its last complete chunk, reporting it as truncated.
#pragma once

#include <gpudiag/event.hpp>
#include <gpudiag/export.hpp>
#include <gpudiag/sink.hpp>
#include <gpudiag/source_info.hpp>
#include <gpudiag/status.hpp>
#include <gpudiag/string_table.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#if GPUDIAG_HAS_SPAN
#    include <span>
#endif
#include <string>
#include <vector>

namespace gpudiag {

/// The format version this build writes and the newest it reads.
inline constexpr std::uint16_t kRecordingFormatVersion = 1;

struct RecordingWriterOptions {
    /// Payload bytes of one events chunk, which is also about all the memory the writer holds.
    /// Smaller chunks lose less on a crash; larger ones cost fewer system calls. Clamped to
    /// [64 KiB, 16 MiB].
    std::size_t chunk_bytes = std::size_t{2} << 20;
    /// The file never grows past this many bytes (0 = no cap; at least 4 MiB). Events that would
    /// take it past are dropped and counted, and the summary says from when the recording is
    /// missing them; 1 MiB stays reserved for the summary and the index, so the file still
    /// closes cleanly.
    std::uint64_t max_file_bytes = 0;
    /// Create the file only if none is there (else open() fails with kIoError, "exists"):
    /// evidence already on disk is never overwritten.
    bool exclusive = false;
};

/// What read_recording_info() learns without reading every event.
struct RecordingInfo {
    std::uint16_t format_version = 0;
    std::uint32_t flags = 0;
    std::string writer_version;  ///< gpudiag version that wrote the file, e.g. "0.1.0"
    std::uint64_t file_bytes = 0;
    SourceInfo source;
    /// The writer's summary when the file has one (its `events` are what the writer was given).
    SourceSummary summary;
    std::uint64_t events = 0;     ///< events stored in readable chunks
    std::uint64_t chunks = 0;     ///< chunks before the index
    std::uint64_t first_ns = 0;   ///< earliest event start (0 when no events)
    std::uint64_t last_ns = 0;    ///< latest event end
    bool closed_cleanly = false;  ///< the index and trailer are present
    bool truncated = false;       ///< cut short, or the writer's source said it was
    std::vector<std::string> notes;
};

#if GPUDIAG_HAS_SPAN  // the writer, the reader and write_recording take spans of events: C++20
/// Writes a recording. It is an EventSink, so it can ride along with the analyses (a live
/// session feeds it every batch its analysis pipeline takes):
/// begin() writes the source info, consume() buffers events and writes a chunk whenever the
/// buffer is full (strings new since the last chunk go first, so a reader always knows a name
/// before an event uses it), end() writes the summary, close() the index and trailer.
/// Memory is bounded by options.chunk_bytes.
///
///     RecordingWriter writer;
///     if (Status s = writer.open("run.gpudiag"); !s) return s;
///     writer.begin(info, strings); writer.consume(events); writer.end(summary);
///     return writer.close();
///
/// Thread-safety: one thread at a time (as for every EventSink). Callback-safe: no (writes to a
/// file). Errors: EventSink methods cannot return one, so the first failure is kept (status())
/// and later events are counted as dropped; close() returns it.
class GPUDIAG_API RecordingWriter final : public EventSink {
public:
    explicit RecordingWriter(RecordingWriterOptions options = {}) noexcept;
    ~RecordingWriter() override;  ///< closes the file if still open (index included)
    RecordingWriter(const RecordingWriter&) = delete;
    RecordingWriter& operator=(const RecordingWriter&) = delete;

    /// Creates (or replaces) `path` and writes the file header.
    /// Errors: kFailedPrecondition when already open, kIoError, kResourceExhausted.
    Status open(const std::string& path) noexcept;

    void begin(const SourceInfo& info, const StringTable& strings) override;
    void consume(std::span<const Event> events) override;
    void end(const SourceSummary& summary) override;

    /// Writes buffered events (and new strings) as a chunk now, so a crash after it loses nothing
    /// before it. Errors: the sticky status.
    Status flush() noexcept;
    /// Flushes, writes the summary (if end() did not), the index and the trailer, closes the
    /// file. Errors: the first failure of the writer's life, kFailedPrecondition if never opened.
    Status close() noexcept;

    /// The first error so far (OK when none).
    [[nodiscard]] Status status() const noexcept;
    [[nodiscard]] std::uint64_t events_written() const noexcept;
    /// Events refused because of an earlier error or a call out of order.
    [[nodiscard]] std::uint64_t events_dropped() const noexcept;
    [[nodiscard]] std::uint64_t bytes_written() const noexcept;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

/// Reads a recording one chunk at a time; memory stays bounded whatever the file size (chunks
/// above 64 MiB are refused as corrupt).
/// Thread-safety: one thread at a time. Callback-safe: no.
class GPUDIAG_API RecordingReader {
public:
    RecordingReader() noexcept;
    ~RecordingReader();
    RecordingReader(const RecordingReader&) = delete;
    RecordingReader& operator=(const RecordingReader&) = delete;

    /// Opens `path` and checks its file header.
    /// Errors: kNotFound, kIoError, kCorruptData (empty, not a recording, damaged header),
    /// kUnsupported (a newer format version or another event size).
    Status open(const std::string& path) noexcept;
    /// As open(), for bytes in memory; `data` must outlive the reader.
    Status open_buffer(const void* data, std::size_t size) noexcept;

    /// Called with (bytes read, file bytes) after each chunk while read() runs.
    void set_progress(std::function<void(std::uint64_t, std::uint64_t)> progress) noexcept;

    /// Streams the recording into `sink`: begin() with the source info, consume() once per
    /// events chunk, end() with a summary that adds to the writer's what this read lost
    /// (truncation, skipped chunks: counted in `dropped`, each named in `notes`). String ids are
    /// bound into `strings` as the writer assigned them (remapped when `strings` already uses an
    /// id for another text). Damage is not an error: it is reported through the summary.
    /// Errors: kFailedPrecondition (not open), kIoError (the OS failed a read midway; end() has
    /// then been called with truncated set).
    Status read(EventSink& sink, StringTable& strings) noexcept;

    /// Header, source info, counts and time range, from the index when the file was closed
    /// cleanly, else by walking the chunk headers (payload CRCs of events chunks are then not
    /// checked; read() checks every one). Errors: as read().
    Result<RecordingInfo> info() noexcept;

    /// The summary read() passed to end() (empty before).
    [[nodiscard]] const SourceSummary& last_summary() const noexcept;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

/// Writes a whole recording from events in memory (tests, the Python layer, simulations).
/// Thread-safety: safe on different paths. Errors: as RecordingWriter::open() and close().
GPUDIAG_API Status write_recording(const std::string& path, const SourceInfo& info,
                                   const StringTable& strings, std::span<const Event> events,
                                   const SourceSummary& summary,
                                   const RecordingWriterOptions& options = {}) noexcept;

#endif

/// Opens `path` and returns RecordingReader::info().
/// Thread-safety: safe. Errors: as RecordingReader::open() and info().
GPUDIAG_API Result<RecordingInfo> read_recording_info(const std::string& path) noexcept;

#if GPUDIAG_HAS_SPAN
/// Opens `path` and streams it into `sink` (RecordingReader::read()).
/// Thread-safety: safe on different sinks. Errors: as RecordingReader::open() and read().
GPUDIAG_API Status read_recording(const std::string& path, EventSink& sink,
                                  StringTable& strings) noexcept;
#endif

}  // namespace gpudiag
