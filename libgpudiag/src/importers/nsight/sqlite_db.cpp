// SPDX-License-Identifier: Apache-2.0
#include "importers/nsight/sqlite_db.hpp"

#include <sqlite3.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace gpudiag::detail {
namespace {

// A file name as an SQLite URI path: characters that mean something in a URI are escaped.
std::string uri_of(const std::string& path) {
    static const char* const kHex = "0123456789ABCDEF";
    std::string uri = "file:";
    for (unsigned char c : path) {
        if (c == '%' || c == '?' || c == '#' || c < 0x21 || c >= 0x7F) {
            uri += '%';
            uri += kHex[c >> 4];
            uri += kHex[c & 15];
        } else {
            uri += static_cast<char>(c);
        }
    }
    return uri + "?immutable=1";
}

}  // namespace

SqliteStatement::~SqliteStatement() {
    sqlite3_finalize(stmt_);
}

SqliteStatement& SqliteStatement::operator=(SqliteStatement&& other) noexcept {
    if (this != &other) {
        sqlite3_finalize(stmt_);
        stmt_ = other.stmt_;
        other.stmt_ = nullptr;
        error_ = std::move(other.error_);
    }
    return *this;
}

bool SqliteStatement::step() noexcept {
    if (stmt_ == nullptr) return false;
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc != SQLITE_DONE) {
        try {
            error_ = sqlite3_errmsg(sqlite3_db_handle(stmt_));
        } catch (...) {
            error_.clear();
        }
        if (error_.empty()) error_ = "SQLite error";
    }
    return false;
}

void SqliteStatement::reset() noexcept {
    if (stmt_ != nullptr) sqlite3_reset(stmt_);
}

void SqliteStatement::bind_int(int index, std::int64_t value) noexcept {
    if (stmt_ != nullptr) sqlite3_bind_int64(stmt_, index, value);
}

std::int64_t SqliteStatement::int_at(int column) const noexcept {
    return sqlite3_column_int64(stmt_, column);
}

bool SqliteStatement::is_null(int column) const noexcept {
    return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

bool SqliteStatement::is_text(int column) const noexcept {
    return sqlite3_column_type(stmt_, column) == SQLITE_TEXT;
}

std::string_view SqliteStatement::text_at(int column) const noexcept {
    const unsigned char* text = sqlite3_column_text(stmt_, column);
    if (text == nullptr) return {};
    return {reinterpret_cast<const char*>(text),
            static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column))};
}

Result<std::unique_ptr<SqliteDb>> SqliteDb::open(const std::string& path) {
    {
        std::ifstream probe(path, std::ios::binary);
        if (!probe) {
            if (errno == ENOENT) return not_found(path + ": no such file");
            return io_error(path + ": cannot open (" + std::strerror(errno) + ")");
        }
    }
    sqlite3* db = nullptr;
    int rc =
        sqlite3_open_v2(uri_of(path).c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr);
    if (rc != SQLITE_OK) {
        std::string message = db != nullptr ? sqlite3_errmsg(db) : "cannot open";
        sqlite3_close(db);
        return io_error(path + ": cannot open as an SQLite database (" + message + ")");
    }
    std::unique_ptr<SqliteDb> out(new SqliteDb(db));
    GPUDIAG_RETURN_IF_ERROR(out->load_tables());
    return out;
}

Result<std::unique_ptr<SqliteDb>> SqliteDb::open_image(std::string_view bytes) {
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
        sqlite3_close(db);
        return resource_exhausted("cannot open an in-memory SQLite database");
    }
    std::unique_ptr<SqliteDb> out(new SqliteDb(db));
    auto* copy = static_cast<unsigned char*>(sqlite3_malloc64(bytes.size()));
    if (copy == nullptr && !bytes.empty())
        return resource_exhausted("out of memory for the database");
    if (!bytes.empty()) std::memcpy(copy, bytes.data(), bytes.size());
    int rc = sqlite3_deserialize(db, "main", copy, static_cast<sqlite3_int64>(bytes.size()),
                                 static_cast<sqlite3_int64>(bytes.size()),
                                 SQLITE_DESERIALIZE_FREEONCLOSE | SQLITE_DESERIALIZE_READONLY);
    if (rc != SQLITE_OK)
        return corrupt_data(std::string("not an SQLite database (") + sqlite3_errmsg(db) + ")");
    GPUDIAG_RETURN_IF_ERROR(out->load_tables());
    return out;
}

SqliteDb::~SqliteDb() {
    sqlite3_close(db_);
}

Result<SqliteStatement> SqliteDb::prepare(std::string_view sql) {
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
    if (rc != SQLITE_OK) {
        sqlite3_finalize(stmt);
        return corrupt_data(std::string("SQLite: ") + sqlite3_errmsg(db_));
    }
    return SqliteStatement(stmt);
}

Status SqliteDb::load_tables() {
    auto stmt = prepare("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')");
    if (!stmt)
        return corrupt_data("not a readable SQLite database (" + stmt.status().message() + ")");
    while (stmt->step()) tables_.emplace_back(stmt->text_at(0));
    if (!stmt->error().empty()) {
        return corrupt_data("not a readable SQLite database (" + stmt->error() + ")");
    }
    return Status::ok();
}

bool SqliteDb::has_table(std::string_view name) const noexcept {
    for (const auto& t : tables_) {
        if (t == name) return true;
    }
    return false;
}

std::vector<std::string> SqliteDb::columns(std::string_view table) {
    std::vector<std::string> out;
    if (!has_table(table)) return out;
    std::string literal = "'";
    for (char c : table) {
        if (c == '\'') literal += '\'';
        literal += c;
    }
    auto stmt = prepare("SELECT name FROM pragma_table_info(" + literal + "')");
    if (!stmt) return out;
    while (stmt->step()) out.emplace_back(stmt->text_at(0));
    return out;
}

std::string sql_identifier(std::string_view name) {
    std::string out = "\"";
    for (char c : name) {
        if (c == '"') out += '"';
        out += c;
    }
    return out + "\"";
}

}  // namespace gpudiag::detail
