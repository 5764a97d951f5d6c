// SPDX-License-Identifier: Apache-2.0
// SafePickleReader. Design notes:
//
// * Allow-list, not deny-list: the dispatch switch handles exactly the data opcodes of protocols
//   2-5 (the set torch's own MemoryViz.js unpickler accepts, plus LONG4, the BINSTRING/BINBYTES
//   families, BYTEARRAY8, POP/DUP/POP_MARK and the mark-based LIST/DICT/TUPLE). Anything else
//   ends the read. The corpus snapshots (torch 2.x, protocol 4) use only these opcodes: no
//   GLOBAL at all, so no allow-list of Python types is needed.
// * No cycles: a container becomes immutable ("sealed") once it is put inside another, and a
//   container may not be put inside itself. Python's pickler always fills a container before
//   nesting it, so genuine data never trips this; self-referential pickles (which would make
//   every consumer loop) are refused. Without cycles, reference counts free everything.
// * Compact values (pickle_store.hpp): 16-byte slots, interned strings, recycled containers;
//   the memo keeps 8 bytes per entry. The tree a caller gets back is built once, at the end.
// * Streaming: items appended to a list the handler streams are handed over and dropped at once,
//   and their memo entry is released, so a trace of millions of entries is read in memory bounded
//   by what the pickle shares through its memo (strings, stack frames, frame lists, the last two
//   condensed by the handler to digests), not by the number of entries. A later reference to a
//   released item is reported as corrupt input.
// * Input comes in pieces from a ByteStream (a file, gzip inflated as it is read, memory).
// * Memory: what the decoded values take is charged to a budget (limits.max_live_bytes) and
//   refunded when they are dropped.
#include "importers/torch_snapshot/safe_pickle_reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace gpudiag::detail {

// ---- PickleStrings ----

std::uint64_t PickleStrings::hash(std::string_view s) noexcept {
    return std::hash<std::string_view>{}(s);
}

std::uint32_t PickleStrings::intern(std::string_view text, bool& added) {
    if (texts_.size() * 2 >= table_.size()) grow();
    const std::uint64_t h = hash(text);
    const auto h32 = static_cast<std::uint32_t>(h);
    const std::size_t mask = table_.size() - 1;
    for (std::size_t at = h & mask;; at = (at + 1) & mask) {
        const std::uint32_t slot = table_[at];
        if (slot == 0) {
            const auto id = static_cast<std::uint32_t>(texts_.size());
            texts_.emplace_back(store(text), text.size());
            hashes_.push_back(h32);
            table_[at] = id + 1;
            added = true;
            return id;
        }
        if (hashes_[slot - 1] == h32 && texts_[slot - 1] == text) {
            added = false;
            return slot - 1;
        }
    }
}

void PickleStrings::grow() {
    std::vector<std::uint32_t> bigger(std::max<std::size_t>(1024, table_.size() * 2), 0);
    const std::size_t mask = bigger.size() - 1;
    for (std::uint32_t id = 0; id < texts_.size(); ++id) {
        std::size_t at = hash(texts_[id]) & mask;
        while (bigger[at] != 0) at = (at + 1) & mask;
        bigger[at] = id + 1;
    }
    table_ = std::move(bigger);
}

// Texts live in chunks that never move, so the views in texts_ stay valid.
char* PickleStrings::store(std::string_view text) {
    constexpr std::size_t kChunk = std::size_t{64} << 10;
    if (text.empty()) return nullptr;
    if (text.size() > kChunk / 4) {
        chunks_.push_back(std::make_unique<char[]>(text.size()));
        std::memcpy(chunks_.back().get(), text.data(), text.size());
        return chunks_.back().get();
    }
    if (text.size() > chunk_left_) {
        chunks_.push_back(std::make_unique<char[]>(kChunk));
        chunk_at_ = chunks_.back().get();
        chunk_left_ = kChunk;
    }
    char* at = chunk_at_;
    std::memcpy(at, text.data(), text.size());
    chunk_at_ += text.size();
    chunk_left_ -= text.size();
    return at;
}

// ---- PickleStore ----

std::uint32_t PickleStore::make(PickleValue::Kind kind) {
    std::uint32_t i = 0;
    if (!free_.empty()) {
        i = free_.back();
        free_.pop_back();
    } else {
        i = static_cast<std::uint32_t>(containers_.size());
        containers_.emplace_back();
        // recycle() must not allocate: the free list always has room for every slot.
        if (free_.capacity() < containers_.size()) free_.reserve(containers_.capacity());
    }
    PickleContainer& c = containers_[i];
    c.serial = next_serial_++;
    c.streamed = 0;
    c.refs = 1;
    c.memo_refs = 0;
    c.memo_index = 0;
    c.digest = 0;
    c.kind = kind;
    c.sealed = false;
    c.tag_known = false;
    c.depth = 0;
    c.tag = 0;
    return i;
}

void PickleStore::recycle(std::uint32_t i) noexcept {
    containers_[i].items.clear();
    free_.push_back(i);  // cannot fail: free_ never holds more than containers_ has slots
}

namespace {

bool is_code_opcode(unsigned char op) {
    switch (op) {
        case 'c':
        case 0x93:
        case 'R':
        case 'b':
        case 'i':
        case 'o':
        case 0x81:
        case 0x92:
        case 0x82:
        case 0x83:
        case 0x84:
        case 'P':
        case 'Q': return true;
        default: return false;
    }
}

// Thrown inside the machine only; converted to a Status at the boundary of run().
struct PickleError {
    Status status;
    bool cut_short = false;  // the input ended before the pickle did
};

}  // namespace

const char* pickle_opcode_name(unsigned char op) noexcept {
    switch (op) {
        case 'I': return "INT";
        case 'J': return "BININT";
        case 'K': return "BININT1";
        case 'M': return "BININT2";
        case 'L': return "LONG";
        case 0x8a: return "LONG1";
        case 0x8b: return "LONG4";
        case 'S': return "STRING";
        case 'T': return "BINSTRING";
        case 'U': return "SHORT_BINSTRING";
        case 'B': return "BINBYTES";
        case 'C': return "SHORT_BINBYTES";
        case 0x8e: return "BINBYTES8";
        case 0x96: return "BYTEARRAY8";
        case 0x97: return "NEXT_BUFFER";
        case 0x98: return "READONLY_BUFFER";
        case 'N': return "NONE";
        case 0x88: return "NEWTRUE";
        case 0x89: return "NEWFALSE";
        case 'V': return "UNICODE";
        case 0x8c: return "SHORT_BINUNICODE";
        case 'X': return "BINUNICODE";
        case 0x8d: return "BINUNICODE8";
        case 'F': return "FLOAT";
        case 'G': return "BINFLOAT";
        case ']': return "EMPTY_LIST";
        case 'a': return "APPEND";
        case 'e': return "APPENDS";
        case 'l': return "LIST";
        case ')': return "EMPTY_TUPLE";
        case 't': return "TUPLE";
        case 0x85: return "TUPLE1";
        case 0x86: return "TUPLE2";
        case 0x87: return "TUPLE3";
        case '}': return "EMPTY_DICT";
        case 'd': return "DICT";
        case 's': return "SETITEM";
        case 'u': return "SETITEMS";
        case 0x8f: return "EMPTY_SET";
        case 0x90: return "ADDITEMS";
        case 0x91: return "FROZENSET";
        case '0': return "POP";
        case '2': return "DUP";
        case '(': return "MARK";
        case '1': return "POP_MARK";
        case 'g': return "GET";
        case 'h': return "BINGET";
        case 'j': return "LONG_BINGET";
        case 'p': return "PUT";
        case 'q': return "BINPUT";
        case 'r': return "LONG_BINPUT";
        case 0x94: return "MEMOIZE";
        case 0x82: return "EXT1";
        case 0x83: return "EXT2";
        case 0x84: return "EXT4";
        case 'c': return "GLOBAL";
        case 0x93: return "STACK_GLOBAL";
        case 'R': return "REDUCE";
        case 'b': return "BUILD";
        case 'i': return "INST";
        case 'o': return "OBJ";
        case 0x81: return "NEWOBJ";
        case 0x92: return "NEWOBJ_EX";
        case 0x80: return "PROTO";
        case '.': return "STOP";
        case 0x95: return "FRAME";
        case 'P': return "PERSID";
        case 'Q': return "BINPERSID";
        default: return "unknown";
    }
}

