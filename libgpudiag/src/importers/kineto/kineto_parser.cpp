// SPDX-License-Identifier: Apache-2.0
// KinetoParser, with simdjson On-Demand: one pass over the document, no DOM. Each event object's
// fields are read in file order and only the fields gpudiag uses are decoded; "args" of CPU
// operators (call stacks, input shapes) are skipped without being materialised, but for the input
// shapes of layer calls (LayerInputShapes). A large document's
// event array is cut into slices parsed on several threads, each cut verified (parse_split).
#include "importers/kineto/kineto_parser.hpp"
#include "core/event_runs.hpp"
#include "core/range_names.hpp"
#include "importers/kineto/parse_thread_budget.hpp"
#include "support/quiet_thread.hpp"

#include "core/producers.hpp"
#include "importers/kineto/json_number.hpp"
#include "importers/kineto/layer_input_shapes.hpp"
#include "importers/kineto/name_cache.hpp"
#include "importers/kineto/start_order.hpp"
#include "importers/kineto/trace_split.hpp"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string_view>
#include <thread>
#include <vector>

namespace gpudiag::detail {
namespace {

namespace od = simdjson::ondemand;

enum class Category : std::uint8_t {
    kOther,
    kKernel,
    kMemcpy,
    kMemset,
    kRuntime,
    kDriver,
    kSync,
    kCpuOp,
    kUserAnnotation,
    kGpuUserAnnotation,
    kIgnored,     // python_function, Trace spans, flows: well-formed, no use to gpudiag
    kInstant,     // cpu_instant_event ([memory] records)
    kMtiaDevice,  // mtia_ccp_events: device queue events, not kernels
    kMtiaRuntime,
};

Category classify_category(std::string_view c) noexcept {
    // Both vocabularies: Kineto's 2021 names ("Kernel", "Runtime", "Operator") and today's.
    switch (c.empty() ? '\0' : c.front()) {
        case 'k':
            if (c == "kernel") return Category::kKernel;
            break;
        case 'K':
            if (c == "Kernel") return Category::kKernel;
            break;
        case 'g':
            if (c == "gpu_memcpy") return Category::kMemcpy;
            if (c == "gpu_memset") return Category::kMemset;
            if (c == "gpu_user_annotation") return Category::kGpuUserAnnotation;
            break;
        case 'M':
            if (c == "Memcpy") return Category::kMemcpy;
            if (c == "Memset") return Category::kMemset;
            break;
        case 'c':
            if (c == "cpu_op") return Category::kCpuOp;
            if (c == "cuda_runtime") return Category::kRuntime;
            if (c == "cuda_driver") return Category::kDriver;
            if (c == "cuda_sync") return Category::kSync;
            if (c == "cpu_instant_event") return Category::kInstant;
            break;
        case 'R':
            if (c == "Runtime") return Category::kRuntime;
            break;
        case 'D':
            if (c == "Driver") return Category::kDriver;
            break;
        case 'O':
            if (c == "Operator") return Category::kCpuOp;
            break;
        case 'u':
            if (c == "user_annotation") return Category::kUserAnnotation;
            break;
        case 'U':
            if (c == "User Annotation") return Category::kUserAnnotation;
            break;
        case 'p':
            if (c == "python_function") return Category::kIgnored;
            break;
        case 'T':
            if (c == "Trace") return Category::kIgnored;
            break;
        case 'm':
            if (c == "mtia_ccp_events") return Category::kMtiaDevice;
            if (c == "mtia_runtime") return Category::kMtiaRuntime;
            break;
        default: break;
    }
    return Category::kOther;
}

// Everything read from one event object: the common fields, and those of "args" (reset only after
// an event whose args were read, as most events' are skipped).
struct RawHeader {
    char ph = 0;
    std::string_view cat;
    Category category = Category::kOther;  // of `cat`
    std::string_view name;
    bool has_ts = false;
    std::int64_t ts = 0;
    std::int64_t dur = 0;
    std::int64_t pid = 0;
    std::int64_t tid = 0;
    bool pid_numeric = false;
    bool tid_is_stream = false;  // "stream 7"
};

struct RawArgs {
    std::int64_t device = -1;
    std::int64_t stream = -1;
    std::int64_t correlation = -1;
    std::int64_t external_id = 0;
    std::int64_t bytes = -1;
    std::int64_t cbid = 0;
    std::int64_t grid = 0;
    std::int64_t block = 0;
    std::int64_t registers = 0;
    std::int64_t shared_memory = 0;
    std::int64_t mem_device_type = -1;
    std::int64_t mem_device_id = -1;
    std::int64_t mem_addr = 0;
    bool has_mem_bytes = false;
    std::int64_t mem_bytes = 0;
    double total_allocated = -1;
    double total_reserved = -1;
    std::string_view sync_kind;
    std::int64_t wait_on_stream = -1;  // cuda_sync: where the waited-on event was recorded
    std::int64_t wait_on_record = -1;  // cuda_sync: that cudaEventRecord's correlation
    std::string_view arg_name;         // args.name of metadata events
    std::string_view arg_labels;       // args.labels of process_labels
    // A layer call's batch-carrying input (LayerInputShapes), from "Input Dims"; -1: none read.
    static constexpr int kMaxInputRank = 6;
    std::int64_t input_dims[kMaxInputRank] = {};
    int input_rank = -1;
};

struct RawEvent : RawHeader, RawArgs {
    bool args_read = false;

