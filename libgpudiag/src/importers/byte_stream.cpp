// SPDX-License-Identifier: Apache-2.0
#include "importers/byte_stream.hpp"

#include "support/quiet_thread.hpp"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace gpudiag::detail {
namespace {

class FileStream final : public ByteStream {
public:
    FileStream(std::FILE* f, std::string path, std::uint64_t size)
        : file_(f), path_(std::move(path)), size_(size) {}
    ~FileStream() override { std::fclose(file_); }
    FileStream(const FileStream&) = delete;
    FileStream& operator=(const FileStream&) = delete;

    Result<std::size_t> read(char* dst, std::size_t n) override {
        std::size_t got = std::fread(dst, 1, n, file_);
        if (got == 0 && std::ferror(file_)) {
            return io_error(path_ + ": read failed (" + std::strerror(errno) + ")");
        }
        consumed_ += got;
        return got;
    }
    [[nodiscard]] std::uint64_t consumed() const noexcept override { return consumed_; }
    [[nodiscard]] std::uint64_t total() const noexcept override { return size_; }

private:
    std::FILE* file_;
    std::string path_;
    std::uint64_t size_;
    std::uint64_t consumed_ = 0;
};

class MemoryStream final : public ByteStream {
public:
    MemoryStream(const void* data, std::size_t size)
        : data_(static_cast<const char*>(data)), size_(size) {}

    Result<std::size_t> read(char* dst, std::size_t n) override {
        std::size_t take = std::min(n, size_ - at_);
        if (take > 0) std::memcpy(dst, data_ + at_, take);
        at_ += take;
        return take;
    }
    [[nodiscard]] std::uint64_t consumed() const noexcept override { return at_; }
    [[nodiscard]] std::uint64_t total() const noexcept override { return size_; }
    [[nodiscard]] std::string_view contiguous() const noexcept override { return {data_, size_}; }

private:
    const char* data_;
    std::size_t size_;
    std::size_t at_ = 0;
};

// zlib's streaming inflate over every member, as the whole-buffer reader (kineto/trace_buffer)
// does: trailing zero bytes after the last member are tolerated, damage keeps what came before.
class GzipStream final : public ByteStream {
public:
    explicit GzipStream(std::unique_ptr<ByteStream> in) : in_(std::move(in)), buffer_(kInBytes) {}
    ~GzipStream() override {
        if (initialised_) inflateEnd(&zs_);
    }
    GzipStream(const GzipStream&) = delete;
    GzipStream& operator=(const GzipStream&) = delete;

    Result<std::size_t> read(char* dst, std::size_t n) override {
        if (!initialised_) {
            if (inflateInit2(&zs_, 15 + 16) != Z_OK)
                return internal_error("zlib inflateInit2 failed");
            initialised_ = true;
        }
        std::size_t produced = 0;
        while (produced < n && !done_) {
            if (zs_.avail_in == 0 && !input_ended_) {
                auto got = in_->read(reinterpret_cast<char*>(buffer_.data()), buffer_.size());
                if (!got) return got.status();
                if (*got == 0) input_ended_ = true;
                zs_.next_in = buffer_.data();
                zs_.avail_in = static_cast<uInt>(*got);
            }
            zs_.next_out = reinterpret_cast<unsigned char*>(dst + produced);
            zs_.avail_out = static_cast<uInt>(std::min<std::size_t>(n - produced, 1u << 30));
            const uInt before = zs_.avail_out;
            int rc = inflate(&zs_, Z_NO_FLUSH);
            produced += before - zs_.avail_out;
            total_out_ += before - zs_.avail_out;
            if (rc == Z_STREAM_END) {
                if (!next_member()) done_ = true;
                continue;
            }
            if (rc == Z_OK) continue;
            if (rc == Z_BUF_ERROR && zs_.avail_out == 0) break;
            if (rc == Z_BUF_ERROR && input_ended_ && zs_.avail_in == 0) {
                truncated_ = true;  // the file ends inside the compressed stream
                done_ = true;
                break;
            }
            if (rc == Z_BUF_ERROR) continue;  // more input wanted
            if (total_out_ == 0) {
                return corrupt_data(std::string("not valid gzip data (") +
                                    (zs_.msg != nullptr ? zs_.msg : "inflate failed") + ")");
            }
            truncated_ = true;  // damaged in the middle: what came before stays
            done_ = true;
        }
        return produced;
    }
    [[nodiscard]] std::uint64_t consumed() const noexcept override { return in_->consumed(); }
    [[nodiscard]] std::uint64_t total() const noexcept override { return in_->total(); }
    [[nodiscard]] bool truncated() const noexcept override { return truncated_; }

private:
    static constexpr std::size_t kInBytes = std::size_t{1} << 18;