// Buffered byte input from a ByteStream or from memory, tracking the absolute offset. Reads that
// fit in the buffer (nearly all: opcodes and their arguments are a few bytes) take the inline
// path; a value that straddles two pieces is copied out.
class SafePickleReader::Input {
public:
    Input(ByteStream& in, std::uint64_t size, std::uint64_t& offset)
        : reported_(offset), size_(size) {
        std::string_view whole = in.contiguous();
        if (!whole.empty()) {
            at_ = begin_ = whole.data();
            end_ = at_ + whole.size();
            size_ = whole.size();
        } else {
            stream_ = &in;
            // Not zeroed: each refill writes what it hands out. A stream known to be small gets
            // a buffer its size (a pickle inside a zip member of a few KiB).
            buffer_bytes_ = static_cast<std::size_t>(std::min<std::uint64_t>(
                kBufferBytes, std::max<std::uint64_t>(size, kMinBufferBytes)));
            buffer_ = std::make_unique_for_overwrite<char[]>(buffer_bytes_);
        }
    }
    Input(std::string_view bytes, std::uint64_t& offset)
        : at_(bytes.data()),
          begin_(bytes.data()),
          end_(bytes.data() + bytes.size()),
          reported_(offset),
          size_(bytes.size()) {}
    ~Input() { reported_ = offset(); }
    Input(const Input&) = delete;
    Input& operator=(const Input&) = delete;

    bool byte(unsigned char& out) {
        if (at_ < end_) {
            out = static_cast<unsigned char>(*at_++);
            return true;
        }
        return read_slow(&out, 1);
    }
    // Copies `n` bytes to `out`; false at end of input.
    bool read(void* out, std::size_t n) {
        if (n <= static_cast<std::size_t>(end_ - at_)) {
            std::memcpy(out, at_, n);
            at_ += n;
            return true;
        }
        return read_slow(out, n);
    }
    // The next `n` bytes, valid until the next read: in place when they are in one piece, else
    // copied to `scratch`.
    bool take(std::size_t n, std::string& scratch, std::string_view& out) {
        if (n <= static_cast<std::size_t>(end_ - at_)) {
            out = std::string_view(at_, n);
            at_ += n;
            return true;
        }
        scratch.resize(n);
        if (!read_slow(scratch.data(), n)) return false;
        out = scratch;
        return true;
    }
    bool skip(std::uint64_t n) {
        while (n > 0) {
            if (at_ == end_ && !refill()) return false;
            auto step = static_cast<std::size_t>(
                std::min<std::uint64_t>(n, static_cast<std::size_t>(end_ - at_)));
            at_ += step;
            n -= step;
        }
        return true;
    }
    [[nodiscard]] std::uint64_t offset() const {
        return base_ + static_cast<std::uint64_t>(at_ - begin_);
    }
    /// Notes where the current opcode starts (its offset is worked out only for messages).
    void mark_op() { op_at_ = at_; }
    void mark_op(const char* at) { op_at_ = at; }
    // The buffered bytes, for a decoding loop that keeps its cursor in a register.
    [[nodiscard]] const char* cursor() const { return at_; }
    [[nodiscard]] const char* buffered_end() const { return end_; }
    void set_cursor(const char* at) { at_ = at; }
    [[nodiscard]] std::uint64_t op_offset() const {
        return op_at_ != nullptr ? base_ + static_cast<std::uint64_t>(op_at_ - begin_) : op_offset_;
    }
    /// Bytes left to read when the input's size is known (memory, a plain file); the most a
    /// length read from the input can honestly claim.
    [[nodiscard]] std::uint64_t remaining() const {
        if (size_ == SafePickleReader::kUnknownSize) return size_;
        return size_ > offset() ? size_ - offset() : 0;
    }
    /// Why the input stopped, when it was the stream's error rather than its end.
    [[nodiscard]] const Status& error() const { return error_; }

private:
    static constexpr std::size_t kBufferBytes = std::size_t{1} << 20;
    static constexpr std::size_t kMinBufferBytes = 4096;

    bool read_slow(void* out, std::size_t n) {
        auto* dst = static_cast<char*>(out);
        while (n > 0) {
            if (at_ == end_ && !refill()) return false;
            std::size_t step = std::min(n, static_cast<std::size_t>(end_ - at_));
            std::memcpy(dst, at_, step);
            at_ += step;
            dst += step;
            n -= step;
        }
        return true;
    }
    bool refill() {
        if (stream_ == nullptr || !error_.is_ok()) return false;
        auto got = stream_->read(buffer_.get(), buffer_bytes_);
        if (!got) {
            error_ = got.status();
            return false;
        }
        if (*got == 0) return false;
        if (op_at_ != nullptr) op_offset_ = op_offset();  // before the buffer changes
        op_at_ = nullptr;
        base_ += static_cast<std::uint64_t>(end_ - begin_);
        at_ = begin_ = buffer_.get();
        end_ = at_ + *got;
        return true;
    }

    ByteStream* stream_ = nullptr;
    std::unique_ptr<char[]> buffer_;
    std::size_t buffer_bytes_ = 0;
    const char* at_ = nullptr;
    const char* begin_ = nullptr;
    const char* end_ = nullptr;
    std::uint64_t base_ = 0;       // bytes of the input before begin_
    const char* op_at_ = nullptr;  // the current opcode in the buffer, or
    std::uint64_t op_offset_ = 0;  // its offset, once the buffer has moved on
    std::uint64_t& reported_;
    std::uint64_t size_ = SafePickleReader::kUnknownSize;
    Status error_ = Status::ok();
};

namespace {

// The VM's stack, on raw pointers: every opcode touches it.
class SlotStack {
public:
    [[nodiscard]] std::size_t size() const noexcept {
        return static_cast<std::size_t>(top_ - base_);
    }
    [[nodiscard]] bool empty() const noexcept { return top_ == base_; }
    PickleSlot& operator[](std::size_t i) noexcept { return base_[i]; }
    const PickleSlot& operator[](std::size_t i) const noexcept { return base_[i]; }
    PickleSlot& back() noexcept { return top_[-1]; }
    PickleSlot* begin() noexcept { return base_; }
    PickleSlot* end() noexcept { return top_; }
    void push_back(const PickleSlot& v) {
        if (top_ == end_) [[unlikely]]
            grow();
        *top_++ = v;
    }
    void pop_back() noexcept { --top_; }
    /// Shrinks to `n` values (never grows).
    void resize(std::size_t n) noexcept { top_ = base_ + n; }
    // For a loop that keeps the top in a register: pushes up to end() need no growing.
    PickleSlot* top() noexcept { return top_; }
    PickleSlot* capacity_end() noexcept { return end_; }
    void set_top(PickleSlot* top) noexcept { top_ = top; }

private:
    void grow() {
        const std::size_t n = size();
        const std::size_t capacity = std::max<std::size_t>(1024, 2 * n);
        auto bigger = std::make_unique<PickleSlot[]>(capacity);
        std::copy(base_, top_, bigger.get());
        storage_ = std::move(bigger);
        base_ = storage_.get();
        top_ = base_ + n;
        end_ = base_ + capacity;
    }