    // Back to defaults for the next event.
    void reset() noexcept {
        static_cast<RawHeader&>(*this) = RawHeader{};
        if (args_read) {
            static_cast<RawArgs&>(*this) = RawArgs{};
            args_read = false;
        }
    }
};

// A field that fails to decode keeps its default: one odd field must not cost the whole event.
inline void ignore(simdjson::error_code) noexcept {}

std::uint32_t hash32(std::string_view s) noexcept {
    std::uint32_t h = 2166136261u;  // FNV-1a: stable ids for non-numeric thread names
    for (unsigned char c : s) h = (h ^ c) * 16777619u;
    return h | 0x80000000u;  // keep clear of real (small) thread ids
}

std::string_view trim_token(std::string_view tok) noexcept {
    while (!tok.empty() &&
           (tok.back() == ' ' || tok.back() == '\n' || tok.back() == '\r' || tok.back() == '\t' ||
            tok.back() == ',' || tok.back() == '}' || tok.back() == ']')) {
        tok.remove_suffix(1);
    }
    return tok;
}

// A string value. Names and categories almost never hold escapes: then the value is a view of the
// document itself, which saves simdjson copying (and faulting in) every string into its own
// buffer. A string with an escape, or a value that is not a string, goes through get_string().
simdjson::error_code read_string(od::value& v, std::string_view& out) noexcept {
    // The token runs to the next structural character: the closing quote, then any whitespace.
    std::string_view tok = trim_token(v.raw_json_token());
    if (tok.size() >= 2 && tok.front() == '"' && tok.back() == '"') {
        std::string_view body = tok.substr(1, tok.size() - 2);
        if (std::memchr(body.data(), '\\', body.size()) == nullptr) {
            out = body;
            return simdjson::SUCCESS;
        }
    }
    return v.get_string().get(out);
}

// A number or numeric string as int64; doubles are truncated. Reads the raw token first (no
// type dispatch): almost every value here is a plain integer.
bool read_int(od::value& v, std::int64_t& out) noexcept {
    std::string_view raw = v.raw_json_token();
    {
        // The common case, in one pass: a plain integer of at most 18 digits (which cannot
        // overflow), then nothing but what trim_token strips.
        std::size_t i = !raw.empty() && raw.front() == '-' ? 1 : 0;
        const std::size_t first = i;
        std::uint64_t value = 0;
        while (i < raw.size() && i - first < 18 && raw[i] >= '0' && raw[i] <= '9') {
            value = value * 10 + static_cast<std::uint64_t>(raw[i] - '0');
            ++i;
        }
        if (i > first && trim_token(raw.substr(i)).empty()) {
            out = first == 1 ? -static_cast<std::int64_t>(value) : static_cast<std::int64_t>(value);
            return true;
        }
    }
    std::string_view tok = trim_token(raw);
    if (tok.empty()) return false;
    char c = tok.front();
    if ((c >= '0' && c <= '9') || c == '-') {
        if (parse_integer_token(tok, out)) return true;
        double d = 0;
        if (v.get_double().get(d) != simdjson::SUCCESS || !std::isfinite(d) ||
            std::fabs(d) > 9e18) {
            return false;
        }
        out = static_cast<std::int64_t>(d);
        return true;
    }
    if (c == '"') {
        std::string_view s;
        if (read_string(v, s) != simdjson::SUCCESS) return false;
        return parse_integer_token(s, out);
    }
    return false;
}

bool read_double(od::value& v, double& out) noexcept {
    std::int64_t i = 0;
    od::json_type t;
    if (v.type().get(t) != simdjson::SUCCESS) return false;
    if (t == od::json_type::number) return v.get_double().get(out) == simdjson::SUCCESS;
    if (t == od::json_type::string && read_int(v, i)) {
        out = static_cast<double>(i);
        return true;
    }
    return false;
}

bool read_time(od::value& v, std::int64_t& ns) noexcept {
    std::string_view tok = trim_token(v.raw_json_token());
    if (!tok.empty() && tok.front() == '"') {
        if (read_string(v, tok) != simdjson::SUCCESS) return false;
    }
    return parse_microseconds_as_ns(tok, ns);
}

// pid/tid: numbers, numeric strings, "stream 7", or free text (hashed).
void read_id(od::value& v, std::int64_t& out, bool* numeric, bool* is_stream) noexcept {
    std::string_view tok = trim_token(v.raw_json_token());
    if (tok.empty()) return;
    if (tok.front() != '"') {
        if (read_int(v, out) && numeric != nullptr) *numeric = true;
        return;
    }
    std::string_view s;
    if (read_string(v, s) != simdjson::SUCCESS) return;
    if (parse_integer_token(s, out)) {
        if (numeric != nullptr) *numeric = true;
        return;
    }
    if (s.size() > 7 && s.substr(0, 7) == "stream " && parse_integer_token(s.substr(7), out)) {
        if (is_stream != nullptr) *is_stream = true;
        return;
    }
    out = hash32(s);
}

std::int64_t read_dim_product(od::value& v) noexcept {
    od::array arr;
    if (v.get_array().get(arr) != simdjson::SUCCESS) return 0;
    std::int64_t product = 1;
    for (auto item : arr) {
        od::value x;
        std::int64_t n = 0;
        if (item.get(x) != simdjson::SUCCESS || !read_int(x, n) || n < 0) return 0;
        product = n == 0 ? 0 : (product > INT32_MAX / n ? INT32_MAX : product * n);
    }
    return product;
}

// Walks an event's "args" object (marking them read), each field to `on_field`, which returns
// false to stop: the rest is skipped by the event's own iteration.
template <typename OnField>
simdjson::error_code walk_args(od::value& v, RawEvent& e, OnField&& on_field) noexcept {
    e.args_read = true;
    od::object args;
    if (auto err = v.get_object().get(args); err) return err;
    for (auto field_result : args) {
        od::field field;
        if (auto err = std::move(field_result).get(field); err) return err;
        if (!on_field(field)) break;
    }
    return simdjson::SUCCESS;
}

// One field of "args", into the event's fields.
void read_arg(od::field& field, RawEvent& e) noexcept {
    od::raw_json_string key = field.key();
    od::value& value = field.value();
    // Dispatch on the key; comparisons against raw (still escaped) keys are exact for these
    // plain-ASCII names.
    const char* k = key.raw();
    switch (k[0]) {
        case 'd':
            if (key == "device") read_int(value, e.device);
            break;
        case 's':
            if (key == "stream")
                read_int(value, e.stream);
            else if (key == "shared memory")
                read_int(value, e.shared_memory);
            break;
        case 'c':
            if (key == "correlation")
                read_int(value, e.correlation);
            else if (key == "cbid")
                read_int(value, e.cbid);
            else if (key == "cuda_sync_kind")
                ignore(read_string(value, e.sync_kind));
            break;
        case 'b':
            if (key == "bytes")
                read_int(value, e.bytes);
            else if (key == "block")
                e.block = read_dim_product(value);
            break;
        case 'g':
            if (key == "grid") e.grid = read_dim_product(value);
            break;
        case 'r':
            if (key == "registers per thread") read_int(value, e.registers);
            break;
        case 'E':
            if (key == "External id") read_int(value, e.external_id);
            break;
        case 'D':
            if (key == "Device Type")
                read_int(value, e.mem_device_type);
            else if (key == "Device Id")
                read_int(value, e.mem_device_id);
            break;
        case 'A':
            if (key == "Addr") read_int(value, e.mem_addr);
            break;
        case 'B':
            if (key == "Bytes") e.has_mem_bytes = read_int(value, e.mem_bytes);
            break;
        case 'T':
            if (key == "Total Allocated")
                read_double(value, e.total_allocated);
            else if (key == "Total Reserved")
                read_double(value, e.total_reserved);
            break;
        case 'n':
            if (key == "name") ignore(read_string(value, e.arg_name));
            break;
        case 'l':
            if (key == "labels") ignore(read_string(value, e.arg_labels));
            break;
        case 'w':
            if (key == "wait_on_stream")
                read_int(value, e.wait_on_stream);
            else if (key == "wait_on_cuda_event_record_corr_id")
                read_int(value, e.wait_on_record);
            break;
        default: break;
    }
}

simdjson::error_code read_args(od::value& v, RawEvent& e) noexcept {
    return walk_args(v, e, [&e](od::field& field) {
        read_arg(field, e);
        return true;
    });
}

// The dims of input `index` in an "Input Dims" array, when that input is a tensor of at most
// RawArgs::kMaxInputRank dims.
void read_input_dims(od::value& inputs_value, int index, RawEvent& e) noexcept {
    od::array inputs;
    if (inputs_value.get_array().get(inputs) != simdjson::SUCCESS) return;
    int at = 0;
    for (auto input : inputs) {
        if (at++ != index) continue;
        od::array dims;
        if (input.get_array().get(dims) != simdjson::SUCCESS) return;
        int rank = 0;
        for (auto item : dims) {
            od::value x;
            std::int64_t n = 0;
            if (rank == RawArgs::kMaxInputRank || item.get(x) != simdjson::SUCCESS ||
                !read_int(x, n) || n < 0) {
                return;
            }
            e.input_dims[rank++] = n;
        }
        e.input_rank = rank;
        return;
    }
}

// A CPU operator's args, read for its "Input Dims" alone.
simdjson::error_code read_layer_args(od::value& v, int index, RawEvent& e) noexcept {
    return walk_args(v, e, [&e, index](od::field& field) {
        if (field.key() != "Input Dims") return true;
        read_input_dims(field.value(), index, e);
        return false;
    });
}

simdjson::error_code read_event(od::object& obj, RawEvent& e) noexcept {
    for (auto field_result : obj) {
        od::field field;
        if (auto err = std::move(field_result).get(field); err) return err;
        od::raw_json_string key = field.key();
        od::value& value = field.value();
        const char* k = key.raw();
        switch (k[0]) {
            case 'p':
                if (key == "ph") {
                    std::string_view ph;
                    if (read_string(value, ph) == simdjson::SUCCESS && !ph.empty()) {
                        e.ph = ph.front();
                    }
                    // Flows, counters and async markers carry nothing gpudiag reads (correlation
                    // ids are in the events' args): stop here, the array iteration skips the rest.
                    if (e.ph == 's' || e.ph == 'f' || e.ph == 't' || e.ph == 'C' || e.ph == 'b' ||
                        e.ph == 'e' || e.ph == 'n') {
                        return simdjson::SUCCESS;
                    }
                } else if (key == "pid") {
                    read_id(value, e.pid, &e.pid_numeric, nullptr);
                }
                break;
            case 'c':
                if (key == "cat") {
                    ignore(read_string(value, e.cat));
                    e.category = classify_category(e.cat);
                }
                break;
            case 'n':
                if (key == "name") ignore(read_string(value, e.name));
                break;
            case 't':
                if (key == "ts")
                    e.has_ts = read_time(value, e.ts);
                else if (key == "tid")
                    read_id(value, e.tid, nullptr, &e.tid_is_stream);
                break;
            case 'd':
                if (key == "dur") {
                    if (!read_time(value, e.dur)) e.dur = 0;
                }
                break;
            case 'a':
                if (key == "args") {
                    // CPU-side records carry call stacks and shapes gpudiag does not read, but
                    // for layers' input shapes.
                    Category c = e.category;
                    bool wanted = e.ph == 'M' || e.ph == 'i' || e.ph == 'I' ||
                                  (c != Category::kCpuOp && c != Category::kUserAnnotation &&
                                   c != Category::kIgnored);
                    if (wanted) {
                        if (auto err = read_args(value, e); err) return err;
                    } else if (c == Category::kCpuOp) {
                        // A layer's shapes ("name" comes before "args" in Kineto's writer).
                        const int input = LayerInputShapes::batch_input(e.name);
                        if (input >= 0) {
                            if (auto err = read_layer_args(value, input, e); err) return err;
                        }
                    }
                }
                break;
            default: break;
        }
    }
    return simdjson::SUCCESS;
}

bool starts_with(std::string_view s, std::string_view p) noexcept {
    return s.size() >= p.size() && s.compare(0, p.size(), p) == 0;
}

MemoryKind memory_kind_from(std::string_view w) noexcept {
    if (starts_with(w, "Pageable")) return MemoryKind::kPageable;
    if (starts_with(w, "Pinned")) return MemoryKind::kPinned;
    if (starts_with(w, "Device")) return MemoryKind::kDevice;
    if (starts_with(w, "Managed")) return MemoryKind::kManaged;
    if (starts_with(w, "Array")) return MemoryKind::kArray;
    return MemoryKind::kUnknown;
}

// "Memcpy HtoD (Pageable -> Device)" -> direction and memory kinds.
void decode_copy_name(std::string_view name, CopyPayload& copy) noexcept {
    if (name.find("HtoD") != std::string_view::npos)
        copy.direction = CopyDirection::kHostToDevice;
    else if (name.find("DtoH") != std::string_view::npos)
        copy.direction = CopyDirection::kDeviceToHost;
    else if (name.find("DtoD") != std::string_view::npos)
        copy.direction = CopyDirection::kDeviceToDevice;
    else if (name.find("HtoH") != std::string_view::npos)
        copy.direction = CopyDirection::kHostToHost;
    else if (name.find("PtoP") != std::string_view::npos)
        copy.direction = CopyDirection::kPeerToPeer;
    auto open = name.find('(');
    auto arrow = name.find("->");
    if (open != std::string_view::npos && arrow != std::string_view::npos && arrow > open) {
        std::string_view src = name.substr(open + 1, arrow - open - 1);
        while (!src.empty() && src.back() == ' ') src.remove_suffix(1);
        std::string_view dst = name.substr(arrow + 2);
        while (!dst.empty() && dst.front() == ' ') dst.remove_prefix(1);
        copy.src_kind = memory_kind_from(src);
        copy.dst_kind = memory_kind_from(dst);
    } else if (open != std::string_view::npos) {
        copy.dst_kind = memory_kind_from(name.substr(open + 1));  // "Memset (Device)"
    }
}

RangeCategory range_category_for(std::string_view name, Category cat, std::int64_t& step) noexcept {
    RangeMeaning m = range_meaning(name);
    if (m.known) {
        step = m.step;
        return m.category;
    }
    if (cat == Category::kCpuOp) return RangeCategory::kCpuOp;
    return RangeCategory::kUserAnnotation;
}

SyncKind sync_kind_from(std::string_view s) noexcept {
    if (s == "Event Sync") return SyncKind::kEvent;
    if (s == "Stream Sync") return SyncKind::kStream;
    if (s == "Context Sync" || s == "Device Sync") return SyncKind::kDevice;
    if (s == "Stream Wait Event") return SyncKind::kStreamWaitEvent;
    return SyncKind::kUnknown;
}

std::uint32_t clamp_u32(std::int64_t v) noexcept {
    if (v < 0) return 0;
    return v > INT32_MAX ? static_cast<std::uint32_t>(INT32_MAX) : static_cast<std::uint32_t>(v);
}

class Converter {
public:
    Converter(StringTable& strings, KinetoParseResult& out) : names_(strings), out_(out) {}

