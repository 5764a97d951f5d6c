// SPDX-License-Identifier: Apache-2.0
// Bounded intern table. Strings live in fixed-size arena blocks so views never move; a mutex
// serialises writers and readers (interning happens off the application's hot path: in the
// decoder thread, importers, and once per distinct NVTX name).
#include <gpudiag/string_table.hpp>

#include <algorithm>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace gpudiag {

struct StringTable::Impl {
    static constexpr std::size_t kBlockBytes = 64 * 1024;

    Impl(std::size_t cap, std::size_t max) : cap_bytes(cap), max_strings(max) {}

    // Copies `text` into the arena and returns a stable view of it.
    std::string_view store(std::string_view text) {
        if (text.size() > kBlockBytes / 4) {  // big strings get a block of their own
            big.emplace_back(text);
            return big.back();
        }
        if (blocks.empty() || block_used + text.size() > kBlockBytes) {
            blocks.emplace_back(new char[kBlockBytes]);
            block_used = 0;
        }
        char* dst = blocks.back().get() + block_used;
        if (!text.empty()) std::memcpy(dst, text.data(), text.size());
        block_used += text.size();
        return {dst, text.size()};
    }

    mutable std::mutex mutex;
    std::size_t cap_bytes;
    std::size_t max_strings;
    std::size_t used_bytes = 0;
    std::uint64_t overflowed = 0;
    std::vector<std::unique_ptr<char[]>> blocks;
    std::size_t block_used = 0;
    std::deque<std::string> big;
    std::vector<std::string_view> by_id{std::string_view(), std::string_view("<strings dropped>")};
    std::unordered_map<std::string_view, StringId> ids;
};

StringTable::StringTable(std::size_t cap_bytes, std::size_t max_strings)
    : impl_(std::make_unique<Impl>(cap_bytes, std::min<std::size_t>(max_strings, 0xFFFFFFF0u))) {}
StringTable::~StringTable() = default;

StringId StringTable::intern(std::string_view text) noexcept {
    if (text.empty()) return kNoString;
    try {
        std::lock_guard<std::mutex> lock(impl_->mutex);
        if (auto it = impl_->ids.find(text); it != impl_->ids.end()) return it->second;
        if (impl_->used_bytes + text.size() > impl_->cap_bytes ||
            impl_->by_id.size() >= impl_->max_strings) {
            ++impl_->overflowed;
            return kOverflowString;
        }
        std::string_view stored = impl_->store(text);
        auto id = static_cast<StringId>(impl_->by_id.size());
        impl_->by_id.push_back(stored);
        impl_->ids.emplace(stored, id);
        impl_->used_bytes += text.size();
        return id;
    } catch (...) {
        return kOverflowString;
    }
}

StringId StringTable::find(std::string_view text) const noexcept {
    if (text.empty()) return kNoString;
    try {
        std::lock_guard<std::mutex> lock(impl_->mutex);
        auto it = impl_->ids.find(text);
        return it == impl_->ids.end() ? kNoString : it->second;
    } catch (...) {
        return kNoString;
    }
}

bool StringTable::bind(StringId id, std::string_view text) noexcept {
    if (id <= kOverflowString) return id == kNoString ? text.empty() : true;
    try {
        std::lock_guard<std::mutex> lock(impl_->mutex);
        if (id < impl_->by_id.size()) {
            return impl_->by_id[id] == text;
        }
        if (id > impl_->by_id.size() + (std::size_t{1} << 24)) return false;  // absurd gap
        if (impl_->used_bytes + text.size() > impl_->cap_bytes) {
            ++impl_->overflowed;
            return false;
        }
        std::string_view stored = impl_->store(text);
        impl_->by_id.resize(id + 1, std::string_view());
        impl_->by_id[id] = stored;
        impl_->ids.emplace(stored, id);
        impl_->used_bytes += text.size();
        return true;
    } catch (...) {
        return false;
    }
}

std::string_view StringTable::lookup(StringId id) const noexcept {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    if (id >= impl_->by_id.size()) return {};
    return impl_->by_id[id];
}

std::size_t StringTable::size() const noexcept {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    return impl_->by_id.size();
}

std::size_t StringTable::bytes() const noexcept {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    return impl_->used_bytes;
}

std::uint64_t StringTable::overflowed() const noexcept {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    return impl_->overflowed;
}

}  // namespace gpudiag
