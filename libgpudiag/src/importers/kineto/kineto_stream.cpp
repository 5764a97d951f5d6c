// SPDX-License-Identifier: Apache-2.0
// The streamed parse. The calling thread reads and cuts pieces and, in piece order, commits the
// parsed ones: their names are interned then (so ids come out in the serial parse's first-seen
// order) into a staging table that reaches the caller's only when it publishes the result. Helper
// threads from the parse budget parse pieces; when all are busy the caller parses one itself, so
// at most threads + 2 pieces are in memory at once.
//
// Hostile and damaged input stays bounded: a byte JSON text cannot hold (a zero-filled tail, a
// sparse file) stops the reading where it is met, and what came before is kept as partial input;
// long runs of whitespace between events are squeezed as they are read; text that holds no
// boundary between two events within max_held_bytes is refused.
#include "importers/kineto/kineto_stream.hpp"

#include "importers/kineto/parse_thread_budget.hpp"
#include "importers/kineto/start_order.hpp"
#include "importers/kineto/trace_split.hpp"
#include "support/quiet_thread.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

namespace gpudiag::detail {
namespace {

constexpr std::string_view kPieceEnd = ",{}]";
constexpr std::size_t kPadding = TraceBuffer::kPadding;  // simdjson's, at least

bool is_space(char c) noexcept {
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

// Squeezes the whitespace runs outside strings in text[from, size) to one character each (a line
// break when the run held one, as cuts prefer them); `in_string`/`escaped` carry the scan's
// state from one call to the next. Returns the new size. Sound only for text that starts at
// element level, which every cut is proved to (see kineto_parser.cpp, parse_split): the squeezed
// text then parses to the same events.
std::size_t squeeze_whitespace(char* text, std::size_t from, std::size_t size, bool& in_string,
                               bool& escaped) noexcept {
    std::size_t out = from;
    std::size_t i = from;
    while (i < size) {
        const char c = text[i];
        if (in_string) {
            if (escaped) {
                escaped = false;
            } else if (c == '\\') {
                escaped = true;
            } else if (c == '"') {
                in_string = false;
            }
            text[out++] = c;
            ++i;
            continue;
        }
        if (c == '"') in_string = true;
        if (!is_space(c)) {
            text[out++] = c;
            ++i;
            continue;
        }
        bool line_break = false;
        while (i < size && is_space(text[i])) {
            line_break = line_break || text[i] == '\n';
            ++i;
        }
        text[out++] = line_break ? '\n' : ' ';
    }
    return out;
}

std::string byte_position(std::uint64_t offset) {
    return fmt::format("byte {}", offset);
}

// One piece: "[" then the text between two cuts, then ",{}]" and zeroed padding; or, for input
// already in memory, a view of the text, framed by the parsing thread in a buffer of its own.
struct Piece {
    std::size_t index = 0;
    std::string_view view;
    std::unique_ptr<char[]> data;
    std::size_t capacity = 0;  // text bytes that fit (the frame and padding come on top)
    std::size_t length = 0;    // text bytes held

    char* text() noexcept { return data.get() + 1; }
    [[nodiscard]] std::size_t size() const noexcept { return 1 + length + kPieceEnd.size(); }

    // Room for `bytes` of text, keeping what is held.
    void reserve(std::size_t bytes) {
        if (bytes <= capacity && data) return;
        std::unique_ptr<char[]> bigger(new char[1 + bytes + kPieceEnd.size() + kPadding]);
        bigger[0] = '[';
        if (length > 0) std::memcpy(bigger.get() + 1, data.get() + 1, length);
        data = std::move(bigger);
        capacity = bytes;
    }
    // Closes the text after `length` bytes with ",{}]" and the padding.
    void seal() noexcept {
        std::memcpy(text() + length, kPieceEnd.data(), kPieceEnd.size());
        std::memset(text() + length + kPieceEnd.size(), 0, kPadding);
    }
};

// What a parsed piece hands to the commit.
struct Parsed {
    bool ok = false;
    EventRun run;
    std::unique_ptr<StringTable> strings;  // the piece's names, ids in first-seen order
    KinetoPieceTotals totals;
};

// What each parsing thread keeps from piece to piece.
struct ParseScratch {
    KinetoPieceParser parser;
    std::vector<Event> events;
    Piece frame;  // where a view is framed
};

void parse_piece(Piece& piece, ParseScratch& scratch, Parsed& out) noexcept {
    try {
        out.strings = std::make_unique<StringTable>();
        scratch.events.clear();
        Piece* framed = &piece;
        if (!piece.view.empty()) {
            scratch.frame.length = 0;
            scratch.frame.reserve(piece.view.size());
            std::memcpy(scratch.frame.text(), piece.view.data(), piece.view.size());
            scratch.frame.length = piece.view.size();
            framed = &scratch.frame;
        }
        framed->seal();
        out.ok = scratch.parser.parse(framed->data.get(), framed->size(), framed->size() + kPadding,
                                      *out.strings, scratch.events, out.totals);
        if (!out.ok) return;
        const std::vector<std::uint64_t> order = start_order(scratch.events);
        encode_run(scratch.events, order, out.run);
    } catch (...) {
        out.ok = false;
    }
}

// The last cut in `text`: the offset of the comma of "}," whitespace "{", preferring whitespace
// that holds a line break (Kineto starts each event on a line of its own, and lists of objects
// inside "args" stay on one line). npos when there is none. Only a "{" at `min_open` or later
// is tried: text before it, searched already, held none (each search then costs the new text
// only, not all the text held so far).
std::size_t find_last_cut(std::string_view text, std::size_t min_open = 0) noexcept {
    constexpr std::size_t kLineBreakWindow = std::size_t{1} << 20;
    const std::size_t window_start =
        text.size() > kLineBreakWindow ? text.size() - kLineBreakWindow : 0;
    if (min_open >= text.size()) return std::string_view::npos;
    const std::string_view tried = text.substr(min_open);  // where a cut's "{" may be
    for (int pass = 0; pass < 2; ++pass) {
        const bool need_line_break = pass == 0;
        for (std::size_t found = tried.rfind('{'); found != std::string_view::npos;
             found = found > 0 ? tried.rfind('{', found - 1) : std::string_view::npos) {
            const std::size_t at = min_open + found;
            if (at == 0) break;
            if (need_line_break && at < window_start) break;
            std::size_t p = at;
            bool line_break = false;
            while (p > 0 && is_space(text[p - 1])) {
                --p;
                line_break = line_break || text[p] == '\n';
            }
            if (p >= 2 && text[p - 1] == ',' && text[p - 2] == '}' &&
                (line_break || !need_line_break)) {
                return p - 1;
            }
        }
    }
    return std::string_view::npos;
}

class PieceStream {
public:
    PieceStream(ByteStream& in, const std::string& name, const KinetoStreamOptions& options)
        : in_(in), name_(name), options_(options) {}

    ~PieceStream() { stop_helpers(); }
    PieceStream(const PieceStream&) = delete;
    PieceStream& operator=(const PieceStream&) = delete;

    StreamOutcome run(KinetoStreamResult& out) {
        const std::string_view whole = in_.contiguous();
        if (!whole.empty()) {
            cut_in_memory(whole);
        } else if (read_head()) {
            start_helpers();
            read_body();
        }
        out.text_bytes = text_read_;
        if (end_ == End::kRefused) return refuse(out);
        if (end_ == End::kDeclined) return decline(out, why_);
        drain();
        if (failed_)
            return decline(out, "a piece of the event array did not parse as whole events");
        stop_helpers();
        if (end_ == End::kClosed) {
            if (!publish(skeleton_, out))
                return decline(out, "the text around the event array is not a trace's");
            if (!after_end_.empty()) {
                out.parse.summary.notes.push_back(note_after_trace_end(after_end_));
            }
            out.outcome = StreamOutcome::kRead;
            return out.outcome;
        }
        // The input ended early (kUnclosed: or closed where the stream cannot verify it): the
        // events before that point, under the head closed right after the array. With none, there
        // is nothing to report on: a cut input is refused, an unclosed one read whole.
        if (runs_.events() == 0) {
            if (end_ == End::kUnclosed) return decline(out, why_);
            refusal_ = corrupt_data(name_ + ": " + why_ + "; no event came before it");
            return refuse(out);
        }
        const std::string closers = head_bare_array() ? "]" : "]}";
        if (!publish(make_skeleton(closers), out)) {
            return decline(out, "the text before the event array is not a trace's");
        }
        out.parse.summary.truncated = true;
        out.parse.summary.missing.push_back(why_);
        out.why = why_;
        out.outcome = end_ == End::kUnclosed ? StreamOutcome::kUnclosed : StreamOutcome::kPartial;
        return out.outcome;
    }

private:
    // How the reading ended. kClosed: the event array closed where verified. kUnclosed: the text
    // ended without that. kCut: the input says it ended early or turned unreadable (why_ says
    // how). kDeclined/kRefused: no result (why_/refusal_ say why).
    enum class End { kReading, kClosed, kUnclosed, kCut, kDeclined, kRefused };

    StreamOutcome decline(KinetoStreamResult& out, std::string why) {
        out.outcome = StreamOutcome::kDeclined;
        out.why = std::move(why);
        return out.outcome;
    }
    StreamOutcome refuse(KinetoStreamResult& out) {
        out.outcome = StreamOutcome::kRefused;
        out.refusal = refusal_;
        out.why = refusal_.message();
        return out.outcome;
    }
    void stop(End end, std::string why) {
        end_ = end;
        why_ = std::move(why);
    }

    // ---- reading -------------------------------------------------------------------------------

    // Appends up to `bytes` more of the input to `piece`; returns the count of usable bytes
    // (0: nothing more to read). A byte JSON text cannot hold ends the input there (stopped_).
    std::size_t fill(Piece& piece, std::size_t bytes) {
        if (stopped_) return 0;
        piece.reserve(piece.length + bytes);
        char* at = piece.text() + piece.length;
        auto got = read_fully(in_, at, bytes);
        if (!got) {
            stopped_ = true;
            stop(End::kCut, fmt::format("reading stopped at {} of the trace's text ({}): whatever "
                                        "followed is missing",
                                        byte_position(text_read_), got.status().message()));
            return 0;
        }
        std::size_t usable = *got;
        const std::size_t bad = find_non_json_byte({at, usable});
        if (bad != std::string_view::npos) {
            stopped_ = true;
            const auto byte = static_cast<unsigned char>(at[bad]);
            stop(End::kCut, describe_non_json_byte(text_read_ + bad, byte));
            usable = bad;
        }
        piece.length += usable;
        text_read_ += usable;
        if (options_.progress) options_.progress(in_.consumed(), in_.total());
        return usable;
    }

    // Whether the input itself ended early (gzip cut short or damaged: inflating stops at the
    // first bad block or checksum), once it is read to its end.
    void note_input_end() {
        if (stopped_) return;
        if (in_.truncated()) {
            stop(End::kCut, fmt::format("the gzip stream ends early, after {} of the trace's text "
                                        "(file cut short, or damaged?): whatever followed the last "
                                        "complete event is missing",
                                        fmt::format("{} bytes", text_read_)));
        }
    }

    // Reads up to the event array's "[" into head_; what follows it starts the first piece.
    bool read_head() {
        current_ = fresh_piece();
        const std::size_t kStep = std::max<std::size_t>(options_.piece_bytes, 64);
        std::size_t open = std::string_view::npos;
        std::size_t searched = 0;
        while (open == std::string_view::npos) {
            if (current_.length >= options_.max_held_bytes) {
                stop(End::kDeclined, fmt::format("no \"traceEvents\" array in its first {} bytes",
                                                 options_.max_held_bytes));
                return false;
            }
            if (fill(current_, kStep) == 0) {
                if (end_ == End::kCut && text_read_ > 0) {
                    refusal_ = corrupt_data(name_ + ": " + why_ + "; no event came before it");
                    end_ = End::kRefused;
                } else {
                    stop(End::kDeclined, "the text ends before its event array");
                }
                return false;
            }
            std::string_view text(current_.text(), current_.length);
            std::size_t first = 0;
            if (text.substr(0, 3) == "\xEF\xBB\xBF") first = 3;  // UTF-8 byte order mark
            while (first < text.size() && is_space(text[first])) ++first;
            if (first == text.size()) continue;
            if (text[first] == '[') {
                open = first;  // the bare event-array form
            } else if (text[first] == '{') {
                std::size_t from = searched > 64 ? searched - 64 : 0;  // a key across two reads
                std::size_t at = find_events_array_open(text.substr(from));
                if (at != std::string_view::npos) open = from + at;
                searched = text.size();
            } else {
                // Not a trace: the whole-document parse says what it is.
                stop(End::kDeclined, "the text does not start with '{' or '['");
                return false;
            }
        }
        head_.assign(current_.text(), open + 1);
        const std::size_t rest = current_.length - (open + 1);
        std::memmove(current_.text(), current_.text() + open + 1, rest);
        current_.length = rest;
        return true;
    }

    // Text without a cut keeps growing: squeeze its whitespace (a hostile file may hold gigabytes
    // of it between two events), and refuse past max_held_bytes.
    bool hold_uncut() {
        if (current_.length >= 2 * std::max<std::size_t>(options_.piece_bytes, 64)) {
            current_.length = squeeze_whitespace(current_.text(), squeezed_, current_.length,
                                                 squeeze_in_string_, squeeze_escaped_);
            squeezed_ = current_.length;
        }
        if (current_.length < options_.max_held_bytes) return true;
        refuse_no_boundary(text_read_);
        return false;
    }

    void refuse_no_boundary(std::uint64_t until) {
        refusal_ = corrupt_data(fmt::format(
            "{}: {} bytes of the event array up to {} of its text hold no boundary between two "
            "events: not a trace gpudiag can read (damaged, or an event larger than that)",
            name_, options_.max_held_bytes, byte_position(until)));
        end_ = End::kRefused;
    }

    // Cuts and submits pieces until the input ends; current_ then holds the last events and
    // everything after the array.
    void read_body() {
        for (;;) {
            if (fill(current_, options_.piece_bytes) == 0) break;
            const std::size_t cut = find_last_cut({current_.text(), current_.length}, uncut_);
            if (cut == std::string_view::npos) {
                if (!hold_uncut()) return;
                uncut_ = current_.length;
                continue;
            }
            uncut_ = 0;
            Piece next = fresh_piece();
            const std::size_t rest = current_.length - (cut + 1);
            next.reserve(std::max(rest, options_.piece_bytes));
            std::memcpy(next.text(), current_.text() + cut + 1, rest);
            next.length = rest;
            current_.length = cut;
            squeezed_ = 0;  // the new text starts at element level, outside strings
            squeeze_in_string_ = false;
            squeeze_escaped_ = false;
            // The newest piece waits for the next one: a cut past the event array's end (between
            // the objects of a deviceProperties array that follows it) is then found at the end.
            if (held_) submit(std::move(*held_));
            held_ = std::move(current_);
            current_ = std::move(next);
            if (failed_) return;
        }
        note_input_end();
        std::string text;
        if (held_) {
            text.assign(held_->text(), held_->length);
            text.push_back(',');  // the cut's comma
            held_.reset();
        }
        text.append(current_.text(), current_.length);
        current_ = Piece();
        end_tail(text);
    }

    // The same for text already in memory: pieces are views of it, nothing is copied but the
    // tail (the last two pieces and what follows the array).
    void cut_in_memory(std::string_view text) {
        const std::size_t bad = find_non_json_byte(text);
        if (bad != std::string_view::npos) {
            const auto byte = static_cast<unsigned char>(text[bad]);
            stopped_ = true;
            stop(End::kCut, describe_non_json_byte(bad, byte));
            text = text.substr(0, bad);
        } else if (in_.truncated()) {
            note_input_end();
        }
        text_read_ = text.size();
        std::size_t first = text.substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0;
        while (first < text.size() && is_space(text[first])) ++first;
        if (first == text.size() || (text[first] != '[' && text[first] != '{')) {
            stop(End::kDeclined, "the text does not start with '{' or '['");
            return;
        }
        const std::size_t open = text[first] == '[' ? first : find_events_array_open(text);
        if (open == std::string_view::npos || open + 1 > options_.max_held_bytes) {
            stop(End::kDeclined, "no \"traceEvents\" array found");
            return;
        }
        head_.assign(text.data(), open + 1);
        start_helpers();
        std::size_t at = open + 1;
        const std::size_t step = std::max<std::size_t>(options_.piece_bytes, 64);
        while (text.size() - at > step) {
            std::size_t window = step;
            std::size_t cut = std::string_view::npos;
            while (cut == std::string_view::npos && at + window < text.size()) {
                cut = find_last_cut(text.substr(at, window));
                if (cut == std::string_view::npos) {
                    if (window >= options_.max_held_bytes) {
                        refuse_no_boundary(at + window);
                        return;
                    }
                    window *= 2;
                }
            }
            if (cut == std::string_view::npos) break;  // the rest is the tail
            Piece piece;
            piece.view = text.substr(at, cut);
            if (held_) submit(std::move(*held_));
            held_ = std::move(piece);
            at += cut + 1;
            if (failed_) return;
            if (options_.progress) options_.progress(at, text.size());
        }
        if (failed_) return;
        // The held piece, its cut's comma and the rest are one stretch of the text.
        const std::size_t tail =
            held_ ? static_cast<std::size_t>(held_->view.data() - text.data()) : at;
        held_.reset();
        end_tail(text.substr(tail));
    }

    bool head_bare_array() const { return head_.find('{') == std::string::npos; }

    // The text after the last piece submitted: the array's last events and what follows it when
    // the input ended normally; else the events before the point it stopped.
    void end_tail(std::string_view text) {
        if (end_ == End::kRefused || end_ == End::kDeclined) return;
        bool close_seen = false;
        if (finish_tail(text, close_seen)) {
            // Whatever stopped the input came after the trace closed: none of it is missing.
            if (end_ == End::kCut) after_end_ = why_;
            end_ = End::kClosed;
            return;
        }
        if (end_ != End::kCut) {
            stop(End::kUnclosed,
                 fmt::format("the trace's text ends after {} bytes without closing its event "
                             "array where gpudiag can verify it (file cut short?): whatever "
                             "followed the last complete event is missing",
                             text_read_));
        } else if (close_seen) {
            // The array may have closed before the input stopped, in a layout the skeleton probe
            // refuses (a second "traceEvents" array, say) but the whole parse reads: that parse
            // may find more, so this is not the input's loss alone (kPartial promises it is).
            end_ = End::kUnclosed;
        }
        salvage_tail(text);
    }

    // Finds where the event array closes in what is left: the last "]" after a "}" whose
    // skeleton holds the array as the trace's event array and whose last events parse; other
    // arrays (deviceProperties, logs) may follow the events.
    // `close_seen`: some candidate was found, verified or not.
    bool finish_tail(std::string_view text, bool& close_seen) {
        constexpr int kCloseCandidates = 4;
        std::size_t before = text.size();
        for (int tries = 0; tries < kCloseCandidates; ++tries) {
            const std::size_t close = find_events_array_close(text, before);
            if (close == std::string::npos) return false;
            close_seen = true;
            before = close;
            TraceBuffer skeleton = make_skeleton(std::string_view(text).substr(close));
            StringTable scratch_strings;
            KinetoParseResult probe;
            bool verified = false;
            parse_kineto_skeleton(skeleton, head_.size() - 1, KinetoPieceTotals{}, name_,
                                  scratch_strings, probe, &verified);
            if (verified && last_events(std::string_view(text).substr(0, close))) {
                skeleton_ = std::move(skeleton);
                return true;
            }
        }
        return false;
    }

    // The whole events at the start of `text`, for input that stopped inside the array: the
    // longest prefix that ends at a cut (or at its last "}") and parses as whole events. A few
    // candidates only: each costs a parse of the tail.
    void salvage_tail(std::string_view text) {
        std::size_t end = text.size();
        while (end > 0 && (is_space(text[end - 1]) || text[end - 1] == ',')) --end;
        constexpr int kCandidates = 8;
        std::size_t candidate =
            end > 0 && text[end - 1] == '}' ? end : find_last_cut(text.substr(0, end));
        for (int tries = 0;
             tries < kCandidates && candidate != std::string_view::npos && candidate > 0; ++tries) {
            if (last_events(text.substr(0, candidate))) return;
            candidate = find_last_cut(text.substr(0, candidate));
        }
    }

    // Parses the events after the last cut here and files them for the commit; false when they
    // do not parse as whole events (the array did not close where assumed).
    bool last_events(std::string_view body) {
        if (body.find_first_not_of(" \n\r\t") == std::string_view::npos) return true;
        Piece piece = fresh_piece();
        piece.reserve(body.size());
        std::memcpy(piece.text(), body.data(), body.size());
        piece.length = body.size();
        piece.index = next_index_;
        Parsed parsed;
        parse_piece(piece, caller_scratch_, parsed);
        if (!parsed.ok) return false;
        ++next_index_;
        std::lock_guard<std::mutex> lock(mutex_);
        done_.emplace(piece.index, std::move(parsed));
        spare_.push_back(std::move(piece));
        return true;
    }

    TraceBuffer make_skeleton(std::string_view tail) const {
        TraceBuffer skeleton(head_.size() + tail.size());
        std::memcpy(skeleton.data(), head_.data(), head_.size());
        std::memcpy(skeleton.data() + head_.size(), tail.data(), tail.size());
        skeleton.resize(head_.size() + tail.size());
        return skeleton;
    }

    Piece fresh_piece() {
        Piece p;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (!spare_.empty()) {
                p = std::move(spare_.back());
                spare_.pop_back();
            }
        }
        p.view = {};
        p.length = 0;
        p.reserve(options_.piece_bytes + (options_.piece_bytes >> 2));
        return p;
    }

    // ---- parsing -------------------------------------------------------------------------------

    void start_helpers() {
        unsigned threads = options_.max_threads;
        if (threads == 0) threads = std::min(4u, std::max(1u, std::thread::hardware_concurrency()));
        if (threads < 2) return;
        ParseThreadBudget& budget = options_.thread_budget != nullptr
                                        ? *options_.thread_budget
                                        : ParseThreadBudget::process();
        lease_ = std::make_unique<ParseThreadBudget::Lease>(budget, threads - 1);
        helpers_.reserve(lease_->granted());
        for (unsigned i = 0; i < lease_->granted(); ++i) {
            try {
                helpers_.push_back(quiet_thread("gpudiag-parse", [this] { helper_loop(); }));
            } catch (...) {
                break;  // no thread to be had: the caller parses more itself
            }
        }
    }

    void stop_helpers() noexcept {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            closing_ = true;
        }
        work_ready_.notify_all();
        for (auto& t : helpers_) t.join();
        helpers_.clear();
        lease_.reset();
    }