    void convert(const RawEvent& r) {
        if (r.ph == 'M') {
            metadata(r);
            return;
        }
        if (r.ph == 'i' || r.ph == 'I') {
            if (r.name == "[memory]")
                memory(r);
            else
                ++out_.ignored;
            return;
        }
        if (r.ph != 'X') {  // flows (s/f), counters, async begin/end: correlation is in args
            ++out_.ignored;
            return;
        }
        if (!r.has_ts || r.ts < 0) {
            ++out_.summary.dropped;
            return;
        }
        Category c = r.category;
        switch (c) {
            case Category::kKernel:
            case Category::kMemcpy:
            case Category::kMemset: gpu_activity(r, c); break;
            case Category::kRuntime:
            case Category::kDriver:
            case Category::kMtiaRuntime: api_call(r, c); break;
            case Category::kSync: sync(r); break;
            case Category::kCpuOp:
            case Category::kUserAnnotation:
            case Category::kGpuUserAnnotation: range(r, c); break;
            case Category::kMtiaDevice:
                saw_mtia_ = true;
                ++out_.ignored;
                break;
            case Category::kIgnored: ++out_.ignored; break;
            case Category::kInstant:
            case Category::kOther:
                if (!r.cat.empty()) note_unknown_category(r.cat);
                ++out_.ignored;
                break;
        }
    }

    // Takes over a slice of the event array that `slice_converter` read into `slice` on another
    // thread: its events in order (their string ids mapped through `remap` when the slice interned
    // into a table of its own), its counts, and what finish() will report.
    void adopt(KinetoParseResult& slice, const Converter& slice_converter,
               const std::vector<StringId>* remap) {
        if (out_.events.empty() && remap == nullptr) {
            out_.events.swap(slice.events);
        } else {
            const std::size_t first = out_.events.size();
            out_.events.insert(out_.events.end(), slice.events.begin(), slice.events.end());
            if (remap != nullptr) {
                for (std::size_t i = first; i < out_.events.size(); ++i) {
                    remap_strings(out_.events[i], *remap);
                }
            }
        }
        slice.events = std::vector<Event>();
        adopt_totals(slice_converter.totals(slice));
    }

