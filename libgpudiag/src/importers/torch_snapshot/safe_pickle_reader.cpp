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
//   every consumer loop) are refused.
// * Streaming: items appended to a list the handler streams are handed over and dropped at once,
//   and their memo slot is released, so a trace of millions of entries is read in memory bounded
//   by what the pickle shares through its memo (strings, stack frames, frame lists), not by the
//   number of entries. A later reference to a released item is reported as corrupt input.
// * Memory: every decoded value is charged to a budget (limits.max_live_bytes); the charge is
//   returned when a streamed item is released.
#include "importers/torch_snapshot/safe_pickle_reader.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <new>
#include <unordered_map>
#include <vector>

namespace gpudiag::detail {
namespace {

constexpr std::size_t kNodeCost = sizeof(PickleValue) + 32;  // + shared_ptr control block

// Values are many and small (a trace entry is a dict of half a dozen ints), and a malloc/free
// pair per value was the largest single cost of decoding. Nodes (value and shared_ptr control
// block, one fixed size) come from chunks of this pool and go back to its free list. The pool
// lives as long as anything uses it: the reader holds one reference and every node from it
// another (plain counters, not atomics: the pool, like the values, is used by one thread at a
// time), so values handed to the caller stay valid after the read.
class NodePool {
public:
    static NodePool* create() { return new NodePool(); }
    NodePool(const NodePool&) = delete;
    NodePool& operator=(const NodePool&) = delete;

    void retain() noexcept { ++refs_; }
    void release() noexcept {
        if (--refs_ == 0) delete this;
    }

    void* allocate(std::size_t bytes) {
        if (block_ == 0) block_ = std::max(round_up(bytes), sizeof(FreeBlock));
        void* p = nullptr;
        if (bytes > block_) {
            p = ::operator new(bytes);
        } else if (free_ != nullptr) {
            p = free_;
            free_ = free_->next;
        } else {
            if (chunks_.empty() || chunk_used_ + block_ > kChunkBytes) {
                chunks_.reserve(chunks_.size() + 1);
                chunks_.push_back(::operator new(kChunkBytes));
                chunk_used_ = 0;
            }
            p = static_cast<char*>(chunks_.back()) + chunk_used_;
            chunk_used_ += block_;
        }
        retain();
        return p;
    }
    void deallocate(void* p, std::size_t bytes) noexcept {
        if (bytes > block_) {
            ::operator delete(p);
        } else {
            auto* b = static_cast<FreeBlock*>(p);
            b->next = free_;
            free_ = b;
        }
        release();
    }

private:
    struct FreeBlock {
        FreeBlock* next;
    };
    static constexpr std::size_t kChunkBytes = std::size_t{64} << 10;
    static std::size_t round_up(std::size_t n) {
        constexpr std::size_t a = alignof(std::max_align_t);
        return (n + a - 1) / a * a;
    }

    NodePool() = default;
    ~NodePool() {
        for (void* c : chunks_) ::operator delete(c);
    }

    std::size_t refs_ = 1;  // the creator's
    std::size_t block_ = 0;
    FreeBlock* free_ = nullptr;
    std::vector<void*> chunks_;
    std::size_t chunk_used_ = 0;
};

template <typename T>
struct NodeAllocator {
    using value_type = T;
    NodePool* pool;