    std::unique_ptr<PickleSlot[]> storage_;
    PickleSlot* base_ = nullptr;
    PickleSlot* top_ = nullptr;
    PickleSlot* end_ = nullptr;
};

// A memo entry in 4 bytes: what it holds (4 bits: a kind, empty or released) and a reference
// (28 bits): a string's id, a container's index, a digest, or for a number (only hand-made
// pickles memoize numbers) its index among the memoized numbers. References stay below 2^28:
// the memory budget runs out long before there are that many strings, containers or numbers,
// and handlers' digests are bounded (PickleView::kMaxDigest).
class MemoEntry {
public:
    static constexpr std::uint8_t kEmpty = 0;
    static constexpr std::uint8_t kReleased = 15;
    static constexpr std::uint32_t kMaxRef = PickleView::kMaxDigest;

    MemoEntry() = default;
    static MemoEntry of(PickleValue::Kind kind, std::uint32_t ref) noexcept {
        return MemoEntry(static_cast<std::uint8_t>(static_cast<unsigned>(kind) + 1), ref);
    }
    static MemoEntry released() noexcept { return MemoEntry(kReleased, 0); }
    [[nodiscard]] std::uint8_t code() const noexcept {
        return static_cast<std::uint8_t>(bits_ >> 28);
    }
    [[nodiscard]] bool holds_value() const noexcept {
        return code() != kEmpty && code() != kReleased;
    }
    /// The kind of value held (when holds_value()).
    [[nodiscard]] PickleValue::Kind kind() const noexcept {
        return static_cast<PickleValue::Kind>(code() - 1);
    }
    [[nodiscard]] std::uint32_t ref() const noexcept { return bits_ & kMaxRef; }
    /// Whether it holds the container at index `container` of kind `kind`.
    [[nodiscard]] bool holds(PickleValue::Kind kind, std::uint32_t container) const noexcept {
        return holds_value() && this->kind() == kind && ref() == container;
    }

private:
    MemoEntry(std::uint8_t code, std::uint32_t ref) noexcept
        : bits_((std::uint32_t{code} << 28) | (ref & kMaxRef)) {}
    std::uint32_t bits_ = 0;  // 0: empty
};
static_assert(sizeof(MemoEntry) == 4, "the memo keeps one of these per memoized object");
static_assert(static_cast<unsigned>(PickleValue::Kind::kDigest) + 1 < MemoEntry::kReleased,
              "every kind has a code");

// Memo entries numbered densely from 0, in pages that never move: growing copies nothing and
// takes memory a page at a time.
class DenseMemo {
public:
    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    MemoEntry& operator[](std::size_t i) noexcept {
        return pages_[i >> kPageBits][i & (kPageEntries - 1)];
    }
    /// Indices below it have room (grow_to() adds pages).
    [[nodiscard]] std::size_t capacity() const noexcept { return pages_.size() * kPageEntries; }
    /// Adds `e` at index size(), which must be below capacity().
    void append(const MemoEntry& e) noexcept {
        (*this)[size_] = e;
        ++size_;
    }
    /// Makes room for indices below `n` (new ones empty); the bytes that took.
    std::size_t grow_to(std::size_t n) {
        std::size_t added = 0;
        while (pages_.size() * kPageEntries < n) {
            pages_.push_back(std::make_unique<MemoEntry[]>(kPageEntries));
            added += kPageEntries * sizeof(MemoEntry);
        }
        size_ = std::max(size_, n);
        return added;
    }

private:
    // 4096 entries, 16 KiB: a small pickle zeroes one small page; a snapshot's millions of
    // entries cost a pointer per page.
    static constexpr unsigned kPageBits = 12;
    static constexpr std::size_t kPageEntries = std::size_t{1} << kPageBits;

    std::vector<std::unique_ptr<MemoEntry[]>> pages_;
    std::size_t size_ = 0;
};

}  // namespace

class SafePickleReader::Machine final : private PickleCondenser {
public:
    Machine(Input& in, const std::string& name, const PickleLimits& limits,
            PickleStreamHandler* handler, PickleStore& store)
        : in_(in), name_(name), limits_(limits), handler_(handler), store_(store) {
        store_.set_condenser(this);
    }
    ~Machine() { store_.set_condenser(nullptr); }
    Machine(const Machine&) = delete;
    Machine& operator=(const Machine&) = delete;

    PickleSlot run() {
        unsigned char op = 0;
        if (!in_.byte(op)) fail_truncated("an empty file");
        if (op != 0x80) {
            fail(corrupt_data(name_ + ": not a binary pickle (first byte 0x" + hex(op) +
                              "); torch snapshots are pickles of protocol 2 or later"));
        }
        unsigned char proto = 0;
        if (!in_.byte(proto)) fail_truncated("the protocol byte");
        if (proto < 2 || proto > 5) {
            fail(unsupported(fmt::format(
                "{}: pickle protocol {} is not supported (expected 2 to 5)", name_, proto)));
        }
        for (;;) {
            run_plain_ops();
            in_.mark_op();
            if (!in_.byte(op)) [[unlikely]]
                fail_truncated("the STOP opcode");
            // The opcodes a snapshot is mostly made of are handled here, inline; the others, and
            // every error, out of line in step().
            switch (op) {
                case 'h': memo_get(read_le<std::uint8_t>(op), op); continue;
                case 'j': memo_get(read_le<std::uint32_t>(op), op); continue;
                case 0x94: memo_put(next_memo_++, op); continue;
                case 'K': push_scalar(K::kInt, read_le<std::uint8_t>(op)); continue;
                case 'M': push_scalar(K::kInt, read_le<std::uint16_t>(op)); continue;
                case 'J': push_scalar(K::kInt, read_le<std::int32_t>(op)); continue;
                case 0x8a: push_long(read_le<std::uint8_t>(op), op); continue;
                case '(':
                    if (marks_.size() >= limits_.max_stack_items) break;
                    marks_.push_back(stack_.size());
                    continue;
                default: break;
            }
            if (op == '.') break;
            step(op);
        }
        if (stack_.size() != 1 || !marks_.empty()) {
            fail(corrupt_data(
                fmt::format("{}: malformed pickle: STOP at offset {} with {} values on the stack",
                            name_, in_.op_offset(), stack_.size())));
        }
        return stack_.back();
    }

private:
    using K = PickleValue::Kind;