    void helper_loop() noexcept {
        ParseScratch scratch;
        std::unique_lock<std::mutex> lock(mutex_);
        for (;;) {
            work_ready_.wait(lock, [this] { return closing_ || !queue_.empty(); });
            if (queue_.empty()) return;
            Piece piece = std::move(queue_.front());
            queue_.pop_front();
            lock.unlock();
            parse_and_file(std::move(piece), scratch);
            lock.lock();
        }
    }

    // Parses `piece` and files the outcome for the commit; the buffer goes back to the spares.
    void parse_and_file(Piece piece, ParseScratch& scratch) noexcept {
        Parsed parsed;
        parse_piece(piece, scratch, parsed);
        std::lock_guard<std::mutex> lock(mutex_);
        try {
            done_.emplace(piece.index, std::move(parsed));
            if (piece.data) spare_.push_back(std::move(piece));
        } catch (...) {
            failed_ = true;
        }
        --in_flight_;
        piece_done_.notify_all();
    }

    // Queues `piece`; while too many are in flight, parses the oldest here or waits.
    void submit(Piece piece) {
        piece.index = next_index_++;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            queue_.push_back(std::move(piece));
            ++in_flight_;
        }
        work_ready_.notify_one();
        const std::size_t limit = helpers_.size() + 2;
        for (;;) {
            commit_ready();
            std::unique_lock<std::mutex> lock(mutex_);
            if (in_flight_ <= (helpers_.empty() ? 0 : limit) || failed_) return;
            if (!queue_.empty()) {
                Piece mine = std::move(queue_.front());
                queue_.pop_front();
                lock.unlock();
                parse_and_file(std::move(mine), caller_scratch_);
                continue;
            }
            piece_done_.wait(lock, [this] {
                return failed_ || (!done_.empty() && done_.begin()->first == next_commit_);
            });
        }
    }

