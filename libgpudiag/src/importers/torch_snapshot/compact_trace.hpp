// SPDX-License-Identifier: Apache-2.0
// CompactTrace: a snapshot's trace entries kept between the importer's two passes, about 12 bytes
// an entry instead of 64: each field is a varint, times and addresses as differences from the
// entry before (zigzag, so going back costs as little as going forward). Appending and reading
// back cost a few nanoseconds an entry, far less than decoding the pickle again.
#pragma once

#include "importers/torch_snapshot/torch_snapshot.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace gpudiag::detail {

class CompactTrace {
    // What the next entry is told relative to.
    struct Last {
        std::uint64_t time_us = 0;
        std::uint64_t address = 0;
        std::uint16_t device = 0;
    };
    // Entries go into chunks of this size (never across two): growing never copies what is
    // kept, and memory is what the entries take plus at most one chunk.
    static constexpr std::size_t kChunkBytes = std::size_t{1} << 20;
    static constexpr std::size_t kMaxEntryBytes = 1 + 6 * 10 + 1;

public:
    /// Appends `e`; false (nothing appended) once `max_bytes` would be passed.
    bool append(const TraceEntry& e, std::size_t max_bytes);
    /// Memory the kept entries take.
    [[nodiscard]] std::size_t bytes() const noexcept { return chunks_.size() * kChunkBytes; }
    [[nodiscard]] std::uint64_t entries() const noexcept { return entries_; }
    void clear() noexcept;

    /// Reads the entries back in order.
    class Reader {
    public:
        explicit Reader(const CompactTrace& trace) noexcept : trace_(trace) {}
        /// The next entry; false at the end.
        bool next(TraceEntry& e) noexcept;

    private:
        std::uint64_t varint() noexcept;
        const CompactTrace& trace_;
        std::size_t chunk_ = 0;
        const unsigned char* at_ = nullptr;
        const unsigned char* end_ = nullptr;
        Last last_;
    };

private:
    struct Chunk {
        std::unique_ptr<unsigned char[]> bytes;
        std::size_t used = 0;
    };
    std::vector<Chunk> chunks_;
    std::uint64_t entries_ = 0;
    Last last_;
};

}  // namespace gpudiag::detail