    // The opcodes most of a snapshot is (memo fetches, numbers, marks) in a tight loop, cursor
    // and stack top in registers. It stops at any other opcode, at anything unusual (an index
    // outside the dense memo, a memoized number, a full stack, the end of the buffered bytes)
    // and leaves that opcode to the general path, which also reports every error.
    void run_plain_ops() {
        constexpr std::ptrdiff_t kLongestPlainOp = 10;  // LONG1: opcode, length, 8 bytes read
        const char* at = nullptr;
        const char* end = nullptr;
        PickleSlot* base = nullptr;
        PickleSlot* top = nullptr;
        PickleSlot* full = nullptr;
        std::size_t memo_size = 0;
        const auto load = [&] {
            at = in_.cursor();
            end = in_.buffered_end();
            base = stack_.begin();
            top = stack_.top();
            full = base +
                   std::min<std::size_t>(limits_.max_stack_items,
                                         static_cast<std::size_t>(stack_.capacity_end() - base));
            memo_size = memo_dense_.size();
        };
        // The container opcodes call out, with the state the general path keeps.
        const auto call_out = [&](const char* op_at, auto&& operation) {
            in_.set_cursor(at);
            in_.mark_op(op_at);
            stack_.set_top(top);
            operation();
            load();
        };
        load();
        bool plain = true;
        while (plain && end - at >= kLongestPlainOp && top < full) {
            const char* const op_at = at;
            const auto op = static_cast<unsigned char>(*at++);
            if (op == 'h' || op == 'j') {
                std::uint64_t index = 0;
                if (op == 'h') {
                    index = static_cast<unsigned char>(*at++);
                } else {
                    index = load_le<std::uint32_t>(at);
                    at += 4;
                }
                const MemoEntry m = index < memo_size ? memo_dense_[index] : MemoEntry{};
                const auto kind = m.kind();
                if (!m.holds_value()) {
                    at = op_at;
                    break;
                }
                if (is_container_kind(kind)) {
                    ++store_.container(m.ref()).refs;
                } else if (kind != K::kString && kind != K::kDigest) {
                    at = op_at;
                    break;
                }
                *top++ = PickleSlot::of(kind, m.ref());
                continue;
            }
            switch (op) {
                case 'K':
                    *top++ = PickleSlot::of(K::kInt, 0, load_le<std::uint8_t>(at));
                    at += 1;
                    break;
                case 'M':
                    *top++ = PickleSlot::of(K::kInt, 0, load_le<std::uint16_t>(at));
                    at += 2;
                    break;
                case 'J':
                    *top++ = PickleSlot::of(K::kInt, 0, load_le<std::int32_t>(at));
                    at += 4;
                    break;
                case 0x8a: {
                    const auto n = static_cast<unsigned char>(*at);
                    if (n == 0 || n > 8) {
                        plain = false;
                        break;
                    }
                    // The n bytes, sign-extended from the top one (8 are read: the loop keeps
                    // that many in the buffer).
                    const unsigned unused = 64 - 8 * n;
                    const auto u = load_le<std::uint64_t>(at + 1) << unused;
                    *top++ = PickleSlot::of(K::kInt, 0, static_cast<std::int64_t>(u) >> unused);
                    at += 1 + n;
                    break;
                }
                case '(':
                    if (marks_.size() >= limits_.max_stack_items) {
                        plain = false;
                        break;
                    }
                    marks_.push_back(static_cast<std::size_t>(top - base));
                    continue;
                case 0x94: {  // MEMOIZE the next index, of a string or a container
                    const bool has_top =
                        top != base &&
                        (marks_.empty() || marks_.back() != static_cast<std::size_t>(top - base));
                    const K kind = has_top ? top[-1].kind() : K::kNone;
                    const std::uint32_t ref = has_top ? top[-1].ref() : 0;
                    plain = (kind == K::kString || is_container_kind(kind)) &&
                            ref <= MemoEntry::kMaxRef && next_memo_ == memo_size &&
                            memo_size < memo_dense_.capacity() && memo_sparse_.empty() &&
                            memo_count_ < kMaxMemo;
                    if (!plain) break;
                    if (is_container_kind(kind)) {
                        PickleContainer& c = store_.container(ref);
                        ++c.refs;
                        if (c.memo_refs++ == 0)
                            c.memo_index = static_cast<std::uint32_t>(memo_size);
                    }
                    memo_dense_.append(MemoEntry::of(kind, ref));
                    ++memo_count_;
                    ++next_memo_;
                    ++memo_size;
                    break;
                }
                case ']': call_out(op_at, [&] { push_container(K::kList); }); break;
                case '}': call_out(op_at, [&] { push_container(K::kDict); }); break;
                case 'u':
                    call_out(op_at, [&] {
                        const std::size_t m = pop_mark(op);
                        if (m == 0) fail_at(op, "no dict below the MARK");
                        set_items(m - 1, m, op);
                    });
                    break;
                case 'e':
                    call_out(op_at, [&] {
                        const std::size_t m = pop_mark(op);
                        if (m == 0) fail_at(op, "no list below the MARK");
                        append_items(m - 1, m, op);
                    });
                    break;
                default: plain = false; break;
            }
            if (!plain) at = op_at;
        }
        in_.set_cursor(at);
        stack_.set_top(top);
    }
    // A little-endian number at `at` (any alignment).
    template <typename T>
    static T load_le(const char* at) {
        if constexpr (std::endian::native == std::endian::little) {
            T v;
            std::memcpy(&v, at, sizeof v);
            return v;
        } else {
            std::make_unsigned_t<T> v = 0;
            for (std::size_t i = sizeof(T); i-- > 0;) {
                v = static_cast<std::make_unsigned_t<T>>(v << 8) |
                    static_cast<unsigned char>(at[i]);
            }
            return static_cast<T>(v);
        }
    }

    // ---- errors ----
    // Out of line and cold, so that the hot paths that may fail stay small.
    [[noreturn, gnu::cold, gnu::noinline]] void fail(Status s) { throw PickleError{std::move(s)}; }
    [[noreturn, gnu::cold, gnu::noinline]] void fail_truncated(const char* what) {
        if (!in_.error().is_ok()) fail(in_.error());
        throw PickleError{
            corrupt_data(fmt::format(
                "{}: the file ends early (offset {}) while reading {}; the snapshot was cut short",
                name_, in_.offset(), what)),
            true};
    }
    [[noreturn, gnu::cold, gnu::noinline]] void fail_at(unsigned char op, const std::string& why) {
        fail(corrupt_data(fmt::format("{}: malformed pickle at offset {} (opcode {}): {}", name_,
                                      in_.op_offset(), pickle_opcode_name(op), why)));
    }
    [[noreturn, gnu::cold, gnu::noinline]] void fail_at(unsigned char op, const char* why) {
        fail_at(op, std::string(why));
    }
    // "<name>: <before><limit><after> at offset <n>"
    [[noreturn, gnu::cold, gnu::noinline]] void fail_limit(const char* before, std::size_t limit,
                                                           const char* after) {
        fail(resource_exhausted(
            fmt::format("{}: {}{}{} at offset {}", name_, before, limit, after, in_.op_offset())));
    }
    static std::string hex(unsigned char c) {
        const char* digits = "0123456789abcdef";
        return {digits[c >> 4], digits[c & 15]};
    }

    // ---- memory accounting ----
    void charge(std::uint64_t bytes) {
        live_bytes_ += bytes;
        if (live_bytes_ > limits_.max_live_bytes) {
            fail(resource_exhausted(fmt::format(
                "{}: decoding needs more than {} MiB of memory (limit reached at offset {}); the "
                "file is larger than the configured cap or is built to amplify",
                name_, limits_.max_live_bytes >> 20, in_.op_offset())));
        }
    }
    void refund(std::uint64_t bytes) noexcept { live_bytes_ -= std::min(live_bytes_, bytes); }