    // What a piece read elsewhere adds to this parse's counts and notes (its events are kept
    // apart, see kineto_stream.cpp).
    void adopt_totals(const KinetoPieceTotals& piece) {
        out_.gpu_activities += piece.gpu_activities;
        out_.ignored += piece.ignored;
        out_.summary.dropped += piece.dropped;
        saw_mtia_ = saw_mtia_ || piece.saw_mtia;
        layer_shapes_.merge(piece.layer_shapes);
        // The first eight categories of the whole file are among the first eight of the pieces
        // they first occur in, so merging the pieces' lists in order gives the serial parse's list.
        for (const auto& c : piece.unknown_categories) note_unknown_category(c);
    }

    // This converter's counts over `result`, the parse it wrote into.
    [[nodiscard]] KinetoPieceTotals totals(const KinetoParseResult& result) const {
        KinetoPieceTotals t;
        t.gpu_activities = result.gpu_activities;
        t.ignored = result.ignored;
        t.dropped = result.summary.dropped;
        t.saw_mtia = saw_mtia_;
        t.unknown_categories = unknown_categories_;
        t.layer_shapes = layer_shapes_;
        return t;
    }

    void finish() {
        if (saw_mtia_) out_.device_vendor = "mtia";
        if (std::string batch = layer_shapes_.dominant(); !batch.empty()) {
            out_.info.properties.emplace_back("input_shapes", std::move(batch));
        }
        if (!unknown_categories_.empty()) {
            std::string list;
            for (const auto& c : unknown_categories_) list += (list.empty() ? "" : ", ") + c;
            out_.summary.notes.push_back("Ignored events of categories gpudiag does not read: " +
                                         list);
        }
    }

private:
    void note_unknown_category(std::string_view c) {
        if (unknown_categories_.size() < 8 &&
            std::find(unknown_categories_.begin(), unknown_categories_.end(), c) ==
                unknown_categories_.end()) {
            unknown_categories_.emplace_back(c);
        }
    }

    Event base(const RawEvent& r) const {
        Event e;
        e.start_ns = static_cast<std::uint64_t>(r.ts);
        e.end_ns = e.start_ns + static_cast<std::uint64_t>(std::max<std::int64_t>(r.dur, 0));
        e.process = static_cast<std::uint32_t>(r.pid);
        e.thread = static_cast<std::uint32_t>(r.tid);
        return e;
    }

    void gpu_activity(const RawEvent& r, Category c) {
        Event e = base(r);
        std::int64_t device = r.device >= 0 ? r.device : (r.pid_numeric ? r.pid : 0);
        std::int64_t stream = r.stream >= 0 ? r.stream : r.tid;
        e.device = static_cast<std::uint16_t>(std::clamp<std::int64_t>(device, 0, 0xFFFE));
        e.stream = static_cast<std::uint32_t>(stream);
        e.thread = 0;
        if (c == Category::kKernel) {
            e.kind = EventKind::kKernel;
            e.kernel.name = names_.intern(r.name);
            e.kernel.correlation = static_cast<std::uint32_t>(r.correlation);
            e.kernel.grid_size = clamp_u32(r.grid);
            e.kernel.block_size = clamp_u32(r.block);
            e.kernel.shared_bytes = clamp_u32(r.shared_memory);
            e.kernel.registers = clamp_u32(r.registers);
        } else {
            e.kind = c == Category::kMemcpy ? EventKind::kMemcpy : EventKind::kMemset;
            e.copy.bytes = static_cast<std::uint64_t>(std::max<std::int64_t>(r.bytes, 0));
            e.copy.correlation = static_cast<std::uint32_t>(r.correlation);
            decode_copy_name(r.name, e.copy);
        }
        ++out_.gpu_activities;
        out_.events.push_back(e);
    }

    void api_call(const RawEvent& r, Category c) {
        Event e = base(r);
        e.kind = EventKind::kApiCall;
        e.api.name = names_.intern(r.name);
        e.api.correlation = static_cast<std::uint32_t>(r.correlation);
        e.api.callback_id = clamp_u32(r.cbid);
        e.api.domain = c == Category::kRuntime  ? ApiDomain::kRuntime
                       : c == Category::kDriver ? ApiDomain::kDriver
                                                : ApiDomain::kUnknown;
        out_.events.push_back(e);
    }

    void sync(const RawEvent& r) {
        Event e = base(r);
        e.kind = EventKind::kSync;
        if (r.device >= 0)
            e.device = static_cast<std::uint16_t>(std::min<std::int64_t>(r.device, 0xFFFE));
        e.stream = r.stream >= 0 ? static_cast<std::uint32_t>(r.stream) : kNoStream;
        e.thread = 0;
        e.sync.correlation = static_cast<std::uint32_t>(r.correlation);
        e.sync.sync_kind = sync_kind_from(r.sync_kind.empty() ? r.name : r.sync_kind);
        e.sync.wait_stream = r.wait_on_stream > 0 ? clamp_u32(r.wait_on_stream) : kNoStream;
        e.sync.record_correlation = r.wait_on_record > 0 ? clamp_u32(r.wait_on_record) : 0;
        out_.events.push_back(e);
    }

    void range(const RawEvent& r, Category c) {
        Event e = base(r);
        e.kind = EventKind::kRange;
        std::int64_t step = 0;
        e.range.name = names_.intern(r.name);
        e.range.id = static_cast<std::uint64_t>(std::max<std::int64_t>(r.external_id, 0));
        if (c == Category::kGpuUserAnnotation) {
            // The GPU-side copy of a user range: kept for exports, never a host range or a step.
            e.range.category = RangeCategory::kUserAnnotation;
            e.device = static_cast<std::uint16_t>(std::clamp<std::int64_t>(
                r.device >= 0 ? r.device : (r.pid_numeric ? r.pid : 0), 0, 0xFFFE));
            e.stream = static_cast<std::uint32_t>(r.tid);
            e.thread = 0;
        } else {
            if (r.input_rank >= 0) {
                layer_shapes_.add(r.name, r.input_dims, static_cast<std::size_t>(r.input_rank));
            }
            e.range.category = range_category_for(r.name, c, step);
            if (e.range.category == RangeCategory::kStep)
                e.range.id = static_cast<std::uint64_t>(step);
        }
        out_.events.push_back(e);
    }

    void memory(const RawEvent& r) {
        // Kineto's allocator records: Device Type 0 is host memory, which gpudiag does not track.
        if (!r.has_ts || r.ts < 0 || r.mem_device_type <= 0) {
            ++out_.ignored;
            return;
        }
        std::uint16_t device =
            static_cast<std::uint16_t>(std::clamp<std::int64_t>(r.mem_device_id, 0, 0xFFFE));
        if (r.has_mem_bytes && r.mem_bytes != 0) {
            Event e = base(r);
            e.end_ns = e.start_ns;
            e.kind = r.mem_bytes > 0 ? EventKind::kBlockAlloc : EventKind::kBlockFree;
            e.device = device;
            e.flags = static_cast<std::uint8_t>(MemoryKind::kDevice);
            e.memory.address = static_cast<std::uint64_t>(r.mem_addr);
            e.memory.bytes =
                static_cast<std::uint64_t>(r.mem_bytes > 0 ? r.mem_bytes : -r.mem_bytes);
            e.memory.aux = e.memory.bytes;
            out_.events.push_back(e);
        }
        auto counter = [&](CounterKind kind, double value) {
            Event e = base(r);
            e.end_ns = e.start_ns;
            e.kind = EventKind::kCounter;
            e.device = device;
            e.counter.counter = kind;
            e.counter.value = value;
            out_.events.push_back(e);
        };
        if (r.total_allocated >= 0)
            counter(CounterKind::kFrameworkAllocatedBytes, r.total_allocated);
        if (r.total_reserved >= 0) counter(CounterKind::kFrameworkReservedBytes, r.total_reserved);
    }

