// SPDX-License-Identifier: Apache-2.0
#include "core/event_runs.hpp"

#include "core/event_strings.hpp"

#include <gpudiag/string_table.hpp>

#include <algorithm>
#include <array>
#include <cstring>

namespace gpudiag::detail {
namespace {

// Header mask bits: which fields follow the start delta.
constexpr std::uint8_t kHasFlags = 0x01;
constexpr std::uint8_t kNewDevice = 0x02;
constexpr std::uint8_t kNewStream = 0x04;
constexpr std::uint8_t kNewProcess = 0x08;
constexpr std::uint8_t kNewThread = 0x10;
constexpr std::uint8_t kHasDuration = 0x20;
constexpr std::uint8_t kEndsBeforeStart = 0x40;
constexpr std::uint8_t kNewPayload = 0x80;

constexpr std::size_t kPayloadWords = 8;
constexpr std::size_t kKindSlots = 64;  // EventKind values are below 64
static_assert(sizeof(Event::raw) == kPayloadWords * 4);

using Words = std::array<std::uint32_t, kPayloadWords>;

Words words_of(const Event& e) noexcept {
    Words w;
    std::memcpy(w.data(), e.raw, sizeof w);
    return w;
}

void put_varint(std::vector<std::uint8_t>& out, std::uint64_t v) {
    while (v >= 0x80) {
        out.push_back(static_cast<std::uint8_t>(v | 0x80));
        v >>= 7;
    }
    out.push_back(static_cast<std::uint8_t>(v));
}

std::uint64_t get_varint(const std::uint8_t*& p, const std::uint8_t* end) noexcept {
    std::uint64_t v = 0;
    for (unsigned shift = 0; p < end && shift < 64; shift += 7) {
        std::uint8_t b = *p++;
        v |= std::uint64_t{b & 0x7Fu} << shift;
        if ((b & 0x80) == 0) break;
    }
    return v;
}

std::uint64_t zigzag64(std::uint64_t delta) noexcept {
    auto s = static_cast<std::int64_t>(delta);
    return (static_cast<std::uint64_t>(s) << 1) ^ static_cast<std::uint64_t>(s >> 63);
}
std::uint64_t unzigzag64(std::uint64_t z) noexcept {
    return (z >> 1) ^ (~(z & 1) + 1);
}
std::uint32_t zigzag32(std::uint32_t delta) noexcept {
    auto s = static_cast<std::int32_t>(delta);
    return (static_cast<std::uint32_t>(s) << 1) ^ static_cast<std::uint32_t>(s >> 31);
}
std::uint32_t unzigzag32(std::uint32_t z) noexcept {
    return (z >> 1) ^ (~(z & 1) + 1);
}

// The state both sides keep: the previous event of each kind and the previous start.
struct CodecState {
    std::array<Event, kKindSlots> previous{};
    std::uint64_t start = 0;
};

void encode_event(const Event& e, CodecState& st, std::vector<std::uint8_t>& out) {
    Event& p = st.previous[static_cast<std::size_t>(e.kind) % kKindSlots];
    const Words w = words_of(e);
    const Words pw = words_of(p);
    std::uint8_t payload_mask = 0;
    for (std::size_t i = 0; i < kPayloadWords; ++i) {
        if (w[i] != pw[i]) payload_mask |= static_cast<std::uint8_t>(1u << i);
    }
    std::uint8_t mask = 0;
    if (e.flags != 0) mask |= kHasFlags;
    if (e.device != p.device) mask |= kNewDevice;
    if (e.stream != p.stream) mask |= kNewStream;
    if (e.process != p.process) mask |= kNewProcess;
    if (e.thread != p.thread) mask |= kNewThread;
    if (e.end_ns != e.start_ns) mask |= kHasDuration;
    if (e.end_ns < e.start_ns) mask |= kEndsBeforeStart;
    if (payload_mask != 0) mask |= kNewPayload;

    out.push_back(static_cast<std::uint8_t>(e.kind));
    out.push_back(mask);
    put_varint(out, zigzag64(e.start_ns - st.start));
    if (mask & kHasFlags) out.push_back(e.flags);
    if (mask & kNewDevice) put_varint(out, e.device);
    if (mask & kNewStream) put_varint(out, e.stream);
    if (mask & kNewProcess) put_varint(out, e.process);
    if (mask & kNewThread) put_varint(out, e.thread);
    if (mask & kHasDuration) {
        put_varint(out, e.end_ns > e.start_ns ? e.end_ns - e.start_ns : e.start_ns - e.end_ns);
    }
    if (mask & kNewPayload) {
        out.push_back(payload_mask);
        for (std::size_t i = 0; i < kPayloadWords; ++i) {
            if (payload_mask & (1u << i)) put_varint(out, zigzag32(w[i] - pw[i]));
        }
    }
    st.start = e.start_ns;
    p = e;
}

// Decodes the event at `p` (advancing it); false when the bytes run out mid-event.
bool decode_event(const std::uint8_t*& p, const std::uint8_t* end, CodecState& st, Event& out) {
    if (end - p < 2) return false;
    const auto kind = static_cast<EventKind>(*p++);
    const std::uint8_t mask = *p++;
    Event& e = st.previous[static_cast<std::size_t>(kind) % kKindSlots];
    e.kind = kind;
    e.start_ns = st.start + unzigzag64(get_varint(p, end));
    e.flags = (mask & kHasFlags) && p < end ? *p++ : 0;
    if (mask & kNewDevice) e.device = static_cast<std::uint16_t>(get_varint(p, end));
    if (mask & kNewStream) e.stream = static_cast<std::uint32_t>(get_varint(p, end));
    if (mask & kNewProcess) e.process = static_cast<std::uint32_t>(get_varint(p, end));
    if (mask & kNewThread) e.thread = static_cast<std::uint32_t>(get_varint(p, end));
    e.end_ns = e.start_ns;
    if (mask & kHasDuration) {
        std::uint64_t d = get_varint(p, end);
        e.end_ns = (mask & kEndsBeforeStart) ? e.start_ns - d : e.start_ns + d;
    }
    if (mask & kNewPayload) {
        if (p >= end) return false;
        const std::uint8_t payload_mask = *p++;
        Words w = words_of(e);
        for (std::size_t i = 0; i < kPayloadWords; ++i) {
            if (payload_mask & (1u << i)) {
                w[i] += unzigzag32(static_cast<std::uint32_t>(get_varint(p, end)));
            }
        }
        std::memcpy(e.raw, w.data(), sizeof w);
    }
    st.start = e.start_ns;
    out = e;
    return true;
}

// One run being read during the merge.
struct Cursor {
    const std::uint8_t* at = nullptr;
    const std::uint8_t* end = nullptr;
    const std::vector<StringId>* remap = nullptr;
    std::size_t run = 0;
    std::uint64_t left = 0;
    Event next;
    CodecState state;

