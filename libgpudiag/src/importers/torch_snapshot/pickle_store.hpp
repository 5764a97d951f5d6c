// SPDX-License-Identifier: Apache-2.0
// PickleStore: how SafePickleReader holds values while it decodes, compactly, and PickleView, how
// a stream handler sees them.
//
// * A value is a 16-byte PickleSlot: scalars inline, strings as an id into an interning table
//   (each distinct text is stored once, so a string the pickle repeats costs nothing more), and
//   containers as an index into a table of containers, reference-counted. A container's slot and
//   its item storage are recycled when it is dropped, so decoding a long trace allocates nothing
//   per entry once the first few have been seen.
// * The memo keeps 4 bytes per entry. A memoized container that a handler has summarized can be
//   condensed to a number (a digest, see PickleView::condense): the memo then keeps the digest,
//   later references get the digest, and the container goes once nothing else holds it. This is
//   how a snapshot's frames and per-allocation frame lists, which the pickle memoizes because
//   later entries refer back to them, cost 4 bytes each and are summarized once.
#pragma once

#include "importers/torch_snapshot/pickle_value.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>
#include <type_traits>
#include <vector>

namespace gpudiag::detail {

/// One decoded value. The kind and the reference share one word, written whole: a slot built
/// field by field and then copied as a whole stalls the CPU (store forwarding fails).
struct PickleSlot {
    // No member initializers: a trivial type, so that moving slots in bulk is one memmove.
    // PickleSlot{} is None.
    std::uint64_t head;  ///< kind (low byte); reference (high half)
    std::int64_t num;    ///< kInt and kBool value, kFloat bits

    /// `ref`: string id (kString, kBytes), container index, digest.
    static PickleSlot of(PickleValue::Kind kind, std::uint32_t ref = 0,
                         std::int64_t num = 0) noexcept {
        return PickleSlot{static_cast<std::uint64_t>(kind) | (std::uint64_t{ref} << 32), num};
    }
    [[nodiscard]] PickleValue::Kind kind() const noexcept {
        return static_cast<PickleValue::Kind>(head & 0xFF);
    }
    [[nodiscard]] std::uint32_t ref() const noexcept {
        return static_cast<std::uint32_t>(head >> 32);
    }
};

static_assert(std::is_trivial_v<PickleSlot>, "slots are copied in bulk");

[[nodiscard]] inline bool is_container_kind(PickleValue::Kind k) noexcept {
    static_assert(static_cast<int>(PickleValue::Kind::kTuple) ==
                          static_cast<int>(PickleValue::Kind::kList) + 1 &&
                      static_cast<int>(PickleValue::Kind::kDict) ==
                          static_cast<int>(PickleValue::Kind::kList) + 2,
                  "list, tuple and dict are consecutive kinds");
    return static_cast<unsigned>(k) - static_cast<unsigned>(PickleValue::Kind::kList) <= 2u;
}

/// A list, tuple or dict being decoded or held.
struct PickleContainer {
    std::vector<PickleSlot> items;  ///< for a dict, keys and values alternate
    std::uint64_t serial = 0;       ///< unique for the read (slots are reused; serials are not)
    std::uint64_t streamed = 0;     ///< items of a streamed list handed to the handler
    std::uint32_t refs = 0;         ///< stack entries, containers and memo entries holding it
    std::uint32_t memo_refs = 0;    ///< of which memo entries
    std::uint32_t memo_index = 0;   ///< the memo entry holding it (when memo_refs == 1)
    std::uint32_t digest = 0;       ///< what to condense to (PickleView::condense); 0: nothing
    PickleValue::Kind kind = PickleValue::Kind::kList;
    bool sealed = false;     ///< inside another container: may no longer change
    bool tag_known = false;  ///< tag has been worked out
    std::uint8_t depth = 0;  ///< nesting depth below it
    std::uint16_t tag = 0;   ///< stream role given by the reader's handler
};

/// Each distinct text once; ids are dense from 0 and stay valid for the read.
class PickleStrings {
public:
    /// The id of `text`, added when new (`added` tells).
    std::uint32_t intern(std::string_view text, bool& added);
    [[nodiscard]] std::string_view text(std::uint32_t id) const noexcept { return texts_[id]; }
    [[nodiscard]] std::size_t size() const noexcept { return texts_.size(); }

private:
    static std::uint64_t hash(std::string_view s) noexcept;
    void grow();
    char* store(std::string_view text);

