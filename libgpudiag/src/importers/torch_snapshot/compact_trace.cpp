// SPDX-License-Identifier: Apache-2.0
// An entry: a head byte (action in the low 4 bits; which optional fields follow above), then
// [device] time-delta address-delta size [stream] [site category] [device_free], varints.
#include "importers/torch_snapshot/compact_trace.hpp"

namespace gpudiag::detail {
namespace {

constexpr unsigned kDevice = 0x10;
constexpr unsigned kStream = 0x20;
constexpr unsigned kSite = 0x40;
constexpr unsigned kDeviceFree = 0x80;

std::uint64_t zigzag(std::uint64_t delta) {
    const auto d = static_cast<std::int64_t>(delta);
    return (static_cast<std::uint64_t>(d) << 1) ^ static_cast<std::uint64_t>(d >> 63);
}
std::uint64_t unzigzag(std::uint64_t z) {
    return (z >> 1) ^ (~(z & 1) + 1);
}

unsigned char* put(unsigned char* at, std::uint64_t v) {
    while (v >= 0x80) {
        *at++ = static_cast<unsigned char>(v | 0x80);
        v >>= 7;
    }
    *at++ = static_cast<unsigned char>(v);
    return at;
}

}  // namespace

bool CompactTrace::append(const TraceEntry& e, std::size_t max_bytes) {
    static_assert(static_cast<unsigned>(TraceAction::kOther) < 16, "the action fits 4 bits");
    if (chunks_.empty() || kChunkBytes - chunks_.back().used < kMaxEntryBytes) {
        if ((chunks_.size() + 1) * kChunkBytes > max_bytes) return false;
        chunks_.push_back(Chunk{std::make_unique_for_overwrite<unsigned char[]>(kChunkBytes), 0});
    }
    Chunk& chunk = chunks_.back();
    unsigned head = static_cast<unsigned>(e.action);
    if (e.device != last_.device) head |= kDevice;
    if (e.stream != 0) head |= kStream;
    if (e.site != kNoString || e.category != MemoryCategory::kOther) head |= kSite;
    if (e.device_free != 0) head |= kDeviceFree;
    unsigned char* at = chunk.bytes.get() + chunk.used;
    *at++ = static_cast<unsigned char>(head);
    if ((head & kDevice) != 0) at = put(at, e.device);
    at = put(at, zigzag(e.time_us - last_.time_us));
    at = put(at, zigzag(e.address - last_.address));
    at = put(at, e.size);
    if ((head & kStream) != 0) at = put(at, e.stream);
    if ((head & kSite) != 0) {
        at = put(at, e.site);
        *at++ = static_cast<unsigned char>(e.category);
    }
    if ((head & kDeviceFree) != 0) at = put(at, e.device_free);
    chunk.used = static_cast<std::size_t>(at - chunk.bytes.get());
    last_ = Last{e.time_us, e.address, e.device};
    ++entries_;
    return true;
}

void CompactTrace::clear() noexcept {
    std::vector<Chunk>().swap(chunks_);
    entries_ = 0;
    last_ = {};
}

// Only what append() wrote is read back, and an entry never straddles chunks: every varint is
// whole, and ends inside the chunk it starts in.
std::uint64_t CompactTrace::Reader::varint() noexcept {
    std::uint64_t b = *at_++;
    if (b < 0x80) return b;
    std::uint64_t v = b & 0x7F;
    for (unsigned shift = 7; shift < 64; shift += 7) {
        b = *at_++;
        v |= (b & 0x7F) << shift;
        if (b < 0x80) break;
    }
    return v;
}

bool CompactTrace::Reader::next(TraceEntry& e) noexcept {
    while (at_ == end_) {
        if (chunk_ == trace_.chunks_.size()) return false;
        const Chunk& c = trace_.chunks_[chunk_++];
        at_ = c.bytes.get();
        end_ = at_ + c.used;
    }
    const unsigned head = *at_++;
    e = TraceEntry{};
    e.action = static_cast<TraceAction>(head & 0x0F);
    e.device = (head & kDevice) != 0 ? static_cast<std::uint16_t>(varint()) : last_.device;
    e.time_us = last_.time_us + unzigzag(varint());
    e.address = last_.address + unzigzag(varint());
    e.size = varint();
    if ((head & kStream) != 0) e.stream = varint();
    if ((head & kSite) != 0) {
        e.site = static_cast<StringId>(varint());
        e.category = static_cast<MemoryCategory>(*at_++);
    }
    if ((head & kDeviceFree) != 0) e.device_free = varint();
    last_ = Last{e.time_us, e.address, e.device};
    return true;
}

}  // namespace gpudiag::detail