    explicit NodeAllocator(NodePool* p) noexcept : pool(p) {}
    template <typename U>
    NodeAllocator(const NodeAllocator<U>& other) noexcept : pool(other.pool) {}  // NOLINT
    T* allocate(std::size_t n) { return static_cast<T*>(pool->allocate(n * sizeof(T))); }
    void deallocate(T* p, std::size_t n) noexcept { pool->deallocate(p, n * sizeof(T)); }
    template <typename U>
    bool operator==(const NodeAllocator<U>& other) const noexcept {
        return pool == other.pool;
    }
};

// The reader's reference to its pool.
class PoolHandle {
public:
    PoolHandle() : pool_(NodePool::create()) {}
    ~PoolHandle() { pool_->release(); }
    PoolHandle(const PoolHandle&) = delete;
    PoolHandle& operator=(const PoolHandle&) = delete;
    [[nodiscard]] NodePool* get() const noexcept { return pool_; }

private:
    NodePool* pool_;
};

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

// Buffered byte input from a FILE* or from memory, tracking the absolute offset. Reads that fit
// in the buffer (nearly all: opcodes and their arguments are a few bytes) take the inline path.
class SafePickleReader::Input {
public:
    Input(std::FILE* file, std::uint64_t& offset) : file_(file), reported_(offset) {
        struct stat st {};
        const long at = std::ftell(file);
        if (::fstat(::fileno(file), &st) == 0 && S_ISREG(st.st_mode) && at >= 0 &&
            static_cast<std::uint64_t>(st.st_size) >= static_cast<std::uint64_t>(at)) {
            file_bytes_ = static_cast<std::uint64_t>(st.st_size) - static_cast<std::uint64_t>(at);
        }
    }
    Input(std::string_view bytes, std::uint64_t& offset)
        : data_(bytes.data()), size_(bytes.size()), reported_(offset) {}
    ~Input() { reported_ = offset(); }
    Input(const Input&) = delete;
    Input& operator=(const Input&) = delete;

    // Copies `n` bytes to `out`; false at end of input.
    bool read(void* out, std::size_t n) {
        if (n <= size_ - pos_) {
            std::memcpy(out, data_ + pos_, n);
            pos_ += n;
            return true;
        }
        auto* dst = static_cast<char*>(out);
        while (n > 0) {
            if (pos_ == size_ && !refill()) return false;
            std::size_t take = std::min(n, size_ - pos_);
            std::memcpy(dst, data_ + pos_, take);
            pos_ += take;
            dst += take;
            n -= take;
        }
        return true;
    }
    // Appends `n` bytes to `out` without a temporary.
    bool read_into(std::string& out, std::size_t n) {
        while (n > 0) {
            if (pos_ == size_ && !refill()) return false;
            std::size_t take = std::min(n, size_ - pos_);
            out.append(data_ + pos_, take);
            pos_ += take;
            n -= take;
        }
        return true;
    }
    bool byte(unsigned char& out) {
        if (pos_ < size_) {
            out = static_cast<unsigned char>(data_[pos_++]);
            return true;
        }
        return read(&out, 1);
    }
    [[nodiscard]] std::uint64_t offset() const { return base_ + pos_; }
    /// Bytes left to read (of a regular file, as it was when opened); the most a length read
    /// from the input can honestly claim.
    [[nodiscard]] std::uint64_t remaining() const {
        if (file_ == nullptr) return size_ - pos_;
        return file_bytes_ > offset() ? file_bytes_ - offset() : 0;
    }

private:
    bool refill() {
        if (file_ == nullptr) return false;
        std::size_t got = std::fread(buffer_.data(), 1, buffer_.size(), file_);
        if (got == 0) return false;
        base_ += size_;
        data_ = buffer_.data();
        size_ = got;
        pos_ = 0;
        return true;
    }

    std::FILE* file_ = nullptr;
    std::vector<char> buffer_ = std::vector<char>(file_ ? std::size_t{1} << 20 : 0);
    const char* data_ = nullptr;
    std::size_t size_ = 0;
    std::size_t pos_ = 0;
    std::uint64_t base_ = 0;  // bytes of the input before data_
    std::uint64_t file_bytes_ = std::numeric_limits<std::uint64_t>::max();  // unknown: a pipe
    std::uint64_t& reported_;
};

class SafePickleReader::Machine {
public:
    Machine(Input& in, const std::string& name, const PickleLimits& limits,
            PickleStreamHandler* handler)
        : in_(in), name_(name), limits_(limits), handler_(handler) {}