    // After a member's end another member follows when the next two bytes are gzip's magic;
    // anything else (trailing zeros, say) ends the stream.
    bool next_member() {
        while (zs_.avail_in < 2 && !input_ended_) {
            std::memmove(buffer_.data(), zs_.next_in, zs_.avail_in);
            auto got = in_->read(reinterpret_cast<char*>(buffer_.data()) + zs_.avail_in,
                                 buffer_.size() - zs_.avail_in);
            zs_.next_in = buffer_.data();
            if (!got || *got == 0) {
                truncated_ = truncated_ || !got;  // a read error after a member: stop there
                input_ended_ = true;
                break;
            }
            zs_.avail_in += static_cast<uInt>(*got);
        }
        if (zs_.avail_in < 2 || zs_.next_in[0] != 0x1f || zs_.next_in[1] != 0x8b) return false;
        inflateReset(&zs_);
        return true;
    }

    std::unique_ptr<ByteStream> in_;
    std::vector<unsigned char> buffer_;
    z_stream zs_{};
    bool initialised_ = false;
    bool input_ended_ = false;
    bool done_ = false;
    bool truncated_ = false;
    std::uint64_t total_out_ = 0;
};

// A worker fills pieces from `in` while the reader empties them; a piece goes back to the worker
// once read. Everything the two share is behind the mutex.
class ReadAheadStream final : public ByteStream {
public:
    explicit ReadAheadStream(std::unique_ptr<ByteStream> in)
        : in_(std::move(in)), pieces_(kPieces), ring_(kPieces) {
        for (auto& p : pieces_) p.bytes.resize(kPieceBytes);
        for (std::size_t i = 0; i < kPieces; ++i) free_.push_back(i);
        total_ = in_->total();
    }
    ~ReadAheadStream() override {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stopping_ = true;
        }
        changed_.notify_all();
        if (worker_.joinable()) worker_.join();
    }
    ReadAheadStream(const ReadAheadStream&) = delete;
    ReadAheadStream& operator=(const ReadAheadStream&) = delete;

    void start() {
        worker_ = quiet_thread("gpudiag-read", [this] { fill(); });
    }
    /// The stream read ahead, back (before start() only).
    std::unique_ptr<ByteStream> take_input() { return std::move(in_); }

    Result<std::size_t> read(char* dst, std::size_t n) override {
        if (current_ != kNone && at_ == pieces_[current_].size) {
            std::lock_guard<std::mutex> lock(mutex_);
            free_.push_back(current_);
            current_ = kNone;
            changed_.notify_all();
        }
        if (current_ == kNone) {
            std::unique_lock<std::mutex> lock(mutex_);
            changed_.wait(lock, [this] { return queued_ != 0 || ended_; });
            if (queued_ == 0) {
                if (!error_.is_ok()) return error_;
                return std::size_t{0};
            }
            current_ = ring_[head_];
            head_ = (head_ + 1) % ring_.size();
            --queued_;
            at_ = 0;
        }
        const Piece& p = pieces_[current_];
        const std::size_t take = std::min(n, p.size - at_);
        std::memcpy(dst, p.bytes.data() + at_, take);
        at_ += take;
        return take;
    }
    [[nodiscard]] std::uint64_t consumed() const noexcept override {
        std::lock_guard<std::mutex> lock(mutex_);
        return consumed_;
    }
    [[nodiscard]] std::uint64_t total() const noexcept override { return total_; }
    [[nodiscard]] bool truncated() const noexcept override {
        std::lock_guard<std::mutex> lock(mutex_);
        return truncated_;
    }

private:
    static constexpr std::size_t kPieces = 4;
    static constexpr std::size_t kPieceBytes = std::size_t{1} << 20;
    static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
    struct Piece {
        std::vector<char> bytes;
        std::size_t size = 0;
    };

    // The worker: fills free pieces until the input ends, fails or the stream goes.
    void fill() {
        for (;;) {
            std::size_t b = 0;
            {
                std::unique_lock<std::mutex> lock(mutex_);
                changed_.wait(lock, [this] { return !free_.empty() || stopping_; });
                if (stopping_) return;
                b = free_.back();
                free_.pop_back();
            }
            Piece& p = pieces_[b];
            p.size = 0;
            Status failure = Status::ok();
            bool end = false;
            while (p.size < p.bytes.size()) {
                auto got = in_->read(p.bytes.data() + p.size, p.bytes.size() - p.size);
                if (!got) {
                    failure = got.status();
                    break;
                }
                if (*got == 0) {
                    end = true;
                    break;
                }
                p.size += *got;
            }
            std::lock_guard<std::mutex> lock(mutex_);
            if (p.size > 0) {
                ring_[(head_ + queued_++) % ring_.size()] = b;
            } else {
                free_.push_back(b);
            }
            consumed_ = in_->consumed();
            truncated_ = in_->truncated();
            if (!failure.is_ok() || end) {
                error_ = std::move(failure);
                ended_ = true;
            }
            changed_.notify_all();
            if (ended_) return;
        }
    }

