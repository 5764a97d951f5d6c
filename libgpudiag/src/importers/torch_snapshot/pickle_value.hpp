// SPDX-License-Identifier: Apache-2.0
// PickleValue: the plain data a safe pickle decodes to (None, bools, ints, floats, strings, bytes,
// lists, tuples, dicts), as a tree the caller owns: what SafePickleReader::read returns. While it
// decodes, the reader holds values in a compact form instead (pickle_store.hpp) and shows them to
// a stream handler as PickleViews. Nothing in either can hold code or a reference to a Python
// type.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gpudiag::detail {

class PickleValue;
using PickleRef = std::shared_ptr<PickleValue>;

class PickleValue {
public:
    enum class Kind : std::uint8_t {
        kNone,
        kBool,
        kInt,
        kBigInt,  ///< an integer wider than 64 bits: kept as a marker, never used as a number
        kFloat,
        kString,
        kBytes,
        kList,
        kTuple,
        kDict,
        kDigest,  ///< a container a stream handler condensed to a number (PickleView::condense)
    };

    explicit PickleValue(Kind kind) noexcept : kind_(kind) {}

    [[nodiscard]] Kind kind() const noexcept { return kind_; }
    [[nodiscard]] bool is_container() const noexcept {
        return kind_ == Kind::kList || kind_ == Kind::kTuple || kind_ == Kind::kDict;
    }
    [[nodiscard]] bool is_string() const noexcept { return kind_ == Kind::kString; }
    /// True when the pickle stored this value in its memo: it then lives until the read ends.
    [[nodiscard]] bool is_memoized() const noexcept { return memo_slot_ >= 0; }
    [[nodiscard]] bool is_number() const noexcept {
        return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool;
    }

    /// The number a handler condensed a container to (kDigest only).
    [[nodiscard]] std::uint32_t digest() const noexcept {
        return kind_ == Kind::kDigest ? static_cast<std::uint32_t>(int_) : 0;
    }
    /// The integer value; floats are truncated, anything else gives `fallback`.
    [[nodiscard]] std::int64_t as_int(std::int64_t fallback = 0) const noexcept {
        if (kind_ == Kind::kInt || kind_ == Kind::kBool) return int_;
        if (kind_ == Kind::kFloat && float_ > -9.2e18 && float_ < 9.2e18) {
            return static_cast<std::int64_t>(float_);
        }
        return fallback;
    }
    [[nodiscard]] double as_double(double fallback = 0) const noexcept {
        if (kind_ == Kind::kFloat) return float_;
        if (kind_ == Kind::kInt || kind_ == Kind::kBool) return static_cast<double>(int_);
        return fallback;
    }
    [[nodiscard]] bool as_bool(bool fallback = false) const noexcept {
        if (kind_ == Kind::kBool || kind_ == Kind::kInt) return int_ != 0;
        return fallback;
    }
    /// Text of a string (or bytes); "" for other kinds.
    [[nodiscard]] std::string_view as_string() const noexcept {
        return (kind_ == Kind::kString || kind_ == Kind::kBytes) ? std::string_view(text_)
                                                                 : std::string_view();
    }

    /// Items of a list or tuple; for a dict, keys and values alternate.
    [[nodiscard]] const std::vector<PickleRef>& items() const noexcept { return items_; }
    [[nodiscard]] std::size_t size() const noexcept {
        return kind_ == Kind::kDict ? items_.size() / 2 : items_.size();
    }

    /// The value of string key `key` in a dict (the last one wins, as in Python), or nullptr.
    [[nodiscard]] const PickleValue* find(std::string_view key) const noexcept {
        if (kind_ != Kind::kDict) return nullptr;
        for (std::size_t i = items_.size(); i >= 2; i -= 2) {
            const PickleValue* k = items_[i - 2].get();
            if (k != nullptr && k->kind_ == Kind::kString && k->text_ == key) {
                return items_[i - 1].get();
            }
        }
        return nullptr;
    }
    [[nodiscard]] std::int64_t int_at(std::string_view key,
                                      std::int64_t fallback = 0) const noexcept {
        const PickleValue* v = find(key);
        return v != nullptr ? v->as_int(fallback) : fallback;
    }
    [[nodiscard]] std::string_view string_at(std::string_view key) const noexcept {
        const PickleValue* v = find(key);
        return v != nullptr ? v->as_string() : std::string_view();
    }

private:
    friend class SafePickleReader;

    Kind kind_;
    std::int64_t memo_slot_ = -1;
    std::int64_t int_ = 0;
    double float_ = 0;
    std::string text_;
    std::vector<PickleRef> items_;
};

}  // namespace gpudiag::detail