    std::vector<std::string_view> texts_;
    std::vector<std::uint32_t> hashes_;  // low bits of each text's hash, by id
    std::vector<std::uint32_t> table_;   // id + 1 by hash position; 0 is empty
    std::vector<std::unique_ptr<char[]>> chunks_;
    std::size_t chunk_left_ = 0;
    char* chunk_at_ = nullptr;
};

/// What condensing a container does to the memo (the reader's part of PickleView::condense).
class PickleCondenser {
public:
    /// Container `i` has just been given its digest.
    virtual void condensed(std::uint32_t i) noexcept = 0;

protected:
    ~PickleCondenser() = default;
};

/// The containers and strings of one read (the reader's; views point into it).
class PickleStore {
public:
    [[nodiscard]] const PickleContainer& container(std::uint32_t i) const noexcept {
        return containers_[i];
    }
    [[nodiscard]] PickleContainer& container(std::uint32_t i) noexcept { return containers_[i]; }
    [[nodiscard]] std::string_view text(std::uint32_t id) const noexcept {
        return strings_.text(id);
    }
    PickleStrings& strings() noexcept { return strings_; }

    /// A new empty container, held once (by the caller); a recycled slot when there is one.
    std::uint32_t make(PickleValue::Kind kind);
    /// Puts the slot of a container nothing holds any more back on the free list. Its items
    /// must have been dropped already.
    void recycle(std::uint32_t i) noexcept;
    [[nodiscard]] std::size_t live() const noexcept { return containers_.size() - free_.size(); }
    /// Container slots ever made (live or free).
    [[nodiscard]] std::size_t slots() const noexcept { return containers_.size(); }

    /// Gives container `i` its digest (once) and lets the reader condense it.
    void condense(std::uint32_t i, std::uint32_t digest) noexcept {
        PickleContainer& c = containers_[i];
        if (c.digest != 0) return;
        c.digest = digest;
        if (condenser_ != nullptr) condenser_->condensed(i);
    }
    void set_condenser(PickleCondenser* condenser) noexcept { condenser_ = condenser; }

private:
    std::vector<PickleContainer> containers_;
    std::vector<std::uint32_t> free_;
    std::uint64_t next_serial_ = 1;
    PickleStrings strings_;
    PickleCondenser* condenser_ = nullptr;
};

/// A value the reader holds, as a stream handler sees it during PickleStreamHandler::on_item:
/// valid only until that call returns. A default view is a missing value (exists() is false).
class PickleView {
public:
    using Kind = PickleValue::Kind;

    PickleView() noexcept = default;
    PickleView(PickleStore* store, const PickleSlot& slot) noexcept : store_(store), slot_(slot) {}

    [[nodiscard]] bool exists() const noexcept { return store_ != nullptr; }
    [[nodiscard]] Kind kind() const noexcept { return slot_.kind(); }
    // A missing view is kNone, so the kind alone answers these.
    [[nodiscard]] bool is_container() const noexcept { return is_container_kind(kind()); }
    [[nodiscard]] bool is_string() const noexcept { return kind() == Kind::kString; }
    [[nodiscard]] bool is_dict() const noexcept { return kind() == Kind::kDict; }
    [[nodiscard]] bool is_list() const noexcept { return kind() == Kind::kList; }
    [[nodiscard]] bool is_digest() const noexcept { return kind() == Kind::kDigest; }

    [[nodiscard]] std::int64_t as_int(std::int64_t fallback = 0) const noexcept {
        if (kind() == Kind::kInt || kind() == Kind::kBool) return slot_.num;
        if (kind() == Kind::kFloat) {
            double d = as_double();
            if (d > -9.2e18 && d < 9.2e18) return static_cast<std::int64_t>(d);
        }
        return fallback;
    }
    [[nodiscard]] double as_double(double fallback = 0) const noexcept {
        if (kind() == Kind::kFloat) {
            double d = 0;
            std::memcpy(&d, &slot_.num, sizeof d);
            return d;
        }
        if (kind() == Kind::kInt || kind() == Kind::kBool) return static_cast<double>(slot_.num);
        return fallback;
    }
    [[nodiscard]] bool as_bool(bool fallback = false) const noexcept {
        if (kind() == Kind::kBool || kind() == Kind::kInt) return slot_.num != 0;
        return fallback;
    }
    /// Text of a string (or bytes); "" for other kinds.
    [[nodiscard]] std::string_view as_string() const noexcept {
        if (kind() == Kind::kString || kind() == Kind::kBytes) {
            return store_->text(slot_.ref());
        }
        return {};
    }
    /// For a string: an id equal for equal texts within the read; kNoId otherwise.
    static constexpr std::uint32_t kNoId = 0xFFFFFFFFu;
    [[nodiscard]] std::uint32_t string_id() const noexcept {
        return is_string() ? slot_.ref() : kNoId;
    }
    /// The number a handler condensed this value to (see condense()): a kDigest's, or that of
    /// a container still held elsewhere; 0 when it has none.
    [[nodiscard]] std::uint32_t digest() const noexcept {
        if (is_digest()) return slot_.ref();
        return is_container() ? store_->container(slot_.ref()).digest : 0;
    }