    std::unique_ptr<ByteStream> in_;
    std::vector<Piece> pieces_;
    mutable std::mutex mutex_;
    std::condition_variable changed_;
    std::vector<std::size_t> free_;  // pieces the worker may fill
    std::vector<std::size_t> ring_;  // filled pieces, oldest first: queued_ of them from head_
    std::size_t head_ = 0;
    std::size_t queued_ = 0;
    bool ended_ = false;
    bool stopping_ = false;
    Status error_ = Status::ok();
    std::uint64_t consumed_ = 0;
    std::uint64_t total_ = 0;
    bool truncated_ = false;
    std::size_t current_ = kNone;  // the piece the reader is emptying (the reader's alone)
    std::size_t at_ = 0;
    std::thread worker_;
};

class BorrowedStream final : public ByteStream {
public:
    explicit BorrowedStream(ByteStream& in) : in_(in) {}
    Result<std::size_t> read(char* dst, std::size_t n) override { return in_.read(dst, n); }
    [[nodiscard]] std::uint64_t consumed() const noexcept override { return in_.consumed(); }
    [[nodiscard]] std::uint64_t total() const noexcept override { return in_.total(); }
    [[nodiscard]] bool truncated() const noexcept override { return in_.truncated(); }

private:
    ByteStream& in_;
};

class PrefixedStream final : public ByteStream {
public:
    PrefixedStream(std::string prefix, std::unique_ptr<ByteStream> rest)
        : prefix_(std::move(prefix)), rest_(std::move(rest)) {}

    Result<std::size_t> read(char* dst, std::size_t n) override {
        if (at_ < prefix_.size()) {
            std::size_t take = std::min(n, prefix_.size() - at_);
            std::memcpy(dst, prefix_.data() + at_, take);
            at_ += take;
            return take;
        }
        return rest_->read(dst, n);
    }
    [[nodiscard]] std::uint64_t consumed() const noexcept override { return rest_->consumed(); }
    [[nodiscard]] std::uint64_t total() const noexcept override { return rest_->total(); }
    [[nodiscard]] bool truncated() const noexcept override { return rest_->truncated(); }

private:
    std::string prefix_;
    std::size_t at_ = 0;
    std::unique_ptr<ByteStream> rest_;
};

}  // namespace

std::unique_ptr<ByteStream> read_ahead_stream(std::unique_ptr<ByteStream> in) {
    auto ahead = std::make_unique<ReadAheadStream>(std::move(in));
    try {
        ahead->start();
    } catch (const std::system_error&) {
        return ahead->take_input();  // no thread to be had: read the stream itself
    }
    return ahead;
}

std::unique_ptr<ByteStream> borrowed_stream(ByteStream& in) {
    return std::make_unique<BorrowedStream>(in);
}

std::unique_ptr<ByteStream> prefixed_stream(std::string prefix, std::unique_ptr<ByteStream> rest) {
    return std::make_unique<PrefixedStream>(std::move(prefix), std::move(rest));
}

Result<std::unique_ptr<ByteStream>> content_of(std::unique_ptr<ByteStream> in) {
    std::string magic(2, '\0');
    auto got = read_fully(*in, magic.data(), 2);
    if (!got) return got.status();
    magic.resize(*got);
    const bool gzip = magic.size() == 2 && magic[0] == '\x1f' && magic[1] == '\x8b';
    std::unique_ptr<ByteStream> whole = prefixed_stream(std::move(magic), std::move(in));
    if (gzip) return gzip_stream(std::move(whole));
    return whole;
}

Result<std::unique_ptr<ByteStream>> open_file_stream(const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) {
        if (errno == ENOENT) return not_found(path + ": no such file");
        return io_error(path + ": cannot open (" + std::strerror(errno) + ")");
    }
    std::uint64_t size = 0;
    if (std::fseek(f, 0, SEEK_END) == 0) {
        long n = std::ftell(f);
        if (n > 0) size = static_cast<std::uint64_t>(n);
        std::fseek(f, 0, SEEK_SET);
    }
    return std::unique_ptr<ByteStream>(std::make_unique<FileStream>(f, path, size));
}

std::unique_ptr<ByteStream> memory_stream(const void* data, std::size_t size) {
    return std::make_unique<MemoryStream>(data, size);
}

std::unique_ptr<ByteStream> gzip_stream(std::unique_ptr<ByteStream> compressed) {
    return std::make_unique<GzipStream>(std::move(compressed));
}

Result<std::unique_ptr<ByteStream>> open_content_stream(const std::string& path) {
    auto file = open_file_stream(path);
    if (!file) return file.status();
    return content_of(std::move(*file));
}

Result<std::size_t> read_fully(ByteStream& in, char* dst, std::size_t n) {
    std::size_t have = 0;
    while (have < n) {
        auto got = in.read(dst + have, n - have);
        if (!got) return got.status();
        if (*got == 0) break;
        have += *got;
    }
    return have;
}

}  // namespace gpudiag::detail