    void drain() {
        for (;;) {
            commit_ready();
            std::unique_lock<std::mutex> lock(mutex_);
            if (failed_ || (in_flight_ == 0 && done_.empty())) return;
            if (!queue_.empty()) {
                Piece mine = std::move(queue_.front());
                queue_.pop_front();
                lock.unlock();
                parse_and_file(std::move(mine), caller_scratch_);
                continue;
            }
            piece_done_.wait(lock, [this] {
                return failed_ || (!done_.empty() && done_.begin()->first == next_commit_);
            });
        }
    }

    // Commits the parsed pieces that are next in order: names into the staging table, counts
    // into the totals, the run into the set.
    void commit_ready() {
        for (;;) {
            Parsed parsed;
            {
                std::lock_guard<std::mutex> lock(mutex_);
                auto it = done_.begin();
                if (it == done_.end() || it->first != next_commit_) return;
                parsed = std::move(it->second);
                done_.erase(it);
            }
            ++next_commit_;
            if (!parsed.ok) {
                std::lock_guard<std::mutex> lock(mutex_);
                failed_ = true;
                return;
            }
            const std::size_t n = parsed.strings->size();
            parsed.run.remap.assign(n, kNoString);
            if (n > StringTable::kOverflowString) {
                parsed.run.remap[StringTable::kOverflowString] = StringTable::kOverflowString;
            }
            for (std::size_t id = StringTable::kOverflowString + 1; id < n; ++id) {
                parsed.run.remap[id] =
                    staging_->intern(parsed.strings->lookup(static_cast<StringId>(id)));
            }
            merge_piece_totals(totals_, parsed.totals);
            runs_.add(std::move(parsed.run));
            ++pieces_;
        }
    }