    /// Containers: true when the memo holds it.
    [[nodiscard]] bool is_memoized() const noexcept {
        return is_container() && store_->container(slot_.ref()).memo_refs > 0;
    }
    /// Containers: a number no other container of the read has; 0 for anything else.
    [[nodiscard]] std::uint64_t identity() const noexcept {
        return is_container() ? store_->container(slot_.ref()).serial : 0;
    }

    /// Items of a list or tuple; for a dict, keys and values alternate.
    [[nodiscard]] std::size_t item_count() const noexcept {
        return is_container() ? store_->container(slot_.ref()).items.size() : 0;
    }
    [[nodiscard]] PickleView item(std::size_t i) const noexcept {
        return PickleView(store_, store_->container(slot_.ref()).items[i]);
    }
    /// Calls f(PickleView) for each item of a list or tuple (keys and values of a dict).
    template <typename F>
    void for_each_item(F&& f) const {
        if (!is_container()) return;
        for (const PickleSlot& s : store_->container(slot_.ref()).items) f(PickleView(store_, s));
    }
    /// Calls f(digest) for each item of a container with the item's digest (see digest()), in
    /// order, while f returns true; returns whether it went through them all.
    template <typename F>
    bool for_each_digest(F&& f) const {
        if (!is_container()) return true;
        for (const PickleSlot& s : store_->container(slot_.ref()).items) {
            const std::uint32_t d = s.kind() == Kind::kDigest ? s.ref()
                                    : is_container_kind(s.kind())
                                        ? store_->container(s.ref()).digest
                                        : 0;
            if (!f(d)) return false;
        }
        return true;
    }
    /// Calls f(key, value) for each pair of a dict, in order.
    template <typename F>
    void for_each_pair(F&& f) const {
        if (!is_dict()) return;
        const std::vector<PickleSlot>& items = store_->container(slot_.ref()).items;
        const PickleSlot* at = items.data();
        for (std::size_t n = items.size() / 2; n > 0; --n, at += 2) {
            f(PickleView(store_, at[0]), PickleView(store_, at[1]));
        }
    }
    /// Entries: items of a list or tuple, pairs of a dict.
    [[nodiscard]] std::size_t size() const noexcept {
        return kind() == Kind::kDict ? item_count() / 2 : item_count();
    }

    /// The value of string key `key` in a dict (the last one wins, as in Python), or a missing
    /// view.
    [[nodiscard]] PickleView find(std::string_view key) const noexcept {
        if (!is_dict()) return {};
        const auto& items = store_->container(slot_.ref()).items;
        for (std::size_t i = items.size(); i >= 2; i -= 2) {
            const PickleSlot& k = items[i - 2];
            if (k.kind() == Kind::kString && store_->text(k.ref()) == key) {
                return PickleView(store_, items[i - 1]);
            }
        }
        return {};
    }
    [[nodiscard]] std::int64_t int_at(std::string_view key,
                                      std::int64_t fallback = 0) const noexcept {
        return find(key).as_int(fallback);
    }
    [[nodiscard]] std::string_view string_at(std::string_view key) const noexcept {
        return find(key).as_string();
    }

    /// The largest digest condense() takes (the memo keeps 28 bits of each entry's reference).
    static constexpr std::uint32_t kMaxDigest = (1u << 28) - 1;
    /// Summarizes this (memoized) container by `digest` (1 to kMaxDigest), once: from now on
    /// the memo gives later references to it as a kDigest view, and the container goes once
    /// what holds it now lets it go. For values the handler summarizes once (a stack's frames,
    /// a list of them) and needs only the summary of later. Other digests are ignored.
    void condense(std::uint32_t digest) const noexcept {
        if (is_container() && digest != 0 && digest <= kMaxDigest) {
            store_->condense(slot_.ref(), digest);
        }
    }

private:
    PickleStore* store_ = nullptr;
    PickleSlot slot_{};
};

}  // namespace gpudiag::detail