    // ---- references: who holds a container (stack, containers, memo) ----
    void retain(const PickleSlot& s) noexcept {
        if (is_container_kind(s.kind())) ++store_.container(s.ref()).refs;
    }
    void drop(const PickleSlot& s) noexcept {
        if (is_container_kind(s.kind())) unref(s.ref());
    }
    [[gnu::always_inline]] void unref(std::uint32_t i) noexcept {
        PickleContainer& c = store_.container(i);
        const std::uint32_t left = --c.refs;
        if (left == 0) {
            destroy(i);
        } else if (left == 1 && c.digest != 0 && c.memo_refs == 1) {
            condensed(i);  // condensed while a second memo entry held it
        }
    }
    // Items first (nesting is at most limits.max_depth deep), then the slot.
    void destroy(std::uint32_t i) noexcept {
        for (const PickleSlot& item : store_.container(i).items) drop(item);
        std::vector<PickleSlot>& items = store_.container(i).items;
        if (items.capacity() > kKeptItemCapacity) {
            refund(items.capacity() * sizeof(PickleSlot));
            std::vector<PickleSlot>().swap(items);
        }
        store_.recycle(i);
    }
    // The handler condensed container i: its memo entry keeps the digest instead of the
    // container, which goes when its other holders let it go (there is one while the handler
    // looks at it: the streamed item it came from). Only a container the memo holds once.
    void condensed(std::uint32_t i) noexcept override {
        PickleContainer& c = store_.container(i);
        if (c.memo_refs != 1) return;
        MemoEntry* m = memo_find(c.memo_index);
        if (m == nullptr || !m->holds(c.kind, i)) return;
        *m = MemoEntry::of(K::kDigest, c.digest);
        c.memo_refs = 0;
        unref(i);
    }

    // ---- input helpers ----
    template <typename T>
    T read_le(unsigned char op) {
        unsigned char b[sizeof(T)];
        if (!in_.read(b, sizeof b)) [[unlikely]]
            fail_truncated(pickle_opcode_name(op));
        if constexpr (std::endian::native == std::endian::little) {
            T v;
            std::memcpy(&v, b, sizeof v);
            return v;
        } else {
            std::uint64_t v = 0;
            for (std::size_t i = sizeof b; i-- > 0;) v = (v << 8) | b[i];
            return static_cast<T>(v);
        }
    }

    std::size_t checked_length(unsigned char op, std::uint64_t n) {
        // A length is only a claim: one longer than what is left of the input is damage (or
        // hostility), reported as such before anything is allocated for it.
        if (n > in_.remaining()) {
            throw PickleError{
                corrupt_data(fmt::format(
                    "{}: a {} value at offset {} declares {} bytes, but only {} follow: the file "
                    "is cut short or damaged",
                    name_, pickle_opcode_name(op), in_.op_offset(), n, in_.remaining())),
                true};
        }
        if (n > limits_.max_string_bytes) {
            fail(resource_exhausted(fmt::format(
                "{}: a {} value of {} bytes at offset {} exceeds the limit of {} bytes", name_,
                pickle_opcode_name(op), n, in_.op_offset(), limits_.max_string_bytes)));
        }
        return static_cast<std::size_t>(n);
    }

    // ---- the stack ----
    [[gnu::always_inline]] void push(const PickleSlot& v) {
        if (stack_.size() >= limits_.max_stack_items) [[unlikely]]
            stack_full(v);
        stack_.push_back(v);
    }
    [[noreturn, gnu::cold, gnu::noinline]] void stack_full(const PickleSlot& v) {
        drop(v);
        fail_limit("more than ", limits_.max_stack_items, " values pending on the pickle stack");
    }
    void push_scalar(K kind, std::int64_t num = 0) { push(PickleSlot::of(kind, 0, num)); }
    // A new container, held once; a slot the store had to add is charged (slots are reused).
    std::uint32_t new_container(K kind) {
        const std::size_t before = store_.slots();
        const std::uint32_t i = store_.make(kind);
        if (store_.slots() != before) charge(kContainerCost);
        return i;
    }
    void push_container(K kind) { push(PickleSlot::of(kind, new_container(kind))); }
    // True when no value lies above the innermost mark.
    bool nothing_above_mark() const {
        return stack_.empty() || (!marks_.empty() && marks_.back() == stack_.size());
    }
    // The top value; the caller takes over its reference.
    PickleSlot pop(unsigned char op) {
        if (nothing_above_mark()) fail_at(op, "the stack is empty");
        PickleSlot v = stack_.back();
        stack_.pop_back();
        return v;
    }
    const PickleSlot& top(unsigned char op) {
        if (nothing_above_mark()) fail_at(op, "the stack is empty");
        return stack_.back();
    }
    // Index of the first item after the innermost mark; the mark is removed.
    std::size_t pop_mark(unsigned char op) {
        if (marks_.empty()) fail_at(op, "no MARK to match");
        std::size_t m = marks_.back();
        marks_.pop_back();
        return m;
    }
    void truncate_stack(std::size_t to) noexcept {
        for (std::size_t i = to; i < stack_.size(); ++i) drop(stack_[i]);
        stack_.resize(to);
    }

    void push_string(K kind, std::size_t n, unsigned char op) {
        std::string_view text;
        if (!in_.take(n, scratch_, text)) fail_truncated(pickle_opcode_name(op));
        bool added = false;
        const std::uint32_t id = store_.strings().intern(text, added);
        if (added) charge(text.size() + kStringCost);
        push(PickleSlot::of(kind, id));
    }

    // LONG1/LONG4: little-endian two's complement of n bytes.
    void push_long(std::size_t n, unsigned char op) {
        if (n > 8) {
            if (!in_.skip(checked_length(op, n))) fail_truncated("a long integer");
            push_scalar(K::kBigInt);
            return;
        }
        unsigned char b[8] = {};
        if (!in_.read(b, n)) [[unlikely]]
            fail_truncated("a long integer");
        std::uint64_t u = 0;
        if constexpr (std::endian::native == std::endian::little) {
            std::memcpy(&u, b, sizeof u);
        } else {
            for (std::size_t i = n; i-- > 0;) u = (u << 8) | b[i];
        }
        if (n > 0 && n < 8 && (b[n - 1] & 0x80) != 0) u |= ~std::uint64_t{0} << (8 * n);
        push_scalar(K::kInt, static_cast<std::int64_t>(u));
    }

    // ---- containers ----
    // Makes room for `extra` more items at once (one allocation per batch instead of one per
    // doubling), still growing geometrically so that long lists built in batches stay linear.
    void reserve_items(std::uint32_t target, std::size_t extra) {
        std::vector<PickleSlot>& items = store_.container(target).items;
        std::size_t need = items.size() + extra;
        std::size_t before = items.capacity();
        if (need <= before) return;
        std::size_t want = std::max(need, 2 * before);
        charge((want - before) * sizeof(PickleSlot));
        items.reserve(want);
    }