    PickleRef run() {
        unsigned char op = 0;
        if (!in_.byte(op)) fail_truncated("an empty file");
        if (op != 0x80) {
            fail(corrupt_data(name_ + ": not a binary pickle (first byte 0x" + hex(op) +
                              "); torch snapshots are pickles of protocol 2 or later"));
        }
        unsigned char proto = 0;
        if (!in_.byte(proto)) fail_truncated("the protocol byte");
        if (proto < 2 || proto > 5) {
            fail(unsupported(name_ + ": pickle protocol " + std::to_string(proto) +
                             " is not supported (expected 2 to 5)"));
        }
        for (;;) {
            op_offset_ = in_.offset();
            if (!in_.byte(op)) fail_truncated("the STOP opcode");
            if (op == '.') break;
            step(op);
        }
        if (stack_.size() != 1 || !marks_.empty()) {
            fail(corrupt_data(name_ + ": malformed pickle: STOP at offset " +
                              std::to_string(op_offset_) + " with " +
                              std::to_string(stack_.size()) + " values on the stack"));
        }
        return stack_.back();
    }

private:
    // ---- errors ----
    [[noreturn]] void fail(Status s) { throw PickleError{std::move(s)}; }
    [[noreturn]] void fail_truncated(const char* what) {
        throw PickleError{
            corrupt_data(name_ + ": the file ends early (offset " + std::to_string(in_.offset()) +
                         ") while reading " + what + "; the snapshot was cut short"),
            true};
    }
    [[noreturn]] void fail_at(unsigned char op, const std::string& why) {
        fail(corrupt_data(name_ + ": malformed pickle at offset " + std::to_string(op_offset_) +
                          " (opcode " + pickle_opcode_name(op) + "): " + why));
    }
    static std::string hex(unsigned char c) {
        const char* digits = "0123456789abcdef";
        return {digits[c >> 4], digits[c & 15]};
    }

    // ---- memory accounting ----
    void charge(std::uint64_t bytes) {
        live_bytes_ += bytes;
        if (live_bytes_ > limits_.max_live_bytes) {
            fail(resource_exhausted(
                name_ + ": decoding needs more than " +
                std::to_string(limits_.max_live_bytes >> 20) +
                " MiB of memory (limit reached at offset " + std::to_string(op_offset_) +
                "); the file is larger than the configured cap or is built to amplify"));
        }
    }
    void refund(std::uint64_t bytes) { live_bytes_ -= std::min(live_bytes_, bytes); }
    static std::uint64_t cost(const PickleValue& v) {
        return kNodeCost + v.text_.capacity() + v.items_.capacity() * sizeof(PickleRef);
    }

    PickleRef make(PickleValue::Kind kind) {
        charge(kNodeCost);
        return std::allocate_shared<PickleValue>(NodeAllocator<PickleValue>(pool_.get()), kind);
    }

    // ---- input helpers ----
    template <typename T>
    T read_le(unsigned char op) {
        unsigned char b[sizeof(T)];
        if (!in_.read(b, sizeof b)) fail_truncated(pickle_opcode_name(op));
        std::uint64_t v = 0;
        for (std::size_t i = sizeof b; i-- > 0;) v = (v << 8) | b[i];
        return static_cast<T>(v);
    }

    std::size_t checked_length(unsigned char op, std::uint64_t n) {
        // A length is only a claim: one longer than what is left of the input is damage (or
        // hostility), reported as such before anything is allocated for it.
        if (n > in_.remaining()) {
            throw PickleError{
                corrupt_data(name_ + ": a " + pickle_opcode_name(op) + " value at offset " +
                             std::to_string(op_offset_) + " declares " + std::to_string(n) +
                             " bytes, but only " + std::to_string(in_.remaining()) +
                             " follow: the file is cut short or damaged"),
                true};
        }
        if (n > limits_.max_string_bytes) {
            fail(resource_exhausted(name_ + ": a " + pickle_opcode_name(op) + " value of " +
                                    std::to_string(n) + " bytes at offset " +
                                    std::to_string(op_offset_) + " exceeds the limit of " +
                                    std::to_string(limits_.max_string_bytes) + " bytes"));
        }
        return static_cast<std::size_t>(n);
    }

