// SPDX-License-Identifier: Apache-2.0
// Loading a trace into memory. Whole-buffer libdeflate is about twice as fast as zlib's streaming
// inflate, but it needs the output size up front: the gzip trailer's ISIZE gives it modulo 2^32 for
// the last member only. So libdeflate gets the common case (one member, under 4 GiB) and zlib's
// streaming inflate handles everything else: several members, wrapped sizes, cut-off files.
#include "importers/kineto/trace_buffer.hpp"

#include <fmt/format.h>
#include <libdeflate.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

namespace gpudiag::detail {

// Only the padding is zeroed: the content is about to be overwritten, and touching 50 MB twice
// costs as much as inflating it.
TraceBuffer::TraceBuffer(std::size_t capacity)
    : data_(new char[capacity + kPadding]), size_(0), capacity_(capacity) {
    std::memset(data_.get(), 0, std::min<std::size_t>(capacity, kPadding));
    std::memset(data_.get() + capacity, 0, kPadding);
}

void TraceBuffer::resize(std::size_t size) noexcept {
    size_ = std::min(size, capacity_);
    std::memset(data_.get() + size_, 0, kPadding);
}

void TraceBuffer::reserve(std::size_t capacity) {
    if (capacity <= capacity_ && data_) return;
    std::unique_ptr<char[]> bigger(new char[capacity + kPadding]);
    if (size_ > 0) std::memcpy(bigger.get(), data_.get(), size_);
    std::memset(bigger.get() + size_, 0, kPadding);
    data_ = std::move(bigger);
    capacity_ = capacity;
}

namespace {

constexpr std::uint64_t kMaxDeflateRatio = 1032;  // DEFLATE cannot expand a byte more than this

struct FileCloser {
    void operator()(std::FILE* f) const noexcept {
        if (f != nullptr) std::fclose(f);
    }
};

Status too_large(std::uint64_t max_bytes) {
    if (max_bytes >= TraceBuffer::kMaxContentBytes) {
        return unsupported(
            "the trace is larger than 4 GiB once decompressed, which the JSON parser cannot index "
            "in one piece; record fewer steps per trace (torch.profiler schedule active=...)");
    }
    return unsupported(fmt::format("the trace holds more than {} MiB of text, the most read whole",
                                   max_bytes >> 20));
}

// The file's bytes, unmodified, in a padded buffer (a plain JSON trace is parsed in place).
Result<TraceBuffer> read_raw(const std::string& path, std::uint64_t max_bytes) {
    std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
    if (!f) {
        if (errno == ENOENT) return not_found(path + ": no such file");
        return io_error(path + ": cannot open (" + std::strerror(errno) + ")");
    }
    std::size_t expected = 1 << 16;
    if (std::fseek(f.get(), 0, SEEK_END) == 0) {
        long n = std::ftell(f.get());
        if (n > 0) expected = static_cast<std::size_t>(n);
        std::fseek(f.get(), 0, SEEK_SET);
    }
    max_bytes = std::min<std::uint64_t>(max_bytes, TraceBuffer::kMaxContentBytes);
    if (expected > max_bytes) return too_large(max_bytes);  // before allocating anything
    TraceBuffer out(expected);
    std::size_t size = 0;
    for (;;) {
        if (size == out.capacity()) {  // the file grew while we read it
            if (out.capacity() >= max_bytes) {
                char probe = 0;
                if (std::fread(&probe, 1, 1, f.get()) == 1) return too_large(max_bytes);
                break;
            }
            out.resize(size);
            out.reserve(static_cast<std::size_t>(
                std::min<std::uint64_t>(std::uint64_t{out.capacity()} * 2, max_bytes)));
        }
        std::size_t got = std::fread(out.data() + size, 1, out.capacity() - size, f.get());
        size += got;
        if (got == 0) break;
    }
    if (std::ferror(f.get()))
        return io_error(path + ": read failed (" + std::strerror(errno) + ")");
    out.resize(size);
    return out;
}

// zlib's streaming inflate over every gzip member; keeps what it produced when the input stops.
Result<TraceBuffer> inflate_streaming(const unsigned char* in, std::size_t in_size,
                                      std::size_t size_hint, bool* truncated,
                                      std::uint64_t max_bytes) {
    z_stream zs{};
    if (inflateInit2(&zs, 15 + 16) != Z_OK) return internal_error("zlib inflateInit2 failed");
    struct Ender {
        z_stream* z;
        ~Ender() { inflateEnd(z); }
    } ender{&zs};

    max_bytes = std::min<std::uint64_t>(max_bytes, TraceBuffer::kMaxContentBytes);
    TraceBuffer out(static_cast<std::size_t>(
        std::min<std::uint64_t>(std::max<std::size_t>(size_hint, 1 << 16), max_bytes)));
    std::size_t produced = 0;
    std::size_t consumed = 0;
    for (;;) {
        if (produced == out.capacity()) {
            if (out.capacity() >= max_bytes) return too_large(max_bytes);
            std::uint64_t next =
                std::min<std::uint64_t>(std::uint64_t{out.capacity()} * 2, max_bytes);
            out.resize(produced);
            out.reserve(static_cast<std::size_t>(next));
        }
        std::size_t in_left = in_size - consumed;
        std::size_t out_left = out.capacity() - produced;
        zs.next_in = const_cast<unsigned char*>(in + consumed);
        zs.avail_in = static_cast<uInt>(std::min<std::size_t>(in_left, 1u << 30));
        zs.next_out = reinterpret_cast<unsigned char*>(out.data() + produced);
        zs.avail_out = static_cast<uInt>(std::min<std::size_t>(out_left, 1u << 30));
        uInt avail_in_before = zs.avail_in;
        uInt avail_out_before = zs.avail_out;
        int rc = inflate(&zs, Z_NO_FLUSH);
        consumed += avail_in_before - zs.avail_in;
        produced += avail_out_before - zs.avail_out;
        if (rc == Z_STREAM_END) {
            // Another member may follow (concatenated gzip); trailing zero bytes are tolerated.
            std::size_t rest = in_size - consumed;
            if (rest >= 2 && in[consumed] == 0x1f && in[consumed + 1] == 0x8b) {
                inflateReset(&zs);
                continue;
            }
            break;
        }
        if (rc == Z_OK) continue;
        if (rc == Z_BUF_ERROR && zs.avail_out == 0) continue;  // grow and go on
        if (rc == Z_BUF_ERROR && consumed == in_size) {
            *truncated = true;  // the file ends inside the compressed stream
            break;
        }
        if (produced == 0) {
            return corrupt_data(std::string("not valid gzip data (") +
                                (zs.msg != nullptr ? zs.msg : "inflate failed") + ")");
        }
        *truncated = true;  // corrupt in the middle: keep what came before
        break;
    }
    out.resize(produced);
    return out;
}

}  // namespace

Result<TraceBuffer> inflate_gzip(const unsigned char* in, std::size_t in_size, bool* truncated,
                                 std::uint64_t max_bytes) {
    *truncated = false;
    if (in_size < 18) {
        // Header and trailer alone take 18 bytes: this can only be a cut-off file.
        return inflate_streaming(in, in_size, 1 << 16, truncated, max_bytes);
    }
    std::uint32_t isize = static_cast<std::uint32_t>(in[in_size - 4]) |
                          (static_cast<std::uint32_t>(in[in_size - 3]) << 8) |
                          (static_cast<std::uint32_t>(in[in_size - 2]) << 16) |
                          (static_cast<std::uint32_t>(in[in_size - 1]) << 24);
    // ISIZE is trustworthy only when it is plausible for this much compressed data; otherwise the
    // size wrapped past 4 GiB, the file has several members, or it is cut short.
    bool plausible = isize > 0 &&
                     std::uint64_t{isize} <= std::uint64_t{in_size} * kMaxDeflateRatio &&
                     isize <= max_bytes;
    if (plausible) {
        TraceBuffer out(isize);
        libdeflate_decompressor* d = libdeflate_alloc_decompressor();
        if (d == nullptr) throw std::bad_alloc();
        std::size_t in_used = 0;
        std::size_t out_used = 0;
        libdeflate_result rc =
            libdeflate_gzip_decompress_ex(d, in, in_size, out.data(), isize, &in_used, &out_used);
        libdeflate_free_decompressor(d);
        if (rc == LIBDEFLATE_SUCCESS && in_used == in_size) {
            out.resize(out_used);
            return out;
        }
    }
    std::size_t hint = plausible ? isize : std::min<std::size_t>(in_size * 8, 1u << 30);
    return inflate_streaming(in, in_size, hint, truncated, max_bytes);
}

std::optional<TraceBuffer> inflate_small_gzip(const std::string& path, std::size_t limit) {
    std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
    unsigned char magic[2] = {0, 0};
    if (!f || std::fread(magic, 1, 2, f.get()) != 2 || magic[0] != 0x1f || magic[1] != 0x8b ||
        std::fseek(f.get(), 0, SEEK_END) != 0) {
        return std::nullopt;  // not gzip (plain JSON streams from the file as it is)
    }
    const long n = std::ftell(f.get());
    if (n < 18 || static_cast<std::uint64_t>(n) > limit || std::fseek(f.get(), 0, SEEK_SET) != 0) {
        return std::nullopt;
    }
    std::vector<unsigned char> in(static_cast<std::size_t>(n));
    if (std::fread(in.data(), 1, in.size(), f.get()) != in.size() || in[0] != 0x1f ||
        in[1] != 0x8b) {
        return std::nullopt;
    }
    const std::size_t k = in.size();
    const std::uint32_t isize = static_cast<std::uint32_t>(in[k - 4]) |
                                (static_cast<std::uint32_t>(in[k - 3]) << 8) |
                                (static_cast<std::uint32_t>(in[k - 2]) << 16) |
                                (static_cast<std::uint32_t>(in[k - 1]) << 24);
    if (isize == 0 || isize > limit || std::uint64_t{isize} > std::uint64_t{k} * kMaxDeflateRatio) {
        return std::nullopt;
    }
    TraceBuffer out(isize);
    libdeflate_decompressor* d = libdeflate_alloc_decompressor();
    if (d == nullptr) throw std::bad_alloc();
    std::size_t in_used = 0;
    std::size_t out_used = 0;
    const libdeflate_result rc =
        libdeflate_gzip_decompress_ex(d, in.data(), k, out.data(), isize, &in_used, &out_used);
    libdeflate_free_decompressor(d);
    if (rc != LIBDEFLATE_SUCCESS || in_used != k) return std::nullopt;  // several members, damage
    out.resize(out_used);
    return out;
}

Result<TraceBuffer> load_trace_stream(ByteStream& in, bool* truncated, std::uint64_t max_bytes) {
    max_bytes = std::min<std::uint64_t>(max_bytes, TraceBuffer::kMaxContentBytes);
    TraceBuffer out(
        static_cast<std::size_t>(std::min<std::uint64_t>(std::size_t{1} << 20, max_bytes)));
    std::size_t size = 0;
    for (;;) {
        if (size == out.capacity()) {
            if (out.capacity() >= max_bytes) {
                char probe = 0;
                auto more = in.read(&probe, 1);
                if (!more) return more.status();
                if (*more == 0) break;
                return too_large(max_bytes);
            }
            out.resize(size);
            out.reserve(static_cast<std::size_t>(
                std::min<std::uint64_t>(std::uint64_t{out.capacity()} * 2, max_bytes)));
        }
        auto got = in.read(out.data() + size, out.capacity() - size);
        if (!got) return got.status();
        if (*got == 0) break;
        size += *got;
    }
    out.resize(size);
    *truncated = in.truncated();
    return out;
}

Result<TraceBuffer> load_trace_file(
    const std::string& path, bool* truncated,
    const std::function<void(std::uint64_t, std::uint64_t)>& progress, std::uint64_t max_bytes) {
    *truncated = false;
    // A gzip file is read whole before it is inflated: its compressed size is bounded too.
    auto raw = read_raw(path, max_bytes);
    if (!raw)
        return Status(raw.status().code(), raw.status().code() == StatusCode::kUnsupported
                                               ? path + ": " + raw.status().message()
                                               : raw.status().message());
    const auto* bytes = reinterpret_cast<const unsigned char*>(raw->data());
    std::size_t n = raw->size();
    if (progress) progress(0, n);
    if (n >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b) {
        auto out = inflate_gzip(bytes, n, truncated, max_bytes);
        if (!out) return Status(out.status().code(), path + ": " + out.status().message());
        if (progress) progress(n, n);
        return out;
    }
    if (progress) progress(n, n);
    return raw;
}

}  // namespace gpudiag::detail