    void metadata(const RawEvent& r) {
        if (r.name == "process_labels" || r.name == "process_name") {
            std::string_view label = r.name == "process_labels" ? r.arg_labels : r.arg_name;
            if (starts_with(label, "MTIA")) saw_mtia_ = true;
        }
    }

    NameCache names_;
    KinetoParseResult& out_;
    bool saw_mtia_ = false;
    std::vector<std::string> unknown_categories_;
    LayerInputShapes layer_shapes_;
};

void read_device_properties(od::value& v, SourceInfo& info, std::string& vendor) {
    od::array arr;
    if (v.get_array().get(arr) != simdjson::SUCCESS) return;
    for (auto item : arr) {
        od::object obj;
        if (item.get_object().get(obj) != simdjson::SUCCESS) continue;
        DeviceInfo d;
        for (auto fr : obj) {
            od::field f;
            if (std::move(fr).get(f) != simdjson::SUCCESS) break;
            od::raw_json_string key = f.key();
            std::int64_t n = 0;
            if (key == "id") {
                if (read_int(f.value(), n))
                    d.ordinal = static_cast<std::uint16_t>(std::clamp<std::int64_t>(n, 0, 0xFFFE));
            } else if (key == "name") {
                std::string_view s;
                if (f.value().get_string().get(s) == simdjson::SUCCESS) d.name = std::string(s);
            } else if (key == "totalGlobalMem") {
                if (read_int(f.value(), n) && n > 0)
                    d.total_memory_bytes = static_cast<std::uint64_t>(n);
            }
        }
        if (d.name.find("AMD") != std::string::npos ||
            d.name.find("Instinct") != std::string::npos ||
            d.name.find("Radeon") != std::string::npos) {
            vendor = "amd";
        } else if (vendor.empty() && !d.name.empty()) {
            vendor = "nvidia";
        }
        if (info.devices.size() < 256) info.devices.push_back(std::move(d));
    }
}

void read_distributed_info(od::value& v, SourceInfo& info) {
    od::object obj;
    if (v.get_object().get(obj) != simdjson::SUCCESS) return;
    for (auto fr : obj) {
        od::field f;
        if (std::move(fr).get(f) != simdjson::SUCCESS) break;
        od::raw_json_string key = f.key();
        std::int64_t n = 0;
        if (key == "rank") {
            if (read_int(f.value(), n) && n >= 0 && n <= INT32_MAX)
                info.rank = static_cast<std::int32_t>(n);
        } else if (key == "world_size") {
            if (read_int(f.value(), n) && n >= 0 && n <= INT32_MAX)
                info.world_size = static_cast<std::int32_t>(n);
        } else if (key == "backend") {
            std::string_view s;
            if (f.value().get_string().get(s) == simdjson::SUCCESS) {
                info.properties.emplace_back("distributed_backend", std::string(s));
            }
        }
    }
}

std::string describe(simdjson::error_code err) {
    return simdjson::error_message(err);
}

// The last place where the trace can be cut and closed into valid JSON: just after a complete
// element of an array at depth 1 or 2 (the event array, in either trace form). Returns the closed
// text, or "" when there is no such place.
std::string close_after_last_complete_event(std::string_view text) {
    std::size_t depth = 0;
    char stack[3] = {0, 0, 0};  // container types at depths 1..3
    bool in_string = false;
    bool escaped = false;
    std::size_t cut = 0;
    char closers[2] = {0, 0};
    std::size_t closer_count = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
        char ch = text[i];
        if (in_string) {
            if (escaped)
                escaped = false;
            else if (ch == '\\')
                escaped = true;
            else if (ch == '"')
                in_string = false;
            continue;
        }
        switch (ch) {
            case '"': in_string = true; break;
            case '{':
            case '[':
                ++depth;
                if (depth <= 3) stack[depth - 1] = ch;
                break;
            case '}':
            case ']':
                if (depth == 0) return {};
                --depth;
                if ((depth == 1 || depth == 2) && stack[depth - 1] == '[') {
                    cut = i + 1;
                    closer_count = 0;
                    for (std::size_t d = depth; d >= 1; --d) {
                        closers[closer_count++] = stack[d - 1] == '[' ? ']' : '}';
                    }
                }
                break;
            default: break;
        }
    }
    if (cut == 0) return {};
    std::string closed(text.substr(0, cut));
    for (std::size_t k = 0; k < closer_count; ++k) closed += closers[k];
    return closed;
}

struct ParseAttempt {
    simdjson::error_code error = simdjson::SUCCESS;
    std::string where;
    bool found_events = false;
    bool not_a_trace_kind = false;  // an array of arrays: a memory-timeline export
};

simdjson::error_code read_event_array(od::array& events, Converter& converter,
                                      ParseAttempt& attempt) {
    attempt.found_events = true;
    RawEvent r;
    std::size_t index = 0;
    for (auto item : events) {
        od::object obj;
        if (auto err = item.get_object().get(obj); err) {
            od::json_type t;
            if (index == 0 && item.type().get(t) == simdjson::SUCCESS &&
                t == od::json_type::array) {
                attempt.not_a_trace_kind = true;
            }
            attempt.where = fmt::format("in event {}", index);
            return err;
        }
        r.reset();
        if (auto err = read_event(obj, r); err) {
            attempt.where = fmt::format("in event {}", index);
            return err;
        }
        converter.convert(r);
        ++index;
    }
    return simdjson::SUCCESS;
}

// One thread's share of the event array: consecutive pieces, parsed in order into one result.
struct SliceWork {
    std::vector<std::string_view> pieces;
    std::unique_ptr<StringTable> own_strings;  // the slice's names, until the split passes
    KinetoParseResult result;
    std::unique_ptr<Converter> converter;
    std::vector<StringId> remap;  // own_strings' ids -> the shared table's
    bool ok = false;
};

// The skeleton walk's view of a split parse: where the event array must be, and its slices.
struct SplitMerge {
    const char* array_open = nullptr;
    std::vector<SliceWork>* slices = nullptr;
    const KinetoPieceTotals* totals = nullptr;  // a streamed parse: the pieces' counts
    bool merged = false;
};

// Whether the document holds nothing after its top-level value (simdjson 3.0's on-demand document
// has no at_end(): current_location() reports the end as out of bounds).
bool nothing_after(od::document& doc) noexcept {
    return doc.current_location().error() == simdjson::OUT_OF_BOUNDS;
}

ParseAttempt parse_document(const char* data, std::size_t size, std::size_t capacity,
                            StringTable& strings, KinetoParseResult& out,
                            SplitMerge* split = nullptr) {
    ParseAttempt attempt;
    od::parser parser;
    Converter converter(strings, out);
    od::document doc;
    auto fail = [&](simdjson::error_code err, std::string where) {
        attempt.error = err;
        attempt.where = std::move(where);
        converter.finish();
        return attempt;
    };
    if (auto err = parser.iterate(data, size, capacity).get(doc); err)
        return fail(err, "at the start");

    od::json_type top;
    if (auto err = doc.type().get(top); err) return fail(err, "at the start");
    if (top == od::json_type::array) {
        if (split != nullptr) {
            // Only a streamed parse cuts a bare event array: its skeleton is the array, empty.
            const char* first = data;
            if (size >= 3 && std::memcmp(first, "\xEF\xBB\xBF", 3) == 0) first += 3;
            while (first < data + size &&
                   (*first == ' ' || *first == '\n' || *first == '\r' || *first == '\t')) {
                ++first;
            }
            if (split->totals == nullptr || first != split->array_open) {
                return fail(simdjson::INCORRECT_TYPE, "in the split skeleton");
            }
            od::array events;
            if (auto err = doc.get_array().get(events); err) return fail(err, "at the start");
            for (auto item : events) {
                (void)item;
                return fail(simdjson::INCORRECT_TYPE, "in the split skeleton");
            }
            if (!nothing_after(doc))
                return fail(simdjson::TRAILING_CONTENT, "after the event array");
            attempt.found_events = true;
            converter.adopt_totals(*split->totals);
            split->merged = true;
            converter.finish();
            return attempt;
        }
        od::array events;
        if (auto err = doc.get_array().get(events); err) return fail(err, "at the start");
        if (auto err = read_event_array(events, converter, attempt); err)
            return fail(err, attempt.where);
    } else if (top == od::json_type::object) {
        od::object root;
        if (auto err = doc.get_object().get(root); err) return fail(err, "at the start");
        for (auto fr : root) {
            od::field f;
            if (auto err = std::move(fr).get(f); err) return fail(err, "in the top-level object");
            od::raw_json_string key = f.key();
            if (key == "traceEvents" && split != nullptr) {
                // The skeleton holds "[]" where the slices were cut out: it must be the one
                // top-level "traceEvents", at the place the slices came from.
                if (split->merged || f.value().raw_json_token().data() != split->array_open) {
                    return fail(simdjson::INCORRECT_TYPE, "in the split skeleton");
                }
                od::array events;
                if (auto err = f.value().get_array().get(events); err)
                    return fail(err, "in traceEvents");
                for (auto item : events) {
                    (void)item;
                    return fail(simdjson::INCORRECT_TYPE, "in the split skeleton");
                }
                attempt.found_events = true;
                if (split->totals != nullptr) {
                    converter.adopt_totals(*split->totals);
                    split->merged = true;
                    continue;
                }
                if (split->slices == nullptr) {
                    split->merged = true;  // a probe of the skeleton alone
                    continue;
                }
                for (SliceWork& work : *split->slices) {
                    converter.adopt(work.result, *work.converter,
                                    work.own_strings ? &work.remap : nullptr);
                }
                split->merged = true;
            } else if (key == "traceEvents") {
                od::array events;
                if (auto err = f.value().get_array().get(events); err)
                    return fail(err, "in traceEvents");
                if (auto err = read_event_array(events, converter, attempt); err)
                    return fail(err, attempt.where);
            } else if (key == "deviceProperties") {
                read_device_properties(f.value(), out.info, out.device_vendor);
            } else if (key == "distributedInfo") {
                read_distributed_info(f.value(), out.info);
            } else if (key == "baseTimeNanoseconds") {
                std::int64_t base = 0;
                if (read_int(f.value(), base) && base > 0) out.info.wall_clock_offset_ns = base;
            } else if (key == "schemaVersion" || key == "cuda_runtime_version" ||
                       key == "cuda_driver_version" || key == "displayTimeUnit") {
                std::int64_t n = 0;
                std::string_view s;
                std::string name = key == "schemaVersion"          ? "kineto_schema_version"
                                   : key == "cuda_runtime_version" ? "cuda_runtime_version"
                                   : key == "cuda_driver_version"  ? "cuda_driver_version"
                                                                   : "display_time_unit";
                od::json_type t;
                if (f.value().type().get(t) != simdjson::SUCCESS) continue;
                if (t == od::json_type::string &&
                    f.value().get_string().get(s) == simdjson::SUCCESS) {
                    out.info.properties.emplace_back(name, std::string(s));
                } else if (read_int(f.value(), n)) {
                    out.info.properties.emplace_back(name, fmt::to_string(n));
                }
            }
        }
    } else {
        return fail(simdjson::INCORRECT_TYPE, "at the start");
    }
    // Text after the top-level value makes the whole no JSON: the on-demand parse stops reading
    // at the value's end, so it is checked here (the streamed parse's skeleton probe relies on it).
    if (!nothing_after(doc)) return fail(simdjson::TRAILING_CONTENT, "after the trace's end");
    converter.finish();
    return attempt;
}

// Parses each piece of a slice as the array "[" piece ",{}]". `ok` is set only when, for every
// piece, every element was read and the last one was the appended "{}", found as an element of
// the array at the very place it was put: the piece then ended between elements, outside any
// string, and the array did not close early at a bracket inside it. The pieces are copied in turn
// into one buffer, so a thread holds one piece's copy at a time. Never throws.
void parse_slice(SliceWork& work, StringTable& strings, std::size_t reserve) noexcept {
    try {
        work.converter = std::make_unique<Converter>(strings, work.result);
        work.result.events.reserve(reserve);
        constexpr std::string_view kEnd = ",{}]";
        std::size_t largest = 0;
        for (std::string_view piece : work.pieces) largest = std::max(largest, piece.size());
        const std::size_t capacity = 1 + largest + kEnd.size() + simdjson::SIMDJSON_PADDING;
        auto copy = std::make_unique_for_overwrite<char[]>(capacity);
        od::parser parser;
        RawEvent r;
        for (std::string_view piece : work.pieces) {
            const std::size_t size = 1 + piece.size() + kEnd.size();
            copy[0] = '[';
            std::memcpy(copy.get() + 1, piece.data(), piece.size());
            std::memcpy(copy.get() + 1 + piece.size(), kEnd.data(), kEnd.size());
            std::memset(copy.get() + size, 0, simdjson::SIMDJSON_PADDING);
            const char* sentinel = copy.get() + size - 3;
            od::document doc;
            if (parser.iterate(copy.get(), size, size + simdjson::SIMDJSON_PADDING).get(doc))
                return;
            od::array events;
            if (doc.get_array().get(events)) return;
            bool at_sentinel = false;
            for (auto item : events) {
                od::value v;
                od::object obj;
                if (at_sentinel || item.get(v)) return;
                const char* at = v.raw_json_token().data();  // before get_object moves past '{'
                if (v.get_object().get(obj)) return;
                if (at == sentinel) {
                    at_sentinel = true;
                    continue;
                }
                r.reset();
                if (read_event(obj, r)) return;
                work.converter->convert(r);
            }
            if (!at_sentinel) return;
        }
        work.ok = true;
    } catch (...) {
        work.ok = false;  // out of memory: the caller parses the whole document instead
    }
}

// Interns every string of `from` into `into`, in id order; returns the map from `from`'s ids.
std::vector<StringId> intern_all(const StringTable& from, StringTable& into) {
    const std::size_t n = from.size();
    std::vector<StringId> ids(n, kNoString);
    if (n > StringTable::kOverflowString)
        ids[StringTable::kOverflowString] = StringTable::kOverflowString;
    for (std::size_t id = StringTable::kOverflowString + 1; id < n; ++id) {
        ids[id] = into.intern(from.lookup(static_cast<StringId>(id)));
    }
    return ids;
}

// The skeleton of a split: the text up to and including the array's "[", then from its "]" on.
TraceBuffer make_skeleton(std::string_view text, std::size_t open, std::size_t close) {
    const std::size_t head = open + 1;
    const std::size_t size = head + (text.size() - close);
    TraceBuffer skeleton(size);
    std::memcpy(skeleton.data(), text.data(), head);
    std::memcpy(skeleton.data() + head, text.data() + close, text.size() - close);
    skeleton.resize(size);
    return skeleton;
}

// The event array parsed in slices on up to `threads` threads. Returns false, leaving `out` to be
// reset, when the document could not be split or any check below fails; the caller then parses
// the whole document on one thread.
//
// Why a wrong cut cannot pass: the cuts are found by bytes, so one may fall inside a nested
// object or array of an event's "args" (or, in a malformed file, inside a string). Each slice is
// parsed as "[" slice ",{}]" and passes only when every element is an object and the last element
// visited is the appended "{}" at the very offset it was written. Counting brackets (the way
// simdjson matches them, also across skipped values), a slice that began at element level but
// ended inside a nested value would swallow the "{}" into that value, so it is never seen as an
// element; one that closed more than it opened would close the array before reaching it; one that
// ended inside a string would swallow it into the string. The first slice starts at element
// level, just after the array's "[" (the skeleton check proves that bracket is the top-level
// "traceEvents" value); by induction every cut is at element level, outside strings, so the slices
// hold exactly the events, in file order, that the serial
// parse reads, and each is read by the same code. The skeleton (the text before the array's "[",
// then "]" and all after) is read by the serial walk, so the top-level keys are read as before.
bool parse_split(const TraceBuffer& buffer, unsigned threads, std::size_t piece_bytes,
                 StringTable& strings, KinetoParseResult& out) {
    const std::string_view text = buffer.view();
    const std::size_t open = find_events_array_open(text);
    if (open == std::string_view::npos) return false;
    // Where the array ends is found from the file's end; other arrays (deviceProperties, log
    // lines) may follow it: try the last few candidates, probing the skeleton of each.
    constexpr int kCloseCandidates = 4;
    std::size_t close = text.size();
    TraceBuffer skeleton;
    bool found = false;
    for (int tries = 0; tries < kCloseCandidates && !found; ++tries) {
        close = find_events_array_close(text, close);
        if (close == std::string_view::npos || close <= open) return false;
        skeleton = make_skeleton(text, open, close);
        KinetoParseResult scratch;
        StringTable scratch_strings;  // the skeleton holds no events; the caller's stays untouched
        SplitMerge probe{skeleton.data() + open, nullptr, nullptr, false};
        ParseAttempt attempt = parse_document(skeleton.data(), skeleton.size(),
                                              skeleton.capacity() + TraceBuffer::kPadding,
                                              scratch_strings, scratch, &probe);
        found = attempt.error == simdjson::SUCCESS && probe.merged;
    }
    if (!found) return false;
    // Each thread parses its share in pieces of a few MB: the copies a piece needs then take
    // little memory, and reusing one buffer saves faulting fresh pages in for every byte.
    piece_bytes = std::max<std::size_t>(piece_bytes, 1);
    const std::size_t body = close - open - 1;
    const std::size_t per_thread =
        std::max<std::size_t>(1, (body / threads + piece_bytes - 1) / piece_bytes);
    TraceSplit split;
    if (!cut_trace_slices(text, open, close, threads * per_thread, split)) return false;
    const std::size_t pieces = split.slices.size();
    const std::size_t groups = std::min<std::size_t>(threads, pieces);
    std::vector<SliceWork> slices(groups);
    for (std::size_t g = 0; g < groups; ++g) {
        for (std::size_t k = g * pieces / groups; k < (g + 1) * pieces / groups; ++k) {
            const auto& s = split.slices[k];
            slices[g].pieces.push_back(text.substr(s.begin, s.end - s.begin));
        }
        // Every slice interns into a table of its own, mapped into the caller's in slice order
        // below (the serial parse's first-seen order) only once all have passed: a split that
        // fails leaves the caller's table as it was, so the serial parse that follows interns
        // exactly what it would have alone.
        slices[g].own_strings = std::make_unique<StringTable>();
    }
    // The first slice's events become the result: room for all (untouched pages cost nothing).
    const std::size_t reserve_all = buffer.size() / 128 + 16;
    std::vector<std::thread> workers;
    std::vector<std::size_t> inline_slices;
    // Nothing may throw while a thread runs unjoined (its destructor would terminate the host).
    workers.reserve(slices.size());
    inline_slices.reserve(slices.size());
    for (std::size_t k = 1; k < slices.size(); ++k) {
        SliceWork& work = slices[k];
        std::size_t reserve = 16;
        for (std::string_view piece : work.pieces) reserve += piece.size() / 128;
        try {
            workers.push_back(quiet_thread("gpudiag-parse", [&work, reserve] {
                parse_slice(work, *work.own_strings, reserve);
            }));
        } catch (...) {
            inline_slices.push_back(k);  // no thread to be had: parse it here, afterwards
        }
    }
    parse_slice(slices[0], *slices[0].own_strings, reserve_all);
    for (auto& w : workers) w.join();
    for (std::size_t k : inline_slices) parse_slice(slices[k], *slices[k].own_strings, 0);
    for (const SliceWork& work : slices) {
        if (!work.ok) return false;
    }
    // The slices' names go through a staging table, in slice order, and reach the caller's only
    // once the merge has passed too.
    StringTable staging;
    for (SliceWork& work : slices) work.remap = intern_all(*work.own_strings, staging);
    SplitMerge merge{skeleton.data() + split.array_open, &slices, nullptr, false};
    ParseAttempt attempt =
        parse_document(skeleton.data(), skeleton.size(),
                       skeleton.capacity() + TraceBuffer::kPadding, staging, out, &merge);
    if (attempt.error != simdjson::SUCCESS || !merge.merged) return false;
    const std::vector<StringId> final_ids = intern_all(staging, strings);
    bool identity = true;
    for (std::size_t id = 0; identity && id < final_ids.size(); ++id)
        identity = final_ids[id] == id;
    if (!identity) {
        for (Event& e : out.events) remap_strings(e, final_ids);
    }
    out.slices = slices.size();
    return true;
}

Status finish_result(KinetoParseResult& out) {
    finish_kineto_result(out, out.events.size());
    return Status::ok();
}

}  // namespace