    void push(PickleRef v) {
        if (stack_.size() >= limits_.max_stack_items) {
            fail(resource_exhausted(
                name_ + ": more than " + std::to_string(limits_.max_stack_items) +
                " values pending on the pickle stack at offset " + std::to_string(op_offset_)));
        }
        stack_.push_back(std::move(v));
    }
    PickleRef pop(unsigned char op) {
        if (stack_.empty() || (!marks_.empty() && marks_.back() == stack_.size())) {
            fail_at(op, "the stack is empty");
        }
        PickleRef v = std::move(stack_.back());
        stack_.pop_back();
        return v;
    }
    PickleRef& top(unsigned char op) {
        if (stack_.empty() || (!marks_.empty() && marks_.back() == stack_.size())) {
            fail_at(op, "the stack is empty");
        }
        return stack_.back();
    }
    // Index of the first item after the innermost mark; the mark is removed.
    std::size_t pop_mark(unsigned char op) {
        if (marks_.empty()) fail_at(op, "no MARK to match");
        std::size_t m = marks_.back();
        marks_.pop_back();
        return m;
    }

    void push_string(PickleValue::Kind kind, std::size_t n, unsigned char op) {
        charge(n);
        PickleRef v = make(kind);
        v->text_.reserve(n);
        if (!in_.read_into(v->text_, n)) fail_truncated(pickle_opcode_name(op));
        push(std::move(v));
    }

    void push_int(std::int64_t value) {
        PickleRef v = make(PickleValue::Kind::kInt);
        v->int_ = value;
        push(std::move(v));
    }

    // LONG1/LONG4: little-endian two's complement of n bytes.
    void push_long(std::size_t n, unsigned char op) {
        if (n > 8) {
            std::string skip;
            if (!in_.read_into(skip, checked_length(op, n))) fail_truncated("a long integer");
            PickleRef v = make(PickleValue::Kind::kBigInt);
            push(std::move(v));
            return;
        }
        unsigned char b[8] = {};
        if (!in_.read(b, n)) fail_truncated("a long integer");
        std::uint64_t u = 0;
        for (std::size_t i = n; i-- > 0;) u = (u << 8) | b[i];
        if (n > 0 && n < 8 && (b[n - 1] & 0x80) != 0) u |= ~std::uint64_t{0} << (8 * n);
        push_int(static_cast<std::int64_t>(u));
    }

    // ---- containers ----
    void check_insert(PickleValue& target, const PickleRef& child, unsigned char op) {
        if (target.sealed_) {
            fail_at(op,
                    "a container is modified after being nested in another one "
                    "(self-referential data is not supported)");
        }
        if (child.get() == &target) fail_at(op, "a container is inserted into itself");
        std::uint8_t child_depth = child->is_container() ? child->depth_ : 0;
        if (std::size_t{child_depth} + 1 > limits_.max_depth) {
            fail(resource_exhausted(name_ + ": containers nested deeper than " +
                                    std::to_string(limits_.max_depth) + " levels at offset " +
                                    std::to_string(op_offset_)));
        }
        target.depth_ =
            std::max<std::uint8_t>(target.depth_, static_cast<std::uint8_t>(child_depth + 1));
    }
    void insert(PickleValue& target, PickleRef child, unsigned char op) {
        check_insert(target, child, op);
        std::size_t per_item = target.kind_ == PickleValue::Kind::kDict ? 2 : 1;
        if (target.items_.size() >= limits_.max_container_items * per_item) {
            fail(resource_exhausted(name_ + ": a container with more than " +
                                    std::to_string(limits_.max_container_items) +
                                    " items at offset " + std::to_string(op_offset_)));
        }
        if (child->is_container()) child->sealed_ = true;
        std::size_t before = target.items_.capacity();
        target.items_.push_back(std::move(child));
        if (target.items_.capacity() != before) {
            charge((target.items_.capacity() - before) * sizeof(PickleRef));
        }
    }

