// SPDX-License-Identifier: Apache-2.0
#include "importers/archive.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

namespace gpudiag::detail {
namespace {

constexpr std::size_t kBlock = 512;

// A NUL- or space-terminated octal field, or GNU's base-256 form for large sizes.
bool parse_number(std::string_view field, std::uint64_t& out) noexcept {
    if (!field.empty() && (static_cast<unsigned char>(field[0]) & 0x80) != 0) {
        std::uint64_t v = static_cast<unsigned char>(field[0]) & 0x7F;
        for (std::size_t i = 1; i < field.size(); ++i) {
            if (v >> 56) return false;
            v = (v << 8) | static_cast<unsigned char>(field[i]);
        }
        out = v;
        return true;
    }
    std::uint64_t v = 0;
    std::size_t i = 0;
    while (i < field.size() && field[i] == ' ') ++i;
    std::size_t digits = 0;
    for (; i < field.size() && field[i] >= '0' && field[i] <= '7'; ++i, ++digits) {
        if (v >> 60) return false;
        v = v * 8 + static_cast<std::uint64_t>(field[i] - '0');
    }
    for (; i < field.size(); ++i) {
        if (field[i] != ' ' && field[i] != '\0') return false;
    }
    out = v;
    return digits > 0;
}

std::string_view c_string(std::string_view field) noexcept {
    std::size_t n = field.find('\0');
    return n == std::string_view::npos ? field : field.substr(0, n);
}

bool all_zero(std::string_view block) noexcept {
    return std::all_of(block.begin(), block.end(), [](char c) { return c == '\0'; });
}

// The "path" record of a pax extended header ("<len> path=<name>\n" records).
std::string pax_path(std::string_view records) {
    std::size_t at = 0;
    while (at < records.size()) {
        std::size_t space = records.find(' ', at);
        if (space == std::string_view::npos) break;
        std::uint64_t len = 0;
        for (std::size_t i = at; i < space; ++i) {
            if (records[i] < '0' || records[i] > '9') return {};
            len = len * 10 + static_cast<std::uint64_t>(records[i] - '0');
        }
        if (len == 0 || at + len > records.size()) break;
        std::string_view record = records.substr(space + 1, at + len - space - 1);
        if (!record.empty() && record.back() == '\n') record.remove_suffix(1);
        if (record.substr(0, 5) == "path=") return std::string(record.substr(5));
        at += len;
    }
    return {};
}

}  // namespace

bool is_tar_header(std::string_view block) noexcept {
    if (block.size() < kBlock || all_zero(block.substr(0, kBlock))) return false;
    if (block.substr(257, 5) == "ustar") return true;
    std::uint64_t stored = 0;
    if (!parse_number(block.substr(148, 8), stored)) return false;
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < kBlock; ++i) {
        sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(block[i]);
    }
    return sum == stored;
}

Result<bool> is_tar_archive(const std::string& path) {
    auto in = open_content_stream(path);
    if (!in) return in.status();
    char block[kBlock];
    auto got = read_fully(**in, block, kBlock);
    if (!got) return false;  // unreadable as gzip, say: not an archive we can read
    return *got == kBlock && is_tar_header({block, kBlock});
}

// The current member as a stream: at most its size, then the end.
class TarReader::Member final : public ByteStream {
public:
    explicit Member(TarReader& reader) : reader_(reader) {}
    Result<std::size_t> read(char* dst, std::size_t n) override {
        std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(n, reader_.left_));
        if (want == 0) return std::size_t{0};
        auto got = reader_.archive_->read(dst, want);
        if (!got) return got.status();
        if (*got == 0) {
            truncated_ = true;  // the archive ends inside the member
            reader_.left_ = 0;
            return std::size_t{0};
        }
        reader_.left_ -= *got;
        return *got;
    }
    [[nodiscard]] std::uint64_t consumed() const noexcept override {
        return reader_.size_ - reader_.left_;
    }
    [[nodiscard]] std::uint64_t total() const noexcept override { return reader_.size_; }
    [[nodiscard]] bool truncated() const noexcept override {
        return truncated_ || reader_.archive_->truncated();
    }

private:
    TarReader& reader_;
    bool truncated_ = false;
};