    // The events passed: the skeleton read with the pieces' totals into `out`, which takes the
    // runs and the staged names. False when the skeleton is not a trace's.
    bool publish(const TraceBuffer& skeleton, KinetoStreamResult& out) {
        bool verified = false;  // (the skeleton holds no events: nothing is interned reading it)
        parse_kineto_skeleton(skeleton, head_.size() - 1, totals_, name_, *staging_, out.parse,
                              &verified);
        if (!verified) return false;
        out.runs = std::move(runs_);
        out.pieces = pieces_;
        out.names = std::move(staging_);
        finish_kineto_result(out.parse, out.runs.events());
        return true;
    }

    ByteStream& in_;
    const std::string& name_;
    const KinetoStreamOptions& options_;
    std::string head_;           // the text up to and including the event array's "["
    Piece current_;              // text read but not yet cut into a piece
    std::optional<Piece> held_;  // the last piece cut, submitted once another is
    TraceBuffer skeleton_;
    std::uint64_t text_read_ = 0;  // bytes of the trace's text read so far
    bool stopped_ = false;         // the input turned unreadable or failed: read no further
    End end_ = End::kReading;
    std::string why_;        // what is missing, or why the stream declined
    std::string after_end_;  // what stopped the input after the trace had closed
    Status refusal_;
    std::size_t squeezed_ = 0;  // current_'s text up to here had its whitespace squeezed
    std::size_t uncut_ = 0;     // current_'s text up to here holds no cut
    bool squeeze_in_string_ = false;
    bool squeeze_escaped_ = false;

