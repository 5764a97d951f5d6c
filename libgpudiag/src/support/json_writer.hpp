// SPDX-License-Identifier: Apache-2.0
// A small streaming JSON writer (reports, Chrome-trace export). Escapes per RFC 8259; writes
// non-finite numbers as null because JSON has no NaN.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

namespace gpudiag::detail {

class JsonWriter {
public:
    explicit JsonWriter(std::string& out, bool pretty = true) : out_(out), pretty_(pretty) {}

    JsonWriter& begin_object() {
        open('{');
        return *this;
    }
    JsonWriter& end_object() {
        close('}');
        return *this;
    }
    JsonWriter& begin_array() {
        open('[');
        return *this;
    }
    JsonWriter& end_array() {
        close(']');
        return *this;
    }

    JsonWriter& key(std::string_view k) {
        separator();
        string_literal(k);
        out_ += pretty_ ? ": " : ":";
        after_key_ = true;
        return *this;
    }
    JsonWriter& value(std::string_view v) {
        separator();
        string_literal(v);
        return *this;
    }
    JsonWriter& value(const char* v) { return value(std::string_view(v ? v : "")); }
    JsonWriter& value(const std::string& v) { return value(std::string_view(v)); }
    JsonWriter& value(bool v) {
        separator();
        out_ += v ? "true" : "false";
        return *this;
    }
    JsonWriter& null() {
        separator();
        out_ += "null";
        return *this;
    }
    JsonWriter& value(double v) {
        separator();
        if (!std::isfinite(v)) {
            out_ += "null";
        } else if (v == std::floor(v) && std::fabs(v) < 9.0e15) {
            fmt::format_to(std::back_inserter(out_), "{}", static_cast<long long>(v));
        } else {
            // fmt writes the shortest text that reads back as exactly v.
            fmt::format_to(std::back_inserter(out_), "{}", v);
        }
        return *this;
    }
    JsonWriter& value(std::int64_t v) {
        separator();
        fmt::format_to(std::back_inserter(out_), "{}", v);
        return *this;
    }
    JsonWriter& value(std::uint64_t v) {
        separator();
        fmt::format_to(std::back_inserter(out_), "{}", v);
        return *this;
    }
    JsonWriter& value(int v) { return value(static_cast<std::int64_t>(v)); }
    JsonWriter& value(unsigned v) { return value(static_cast<std::uint64_t>(v)); }

    template <typename T>
    JsonWriter& field(std::string_view k, const T& v) {
        key(k);
        return value(v);
    }

private:
    void open(char c) {
        separator();
        out_ += c;
        first_.push_back(true);
    }
    void close(char c) {
        bool empty = first_.empty() ? true : first_.back();
        if (!first_.empty()) first_.pop_back();
        if (!empty) newline();
        out_ += c;
    }
    void separator() {
        if (after_key_) {
            after_key_ = false;
            return;
        }
        if (first_.empty()) return;
        if (!first_.back()) out_ += ',';
        first_.back() = false;
        newline();
    }
    void newline() {
        if (!pretty_) return;
        out_ += '\n';
        out_.append(first_.size() * 2, ' ');
    }
    // Runs of characters that need no escape are appended whole.
    void string_literal(std::string_view s) {
        out_ += '"';
        std::size_t plain = 0;  // the first character not appended yet
        for (std::size_t i = 0; i < s.size(); ++i) {
            const auto ch = static_cast<unsigned char>(s[i]);
            if (ch >= 0x20 && ch != '"' && ch != '\\') continue;
            out_.append(s.data() + plain, i - plain);
            plain = i + 1;
            escape(ch);
        }
        out_.append(s.data() + plain, s.size() - plain);
        out_ += '"';
    }
    void escape(unsigned char ch) {
        switch (ch) {
            case '"': out_ += "\\\""; break;
            case '\\': out_ += "\\\\"; break;
            case '\n': out_ += "\\n"; break;
            case '\r': out_ += "\\r"; break;
            case '\t': out_ += "\\t"; break;
            case '\b': out_ += "\\b"; break;
            case '\f': out_ += "\\f"; break;
            default: fmt::format_to(std::back_inserter(out_), "\\u{:04x}", ch);
        }
    }

    std::string& out_;
    bool pretty_;
    bool after_key_ = false;
    std::vector<bool> first_;
};

}  // namespace gpudiag::detail
