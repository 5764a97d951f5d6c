// SPDX-License-Identifier: Apache-2.0
// Interned strings (kernel names, call sites, range names) shared by producers and analyses.
#pragma once

#include <gpudiag/event.hpp>
#include <gpudiag/export.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

namespace gpudiag {

/// A bounded, thread-safe intern table. Ids are dense and start at 1 (0 is the empty string).
/// Views returned by lookup() stay valid for the table's lifetime. When the byte cap is reached,
/// new strings map to the reserved id kOverflowString ("<strings dropped>") and are counted, so a
/// service left on for days cannot grow without bound.
class GPUDIAG_API StringTable {
public:
    static constexpr StringId kOverflowString = 1;
    static constexpr std::size_t kDefaultCapBytes = std::size_t{64} << 20;

    /// At most `cap_bytes` of text and `max_strings` ids (each id also costs some 70 bytes of
    /// index, so a count bound matters for many short names).
    explicit StringTable(std::size_t cap_bytes = kDefaultCapBytes,
                         std::size_t max_strings = std::size_t{0xFFFFFFF0u});
    ~StringTable();
    StringTable(const StringTable&) = delete;
    StringTable& operator=(const StringTable&) = delete;

    /// Returns the id of `text`, adding it when new. Thread-safety: safe. Callback-safe: no
    /// (takes a lock and may allocate). Errors: none; overflow maps to kOverflowString.
    StringId intern(std::string_view text) noexcept;

    /// The id of `text` when it is interned already, else kNoString (nothing is added).
    [[nodiscard]] StringId find(std::string_view text) const noexcept;

    /// Adds `text` under a fixed id (used by readers of recordings, whose ids were assigned by the
    /// writer). Returns false when the id is already bound to a different string or out of range.
    bool bind(StringId id, std::string_view text) noexcept;

    /// The text of `id`; "" for unknown ids. Thread-safety: safe.
    [[nodiscard]] std::string_view lookup(StringId id) const noexcept;

    /// Number of ids handed out, including the two reserved ones.
    [[nodiscard]] std::size_t size() const noexcept;
    [[nodiscard]] std::size_t bytes() const noexcept;
    /// Strings refused because of the cap.
    [[nodiscard]] std::uint64_t overflowed() const noexcept;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace gpudiag
