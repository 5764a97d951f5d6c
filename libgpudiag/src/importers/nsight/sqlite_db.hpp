// SPDX-License-Identifier: Apache-2.0
// A thin RAII layer over the SQLite C library for reading Nsight Systems exports: a read-only
// connection, prepared statements, and what the schema holds (tables, their columns), so the
// importer asks the file instead of assuming a version's layout.
#pragma once

#include <gpudiag/status.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct sqlite3;
struct sqlite3_stmt;

namespace gpudiag::detail {

class SqliteStatement {
public:
    SqliteStatement() = default;
    explicit SqliteStatement(sqlite3_stmt* stmt) noexcept : stmt_(stmt) {}
    ~SqliteStatement();
    SqliteStatement(SqliteStatement&& other) noexcept : stmt_(other.stmt_) {
        other.stmt_ = nullptr;
    }
    SqliteStatement& operator=(SqliteStatement&& other) noexcept;
    SqliteStatement(const SqliteStatement&) = delete;
    SqliteStatement& operator=(const SqliteStatement&) = delete;

    /// Advances to the next row: true with a row, false at the end; a failure sets error().
    bool step() noexcept;
    void reset() noexcept;
    void bind_int(int index, std::int64_t value) noexcept;  ///< 1-based, as SQLite counts

    [[nodiscard]] std::int64_t int_at(int column) const noexcept;
    [[nodiscard]] bool is_null(int column) const noexcept;
    [[nodiscard]] bool is_text(int column) const noexcept;
    /// The column's bytes as stored (not necessarily valid UTF-8); valid until the next step().
    [[nodiscard]] std::string_view text_at(int column) const noexcept;
    /// The message of the last failed step, empty when none failed.
    [[nodiscard]] const std::string& error() const noexcept { return error_; }

private:
    sqlite3_stmt* stmt_ = nullptr;
    std::string error_;
};

class SqliteDb {
public:
    /// Opens `path` read-only, taking the file as immutable (no locks, no journal: a report is
    /// never written while it is read). Errors: kNotFound, kIoError, kCorruptData (not a database).
    static Result<std::unique_ptr<SqliteDb>> open(const std::string& path);
    /// Opens a copy of a database image held in memory (`bytes`), read-only.
    static Result<std::unique_ptr<SqliteDb>> open_image(std::string_view bytes);
    ~SqliteDb();
    SqliteDb(const SqliteDb&) = delete;
    SqliteDb& operator=(const SqliteDb&) = delete;

    /// Errors: kCorruptData with SQLite's message (a damaged file shows here).
    Result<SqliteStatement> prepare(std::string_view sql);

    /// The tables and views, as sqlite_master lists them.
    [[nodiscard]] const std::vector<std::string>& tables() const noexcept { return tables_; }
    [[nodiscard]] bool has_table(std::string_view name) const noexcept;
    /// The columns of `table` (PRAGMA table_info), empty when it does not exist.
    std::vector<std::string> columns(std::string_view table);

private:
    explicit SqliteDb(sqlite3* db) noexcept : db_(db) {}
    Status load_tables();

    sqlite3* db_ = nullptr;
    std::vector<std::string> tables_;
};

/// `name` quoted as an SQL identifier ("CUPTI_ACTIVITY_KIND_KERNEL").
std::string sql_identifier(std::string_view name);

}  // namespace gpudiag::detail
