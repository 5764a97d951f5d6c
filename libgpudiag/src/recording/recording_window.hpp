// SPDX-License-Identifier: Apache-2.0
// RecordingWindow: the last N seconds of a session's events, kept on disk as they arrive, so that
// the window outlives a crash, kill -9 or the OOM killer (a "flight recorder" for services left
// on for days).
//
// Two recordings beside record_path get every event: <stem>-window<ext>, which always holds at
// least the window, and <stem>-window-next<ext>, started later. When the next one spans the
// window (or holds half the byte cap), it replaces the window file by an atomic rename and a new
// next one starts. So at every moment <stem>-window<ext> is a recording that opens and covers
// between one and two windows (the report says how much), and the disk holds at most twice the
// cap (plus the state below). Each recording begins with the state from before it (WindowState:
// live allocations, latest levels), so its levels, leak rates and OOM explanations are those of
// the whole session.
//
// A crash loses what the writers have not flushed: the session calls flush() at every tick of
// its worker (flush_period_ms), which is the bound a report states. Memory: two writers' buffers
// and the state, whatever the window's length.
// An EventSink: one thread at a time.
#pragma once

#include "recording/window_state.hpp"

#include <gpudiag/recording.hpp>
#include <gpudiag/sink.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace gpudiag::detail {

class RecordingWindow final : public EventSink {
public:
    /// The window kept beside `record_path`, covering the last `seconds` (> 0), each of its two
    /// files at most about `max_bytes`, flushed every `flush_period` (what a crash may lose).
    RecordingWindow(std::string record_path, double seconds, std::uint64_t max_bytes,
                    std::chrono::milliseconds flush_period);
    ~RecordingWindow() override;
    RecordingWindow(const RecordingWindow&) = delete;
    RecordingWindow& operator=(const RecordingWindow&) = delete;

    /// <stem>-window<ext>: the file that holds the window at every moment.
    static std::string window_path(const std::string& record_path);
    /// <stem>-window-next<ext>: the one that will replace it.
    static std::string next_path(const std::string& record_path);

    /// Creates the window file (and removes a next one a crashed run left: the window file it
    /// left holds all of it). Errors: those of RecordingWriter::open().
    Status open();

    void begin(const SourceInfo& info, const StringTable& strings) override;
    void consume(std::span<const Event> events) override;
    void end(const SourceSummary& summary) override;

    /// Writes what the writers hold to disk. Errors: the writers' sticky status.
    Status flush();
    /// Writes the window as a recording at `path` (a dump): the window file as it is now, with
    /// `summary` (the session's) and what the window covers. Errors: those of the reader and
    /// the writer.
    Status write(const std::string& path, const SourceSummary& summary,
                 RecordingWriterOptions options = {});
    /// At stop: closes the window with `summary` and moves it to record_path.
    Status finish(const SourceSummary& summary);

    /// True once when an allocation failed in the events since the last call: a moment worth a
    /// dump.
    bool take_allocation_failure() noexcept;

    [[nodiscard]] double seconds() const noexcept { return seconds_; }
    /// What the window file covers now, on the session's clock (0 before any event).
    [[nodiscard]] double seconds_held() const noexcept;
    [[nodiscard]] std::uint64_t events_held() const noexcept;
    /// What both files take on disk now.
    [[nodiscard]] std::uint64_t bytes_on_disk() const noexcept;
    [[nodiscard]] const std::string& path() const noexcept { return window_path_; }

private:
    // One of the two recordings: its writer and what it holds beyond the state it began with.
    struct File {
        std::unique_ptr<RecordingWriter> writer;
        std::uint64_t first_ns = 0;  // its own events' time span, 0 before the first
        std::uint64_t last_ns = 0;
        std::uint64_t events = 0;
        std::uint64_t state_events = 0;
        WindowState::Totals state;
    };
    [[nodiscard]] std::unique_ptr<RecordingWriter> make_writer() const;
    Status start_file(File& file, const std::string& path);
    void rotate_if_due();
    [[nodiscard]] std::size_t until_full(std::span<const Event> events) const;
    void append(File& file, std::span<const Event> events);
    [[nodiscard]] SourceSummary described(const SourceSummary& summary) const;

    std::string record_path_;
    std::string window_path_;
    std::string next_path_;
    double seconds_;
    std::chrono::milliseconds flush_period_;
    std::uint64_t window_ns_;
    std::uint64_t max_bytes_;
    File window_;
    File next_;
    WindowState state_;
    SourceInfo info_;
    const StringTable* strings_ = nullptr;
    std::uint64_t observed_ = 0;  // every event of the session
    std::uint64_t rotations_ = 0;
    Status status_;
    bool allocation_failed_ = false;
};

}  // namespace gpudiag::detail