void finish_kineto_result(KinetoParseResult& out, std::uint64_t events) {
    out.summary.events = events;
    if (out.summary.dropped > 0) {
        out.summary.notes.push_back(
            fmt::format("{} events without a usable timestamp were skipped", out.summary.dropped));
    }
    if (out.device_vendor.empty() && out.gpu_activities > 0) out.device_vendor = "nvidia";
    if (!out.device_vendor.empty())
        out.info.properties.emplace_back("device_vendor", out.device_vendor);
}

void merge_piece_totals(KinetoPieceTotals& into, const KinetoPieceTotals& later) {
    into.gpu_activities += later.gpu_activities;
    into.ignored += later.ignored;
    into.dropped += later.dropped;
    into.saw_mtia = into.saw_mtia || later.saw_mtia;
    into.layer_shapes.merge(later.layer_shapes);
    for (const auto& c : later.unknown_categories) {
        if (into.unknown_categories.size() < 8 &&
            std::find(into.unknown_categories.begin(), into.unknown_categories.end(), c) ==
                into.unknown_categories.end()) {
            into.unknown_categories.push_back(c);
        }
    }
}

struct KinetoPieceParser::Impl {
    od::parser parser;
    RawEvent raw;
};

KinetoPieceParser::KinetoPieceParser() : impl_(std::make_unique<Impl>()) {}
KinetoPieceParser::~KinetoPieceParser() = default;

