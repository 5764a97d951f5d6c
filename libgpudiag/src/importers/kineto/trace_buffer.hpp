// SPDX-License-Identifier: Apache-2.0
// TraceBuffer: a whole trace file in memory, decompressed when it was gzip, with the zero padding
// simdjson needs after the last byte.
#pragma once

#include <gpudiag/status.hpp>

#include "importers/byte_stream.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace gpudiag::detail {

class TraceBuffer {
public:
    /// Zero bytes kept after the content (at least simdjson::SIMDJSON_PADDING).
    static constexpr std::size_t kPadding = 64;
    /// The JSON parser indexes a document with 32-bit offsets; larger inputs are refused.
    static constexpr std::uint64_t kMaxContentBytes = 0xFFFFFFFFull - kPadding;

    TraceBuffer() = default;
    /// Allocates `capacity` content bytes plus padding, zeroed. Throws std::bad_alloc.
    explicit TraceBuffer(std::size_t capacity);

    [[nodiscard]] char* data() noexcept { return data_.get(); }
    [[nodiscard]] const char* data() const noexcept { return data_.get(); }
    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
    [[nodiscard]] std::string_view view() const noexcept { return {data_.get(), size_}; }
    /// Sets the content size (<= capacity) and re-zeroes the padding after it.
    void resize(std::size_t size) noexcept;
    /// Grows the capacity, keeping the content. Throws std::bad_alloc.
    void reserve(std::size_t capacity);

private:
    std::unique_ptr<char[]> data_;
    std::size_t size_ = 0;
    std::size_t capacity_ = 0;
};

/// Reads `path` into memory, inflating gzip (single or multi-member, any size up to `max_bytes`
/// and the parser's limit). `progress(done, total)` is called now and then with compressed bytes
/// consumed. Errors: kNotFound, kIoError, kCorruptData (bad gzip; the message says how far it
/// got), kUnsupported (more than `max_bytes`, or kMaxContentBytes, once inflated: refused before
/// that much is allocated). A gzip stream cut short yields the bytes inflated so far and sets
/// `*truncated`.
Result<TraceBuffer> load_trace_file(
    const std::string& path, bool* truncated,
    const std::function<void(std::uint64_t, std::uint64_t)>& progress,
    std::uint64_t max_bytes = TraceBuffer::kMaxContentBytes);

/// The gzip file at `path` inflated whole with libdeflate (about twice zlib's speed), when it is
/// one gzip member of at most `limit` bytes inflated; nullopt when it is not (the caller then
/// streams it through zlib) or cannot be read this way. Throws std::bad_alloc.
std::optional<TraceBuffer> inflate_small_gzip(const std::string& path, std::size_t limit);

/// Reads all of `in` (already inflated) into memory; `*truncated` when the stream broke off.
/// Errors: those of the stream, kUnsupported (more than `max_bytes` or kMaxContentBytes).
Result<TraceBuffer> load_trace_stream(ByteStream& in, bool* truncated,
                                      std::uint64_t max_bytes = TraceBuffer::kMaxContentBytes);

/// Inflates an in-memory gzip image (used by load_trace_file and by tests). Same errors.
Result<TraceBuffer> inflate_gzip(const unsigned char* in, std::size_t in_size, bool* truncated,
                                 std::uint64_t max_bytes = TraceBuffer::kMaxContentBytes);

}  // namespace gpudiag::detail
