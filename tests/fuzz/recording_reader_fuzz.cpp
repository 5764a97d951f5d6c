// SPDX-License-Identifier: Apache-2.0
// Fuzz target: arbitrary bytes as a .gpudiag recording, through info() and a full read().
// Beyond "no crash, no leak, no overflow", it checks the reader's contract: begin() and end()
// exactly once, end()'s event count equal to what consume() delivered.
// Each input runs twice: as given (damage handling, resynchronisation), and with every CRC along
// the chunk walk recomputed, so mutations also reach the payload decoders (source info, strings,
// summary, index) that a CRC mismatch would otherwise keep them from.
#include <gpudiag/recording.hpp>

#include "recording/file_layout.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

class CheckingSink final : public gpudiag::EventSink {
public:
    void begin(const gpudiag::SourceInfo& /*info*/, const gpudiag::StringTable& strings) override {
        ++begins_;
        strings_ = &strings;
    }
    void consume(std::span<const gpudiag::Event> events) override {
        if (begins_ != 1 || ends_ != 0) fail("consume() outside begin()/end()");
        for (const auto& e : events) {
            delivered_ += 1;
            // Names must resolve (to something or nothing) whatever the ids are.
            checksum_ += strings_->lookup(e.kernel.name).size();
        }
    }
    void end(const gpudiag::SourceSummary& summary) override {
        ++ends_;
        if (summary.events != delivered_) fail("summary.events differs from events delivered");
    }
    void check_after_read() const {
        if (begins_ != 1 || ends_ != 1) fail("begin()/end() not called exactly once");
    }

private:
    [[noreturn]] static void fail(const char* what) {
        std::fprintf(stderr, "reader contract violated: %s\n", what);
        std::abort();
    }
    int begins_ = 0;
    int ends_ = 0;
    std::uint64_t delivered_ = 0;
    std::uint64_t checksum_ = 0;
    const gpudiag::StringTable* strings_ = nullptr;
};

void run_reader(const std::uint8_t* data, std::size_t size) {
    gpudiag::RecordingReader reader;
    if (!reader.open_buffer(data, size).is_ok()) return;
    (void)reader.info();
    gpudiag::StringTable strings(std::size_t{1} << 20);  // a small cap: exercises overflow too
    CheckingSink sink;
    if (reader.read(sink, strings).is_ok()) sink.check_after_read();
}

template <typename T>
void put(std::vector<std::uint8_t>& b, std::size_t at, T v) {
    std::memcpy(b.data() + at, &v, sizeof v);
}

// Makes every checksum the reader will look at valid, following chunk lengths from the header.
void fix_checksums(std::vector<std::uint8_t>& b) {
    namespace rec = gpudiag::detail::record;
    if (b.size() < rec::kFileHeaderBytes) return;
    put(b, 28, rec::crc32(b.data(), 28));
    std::size_t pos = rec::kFileHeaderBytes;
    while (pos + rec::kChunkHeaderBytes <= b.size()) {
        if (std::memcmp(&b[pos], rec::kChunkMagic, sizeof rec::kChunkMagic) != 0) {
            if (pos + rec::kTrailerBytes == b.size() &&
                std::memcmp(&b[pos], rec::kTrailerMagic, sizeof rec::kTrailerMagic) == 0) {
                put(b, pos + 28, rec::crc32(&b[pos], 28));
            }
            ++pos;
            continue;
        }
        std::uint32_t len = 0;
        std::memcpy(&len, &b[pos + 8], sizeof len);
        const std::size_t room = b.size() - pos - rec::kChunkHeaderBytes;
        if (len > room) {
            len = static_cast<std::uint32_t>(room);
            put(b, pos + 8, len);
        }
        put(b, pos + 12, rec::crc32(&b[pos + rec::kChunkHeaderBytes], len));
        put(b, pos + 44, rec::crc32(&b[pos], 44));
        pos += rec::kChunkHeaderBytes + len;
    }
    if (pos + rec::kTrailerBytes == b.size() &&
        std::memcmp(&b[pos], rec::kTrailerMagic, sizeof rec::kTrailerMagic) == 0) {
        put(b, pos + 28, rec::crc32(&b[pos], 28));
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    run_reader(data, size);
    std::vector<std::uint8_t> fixed(data, data + size);
    fix_checksums(fixed);
    run_reader(fixed.data(), fixed.size());
    return 0;
}