bool KinetoPieceParser::parse(const char* text, std::size_t size, std::size_t capacity,
                              StringTable& strings, std::vector<Event>& events,
                              KinetoPieceTotals& totals) noexcept {
    try {
        KinetoParseResult result;
        result.events.swap(events);
        struct GiveBack {  // the events go back to the caller however this ends
            KinetoParseResult& from;
            std::vector<Event>& to;
            ~GiveBack() { to.swap(from.events); }
        } give_back{result, events};
        Converter converter(strings, result);
        const char* sentinel = text + size - 3;  // the "{" of the appended ",{}]"
        od::document doc;
        if (impl_->parser.iterate(text, size, capacity).get(doc)) return false;
        od::array array;
        if (doc.get_array().get(array)) return false;
        bool at_sentinel = false;
        for (auto item : array) {
            od::value v;
            od::object obj;
            if (at_sentinel || item.get(v)) return false;
            const char* at = v.raw_json_token().data();  // before get_object moves past '{'
            if (v.get_object().get(obj)) return false;
            if (at == sentinel) {
                at_sentinel = true;
                continue;
            }
            impl_->raw.reset();
            if (read_event(obj, impl_->raw)) return false;
            converter.convert(impl_->raw);
        }
        if (!at_sentinel) return false;
        merge_piece_totals(totals, converter.totals(result));
        return true;
    } catch (...) {
        return false;  // out of memory: the caller reads the trace another way
    }
}