    // Makes room for `extra` more items at once (one allocation per batch instead of one per
    // doubling), still growing geometrically so that long lists built in batches stay linear.
    void reserve_items(PickleValue& target, std::size_t extra) {
        std::size_t need = target.items_.size() + extra;
        std::size_t before = target.items_.capacity();
        if (need <= before) return;
        target.items_.reserve(std::max(need, 2 * before));
        charge((target.items_.capacity() - before) * sizeof(PickleRef));
    }

    // Builds a tuple/list from the items in [from, end) of the stack.
    PickleRef collect(PickleValue::Kind kind, std::size_t from, unsigned char op) {
        PickleRef v = make(kind);
        reserve_items(*v, stack_.size() - from);
        for (std::size_t i = from; i < stack_.size(); ++i) insert(*v, std::move(stack_[i]), op);
        stack_.resize(from);
        return v;
    }

    void append_items(const PickleRef& list, std::size_t from, unsigned char op) {
        if (list->kind_ != PickleValue::Kind::kList) {
            fail_at(op, "APPEND to something that is not a list");
        }
        std::uint16_t tag = handler_ != nullptr ? tag_of(stack_position(list)) : 0;
        if (tag != 0 && handler_->streams(tag)) {
            if (list->sealed_) fail_at(op, "a streamed list is modified after being nested");
            for (std::size_t i = from; i < stack_.size(); ++i) {
                auto index = static_cast<std::size_t>(list->int_++);
                Status s = handler_->on_item(tag, index, *stack_[i]);
                if (!s.is_ok()) fail(std::move(s));
                release(stack_[i]);
            }
            stack_.resize(from);
            return;
        }
        reserve_items(*list, stack_.size() - from);
        for (std::size_t i = from; i < stack_.size(); ++i) insert(*list, std::move(stack_[i]), op);
        stack_.resize(from);
    }

    // Drops a streamed item: its memo slot goes (a later reference to it is an error) and its
    // memory is refunded unless something else still shares it.
    void release(PickleRef& item) {
        if (item->memo_slot_ >= 0) {
            auto slot = static_cast<std::uint64_t>(item->memo_slot_);
            if (PickleRef* held = memo_find(slot); held != nullptr && *held == item) {
                memo_erase(slot);
                released_.push_back(static_cast<std::uint64_t>(item->memo_slot_));
                if (released_.size() > kReleasedRemembered) {
                    released_.erase(released_.begin(), released_.begin() + kReleasedRemembered / 2);
                }
            }
            item->memo_slot_ = -1;
        }
        if (item.use_count() == 1) refund_tree(*item);
        item.reset();
    }
    void refund_tree(const PickleValue& v) {
        refund(cost(v));
        for (const auto& c : v.items_) {
            if (c.use_count() == 1) refund_tree(*c);
        }
    }

    // Position of `v` on the stack, searching from the top (it is near the top when used).
    std::size_t stack_position(const PickleRef& v) const {
        for (std::size_t i = stack_.size(); i-- > 0;) {
            if (stack_[i] == v) return i;
        }
        return SIZE_MAX;
    }

