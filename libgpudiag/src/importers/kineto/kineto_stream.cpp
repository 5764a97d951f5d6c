// SPDX-License-Identifier: Apache-2.0
// The streamed parse. The calling thread reads and cuts pieces and, in piece order, commits the
// parsed ones: their names are interned then (so ids come out in the serial parse's first-seen
// order) into a staging table that reaches `strings` only once the whole trace has passed. Helper
// threads from the parse budget parse pieces; when all are busy the caller parses one itself, so
// at most threads + 2 pieces are in memory at once.
#include "importers/kineto/kineto_stream.hpp"

#include "importers/kineto/parse_thread_budget.hpp"
#include "importers/kineto/start_order.hpp"
#include "importers/kineto/trace_split.hpp"

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

bool is_space(char c) noexcept { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

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
        out.ok = scratch.parser.parse(framed->data.get(), framed->size(),
                                      framed->size() + kPadding, *out.strings, scratch.events,
                                      out.totals);
        if (!out.ok) return;
        const std::vector<std::uint64_t> order = start_order(scratch.events);
        encode_run(scratch.events, order, out.run);
    } catch (...) {
        out.ok = false;
    }
}

// The last cut in `text`: the offset of the comma of "}," whitespace "{", preferring whitespace
// that holds a line break (Kineto starts each event on a line of its own, and lists of objects
// inside "args" stay on one line). npos when there is none.
std::size_t find_last_cut(std::string_view text) noexcept {
    constexpr std::size_t kLineBreakWindow = std::size_t{1} << 20;
    const std::size_t window_start = text.size() > kLineBreakWindow ? text.size() - kLineBreakWindow : 0;
    for (int pass = 0; pass < 2; ++pass) {
        const bool need_line_break = pass == 0;
        for (std::size_t at = text.rfind('{'); at != std::string_view::npos && at > 0;
             at = text.rfind('{', at - 1)) {
            if (need_line_break && at < window_start) break;
            std::size_t p = at;
            bool line_break = false;
            while (p > 0 && is_space(text[p - 1])) line_break = line_break || text[--p] == '\n';
            if (p >= 2 && text[p - 1] == ',' && text[p - 2] == '}' && (line_break || !need_line_break)) {
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

    bool run(StringTable& strings, KinetoStreamResult& out) {
        const std::string_view whole = in_.contiguous();
        if (!whole.empty()) {
            if (!cut_in_memory(whole)) return false;
        } else {
            if (!read_head()) return false;
            start_helpers();
            if (!read_body() || !finish_tail()) return false;
        }
        drain();
        if (failed_) return false;
        stop_helpers();
        return publish(strings, out);
    }

private:
    // ---- reading -------------------------------------------------------------------------------

    // Appends up to `bytes` more of the input to `piece`; returns the count (0: the end).
    std::size_t fill(Piece& piece, std::size_t bytes) {
        piece.reserve(piece.length + bytes);
        auto got = read_fully(in_, piece.text() + piece.length, bytes);
        if (!got) {
            input_failed_ = true;
            return 0;
        }
        piece.length += *got;
        if (options_.progress) options_.progress(in_.consumed(), in_.total());
        return *got;
    }

    // Reads up to the event array's "[" into head_; what follows it starts the first piece.
    bool read_head() {
        current_ = fresh_piece();
        const std::size_t kStep = std::max<std::size_t>(options_.piece_bytes, 64);
        std::size_t open = std::string_view::npos;
        std::size_t searched = 0;
        while (open == std::string_view::npos) {
            if (current_.length >= options_.max_held_bytes || fill(current_, kStep) == 0) return false;
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
                return false;  // not a trace: the whole-document parse says what it is
            }
        }
        head_.assign(current_.text(), open + 1);
        const std::size_t rest = current_.length - (open + 1);
        std::memmove(current_.text(), current_.text() + open + 1, rest);
        current_.length = rest;
        return true;
    }

    // Cuts and submits pieces until the input ends; current_ then holds the last events and
    // everything after the array.
    bool read_body() {
        for (;;) {
            if (fill(current_, options_.piece_bytes) == 0) break;
            const std::size_t cut = find_last_cut({current_.text(), current_.length});
            if (cut == std::string_view::npos) {
                if (current_.length >= options_.max_held_bytes) return false;  // no events here
                continue;
            }
            Piece next = fresh_piece();
            const std::size_t rest = current_.length - (cut + 1);
            next.reserve(std::max(rest, options_.piece_bytes));
            std::memcpy(next.text(), current_.text() + cut + 1, rest);
            next.length = rest;
            current_.length = cut;
            // The newest piece waits for the next one: a cut past the event array's end (between
            // the objects of a deviceProperties array that follows it) is then found at the end.
            if (held_) submit(std::move(*held_));
            held_ = std::move(current_);
            current_ = std::move(next);
            if (failed_) return false;
        }
        return !input_failed_ && !in_.truncated();
    }

    // The same for text already in memory: pieces are views of it, nothing is copied but the
    // tail (the last two pieces and what follows the array).
    bool cut_in_memory(std::string_view text) {
        std::size_t first = text.substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0;
        while (first < text.size() && is_space(text[first])) ++first;
        if (first == text.size() || (text[first] != '[' && text[first] != '{')) return false;
        const std::size_t open = text[first] == '[' ? first : find_events_array_open(text);
        if (open == std::string_view::npos || open + 1 > options_.max_held_bytes) return false;
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
                    if (window >= options_.max_held_bytes) return false;  // no events here
                    window *= 2;
                }
            }
            if (cut == std::string_view::npos) break;  // the rest is the tail
            Piece piece;
            piece.view = text.substr(at, cut);
            if (held_) submit(std::move(*held_));
            held_ = std::move(piece);
            at += cut + 1;
            if (failed_) return false;
            if (options_.progress) options_.progress(at, text.size());
        }
        if (failed_) return false;
        // The held piece, its cut's comma and the rest are one stretch of the text.
        const std::size_t tail = held_ ? static_cast<std::size_t>(held_->view.data() - text.data()) : at;
        held_.reset();
        return finish_tail(text.substr(tail));
    }

    // Finds where the event array closes in what is left: the last "]" after a "}" whose
    // skeleton holds the array as the trace's event array and whose last events parse; other
    // arrays (deviceProperties, logs) may follow the events.
    bool finish_tail() {
        std::string text;
        if (held_) {
            text.assign(held_->text(), held_->length);
            text.push_back(',');  // the cut's comma
            held_.reset();
        }
        text.append(current_.text(), current_.length);
        current_ = Piece();
        return finish_tail(text);
    }

    bool finish_tail(std::string_view text) {
        constexpr int kCloseCandidates = 4;
        std::size_t before = text.size();
        for (int tries = 0; tries < kCloseCandidates; ++tries) {
            const std::size_t close = find_events_array_close(text, before);
            if (close == std::string::npos) return false;
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
        ParseThreadBudget& budget = options_.thread_budget != nullptr ? *options_.thread_budget
                                                                      : ParseThreadBudget::process();
        lease_ = std::make_unique<ParseThreadBudget::Lease>(budget, threads - 1);
        helpers_.reserve(lease_->granted());
        for (unsigned i = 0; i < lease_->granted(); ++i) {
            try {
                helpers_.emplace_back([this] { helper_loop(); });
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
            piece_done_.wait(lock, [this] { return failed_ || (!done_.empty() && done_.begin()->first == next_commit_); });
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
            piece_done_.wait(lock, [this] { return failed_ || (!done_.empty() && done_.begin()->first == next_commit_); });
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
                parsed.run.remap[id] = staging_.intern(parsed.strings->lookup(static_cast<StringId>(id)));
            }
            merge_piece_totals(totals_, parsed.totals);
            runs_.add(std::move(parsed.run));
            ++pieces_;
        }
    }

    // The whole trace passed: names into `strings`, the skeleton read with the pieces' totals.
    bool publish(StringTable& strings, KinetoStreamResult& out) {
        bool verified = false;  // (the skeleton holds no events: nothing is interned reading it)
        parse_kineto_skeleton(skeleton_, head_.size() - 1, totals_, name_, staging_, out.parse, &verified);
        if (!verified) return false;
        std::vector<StringId> final_ids(staging_.size(), kNoString);
        if (final_ids.size() > StringTable::kOverflowString) {
            final_ids[StringTable::kOverflowString] = StringTable::kOverflowString;
        }
        for (std::size_t id = StringTable::kOverflowString + 1; id < final_ids.size(); ++id) {
            final_ids[id] = strings.intern(staging_.lookup(static_cast<StringId>(id)));
        }
        runs_.map_strings(final_ids);
        out.runs = std::move(runs_);
        out.pieces = pieces_;
        finish_kineto_result(out.parse, out.runs.events());
        return true;
    }

    ByteStream& in_;
    const std::string& name_;
    const KinetoStreamOptions& options_;
    std::string head_;        // the text up to and including the event array's "["
    Piece current_;           // text read but not yet cut into a piece
    std::optional<Piece> held_;  // the last piece cut, submitted once another is
    TraceBuffer skeleton_;
    bool input_failed_ = false;

    std::unique_ptr<ParseThreadBudget::Lease> lease_;
    std::vector<std::thread> helpers_;
    ParseScratch caller_scratch_;
    std::mutex mutex_;
    std::condition_variable work_ready_;
    std::condition_variable piece_done_;
    std::deque<Piece> queue_;           // cut, not yet parsed
    std::map<std::size_t, Parsed> done_;  // parsed, not yet committed
    std::vector<Piece> spare_;          // buffers to reuse
    std::size_t in_flight_ = 0;
    bool closing_ = false;
    std::atomic<bool> failed_{false};  // written under mutex_, read anywhere

    std::size_t next_index_ = 0;   // caller only, from here on
    std::size_t next_commit_ = 0;
    std::size_t pieces_ = 0;
    StringTable staging_;
    KinetoPieceTotals totals_;
    EventRunSet runs_;
};

}  // namespace

bool stream_kineto_events(ByteStream& in, const std::string& name, StringTable& strings,
                          const KinetoStreamOptions& options, KinetoStreamResult& out) {
    PieceStream stream(in, name, options);
    return stream.run(strings, out);
}

}  // namespace gpudiag::detail