void parse_kineto_skeleton(const TraceBuffer& skeleton, std::size_t array_open,
                           const KinetoPieceTotals& totals, const std::string& name,
                           StringTable& strings, KinetoParseResult& out, bool* verified) {
    out = KinetoParseResult{};
    out.info.producer = kProducerKineto;
    out.info.description = name;
    SplitMerge merge{skeleton.data() + array_open, nullptr, &totals, false};
    ParseAttempt attempt =
        parse_document(skeleton.data(), skeleton.size(),
                       skeleton.capacity() + TraceBuffer::kPadding, strings, out, &merge);
    *verified = attempt.error == simdjson::SUCCESS && merge.merged;
}

Status parse_kineto_trace(const TraceBuffer& buffer, const std::string& name, StringTable& strings,
                          KinetoParseResult& out) {
    Status status = parse_kineto_events(buffer, name, strings, out);
    // Kineto writes CPU operators, then GPU activity, then flows: order everything by time once.
    if (status.is_ok()) sort_by_start(out.events);
    return status;
}

namespace {

// Parses a copy of `text` (with the padding simdjson needs); true when it read a trace (whose
// events may all have been skipped).
bool parse_copy(std::string_view text, StringTable& strings, KinetoParseResult& out) {
    if (text.empty()) return false;
    TraceBuffer copy(text.size());
    std::memcpy(copy.data(), text.data(), text.size());
    copy.resize(text.size());
    const ParseAttempt attempt = parse_document(
        copy.data(), copy.size(), copy.capacity() + TraceBuffer::kPadding, strings, out);
    return attempt.error == simdjson::SUCCESS && attempt.found_events;
}

// The text up to a byte JSON text cannot hold, as the streamed parse reads the same input (the
// on-demand parse alone would skip over such damage inside an event it does not use, and call
// the trace whole): whole when the trace closed before that byte, else the events before it.
Status parse_before_non_json_byte(const TraceBuffer& buffer, std::size_t at,
                                  const std::string& name, StringTable& strings,
                                  KinetoParseResult& out) {
    const std::string problem =
        describe_non_json_byte(at, static_cast<unsigned char>(buffer.data()[at]));
    const std::string_view before = buffer.view().substr(0, at);
    const SourceInfo info = out.info;
    if (parse_copy(before, strings, out)) {
        finish_kineto_result(out, out.events.size());
        out.summary.notes.push_back(note_after_trace_end(problem));
        return Status::ok();
    }
    out = KinetoParseResult{};
    out.info = info;
    if (parse_copy(close_after_last_complete_event(before), strings, out) && !out.events.empty()) {
        out.summary.truncated = true;
        out.summary.missing.push_back(
            fmt::format("{}; kept the {} events before it, whatever followed is missing", problem,
                        out.events.size()));
        return finish_result(out);
    }
    return corrupt_data(name + ": " + problem + "; no event came before it");
}

}  // namespace

Status parse_kineto_events(const TraceBuffer& buffer, const std::string& name, StringTable& strings,
                           KinetoParseResult& out, const KinetoParseOptions& options) {
    auto reset = [&] {
        out = KinetoParseResult{};
        out.info.producer = kProducerKineto;
        out.info.description = name;
    };
    reset();
    const std::size_t bad = find_non_json_byte(buffer.view());
    if (bad != std::string_view::npos)
        return parse_before_non_json_byte(buffer, bad, name, strings, out);
    unsigned threads = options.max_threads;
    if (threads == 0) threads = std::min(4u, std::max(1u, std::thread::hardware_concurrency()));
    if (threads >= 2 && buffer.size() >= options.split_min_bytes) {
        // Helper threads come from a process-wide budget: parses running side by side share it.
        ParseThreadBudget& budget = options.thread_budget != nullptr ? *options.thread_budget
                                                                     : ParseThreadBudget::process();
        ParseThreadBudget::Lease helpers(budget, threads - 1);
        bool done = false;
        if (helpers.granted() > 0) {
            try {
                done =
                    parse_split(buffer, 1 + helpers.granted(), options.piece_bytes, strings, out);
            } catch (const std::bad_alloc&) {
                done = false;  // the serial parse needs less memory: let it try
            }
        }
        if (done) return finish_result(out);
        reset();
    }
    // Kineto events take 150-400 bytes of JSON; reserving for the short end costs only address
    // space (untouched pages are never faulted in) and saves copying 64-byte events on growth.
    out.events.reserve(buffer.size() / 128 + 16);

    ParseAttempt first = parse_document(buffer.data(), buffer.size(),
                                        buffer.capacity() + TraceBuffer::kPadding, strings, out);
    if (first.error != simdjson::SUCCESS) {
        if (first.not_a_trace_kind) {
            return unsupported(name +
                               ": a JSON array of arrays, not a trace (this looks like a torch "
                               "memory-timeline export; gpudiag reads Kineto traces)");
        }
        // Close the text after its last complete event and read it again: a trace cut short by a
        // killed writer then loses only its unfinished tail.
        KinetoParseResult repaired;
        repaired.info = out.info;
        repaired.info.producer = kProducerKineto;
        repaired.info.description = name;
        const bool recovered =
            parse_copy(close_after_last_complete_event(buffer.view()), strings, repaired) &&
            repaired.events.size() >= out.events.size();
        std::string problem = "malformed JSON " + first.where + " (" + describe(first.error) + ")";
        if (recovered) {
            out = std::move(repaired);
        } else if (out.events.empty()) {
            return corrupt_data(name + ": " + problem + "; not a readable Chrome/Kineto trace");
        }
        out.summary.truncated = true;
        out.summary.missing.push_back(
            fmt::format("{}: the trace is unreadable from there on; kept the {} events before it, "
                        "whatever followed is missing",
                        problem, out.events.size()));
    } else if (!first.found_events) {
        return corrupt_data(name +
                            ": valid JSON but no \"traceEvents\" array: not a "
                            "Chrome/Kineto trace");
    }

    return finish_result(out);
}

}  // namespace gpudiag::detail