    // The stream role of the container at stack position `p`, worked out from what lies below
    // it: the container it will be stored into, and under which key or index. Cached on the
    // value, since that context does not change while the container is being filled.
    std::uint16_t tag_of(std::size_t p) {
        if (p == SIZE_MAX || p >= stack_.size()) return 0;
        PickleValue& v = *stack_[p];
        if (v.tag_known_) return v.tag_;
        std::uint16_t tag = 0;
        if (p == 0) {
            tag = handler_->root_tag();
        } else {
            // The innermost mark at or below p opens the batch that holds v, if any.
            std::size_t q = SIZE_MAX;
            for (std::size_t i = marks_.size(); i-- > 0;) {
                if (marks_[i] <= p) {
                    q = marks_[i];
                    break;
                }
            }
            bool found = false;
            if (q != SIZE_MAX && q > 0 && stack_[q - 1]->is_container()) {
                PickleValue& parent = *stack_[q - 1];
                std::size_t off = p - q;
                if (parent.kind_ == PickleValue::Kind::kList) {
                    tag = handler_->child_tag(tag_of(q - 1), {}, parent_count(parent) + off);
                    found = true;
                } else if (parent.kind_ == PickleValue::Kind::kDict && off % 2 == 1) {
                    tag = handler_->child_tag(tag_of(q - 1), stack_[p - 1]->as_string(), 0);
                    found = true;
                }
            }
            if (!found && (q == SIZE_MAX || q < p)) {
                // Single APPEND / SETITEM pattern: the parent sits right below (or below a key).
                PickleValue& below = *stack_[p - 1];
                if (below.kind_ == PickleValue::Kind::kList && !below.sealed_) {
                    tag = handler_->child_tag(tag_of(p - 1), {}, parent_count(below));
                } else if (below.kind_ == PickleValue::Kind::kString && p >= 2 &&
                           stack_[p - 2]->kind_ == PickleValue::Kind::kDict &&
                           (q == SIZE_MAX || q < p - 1)) {
                    tag = handler_->child_tag(tag_of(p - 2), below.as_string(), 0);
                }
            }
        }
        v.tag_ = tag;
        v.tag_known_ = true;
        return tag;
    }
    static std::size_t parent_count(const PickleValue& list) {
        return list.items_.size() + static_cast<std::size_t>(list.int_);
    }

    void set_items(PickleValue& dict, std::size_t from, unsigned char op) {
        if (dict.kind_ != PickleValue::Kind::kDict) {
            fail_at(op, "SETITEM on something that is not a dict");
        }
        if ((stack_.size() - from) % 2 != 0) fail_at(op, "an odd number of keys and values");
        reserve_items(dict, stack_.size() - from);
        for (std::size_t i = from; i < stack_.size(); ++i) {
            if (i % 2 == from % 2 && stack_[i]->kind_ == PickleValue::Kind::kList) {
                fail_at(op, "a list used as a dict key");
            }
            insert(dict, std::move(stack_[i]), op);
        }
        stack_.resize(from);
    }