    // Moves the stack's values in [from, end) (their references) into container `target`, in
    // one batch: every check first, then one copy.
    void move_into(std::uint32_t target, std::size_t from, unsigned char op) {
        const std::size_t n = stack_.size() - from;
        if (n == 0) return;
        {
            const PickleContainer& t = store_.container(target);
            if (t.sealed) [[unlikely]] {
                fail_at(op,
                        "a container is modified after being nested in another one "
                        "(self-referential data is not supported)");
            }
            const std::size_t per_item = t.kind == K::kDict ? 2 : 1;
            if (t.items.size() + n > limits_.max_container_items * per_item) [[unlikely]] {
                fail_limit("a container with more than ", limits_.max_container_items, " items");
            }
        }
        // Children that are containers are sealed as they are checked: when a check fails the
        // read ends, so what was sealed no longer matters.
        std::uint8_t depth = 1;
        for (std::size_t i = from; i < stack_.size(); ++i) {
            const PickleSlot& child = stack_[i];
            if (!is_container_kind(child.kind())) continue;
            if (child.ref() == target) [[unlikely]]
                fail_at(op, "a container is inserted into itself");
            PickleContainer& c = store_.container(child.ref());
            if (std::size_t{c.depth} + 1 > limits_.max_depth) [[unlikely]] {
                fail_limit("containers nested deeper than ", limits_.max_depth, " levels");
            }
            depth = std::max<std::uint8_t>(depth, static_cast<std::uint8_t>(c.depth + 1));
            c.sealed = true;
        }
        reserve_items(target, n);
        PickleContainer& t = store_.container(target);
        t.depth = std::max(t.depth, depth);
        t.items.insert(t.items.end(), stack_.begin() + from, stack_.end());
        stack_.resize(from);
    }

    // A tuple or list of the stack's values in [from, end), pushed in their place.
    void collect(K kind, std::size_t from, unsigned char op) {
        const std::uint32_t c = new_container(kind);
        move_into(c, from, op);
        push(PickleSlot::of(kind, c));
    }

    void set_items(std::size_t dict_at, std::size_t from, unsigned char op) {
        const PickleSlot& dict = stack_[dict_at];
        if (dict.kind() != K::kDict) fail_at(op, "SETITEM on something that is not a dict");
        if ((stack_.size() - from) % 2 != 0) fail_at(op, "an odd number of keys and values");
        for (std::size_t i = from; i < stack_.size(); i += 2) {
            if (stack_[i].kind() == K::kList) fail_at(op, "a list used as a dict key");
        }
        move_into(dict.ref(), from, op);
    }

    void append_items(std::size_t list_at, std::size_t from, unsigned char op) {
        const PickleSlot list = stack_[list_at];
        if (list.kind() != K::kList) fail_at(op, "APPEND to something that is not a list");
        std::uint16_t tag = handler_ != nullptr ? tag_of(list_at) : 0;
        if (tag != 0 && handler_->streams(tag)) {
            if (store_.container(list.ref()).sealed) {
                fail_at(op, "a streamed list is modified after being nested");
            }
            for (std::size_t i = from; i < stack_.size(); ++i) {
                // A batch holds up to a thousand items, built long before: ask for the next
                // ones' memory while the handler reads this one.
                if (i + 2 < stack_.size()) prefetch(stack_[i + 2]);
                auto index = static_cast<std::size_t>(store_.container(list.ref()).streamed++);
                Status s = handler_->on_item(tag, index, PickleView(&store_, stack_[i]));
                if (!s.is_ok()) fail(std::move(s));
                release(stack_[i]);
                stack_[i] = PickleSlot{};
            }
            stack_.resize(from);
            return;
        }
        move_into(list.ref(), from, op);
    }

    void prefetch(const PickleSlot& item) const noexcept {
        if (!is_container_kind(item.kind())) return;
        const PickleContainer& c = store_.container(item.ref());
        __builtin_prefetch(&c);
        const PickleSlot* items = c.items.data();
        for (std::size_t i = 0; i < c.items.size(); i += 4) __builtin_prefetch(items + i);
    }

    // Drops a streamed item: its memo entry goes (a later reference to it is an error) and its
    // memory with it unless something else still holds it.
    void release(const PickleSlot& item) noexcept {
        if (is_container_kind(item.kind())) {
            PickleContainer& c = store_.container(item.ref());
            MemoEntry* m = c.memo_refs > 0 ? memo_find(c.memo_index) : nullptr;
            if (m != nullptr && m->holds(c.kind, item.ref())) {
                *m = MemoEntry::released();
                --c.memo_refs;
                --c.refs;  // the stack still holds it: never the last reference
            }
        }
        drop(item);
    }

    // The stream role of the container at stack position `p`, worked out from what lies below
    // it: the container it will be stored into, and under which key or index. Cached on the
    // container, since that context does not change while the container is being filled. The
    // handler is asked only when the parent has a role (children of one without have none).
    std::uint16_t tag_of(std::size_t p) {
        if (p >= stack_.size() || !is_container_kind(stack_[p].kind())) return 0;
        if (const PickleContainer& self = store_.container(stack_[p].ref()); self.tag_known) {
            return self.tag;
        }
        const std::uint16_t tag = p == 0 ? handler_->root_tag() : tag_from_parent(p);
        PickleContainer& c = store_.container(stack_[p].ref());
        c.tag = tag;
        c.tag_known = true;
        return tag;
    }
    std::uint16_t tag_from_parent(std::size_t p) {
        // The innermost mark at or below p opens the batch that holds the container, if any.
        std::size_t q = SIZE_MAX;
        for (std::size_t i = marks_.size(); i-- > 0;) {
            if (marks_[i] <= p) {
                q = marks_[i];
                break;
            }
        }
        if (q != SIZE_MAX && q > 0 && is_container_kind(stack_[q - 1].kind())) {
            const PickleSlot parent = stack_[q - 1];
            const std::size_t off = p - q;
            if (parent.kind() == K::kList) {
                const std::uint16_t role = tag_of(q - 1);
                return role == 0 ? 0
                                 : handler_->child_tag(role, {}, parent_count(parent.ref()) + off);
            }
            if (parent.kind() == K::kDict && off % 2 == 1) {
                const std::uint16_t role = tag_of(q - 1);
                return role == 0 ? 0 : handler_->child_tag(role, text_of(stack_[p - 1]), 0);
            }
        }
        if (q != SIZE_MAX && q >= p) return 0;
        // Single APPEND / SETITEM pattern: the parent sits right below (or below a key).
        const PickleSlot below = stack_[p - 1];
        if (below.kind() == K::kList && !store_.container(below.ref()).sealed) {
            const std::uint16_t role = tag_of(p - 1);
            return role == 0 ? 0 : handler_->child_tag(role, {}, parent_count(below.ref()));
        }
        if (below.kind() == K::kString && p >= 2 && stack_[p - 2].kind() == K::kDict &&
            (q == SIZE_MAX || q < p - 1)) {
            const std::uint16_t role = tag_of(p - 2);
            return role == 0 ? 0 : handler_->child_tag(role, text_of(below), 0);
        }
        return 0;
    }
    std::size_t parent_count(std::uint32_t list) const {
        const PickleContainer& c = store_.container(list);
        return c.items.size() + static_cast<std::size_t>(c.streamed);
    }
    std::string_view text_of(const PickleSlot& s) const {
        return s.kind() == K::kString ? store_.text(s.ref()) : std::string_view();
    }

