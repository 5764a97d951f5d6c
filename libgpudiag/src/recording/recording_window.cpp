// SPDX-License-Identifier: Apache-2.0
#include "recording/recording_window.hpp"

#include "support/file_name.hpp"
#include "support/format.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

namespace gpudiag::detail {
namespace {

// "run.gpudiag" + "-window" -> "run-window.gpudiag"; a path with no extension just gets the tag.
std::string tagged(const std::string& path, const char* tag) {
    const auto [stem, ext] = split_extension(path);
    return stem + tag + ext;
}

std::uint64_t time_of(const Event& e) {
    return std::max(e.start_ns, e.end_ns);
}

// Streams a recording into a writer, leaving the summary to the caller.
class IntoWriter final : public EventSink {
public:
    explicit IntoWriter(RecordingWriter& writer) : writer_(writer) {}
    void begin(const SourceInfo& info, const StringTable& strings) override {
        writer_.begin(info, strings);
    }
    void consume(std::span<const Event> events) override { writer_.consume(events); }
    void end(const SourceSummary& /*summary*/) override {}

private:
    RecordingWriter& writer_;
};

constexpr std::uint64_t kSlackBytes = std::uint64_t{64} << 20;  // past the cap: a backstop only

}  // namespace

RecordingWindow::RecordingWindow(std::string record_path, double seconds, std::uint64_t max_bytes,
                                 std::chrono::milliseconds flush_period)
    : record_path_(std::move(record_path)),
      window_path_(window_path(record_path_)),
      next_path_(next_path(record_path_)),
      seconds_(seconds),
      flush_period_(flush_period),
      window_ns_(static_cast<std::uint64_t>(std::max(seconds, 0.0) * 1e9)),
      max_bytes_(std::max<std::uint64_t>(max_bytes, std::uint64_t{4} << 20)) {}

RecordingWindow::~RecordingWindow() = default;  // the writers close their files: evidence stays

std::string RecordingWindow::window_path(const std::string& record_path) {
    return tagged(record_path, "-window");
}

std::string RecordingWindow::next_path(const std::string& record_path) {
    return tagged(record_path, "-window-next");
}

Status RecordingWindow::open() {
    std::error_code ec;
    std::filesystem::remove(next_path_, ec);  // a crashed run's: its window file holds it all
    window_.writer = make_writer();
    Status s = window_.writer->open(window_path_);
    if (!s.is_ok()) window_.writer.reset();
    return s;
}

// Chunks small enough that a small window still has many; the size cap is only a backstop, as
// rotation bounds each file.
std::unique_ptr<RecordingWriter> RecordingWindow::make_writer() const {
    RecordingWriterOptions options;
    options.chunk_bytes =
        static_cast<std::size_t>(std::min<std::uint64_t>(2 << 20, max_bytes_ / 16));
    options.max_file_bytes = max_bytes_ + kSlackBytes;
    return std::make_unique<RecordingWriter>(options);
}

void RecordingWindow::begin(const SourceInfo& info, const StringTable& strings) {
    info_ = info;
    strings_ = &strings;
    if (window_.writer) (void)start_file(window_, window_path_);
}

// Opens `file` (the window's is opened by open()) and writes the state first: a reader of the
// file alone sees what was held when it began. The source info says how many events that is, so
// a file cut short by a crash still tells its state from its window.
Status RecordingWindow::start_file(File& file, const std::string& path) {
    if (!file.writer) {
        file.writer = make_writer();
        if (Status s = file.writer->open(path); !s.is_ok()) {
            file.writer.reset();
            return s;
        }
    }
    const std::vector<Event> state = state_.events();
    SourceInfo info = info_;
    info.properties.emplace_back("gpudiag.window.seconds", fmt::format("{:g}", seconds_));
    info.properties.emplace_back("gpudiag.window.state_events", fmt::format("{}", state.size()));
    file.writer->begin(info, *strings_);
    file.writer->consume(state);
    file.state_events = state.size();
    file.state = state_.totals();
    file.first_ns = file.last_ns = 0;
    file.events = 0;
    return file.writer->flush();  // the state is on disk before any event of the file
}

void RecordingWindow::consume(std::span<const Event> events) {
    // In parts that end where a file becomes full: the files move on at the event that fills
    // them, not at the end of a batch that may span minutes.
    while (!events.empty()) {
        rotate_if_due();  // before the part: the next file's state is what came before it
        const std::span<const Event> part = events.first(until_full(events));
        if (window_.writer) append(window_, part);
        if (next_.writer) append(next_, part);
        state_.observe(part);
        observed_ += part.size();
        for (const Event& e : part) {
            if (e.kind == EventKind::kOutOfMemory) allocation_failed_ = true;
        }
        events = events.subspan(part.size());
    }
}

// How many of `events` (at least one) the file that moves on next takes before it is full.
std::size_t RecordingWindow::until_full(std::span<const Event> events) const {
    const File& f = next_.writer ? next_ : window_;
    if (!f.writer) return events.size();
    std::uint64_t first = f.first_ns;
    std::uint64_t last = f.last_ns;
    const std::uint64_t room = max_bytes_ / 2 - std::min(max_bytes_ / 2, f.writer->bytes_written());
    for (std::size_t i = 0; i < events.size(); ++i) {
        if (first == 0) first = events[i].start_ns;
        last = std::max(last, time_of(events[i]));
        if (last - std::min(last, first) >= window_ns_ || (i + 1) * sizeof(Event) >= room) {
            return i + 1;
        }
    }
    return events.size();
}

void RecordingWindow::append(File& file, std::span<const Event> events) {
    file.writer->consume(events);
    for (const Event& e : events) {
        if (file.first_ns == 0 && e.start_ns != 0) file.first_ns = e.start_ns;
        file.last_ns = std::max(file.last_ns, time_of(e));
    }
    file.events += events.size();
}

// A file is "full" once it spans the window or holds half the cap: the window file then gets a
// successor, and a full successor replaces it.
void RecordingWindow::rotate_if_due() {
    auto full = [this](const File& f) {
        return f.writer && f.events > 0 &&
               (f.last_ns - std::min(f.last_ns, f.first_ns) >= window_ns_ ||
                f.writer->bytes_written() >= max_bytes_ / 2);
    };
    if (!window_.writer || strings_ == nullptr) return;
    if (!next_.writer) {
        if (full(window_)) status_ = start_file(next_, next_path_);
        return;
    }
    if (!full(next_)) return;
    // On disk before it takes the window's name: a kill right after the rename finds a file
    // that holds the window, not one whose events wait in a buffer.
    if (Status s = next_.writer->flush(); !s.is_ok()) status_ = s;
    (void)window_.writer->close();
    window_.writer.reset();
    if (std::rename(next_path_.c_str(), window_path_.c_str()) != 0) {
        status_ = io_error(fmt::format("{}: could not replace the window file ({})", window_path_,
                                       std::strerror(errno)));
    }
    window_ = std::move(next_);
    next_ = File{};
    ++rotations_;
    if (Status s = start_file(next_, next_path_); !s.is_ok()) status_ = s;
}

void RecordingWindow::end(const SourceSummary& /*summary*/) {}  // finish() closes, with notes

Status RecordingWindow::flush() {
    Status result = status_;
    for (File* f : {&window_, &next_}) {
        if (!f->writer) continue;
        if (Status s = f->writer->flush(); !s.is_ok() && result.is_ok()) result = s;
    }
    return result;
}

Status RecordingWindow::write(const std::string& path, const SourceSummary& summary,
                              RecordingWriterOptions options) {
    if (strings_ == nullptr || !window_.writer) {
        return failed_precondition("the session has not started");
    }
    if (Status s = window_.writer->flush(); !s.is_ok()) return s;
    RecordingReader reader;
    if (Status s = reader.open(window_path_); !s.is_ok()) return s;
    RecordingWriter writer(options);
    if (Status s = writer.open(path); !s.is_ok()) return s;
    IntoWriter into(writer);
    StringTable strings;  // the dump's own: the session's goes on growing meanwhile
    if (Status s = reader.read(into, strings); !s.is_ok()) return s;
    SourceSummary s = described(summary);
    if (reader.last_summary().damaged > 0) {
        s.missing.push_back(fmt::format("{} damaged chunks of the window file were skipped",
                                        reader.last_summary().damaged));
    }
    writer.end(s);
    return writer.close();
}

Status RecordingWindow::finish(const SourceSummary& summary) {
    Status result = status_;
    if (next_.writer) {
        (void)next_.writer->close();
        next_.writer.reset();
        std::error_code ec;
        std::filesystem::remove(next_path_, ec);
    }
    if (!window_.writer) return result.is_ok() ? failed_precondition("no window file") : result;
    window_.writer->end(described(summary));
    Status closed = window_.writer->close();
    window_.writer.reset();
    if (!closed.is_ok()) return closed;
    if (std::rename(window_path_.c_str(), record_path_.c_str()) != 0) {
        return io_error(fmt::format("{}: the window could not be moved to {} ({})", window_path_,
                                    record_path_, std::strerror(errno)));
    }
    return result;
}

// The session's summary, with what this window holds and what it does not.
SourceSummary RecordingWindow::described(const SourceSummary& summary) const {
    SourceSummary s = summary;
    s.events = window_.events + window_.state_events;
    s.notes.push_back(fmt::format(
        "A window of the session's events, written to disk as they arrive (a crash loses at most "
        "the last {} ms): it covers the last {:.1f} s of the session (it keeps {:g} s to {:g} s, "
        "each file at most about {}).",
        flush_period_.count(), seconds_held(), seconds_, 2 * seconds_,
        format_bytes(static_cast<double>(max_bytes_))));
    if (window_.state_events > 0) {
        std::string state = fmt::format(
            "It begins with the state from before it, each at its own time: {} live allocations "
            "({} held on the devices) and {} latest levels",
            window_.state.allocations, format_bytes(static_cast<double>(window_.state.bytes)),
            window_.state.levels);
        if (window_.state.summed > 0) {
            state += fmt::format("; {} allocations past the bound of {} are summed per call site",
                                 window_.state.summed, WindowState::kMaxLiveAllocations);
        }
        s.notes.push_back(state + ".");
    }
    if (observed_ > window_.events) {
        s.missing.push_back(fmt::format(
            "the session's {} events before the window are not in this recording: only the state "
            "they left (live allocations, latest levels) is",
            observed_ - window_.events));
    }
    return s;
}

bool RecordingWindow::take_allocation_failure() noexcept {
    const bool failed = allocation_failed_;
    allocation_failed_ = false;
    return failed;
}

double RecordingWindow::seconds_held() const noexcept {
    return static_cast<double>(window_.last_ns - std::min(window_.last_ns, window_.first_ns)) / 1e9;
}

std::uint64_t RecordingWindow::events_held() const noexcept {
    return window_.events;
}

std::uint64_t RecordingWindow::bytes_on_disk() const noexcept {
    std::uint64_t n = 0;
    for (const File* f : {&window_, &next_}) {
        if (f->writer) n += f->writer->bytes_written();
    }
    return n;
}

}  // namespace gpudiag::detail