    // ---- memo ----
    // Pickle writers number memo entries densely from 0 (MEMOIZE always does; Python's BINPUT
    // does too), so entries live in a vector indexed by number. An index far past the entries
    // stored so far (only a hand-made pickle has one) goes to a hash map instead, so no index
    // can make the vector huge. When streaming has released most entries (a list whose items
    // share nothing), the vector would hold mostly empty slots: the live ones then move to the
    // map for the rest of the read, which keeps memory bounded by what is live.
    // An index may sit in either: one stored in the map can fall inside the vector's range
    // once the vector has grown past it.
    PickleRef* memo_find(std::uint64_t index) {
        if (index < memo_dense_.size() && memo_dense_[index]) return &memo_dense_[index];
        if (memo_sparse_.empty()) return nullptr;
        auto it = memo_sparse_.find(index);
        return it != memo_sparse_.end() ? &it->second : nullptr;
    }
    void memo_put(std::uint64_t index, unsigned char op) {
        PickleRef& v = top(op);
        PickleRef* slot = memo_find(index);
        if (slot == nullptr) {
            if (memo_count_ >= kMaxMemo) {
                fail(resource_exhausted(name_ + ": more than " + std::to_string(kMaxMemo) +
                                        " memoized values"));
            }
            if (index < memo_dense_.size() ||
                (!memo_dense_closed_ && index <= 2 * memo_count_ + 1024)) {
                if (index >= memo_dense_.size()) {
                    std::size_t before = memo_dense_.capacity();
                    memo_dense_.resize(index + 1);
                    charge((memo_dense_.capacity() - before) * sizeof(PickleRef));
                }
                slot = &memo_dense_[index];
                ++memo_dense_live_;
            } else {
                charge(kMemoNodeCost);
                slot = &memo_sparse_[index];
            }
            ++memo_count_;
        }
        *slot = v;
        if (v->memo_slot_ < 0) v->memo_slot_ = static_cast<std::int64_t>(index);
    }
    void memo_get(std::uint64_t index, unsigned char op) {
        PickleRef* slot = memo_find(index);
        if (slot == nullptr) {
            bool released = std::find(released_.begin(), released_.end(), index) != released_.end();
            fail_at(op, released ? "refers back to a list item that was already streamed"
                                 : "refers to memo entry " + std::to_string(index) +
                                       " that was never stored");
        }
        push(*slot);
    }
    void memo_erase(std::uint64_t index) {
        if (index < memo_dense_.size() && memo_dense_[index]) {
            --memo_count_;
            --memo_dense_live_;
            memo_dense_[index].reset();
            if (memo_dense_.size() >= 4096 && memo_dense_live_ * 4 < memo_dense_.size()) {
                memo_to_sparse();
            }
        } else if (memo_sparse_.erase(index) != 0) {
            --memo_count_;
            refund(kMemoNodeCost);
        }
    }
    void memo_to_sparse() {
        for (std::size_t i = 0; i < memo_dense_.size(); ++i) {
            if (!memo_dense_[i]) continue;
            charge(kMemoNodeCost);
            memo_sparse_.emplace(i, std::move(memo_dense_[i]));
        }
        refund(memo_dense_.capacity() * sizeof(PickleRef));
        memo_dense_ = {};
        memo_dense_live_ = 0;
        memo_dense_closed_ = true;
    }

