// SPDX-License-Identifier: Apache-2.0
#include "recording/recording_window.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace gpudiag::detail {

RecordingWindow::RecordingWindow(double seconds, std::uint64_t max_bytes)
    : seconds_(seconds),
      window_ns_(static_cast<std::uint64_t>(std::max(seconds, 0.0) * 1e9)),
      max_chunks_(std::max<std::size_t>(
          2, static_cast<std::size_t>(max_bytes / (kChunkEvents * sizeof(Event))))) {}

void RecordingWindow::begin(const SourceInfo& info, const StringTable& strings) {
    info_ = info;
    strings_ = &strings;
}

void RecordingWindow::end(const SourceSummary&) {}

void RecordingWindow::consume(std::span<const Event> events) {
    while (!events.empty()) {
        if (chunks_.empty() || chunks_.back().count == kChunkEvents) {
            Chunk c;
            if (!spare_.empty()) {
                c.events = std::move(spare_.back());
                spare_.pop_back();
            } else {
                c.events = std::make_unique<Event[]>(kChunkEvents);
            }
            chunks_.push_back(std::move(c));
            evict();
        }
        Chunk& c = chunks_.back();
        const std::size_t n = std::min(events.size(), kChunkEvents - c.count);
        std::memcpy(static_cast<void*>(c.events.get() + c.count), events.data(), n * sizeof(Event));
        for (std::size_t i = 0; i < n; ++i) {
            const Event& e = events[i];
            const std::uint64_t t = std::max(e.start_ns, e.end_ns);
            c.last_ns = std::max(c.last_ns, t);
            if (first_seen_ns_ == 0 || (e.start_ns != 0 && e.start_ns < first_seen_ns_)) {
                first_seen_ns_ = e.start_ns;
            }
            if (e.kind == EventKind::kOutOfMemory) allocation_failed_ = true;
        }
        latest_ns_ = std::max(latest_ns_, c.last_ns);
        c.count += n;
        events = events.subspan(n);
    }
    evict();
}

// Whole chunks go from the front once every event in them is older than the window, or when the
// window holds more chunks than its byte cap allows; the newest chunk always stays.
void RecordingWindow::evict() {
    while (chunks_.size() > 1) {
        const Chunk& front = chunks_.front();
        const bool too_old = latest_ns_ > window_ns_ && front.last_ns < latest_ns_ - window_ns_;
        if (!too_old && chunks_.size() <= max_chunks_) break;
        evicted_ += front.count;
        evicted_until_ns_ = std::max(evicted_until_ns_, front.last_ns);
        if (spare_.empty()) spare_.push_back(std::move(chunks_.front().events));
        chunks_.pop_front();
    }
}

bool RecordingWindow::take_allocation_failure() noexcept {
    const bool failed = allocation_failed_;
    allocation_failed_ = false;
    return failed;
}

std::uint64_t RecordingWindow::events_held() const noexcept {
    std::uint64_t n = 0;
    for (const Chunk& c : chunks_) n += c.count;
    return n;
}

std::uint64_t RecordingWindow::bytes_held() const noexcept {
    return (chunks_.size() + spare_.size()) * kChunkEvents * sizeof(Event);
}

Status RecordingWindow::write(const std::string& path, const SourceSummary& summary,
                              RecordingWriterOptions options) const {
    if (strings_ == nullptr) return failed_precondition("the session has not started");
    RecordingWriter writer(options);
    if (Status s = writer.open(path); !s.is_ok()) return s;
    writer.begin(info_, *strings_);
    // Chunks are evicted whole, so the oldest may reach back further: the dump holds the window.
    const std::uint64_t from = latest_ns_ > window_ns_ ? latest_ns_ - window_ns_ : 0;
    std::uint64_t written = 0;
    std::uint64_t older = evicted_;
    std::uint64_t older_until = evicted_until_ns_;
    std::vector<Event> kept;
    for (const Chunk& c : chunks_) {
        std::span<const Event> events(c.events.get(), c.count);
        if (c.last_ns >= from &&
            (c.count == 0 || std::max(events[0].start_ns, events[0].end_ns) >= from)) {
            writer.consume(events);  // the common case: the whole chunk is in the window
            written += c.count;
            continue;
        }
        kept.clear();
        for (const Event& e : events) {
            if (std::max(e.start_ns, e.end_ns) >= from) {
                kept.push_back(e);
            } else {
                ++older;
                older_until = std::max(older_until, std::max(e.start_ns, e.end_ns));
            }
        }
        writer.consume(kept);
        written += kept.size();
    }
    SourceSummary s = summary;
    s.events = written;
    s.notes.push_back(fmt::format(
        "A window of the session's events: the last {:g} s (at most {} MiB) are kept in memory "
        "and written when asked.",
        seconds_, max_chunks_ * kChunkEvents * sizeof(Event) >> 20));
    if (older > 0) {
        s.missing.push_back(fmt::format(
            "the {} events before the window ({:.1f} s of the session, up to {} ns on its clock) "
            "are not in this recording: it holds the session's last part only",
            older, static_cast<double>(older_until - std::min(older_until, first_seen_ns_)) / 1e9,
            older_until));
    }
    writer.end(s);
    return writer.close();
}

}  // namespace gpudiag::detail
