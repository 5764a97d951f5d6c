// SPDX-License-Identifier: Apache-2.0
// NsightReader: an Nsight Systems report exported as SQLite (nsys export --type sqlite) -> Events.
//
// Reads CUDA kernels, memcpys (with the memory kinds of both ends), memsets, synchronizations,
// runtime and driver API calls, NVTX ranges and marks, OS runtime calls, and the GPUs, process
// and session of the report. The export's layout changed across versions (2.x to 3.x): tables
// and columns are looked up in the file, never assumed; names go through its StringIds table;
// enumerations through its ENUM_* tables where it has them. Each table is read in start order and
// the tables are merged as they are read, so memory does not grow with the report.
#pragma once

#include "importers/nsight/sqlite_db.hpp"

#include <gpudiag/sink.hpp>
#include <gpudiag/status.hpp>
#include <gpudiag/string_table.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace gpudiag::detail {

class NsightReader {
public:
    /// Errors: kNotFound, kIoError, kCorruptData (not a database), kUnsupported (a database that
    /// is not an Nsight Systems export).
    static Result<std::unique_ptr<NsightReader>> open(const std::string& path);
    /// The same over a database image in memory (fuzzing, archive members). `name` is for messages.
    static Result<std::unique_ptr<NsightReader>> open_image(std::string_view bytes,
                                                            const std::string& name);

    /// Streams every event to `sink` in start order: begin(), consume()..., end().
    /// Errors: kCorruptData when the database breaks while being read (the events before stay
    /// delivered, end() reports the report truncated).
    Status read(EventSink& sink, StringTable& strings);

    void set_progress(std::function<void(std::uint64_t, std::uint64_t)> progress) {
        progress_ = std::move(progress);
    }

private:
    NsightReader(std::unique_ptr<SqliteDb> db, std::string name)
        : db_(std::move(db)), name_(std::move(name)) {}

    std::unique_ptr<SqliteDb> db_;
    std::string name_;
    std::function<void(std::uint64_t, std::uint64_t)> progress_;
};

/// True when the tables of `db` are those of an Nsight Systems export.
bool is_nsight_export(const SqliteDb& db) noexcept;

}  // namespace gpudiag::detail