TarReader::TarReader(std::unique_ptr<ByteStream> archive)
    : archive_(std::move(archive)), member_(std::make_unique<Member>(*this)) {}
TarReader::~TarReader() = default;

ByteStream& TarReader::member() noexcept {
    return *member_;
}

Status TarReader::skip_rest() {
    std::vector<char> scratch(64 * 1024);
    std::uint64_t left = left_ + padding_;
    while (left > 0) {
        auto got =
            archive_->read(scratch.data(),
                           static_cast<std::size_t>(std::min<std::uint64_t>(left, scratch.size())));
        if (!got) return got.status();
        if (*got == 0) break;
        left -= *got;
    }
    left_ = padding_ = 0;
    return Status::ok();
}

// Reads one header; false at the end. Long names (GNU 'L', pax 'x') go to `long_name` and the
// caller reads the next header for the member itself.
Result<bool> TarReader::read_header(std::string& long_name) {
    char block[kBlock];
    auto got = read_fully(*archive_, block, kBlock);
    if (!got) return got.status();
    if (*got < kBlock || all_zero({block, kBlock})) return false;  // end-of-archive blocks
    const std::string_view h(block, kBlock);
    if (!is_tar_header(h)) return corrupt_data("damaged tar header (a broken or cut archive)");
    std::uint64_t size = 0;
    if (!parse_number(h.substr(124, 12), size)) return corrupt_data("damaged tar header (size)");
    const char type = h[156];
    std::string name = long_name.empty() ? std::string(c_string(h.substr(0, 100))) : long_name;
    if (long_name.empty() && h.substr(257, 5) == "ustar") {
        std::string_view prefix = c_string(h.substr(345, 155));
        if (!prefix.empty()) {
            std::string full(prefix);  // (not prefix + "/" + name: GCC 12 warns falsely on it)
            full.push_back('/');
            full.append(name);
            name.swap(full);
        }
    }
    name_ = name;
    size_ = left_ = size;
    padding_ = (kBlock - size % kBlock) % kBlock;
    if (type == 'L' || type == 'x') {
        if (size > (1u << 20)) return corrupt_data("tar extended header too large");
        std::string text(static_cast<std::size_t>(size), '\0');
        auto read = read_fully(member(), text.data(), text.size());
        if (!read) return read.status();
        GPUDIAG_RETURN_IF_ERROR(skip_rest());
        long_name = type == 'L' ? std::string(c_string(text)) : pax_path(text);
        if (long_name.empty()) long_name.push_back('?');  // a pax header without a path
        return read_header(long_name);
    }
    long_name.clear();
    if (type != '0' && type != '\0' && type != '7') {  // directories, links, devices
        GPUDIAG_RETURN_IF_ERROR(skip_rest());
        return read_header(long_name);
    }
    return true;
}

Result<bool> TarReader::next() {
    GPUDIAG_RETURN_IF_ERROR(skip_rest());
    std::string long_name;
    return read_header(long_name);
}

namespace {

// A member's content that keeps its archive open.
class OwnedMember final : public ByteStream {
public:
    explicit OwnedMember(std::unique_ptr<TarReader> reader) : reader_(std::move(reader)) {}
    Result<std::size_t> read(char* dst, std::size_t n) override {
        return reader_->member().read(dst, n);
    }
    [[nodiscard]] std::uint64_t consumed() const noexcept override {
        return reader_->member().consumed();
    }
    [[nodiscard]] std::uint64_t total() const noexcept override {
        return reader_->member().total();
    }
    [[nodiscard]] bool truncated() const noexcept override { return reader_->member().truncated(); }

private:
    std::unique_ptr<TarReader> reader_;
};

}  // namespace

Result<std::unique_ptr<ByteStream>> open_archive_member(const std::string& path,
                                                        const std::string& member) {
    auto in = open_content_stream(path);
    if (!in) return in.status();
    auto reader = std::make_unique<TarReader>(std::move(*in));
    for (;;) {
        auto more = reader->next();
        if (!more) return Status(more.status().code(), path + ": " + more.status().message());
        if (!*more) return not_found(path + ": no member " + member);
        if (reader->name() == member) break;
    }
    // A compressed member (rank0.json.gz in a .tar) is inflated as it is read.
    return content_of(std::make_unique<OwnedMember>(std::move(reader)));
}

}  // namespace gpudiag::detail