    std::unique_ptr<ParseThreadBudget::Lease> lease_;
    std::vector<std::thread> helpers_;
    ParseScratch caller_scratch_;
    std::mutex mutex_;
    std::condition_variable work_ready_;
    std::condition_variable piece_done_;
    std::deque<Piece> queue_;             // cut, not yet parsed
    std::map<std::size_t, Parsed> done_;  // parsed, not yet committed
    std::vector<Piece> spare_;            // buffers to reuse
    std::size_t in_flight_ = 0;
    bool closing_ = false;
    std::atomic<bool> failed_{false};  // written under mutex_, read anywhere

    std::size_t next_index_ = 0;  // caller only, from here on
    std::size_t next_commit_ = 0;
    std::size_t pieces_ = 0;
    std::unique_ptr<StringTable> staging_ = std::make_unique<StringTable>();
    KinetoPieceTotals totals_;
    EventRunSet runs_;
};

}  // namespace

StreamOutcome stream_kineto_trace(ByteStream& in, const std::string& name,
                                  const KinetoStreamOptions& options, KinetoStreamResult& out) {
    PieceStream stream(in, name, options);
    return stream.run(out);
}

void publish_stream_names(KinetoStreamResult& result, StringTable& strings) {
    if (!result.names) return;
    const StringTable& names = *result.names;
    std::vector<StringId> final_ids(names.size(), kNoString);
    if (final_ids.size() > StringTable::kOverflowString) {
        final_ids[StringTable::kOverflowString] = StringTable::kOverflowString;
    }
    for (std::size_t id = StringTable::kOverflowString + 1; id < final_ids.size(); ++id) {
        final_ids[id] = strings.intern(names.lookup(static_cast<StringId>(id)));
    }
    result.runs.map_strings(final_ids);
    result.names.reset();
}

bool stream_kineto_events(ByteStream& in, const std::string& name, StringTable& strings,
                          const KinetoStreamOptions& options, KinetoStreamResult& out) {
    if (stream_kineto_trace(in, name, options, out) != StreamOutcome::kRead) return false;
    publish_stream_names(out, strings);
    return true;
}

}  // namespace gpudiag::detail
