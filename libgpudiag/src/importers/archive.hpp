// SPDX-License-Identifier: Apache-2.0
// Tar archives (plain, or gzip-compressed: .tar.gz, .tgz) read member by member as streams, the
// way jobs ship their traces (one file per rank). ustar, GNU long names and pax path records are
// understood; members other than regular files are skipped.
#pragma once

#include "importers/byte_stream.hpp"

#include <gpudiag/status.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace gpudiag::detail {

/// True when `block` (at least 512 bytes) is a tar header: "ustar" magic, or a valid checksum.
bool is_tar_header(std::string_view block) noexcept;

/// True when the file (inflated when gzip) starts with a tar header. Errors: those of opening it.
Result<bool> is_tar_archive(const std::string& path);

class TarReader {
public:
    explicit TarReader(std::unique_ptr<ByteStream> archive);
    ~TarReader();
    TarReader(const TarReader&) = delete;
    TarReader& operator=(const TarReader&) = delete;

    /// Moves to the next regular file; false at the end of the archive. Errors: kCorruptData
    /// (a damaged header), kIoError.
    Result<bool> next();
    [[nodiscard]] const std::string& name() const noexcept { return name_; }
    [[nodiscard]] std::uint64_t size() const noexcept { return size_; }
    /// The current member's bytes, valid until next().
    ByteStream& member() noexcept;

private:
    class Member;
    Status skip_rest();
    Result<bool> read_header(std::string& long_name);

    std::unique_ptr<ByteStream> archive_;
    std::unique_ptr<Member> member_;
    std::string name_;
    std::uint64_t size_ = 0;
    std::uint64_t left_ = 0;     // bytes of the member not yet read
    std::uint64_t padding_ = 0;  // to the next 512-byte block after it
};

/// The member `member` of the archive at `path`, as a stream of its (inflated, when gzip) content
/// that owns the archive's reader. Errors: kNotFound (no such member), those of the archive.
Result<std::unique_ptr<ByteStream>> open_archive_member(const std::string& path,
                                                        const std::string& member);

}  // namespace gpudiag::detail
