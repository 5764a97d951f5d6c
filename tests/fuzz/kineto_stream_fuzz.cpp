// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the streamed Kineto parse as files reach it: through a ByteStream that
// hands out bytes in uneven trickles (never all at once), inflated on the fly when the input is
// gzip, in tiny pieces with a tiny hold limit, so the reading, cutting, whitespace squeezing,
// refusal and salvage paths all run. Its outcome is checked against the whole-document parse:
//  * read: the same events, names and summary;
//  * partial (the input itself ends early or turns unreadable): the whole parse could not read it
//    all either, and the salvaged events are no more than it read;
//  * unclosed: no more events than the whole parse read;
//  * declined or refused: nothing to compare.
#include "importers/byte_stream.hpp"
#include "importers/kineto/kineto_parser.hpp"
#include "importers/kineto/kineto_stream.hpp"
#include "importers/kineto/trace_buffer.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace {

using namespace gpudiag;
using namespace gpudiag::detail;

// Bytes in memory read in trickles of 1..509 bytes, the sizes drawn from the bytes themselves.
class TrickleStream final : public ByteStream {
public:
    TrickleStream(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
    Result<std::size_t> read(char* dst, std::size_t n) override {
        const std::size_t step = 1 + (pos_ < size_ ? (data_[pos_] * 7u + pos_) % 509 : 0);
        const std::size_t take = std::min({n, step, size_ - pos_});
        if (take > 0) std::memcpy(dst, data_ + pos_, take);
        pos_ += take;
        return take;
    }
    [[nodiscard]] std::uint64_t consumed() const noexcept override { return pos_; }
    [[nodiscard]] std::uint64_t total() const noexcept override { return size_; }

private:
    const std::uint8_t* data_;
    std::size_t size_;
    std::size_t pos_ = 0;
};

class Collect final : public EventSink {
public:
    void consume(std::span<const Event> e) override { seen.insert(seen.end(), e.begin(), e.end()); }
    std::vector<Event> seen;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size > (1u << 20)) return 0;
    const bool gzip = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
    // The whole-document parse of the same text, for comparison.
    TraceBuffer text;
    bool gzip_damaged = false;  // cut short or damaged: inflating stopped early
    if (gzip) {
        auto inflated = inflate_gzip(data, size, &gzip_damaged, std::uint64_t{1} << 24);
        if (!inflated.is_ok()) return 0;
        text = std::move(*inflated);
    } else {
        text = TraceBuffer(size);
        if (size > 0) std::memcpy(text.data(), data, size);
        text.resize(size);
    }
    StringTable whole_strings;
    KinetoParseResult whole;
    const bool whole_ok = parse_kineto_trace(text, "fuzz", whole_strings, whole).is_ok();

    std::unique_ptr<ByteStream> in = std::make_unique<TrickleStream>(data, size);
    if (gzip) in = gzip_stream(std::move(in));
    KinetoStreamOptions options;
    options.piece_bytes = 61;
    options.max_held_bytes = 4096;
    options.max_threads = 2;
    KinetoStreamResult streamed;
    const StreamOutcome outcome = stream_kineto_trace(*in, "fuzz", options, streamed);
    if (outcome == StreamOutcome::kDeclined || outcome == StreamOutcome::kRefused) {
        if (streamed.names || streamed.runs.events() != 0) __builtin_trap();  // no half results
        return 0;
    }
    StringTable strings;
    publish_stream_names(streamed, strings);
    Collect sink;
    streamed.runs.replay(sink);
    if (sink.seen.size() != streamed.parse.summary.events) __builtin_trap();
    bool same = true;
    if (outcome == StreamOutcome::kRead) {
        // Damage to the gzip stream after the trace closed is the stream's note alone: the whole
        // parse sees only the inflated text.
        std::vector<std::string> notes = streamed.parse.summary.notes;
        if (gzip_damaged && !notes.empty() && notes.back().rfind("after the trace's end: ", 0) == 0)
            notes.pop_back();
        same = whole_ok && !whole.summary.truncated && sink.seen.size() == whole.events.size() &&
               strings.size() == whole_strings.size() && notes == whole.summary.notes &&
               streamed.parse.info.properties == whole.info.properties;
        for (std::size_t i = 0; same && i < sink.seen.size(); ++i) {
            same = std::memcmp(&sink.seen[i], &whole.events[i], sizeof(Event)) == 0;
        }
        for (std::size_t id = 0; same && id < strings.size(); ++id) {
            same = strings.lookup(static_cast<StringId>(id)) ==
                   whole_strings.lookup(static_cast<StringId>(id));
        }
    } else {
        // Partial input: said so, and never more than the whole parse found.
        same = streamed.parse.summary.truncated && !streamed.parse.summary.missing.empty() &&
               (!whole_ok || sink.seen.size() <= whole.events.size());
        if (outcome == StreamOutcome::kPartial)
            same = same && (!whole_ok || whole.summary.truncated);
    }
    if (!same) __builtin_trap();
    return 0;
}