    bool advance() {
        if (left == 0 || !decode_event(at, end, state, next)) return false;
        --left;
        return true;
    }
};

}  // namespace

void remap_strings(Event& e, const std::vector<StringId>& remap) noexcept {
    if (StringId* id = string_id_of(e)) {
        *id = *id < remap.size() ? remap[*id] : StringTable::kOverflowString;
    }
}

void encode_run(std::span<const Event> events, std::span<const std::uint64_t> order,
                EventRun& out) {
    out.bytes.clear();
    out.bytes.reserve(events.size() * 16);
    CodecState state;
    if (order.empty()) {
        for (const Event& e : events) encode_event(e, state, out.bytes);
    } else {
        for (std::uint64_t i : order)
            encode_event(events[static_cast<std::size_t>(i)], state, out.bytes);
    }
    out.bytes.shrink_to_fit();
    out.events = events.size();
}

std::vector<Event> decode_run(const EventRun& run) {
    std::vector<Event> out;
    Cursor c;
    c.at = run.bytes.data();
    c.end = run.bytes.data() + run.bytes.size();
    c.left = run.events;
    while (c.advance()) {
        out.push_back(c.next);
        if (!run.remap.empty()) remap_strings(out.back(), run.remap);
    }
    return out;
}

void EventRunSet::add(EventRun run) {
    events_ += run.events;
    bytes_ += run.bytes.size();
    if (run.events > 0) runs_.push_back(std::move(run));
}

void EventRunSet::map_strings(const std::vector<StringId>& ids) {
    auto mapped = [&ids](StringId id) {
        return id < ids.size() ? ids[id] : StringTable::kOverflowString;
    };
    for (EventRun& run : runs_) {
        if (run.remap.empty()) {
            run.remap = ids;
            continue;
        }
        for (StringId& id : run.remap) id = mapped(id);
    }
}

void EventRunSet::replay(EventSink& sink, std::size_t batch) const {
    std::vector<Cursor> cursors(runs_.size());
    std::vector<Cursor*> heap;
    heap.reserve(cursors.size());
    for (std::size_t i = 0; i < runs_.size(); ++i) {
        Cursor& c = cursors[i];
        c.at = runs_[i].bytes.data();
        c.end = runs_[i].bytes.data() + runs_[i].bytes.size();
        c.remap = runs_[i].remap.empty() ? nullptr : &runs_[i].remap;
        c.run = i;
        c.left = runs_[i].events;
        if (c.advance()) heap.push_back(&c);
    }
    // A min-heap on (start, run): equal starts come out in run order, which keeps the merge stable.
    auto later = [](const Cursor* a, const Cursor* b) {
        return a->next.start_ns != b->next.start_ns ? a->next.start_ns > b->next.start_ns
                                                    : a->run > b->run;
    };
    std::make_heap(heap.begin(), heap.end(), later);
    // The top's new key moved down from the root: pieces hold stretches of time, so the run on
    // top usually stays there, for two comparisons (pop + push would take 2 log n).
    auto sift_down = [&heap, &later](std::size_t i) {
        const std::size_t n = heap.size();
        Cursor* moving = heap[i];
        for (;;) {
            std::size_t child = 2 * i + 1;
            if (child >= n) break;
            if (child + 1 < n && later(heap[child], heap[child + 1])) ++child;
            if (!later(moving, heap[child])) break;
            heap[i] = heap[child];
            i = child;
        }
        heap[i] = moving;
    };
    std::vector<Event> out;
    out.reserve(std::max<std::size_t>(batch, 1));
    while (!heap.empty()) {
        Cursor* c = heap.front();
        out.push_back(c->next);
        if (c->remap != nullptr) remap_strings(out.back(), *c->remap);
        if (!c->advance()) {
            heap.front() = heap.back();
            heap.pop_back();
        }
        if (!heap.empty()) sift_down(0);
        if (out.size() >= batch) {
            sink.consume(out);
            out.clear();
        }
    }
    if (!out.empty()) sink.consume(out);
}

}  // namespace gpudiag::detail
