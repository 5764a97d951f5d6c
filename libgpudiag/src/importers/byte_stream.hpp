// SPDX-License-Identifier: Apache-2.0
// ByteStream: a forward-only source of bytes for importers that read their input in pieces (a
// file, gzip inflated on the fly over another stream, bytes in memory, a member of an archive),
// so that memory does not grow with the input.
#pragma once

#include <gpudiag/status.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace gpudiag::detail {

class ByteStream {
public:
    virtual ~ByteStream() = default;
    /// Reads up to `n` bytes into `dst`; 0 means the end. Errors: kIoError, kCorruptData (a
    /// compressed stream that is not valid from its first byte).
    virtual Result<std::size_t> read(char* dst, std::size_t n) = 0;
    /// Bytes of the underlying file consumed so far, and its size when known (0 otherwise): what
    /// a progress bar shows.
    [[nodiscard]] virtual std::uint64_t consumed() const noexcept = 0;
    [[nodiscard]] virtual std::uint64_t total() const noexcept = 0;
    /// A compressed stream that ended (or broke) before its end: what was read stays valid.
    [[nodiscard]] virtual bool truncated() const noexcept { return false; }
    /// All of the content, when it already is in memory in one piece (readers may then take
    /// views instead of copies); empty otherwise.
    [[nodiscard]] virtual std::string_view contiguous() const noexcept { return {}; }
};

/// The file's bytes as they are. Errors: kNotFound, kIoError.
Result<std::unique_ptr<ByteStream>> open_file_stream(const std::string& path);

/// `size` bytes at `data` (not copied: they must outlive the stream).
std::unique_ptr<ByteStream> memory_stream(const void* data, std::size_t size);

/// gzip (one member or several) inflated from `compressed` as it is read. A stream cut short
/// ends early with truncated() set; one that is damaged in the middle likewise, after the bytes
/// before the damage; one that is not gzip from the start fails with kCorruptData.
std::unique_ptr<ByteStream> gzip_stream(std::unique_ptr<ByteStream> compressed);

/// `in` read ahead on a thread of its own, in pieces of a MiB (a few at most in memory), so that
/// what producing the bytes costs (inflating gzip) overlaps with what the caller does with them.
/// The same bytes, errors and truncated() as `in`, in the same order; without a thread to be
/// had, `in` itself.
std::unique_ptr<ByteStream> read_ahead_stream(std::unique_ptr<ByteStream> in);

/// Reads `in` without owning it (it must outlive the result).
std::unique_ptr<ByteStream> borrowed_stream(ByteStream& in);

/// A stream that yields `prefix` first, then what `rest` yields (bytes peeked at go back).
std::unique_ptr<ByteStream> prefixed_stream(std::string prefix, std::unique_ptr<ByteStream> rest);

/// `in`'s content: inflated when it starts with the gzip magic, as it is otherwise.
Result<std::unique_ptr<ByteStream>> content_of(std::unique_ptr<ByteStream> in);

/// The file's content: inflated when it starts with the gzip magic, as it is otherwise.
Result<std::unique_ptr<ByteStream>> open_content_stream(const std::string& path);

/// Reads until `n` bytes or the end; returns the count. Errors: those of read().
Result<std::size_t> read_fully(ByteStream& in, char* dst, std::size_t n);

}  // namespace gpudiag::detail