    // ---- memo ----
    // Pickle writers number memo entries densely from 0 (MEMOIZE always does; Python's BINPUT
    // does too), so entries live in a vector indexed by number. An index far past the entries
    // stored so far (only a hand-made pickle has one) goes to a hash map instead, so no index
    // can make the vector huge. An index may sit in either: one stored in the map can fall
    // inside the vector's range once the vector has grown past it.
    MemoEntry* memo_find(std::uint64_t index) {
        if (index < memo_dense_.size() && memo_dense_[index].code() != MemoEntry::kEmpty) {
            return &memo_dense_[index];
        }
        if (memo_sparse_.empty()) return nullptr;
        auto it = memo_sparse_.find(index);
        return it != memo_sparse_.end() ? &it->second : nullptr;
    }
    MemoEntry& memo_slot_for(std::uint64_t index) {
        if (MemoEntry* found = memo_find(index)) return *found;
        if (memo_count_ >= kMaxMemo || index > std::numeric_limits<std::uint32_t>::max()) {
            fail(resource_exhausted(fmt::format(
                "{}: more than {} memoized values, or a memo index past 2^32", name_, kMaxMemo)));
        }
        ++memo_count_;
        if (index < memo_dense_.size() || index <= 2 * memo_count_ + 1024) {
            if (index >= memo_dense_.size()) charge(memo_dense_.grow_to(index + 1));
            return memo_dense_[index];
        }
        charge(kMemoNodeCost);
        return memo_sparse_[index];
    }
    [[gnu::always_inline]] void memo_put(std::uint64_t index, unsigned char op) {
        // The usual case: the next index (MEMOIZE), of a string or a container.
        if (index == memo_dense_.size() && memo_sparse_.empty() && memo_count_ < kMaxMemo &&
            !nothing_above_mark()) [[likely]] {
            const PickleSlot& v = stack_.back();
            if ((v.kind() == K::kString || is_container_kind(v.kind())) &&
                v.ref() <= MemoEntry::kMaxRef) {
                if (is_container_kind(v.kind())) {
                    PickleContainer& c = store_.container(v.ref());
                    ++c.refs;
                    if (c.memo_refs++ == 0) c.memo_index = static_cast<std::uint32_t>(index);
                }
                const MemoEntry entry = MemoEntry::of(v.kind(), v.ref());
                if (const std::size_t added = memo_dense_.grow_to(index + 1)) charge(added);
                memo_dense_[index] = entry;
                ++memo_count_;
                return;
            }
        }
        memo_put_any(index, op);
    }
    [[gnu::noinline]] void memo_put_any(std::uint64_t index, unsigned char op) {
        const PickleSlot v = top(op);
        MemoEntry& slot = memo_slot_for(index);
        std::uint32_t ref = v.ref();
        if (v.kind() == K::kInt || v.kind() == K::kBool || v.kind() == K::kFloat) {
            charge(sizeof(PickleSlot));
            ref = static_cast<std::uint32_t>(boxed_.size());
            boxed_.push_back(v);
        }
        if (ref > MemoEntry::kMaxRef) {
            fail(resource_exhausted(name_ + ": more values in the memo than a reader keeps"));
        }
        if (is_container_kind(v.kind())) {
            PickleContainer& c = store_.container(v.ref());
            ++c.refs;
            if (c.memo_refs++ == 0) c.memo_index = static_cast<std::uint32_t>(index);
        }
        const MemoEntry old = slot;
        slot = MemoEntry::of(v.kind(), ref);
        if (old.holds_value() && is_container_kind(old.kind())) {
            --store_.container(old.ref()).memo_refs;
            unref(old.ref());
        }
    }
    [[gnu::always_inline]] void memo_get(std::uint64_t index, unsigned char op) {
        if (index < memo_dense_.size()) [[likely]] {
            const MemoEntry m = memo_dense_[index];
            const auto kind = m.kind();
            if (m.holds_value() &&
                (is_container_kind(kind) || kind == K::kString || kind == K::kDigest)) [[likely]] {
                if (is_container_kind(kind)) ++store_.container(m.ref()).refs;
                push(PickleSlot::of(kind, m.ref()));
                return;
            }
        }
        memo_get_any(index, op);
    }
    [[gnu::noinline]] void memo_get_any(std::uint64_t index, unsigned char op) {
        MemoEntry* m = memo_find(index);
        if (m == nullptr) {
            fail_at(op, fmt::format("refers to memo entry {} that was never stored", index));
        }
        if (!m->holds_value()) fail_at(op, "refers back to a list item that was already streamed");
        const auto kind = m->kind();
        PickleSlot s{};
        if (kind == K::kInt || kind == K::kBool || kind == K::kFloat) {
            s = boxed_[m->ref()];
        } else {
            s = PickleSlot::of(kind, m->ref());
            retain(s);
        }
        push(s);
    }

