// SPDX-License-Identifier: Apache-2.0
// RecordingWindow: the last N seconds of a session's events, in memory, written out as a
// recording on demand (a "flight recorder" for services left on for days).
//
// Events go into fixed chunks of kChunkEvents; whole chunks older than the window, or past the
// byte cap, are dropped from the front (their memory is reused). So memory is the cap plus one
// chunk, whatever the run length, and a dump holds at least the last `seconds` of events when
// the cap allows it. An EventSink: one thread at a time.
#pragma once

#include <gpudiag/recording.hpp>
#include <gpudiag/sink.hpp>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace gpudiag::detail {

class RecordingWindow final : public EventSink {
public:
    static constexpr std::size_t kChunkEvents = 16384;  // 1 MiB of events

    /// Keeps the events of the last `seconds` (> 0), in at most `max_bytes` (at least 2 chunks).
    RecordingWindow(double seconds, std::uint64_t max_bytes);

    void begin(const SourceInfo& info, const StringTable& strings) override;
    void consume(std::span<const Event> events) override;
    void end(const SourceSummary& summary) override;

    /// Writes what the window holds to `path` as a recording, `summary` describing the session
    /// (its notes and what is missing are kept; the window adds what it no longer holds).
    /// Errors: those of RecordingWriter.
    Status write(const std::string& path, const SourceSummary& summary,
                 RecordingWriterOptions options = {}) const;

    /// True once when an allocation failed in the events since the last call: a moment worth a
    /// dump.
    bool take_allocation_failure() noexcept;

    [[nodiscard]] std::uint64_t events_held() const noexcept;
    [[nodiscard]] std::uint64_t bytes_held() const noexcept;
    [[nodiscard]] std::uint64_t events_evicted() const noexcept { return evicted_; }
    [[nodiscard]] double seconds() const noexcept { return seconds_; }

private:
    struct Chunk {
        std::unique_ptr<Event[]> events;
        std::size_t count = 0;
        std::uint64_t last_ns = 0;  // latest event time in the chunk
    };
    void evict();

    double seconds_;
    std::uint64_t window_ns_;
    std::size_t max_chunks_;
    std::deque<Chunk> chunks_;
    std::vector<std::unique_ptr<Event[]>> spare_;  // at most one, reused
    SourceInfo info_;
    const StringTable* strings_ = nullptr;
    std::uint64_t latest_ns_ = 0;
    std::uint64_t evicted_ = 0;
    std::uint64_t evicted_until_ns_ = 0;  // the latest event time evicted
    std::uint64_t first_seen_ns_ = 0;
    bool allocation_failed_ = false;
};

}  // namespace gpudiag::detail