    // ---- dispatch ----
    void step(unsigned char op) {
        using K = PickleValue::Kind;
        switch (op) {
            case 0x95: {  // FRAME: a length hint; frames are not needed to decode
                (void)read_le<std::uint64_t>(op);
                return;
            }
            case 0x80: {  // PROTO again (allowed by pickle; must be a supported protocol)
                unsigned char p = 0;
                if (!in_.byte(p)) fail_truncated("PROTO");
                if (p < 2 || p > 5) fail_at(op, "unsupported protocol " + std::to_string(p));
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
                    (void)pop(op);
                }
                return;
            }
            case '1': {  // POP_MARK
                std::size_t m = pop_mark(op);
                stack_.resize(m);
                return;
            }
            case '2': {  // DUP
                PickleRef v = top(op);
                push(std::move(v));
                return;
            }
            case 'N': push(make(K::kNone)); return;
            case 0x88:
            case 0x89: {
                PickleRef v = make(K::kBool);
                v->int_ = op == 0x88 ? 1 : 0;
                push(std::move(v));
                return;
            }
            case 'J': push_int(read_le<std::int32_t>(op)); return;
            case 'K': push_int(read_le<std::uint8_t>(op)); return;
            case 'M': push_int(read_le<std::uint16_t>(op)); return;
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
                double d = 0;
                std::memcpy(&d, &u, sizeof d);
                PickleRef v = make(K::kFloat);
                v->float_ = d;
                push(std::move(v));
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
            case ']': push(make(K::kList)); return;
            case '}': push(make(K::kDict)); return;
            case ')': push(make(K::kTuple)); return;
            case 'l': {
                std::size_t m = pop_mark(op);
                push(collect(K::kList, m, op));
                return;
            }
            case 't': {
                std::size_t m = pop_mark(op);
                push(collect(K::kTuple, m, op));
                return;
            }
            case 0x85:
            case 0x86:
            case 0x87: {
                std::size_t n = static_cast<std::size_t>(op - 0x84);
                std::size_t floor = marks_.empty() ? 0 : marks_.back();
                if (stack_.size() < floor + n) fail_at(op, "not enough values on the stack");
                push(collect(K::kTuple, stack_.size() - n, op));
                return;
            }
            case 'd': {
                std::size_t m = pop_mark(op);
                PickleRef dict = make(K::kDict);
                set_items(*dict, m, op);
                push(std::move(dict));
                return;
            }
            case 'a': {
                PickleRef item = pop(op);
                PickleRef list = top(op);
                stack_.push_back(std::move(item));
                append_items(std::move(list), stack_.size() - 1, op);
                return;
            }
            case 'e': {
                std::size_t m = pop_mark(op);
                if (m == 0) fail_at(op, "no list below the MARK");
                append_items(stack_[m - 1], m, op);
                return;
            }
            case 's': {
                std::size_t floor = marks_.empty() ? 0 : marks_.back();
                if (stack_.size() < floor + 3) fail_at(op, "not enough values on the stack");
                set_items(*stack_[stack_.size() - 3], stack_.size() - 2, op);
                return;
            }
            case 'u': {
                std::size_t m = pop_mark(op);
                if (m == 0) fail_at(op, "no dict below the MARK");
                set_items(*stack_[m - 1], m, op);
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
                name_ + ": refusing to load: opcode " + pickle_opcode_name(op) + " at offset " +
                std::to_string(op_offset_) +
                " would import or call Python code. A torch memory snapshot holds only plain "
                "data (dicts, lists, strings, numbers), so this file is not a genuine snapshot "
                "or was tampered with. Nothing in it was executed."));
        }
        std::string why = std::string(pickle_opcode_name(op)) == "unknown"
                              ? "unknown opcode 0x" + hex(op)
                              : std::string("opcode ") + pickle_opcode_name(op) +
                                    " is not used by torch memory snapshots and is not supported";
        fail(corrupt_data(name_ + ": cannot read the pickle at offset " +
                          std::to_string(op_offset_) + ": " + why));
    }

    static constexpr std::size_t kMaxMemo = std::size_t{1} << 28;
    static constexpr std::size_t kMemoNodeCost = 64;  // a hash map node holding a PickleRef
    static constexpr std::size_t kReleasedRemembered = 4096;

    Input& in_;
    const std::string& name_;
    const PickleLimits& limits_;
    PickleStreamHandler* handler_;
    std::uint64_t live_bytes_ = 0;
    std::uint64_t op_offset_ = 0;
    std::uint64_t next_memo_ = 0;
    std::vector<PickleRef> stack_;
    std::vector<std::size_t> marks_;
    PoolHandle pool_;
    std::vector<PickleRef> memo_dense_;
    std::unordered_map<std::uint64_t, PickleRef> memo_sparse_;
    std::size_t memo_count_ = 0;
    std::size_t memo_dense_live_ = 0;
    bool memo_dense_closed_ = false;
    std::vector<std::uint64_t> released_;  // recent released memo slots, for a clearer error
};

Result<PickleRef> SafePickleReader::run(Input& input, const std::string& name,
                                        PickleStreamHandler* handler) {
    ended_early_ = false;
    try {
        Machine machine(input, name, limits_, handler);
        return machine.run();
    } catch (PickleError& e) {
        ended_early_ = e.cut_short;
        return std::move(e.status);
    } catch (const std::bad_alloc&) {
        return resource_exhausted(name + ": out of host memory while decoding the pickle");
    } catch (const std::exception& e) {
        return internal_error(name + ": pickle decoding failed: " + e.what());
    }
}

Result<PickleRef> SafePickleReader::read(std::FILE* file, const std::string& name,
                                         PickleStreamHandler* handler) noexcept {
    offset_ = 0;
    if (file == nullptr) return invalid_argument(name + ": no file to read");
    try {
        Input input(file, offset_);
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