    // ---- dispatch ----
    [[gnu::noinline]] void step(unsigned char op) {
        switch (op) {
            case 0x95: {  // FRAME: a length hint; frames are not needed to decode
                (void)read_le<std::uint64_t>(op);
                return;
            }
            case 0x80: {  // PROTO again (allowed by pickle; must be a supported protocol)
                unsigned char p = 0;
                if (!in_.byte(p)) fail_truncated("PROTO");
                if (p < 2 || p > 5) fail_at(op, fmt::format("unsupported protocol {}", p));
                return;
            }
            case '(':
                if (marks_.size() >= limits_.max_stack_items) fail_at(op, "too many marks");
                marks_.push_back(stack_.size());
                return;
            case '0': {  // POP
                if (!marks_.empty() && marks_.back() == stack_.size()) {
                    marks_.pop_back();
                } else {
                    drop(pop(op));
                }
                return;
            }
            case '1': {  // POP_MARK
                truncate_stack(pop_mark(op));
                return;
            }
            case '2': {  // DUP
                const PickleSlot v = top(op);
                retain(v);
                push(v);
                return;
            }
            case 'N': push_scalar(K::kNone); return;
            case 0x88: push_scalar(K::kBool, 1); return;
            case 0x89: push_scalar(K::kBool, 0); return;
            case 'J': push_scalar(K::kInt, read_le<std::int32_t>(op)); return;
            case 'K': push_scalar(K::kInt, read_le<std::uint8_t>(op)); return;
            case 'M': push_scalar(K::kInt, read_le<std::uint16_t>(op)); return;
            case 0x8a: push_long(read_le<std::uint8_t>(op), op); return;
            case 0x8b: {
                std::int32_t n = read_le<std::int32_t>(op);
                if (n < 0) fail_at(op, "negative length");
                push_long(static_cast<std::size_t>(n), op);
                return;
            }
            case 'G': {
                unsigned char b[8];
                if (!in_.read(b, 8)) fail_truncated("BINFLOAT");
                std::uint64_t u = 0;
                for (unsigned char c : b) u = (u << 8) | c;  // big-endian
                push_scalar(K::kFloat, static_cast<std::int64_t>(u));
                return;
            }
            case 0x8c: push_string(K::kString, read_le<std::uint8_t>(op), op); return;
            case 'X':
                push_string(K::kString, checked_length(op, read_le<std::uint32_t>(op)), op);
                return;
            case 0x8d:
                push_string(K::kString, checked_length(op, read_le<std::uint64_t>(op)), op);
                return;
            case 'U': push_string(K::kString, read_le<std::uint8_t>(op), op); return;
            case 'T': {
                std::int32_t n = read_le<std::int32_t>(op);
                if (n < 0) fail_at(op, "negative length");
                push_string(K::kString, checked_length(op, static_cast<std::uint64_t>(n)), op);
                return;
            }
            case 'C': push_string(K::kBytes, read_le<std::uint8_t>(op), op); return;
            case 'B':
                push_string(K::kBytes, checked_length(op, read_le<std::uint32_t>(op)), op);
                return;
            case 0x8e:
            case 0x96:
                push_string(K::kBytes, checked_length(op, read_le<std::uint64_t>(op)), op);
                return;
            case ']': push_container(K::kList); return;
            case '}': push_container(K::kDict); return;
            case ')': push_container(K::kTuple); return;
            case 'l': collect(K::kList, pop_mark(op), op); return;
            case 't': collect(K::kTuple, pop_mark(op), op); return;
            case 0x85:
            case 0x86:
            case 0x87: {
                std::size_t n = static_cast<std::size_t>(op - 0x84);
                std::size_t floor = marks_.empty() ? 0 : marks_.back();
                if (stack_.size() < floor + n) fail_at(op, "not enough values on the stack");
                collect(K::kTuple, stack_.size() - n, op);
                return;
            }
            case 'd': {
                std::size_t m = pop_mark(op);
                // The dict goes below its items (it takes them from there) and ends up alone.
                push_container(K::kDict);
                std::rotate(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end() - 1,
                            stack_.end());
                set_items(m, m + 1, op);
                return;
            }
            case 'a': {
                std::size_t floor = marks_.empty() ? 0 : marks_.back();
                if (stack_.size() < floor + 2) fail_at(op, "the stack is empty");
                append_items(stack_.size() - 2, stack_.size() - 1, op);
                return;
            }
            case 'e': {
                std::size_t m = pop_mark(op);
                if (m == 0) fail_at(op, "no list below the MARK");
                append_items(m - 1, m, op);
                return;
            }
            case 's': {
                std::size_t floor = marks_.empty() ? 0 : marks_.back();
                if (stack_.size() < floor + 3) fail_at(op, "not enough values on the stack");
                set_items(stack_.size() - 3, stack_.size() - 2, op);
                return;
            }
            case 'u': {
                std::size_t m = pop_mark(op);
                if (m == 0) fail_at(op, "no dict below the MARK");
                set_items(m - 1, m, op);
                return;
            }
            case 'h': memo_get(read_le<std::uint8_t>(op), op); return;
            case 'j': memo_get(read_le<std::uint32_t>(op), op); return;
            case 'q': memo_put(read_le<std::uint8_t>(op), op); return;
            case 'r': memo_put(read_le<std::uint32_t>(op), op); return;
            case 0x94: memo_put(next_memo_++, op); return;
            default: break;
        }
        if (is_code_opcode(op)) {
            fail(corrupt_data(
                fmt::format("{}: refusing to load: opcode {} at offset {} would import or call "
                            "Python code. A torch memory snapshot holds only plain data (dicts, "
                            "lists, strings, numbers), so this file is not a genuine snapshot or "
                            "was tampered with. Nothing in it was executed.",
                            name_, pickle_opcode_name(op), in_.op_offset())));
        }
        std::string why = std::string(pickle_opcode_name(op)) == "unknown"
                              ? "unknown opcode 0x" + hex(op)
                              : std::string("opcode ") + pickle_opcode_name(op) +
                                    " is not used by torch memory snapshots and is not supported";
        fail(corrupt_data(fmt::format("{}: cannot read the pickle at offset {}: {}", name_,
                                      in_.op_offset(), why)));
    }

    static constexpr std::size_t kMaxMemo = std::size_t{1} << 28;
    static constexpr std::size_t kMemoNodeCost = 64;  // a hash map node holding a MemoEntry
    static constexpr std::size_t kStringCost = 32;    // an interned text's bookkeeping
    static constexpr std::size_t kContainerCost = sizeof(PickleContainer) + sizeof(std::uint32_t);
    // Item storage a recycled container keeps (more is given back).
    static constexpr std::size_t kKeptItemCapacity = 256;

    Input& in_;
    const std::string& name_;
    const PickleLimits& limits_;
    PickleStreamHandler* handler_;
    PickleStore& store_;
    std::uint64_t live_bytes_ = 0;
    std::uint64_t next_memo_ = 0;
    SlotStack stack_;
    std::vector<std::size_t> marks_;
    DenseMemo memo_dense_;
    std::unordered_map<std::uint64_t, MemoEntry> memo_sparse_;
    std::size_t memo_count_ = 0;
    std::vector<PickleSlot> boxed_;  // memoized numbers
    std::string scratch_;            // a value that straddles two pieces of input
};

// The tree a caller keeps: each container once, however often the pickle refers to it.
PickleRef SafePickleReader::materialize(const PickleStore& store, const PickleSlot& root) {
    std::unordered_map<std::uint32_t, PickleRef> done;
    std::function<PickleRef(const PickleSlot&)> build = [&](const PickleSlot& s) -> PickleRef {
        if (is_container_kind(s.kind())) {
            if (auto it = done.find(s.ref()); it != done.end()) return it->second;
        }
        auto v = std::make_shared<PickleValue>(s.kind());
        switch (s.kind()) {
            case PickleValue::Kind::kInt:
            case PickleValue::Kind::kBool: v->int_ = s.num; break;
            case PickleValue::Kind::kFloat:
                std::memcpy(&v->float_, &s.num, sizeof v->float_);
                break;
            case PickleValue::Kind::kString:
            case PickleValue::Kind::kBytes: v->text_ = std::string(store.text(s.ref())); break;
            case PickleValue::Kind::kDigest: v->int_ = s.ref(); break;
            default: break;
        }
        if (is_container_kind(s.kind())) {
            const PickleContainer& c = store.container(s.ref());
            if (c.memo_refs > 0) v->memo_slot_ = c.memo_index;
            v->items_.reserve(c.items.size());
            for (const PickleSlot& item : c.items) v->items_.push_back(build(item));
            done.emplace(s.ref(), v);
        }
        return v;
    };
    return build(root);
}

Result<PickleRef> SafePickleReader::run(Input& input, const std::string& name,
                                        PickleStreamHandler* handler) {
    ended_early_ = false;
    try {
        PickleStore store;
        Machine machine(input, name, limits_, handler, store);
        PickleSlot root = machine.run();
        return materialize(store, root);
    } catch (PickleError& e) {
        ended_early_ = e.cut_short;
        return std::move(e.status);
    } catch (const std::bad_alloc&) {
        return resource_exhausted(name + ": out of host memory while decoding the pickle");
    } catch (const std::exception& e) {
        return internal_error(name + ": pickle decoding failed: " + e.what());
    }
}

Result<PickleRef> SafePickleReader::read(ByteStream& in, std::uint64_t size,
                                         const std::string& name,
                                         PickleStreamHandler* handler) noexcept {
    offset_ = 0;
    try {
        Input input(in, size, offset_);
        return run(input, name, handler);
    } catch (...) {
        return resource_exhausted(name + ": out of host memory");
    }
}

Result<PickleRef> SafePickleReader::read(std::string_view bytes, const std::string& name,
                                         PickleStreamHandler* handler) noexcept {
    offset_ = 0;
    try {
        Input input(bytes, offset_);
        return run(input, name, handler);
    } catch (...) {
        return resource_exhausted(name + ": out of host memory");
    }
}

}  // namespace gpudiag::detail
