// SPDX-License-Identifier: Apache-2.0
// Flight Recorder dumps, pickle and JSON, read through one set of field rules: each backend (the
// safe pickle reader's values, simdjson's DOM) answers the same few questions (a dict's member, a
// list's items, a value as an integer or text), and the dump is built from those answers once.
#include "importers/flight_recorder/flight_recorder_dump.hpp"

#include "importers/torch_snapshot/safe_pickle_reader.hpp"

#include <fmt/format.h>
#include <simdjson.h>

#include <charconv>
#include <limits>
#include <utility>

namespace gpudiag::detail {
namespace {

// ---- the pickle's values ----------------------------------------------------------------------

using PNode = const PickleValue*;

PNode member(PNode v, std::string_view key) {
    return v != nullptr ? v->find(key) : nullptr;
}
bool is_null(PNode v) {
    return v == nullptr || v->kind() == PickleValue::Kind::kNone;
}
std::optional<std::int64_t> integer(PNode v) {
    if (v == nullptr) return std::nullopt;
    if (v->is_number()) return v->as_int();
    const std::string_view s = v->as_string();
    std::int64_t out = 0;
    if (!s.empty() && std::from_chars(s.data(), s.data() + s.size(), out).ec == std::errc())
        return out;
    return std::nullopt;
}
std::string text(PNode v) {
    if (v == nullptr) return {};
    if (v->is_string() || v->kind() == PickleValue::Kind::kBytes)
        return std::string(v->as_string());
    if (v->kind() == PickleValue::Kind::kFloat) return fmt::format("{:g}", v->as_double());
    if (v->is_number()) return fmt::format("{}", v->as_int());
    return {};
}
std::vector<PNode> items(PNode v) {
    std::vector<PNode> out;
    if (v == nullptr || v->kind() == PickleValue::Kind::kDict || !v->is_container()) return out;
    for (const auto& i : v->items()) out.push_back(i.get());
    return out;
}
std::vector<std::pair<std::string, PNode>> members(PNode v) {
    std::vector<std::pair<std::string, PNode>> out;
    if (v == nullptr || v->kind() != PickleValue::Kind::kDict) return out;
    const auto& kv = v->items();
    for (std::size_t i = 0; i + 1 < kv.size(); i += 2)
        out.emplace_back(text(kv[i].get()), kv[i + 1].get());
    return out;
}
bool is_dict(PNode v) {
    return v != nullptr && v->kind() == PickleValue::Kind::kDict;
}
bool is_list(PNode v) {
    return v != nullptr &&
           (v->kind() == PickleValue::Kind::kList || v->kind() == PickleValue::Kind::kTuple);
}

// ---- the JSON form's values -------------------------------------------------------------------

namespace dom = simdjson::dom;
using JNode = std::optional<dom::element>;

JNode member(const JNode& v, std::string_view key) {
    dom::object o;
    dom::element e;
    if (!v || v->get(o) != simdjson::SUCCESS || o.at_key(key).get(e) != simdjson::SUCCESS)
        return std::nullopt;
    return e;
}
bool is_null(const JNode& v) {
    return !v || v->is_null();
}
std::optional<std::int64_t> integer(const JNode& v) {
    if (!v) return std::nullopt;
    std::int64_t i = 0;
    double d = 0;
    bool b = false;
    std::string_view s;
    if (v->get(i) == simdjson::SUCCESS) return i;
    std::uint64_t u = 0;
    if (v->get(u) == simdjson::SUCCESS) return std::numeric_limits<std::int64_t>::max();
    if (v->get(d) == simdjson::SUCCESS && d > -9.2e18 && d < 9.2e18)
        return static_cast<std::int64_t>(d);
    if (v->get(b) == simdjson::SUCCESS) return b ? 1 : 0;
    if (v->get(s) == simdjson::SUCCESS && !s.empty() &&
        std::from_chars(s.data(), s.data() + s.size(), i).ec == std::errc())
        return i;
    return std::nullopt;
}
std::string text(const JNode& v) {
    if (!v) return {};
    std::string_view s;
    if (v->get(s) == simdjson::SUCCESS) return std::string(s);
    if (v->is_number()) {
        double d = 0;
        if (v->get(d) == simdjson::SUCCESS) return fmt::format("{:g}", d);
    }
    return {};
}
std::vector<JNode> items(const JNode& v) {
    std::vector<JNode> out;
    dom::array a;
    if (!v || v->get(a) != simdjson::SUCCESS) return out;
    for (dom::element e : a) out.emplace_back(e);
    return out;
}
std::vector<std::pair<std::string, JNode>> members(const JNode& v) {
    std::vector<std::pair<std::string, JNode>> out;
    dom::object o;
    if (!v || v->get(o) != simdjson::SUCCESS) return out;
    for (auto field : o) out.emplace_back(std::string(field.key), JNode(field.value));
    return out;
}
bool is_dict(const JNode& v) {
    return v && v->is_object();
}
bool is_list(const JNode& v) {
    return v && v->is_array();
}

// ---- the dump, from either ---------------------------------------------------------------------

template <typename N>
std::int64_t int_or(const N& v, std::int64_t fallback) {
    return integer(v).value_or(fallback);
}

// "[[4], [2, 3]]": torch's own list spelling, so that sizes compare as text across ranks.
template <typename N>
std::string sizes_text(const N& v) {
    if (!is_list(v)) return text(v);
    std::string out = "[";
    bool first = true;
    for (const auto& item : items(v)) {
        if (!first) out += ", ";
        first = false;
        out += is_list(item) ? sizes_text(item) : fmt::format("{}", int_or(item, 0));
    }
    return out + "]";
}

template <typename N>
std::string names_text(const N& v) {
    std::string out;
    for (const auto& item : items(v)) out += (out.empty() ? "" : ", ") + text(item);
    return out;
}

template <typename N>
std::uint64_t time_of(const N& v) {
    const std::int64_t t = is_null(v) ? 0 : int_or(v, 0);
    return t > 0 ? static_cast<std::uint64_t>(t) : 0;
}

template <typename N>
FlightRecorderEntry entry_of(const N& e) {
    FlightRecorderEntry out;
    out.record_id = int_or(member(e, "record_id"), -1);
    out.pg_id = int_or(member(e, "pg_id"), -1);
    const auto pg = items(member(e, "process_group"));  // (name, desc) since torch 2.4
    if (!pg.empty()) out.group = text(pg[0]);
    if (pg.size() > 1) out.group_desc = text(pg[1]);
    if (pg.empty() && out.pg_id >= 0) out.group = fmt::format("{}", out.pg_id);
    // torch 2.3 ("1.4") called the collective sequence id seq_id.
    auto seq = member(e, "collective_seq_id");
    out.collective_seq_id = int_or(is_null(seq) ? member(e, "seq_id") : seq, -1);
    out.p2p_seq_id = int_or(member(e, "p2p_seq_id"), -1);
    out.is_p2p = int_or(member(e, "is_p2p"), 0) != 0;
    out.profiling_name = text(member(e, "profiling_name"));
    out.state = text(member(e, "state"));
    out.retired = int_or(member(e, "retired"), 0) != 0;
    out.time_created_ns = time_of(member(e, "time_created_ns"));
    out.time_started_ns = time_of(member(e, "time_discovered_started_ns"));
    out.time_completed_ns = time_of(member(e, "time_discovered_completed_ns"));
    out.timeout_ms = int_or(member(e, "timeout_ms"), -1);
    out.input_sizes = sizes_text(member(e, "input_sizes"));
    out.output_sizes = sizes_text(member(e, "output_sizes"));
    out.input_dtypes = names_text(member(e, "input_dtypes"));
    out.output_dtypes = names_text(member(e, "output_dtypes"));
    for (const auto& f : items(member(e, "frames"))) {
        if (out.frames.size() >= kFlightRecorderMaxFrames) break;
        out.frames.push_back(FlightRecorderFrame{
            text(member(f, "name")), text(member(f, "filename")), int_or(member(f, "line"), 0)});
    }
    return out;
}

// "[0, 1, 2]" (the ranks as torch writes them, a string since torch 2.4) or a list of them.
template <typename N>
std::vector<std::int64_t> ranks_of(const N& v) {
    std::vector<std::int64_t> out;
    if (is_list(v)) {
        for (const auto& r : items(v)) out.push_back(int_or(r, -1));
        return out;
    }
    const std::string s = text(v);
    std::int64_t value = 0;
    for (std::size_t i = 0; i < s.size();) {
        auto [end, ec] = std::from_chars(s.data() + i, s.data() + s.size(), value);
        if (ec == std::errc()) {
            out.push_back(value);
            i = static_cast<std::size_t>(end - s.data());
        } else {
            ++i;
        }
    }
    return out;
}

template <typename N>
Result<FlightRecorderDump> dump_of(const N& root, const std::string& name) {
    if (!is_dict(root) || (is_null(member(root, "entries")) && is_null(member(root, "pg_config"))))
        return corrupt_data(name + ": not a Flight Recorder dump (no entries, no pg_config)");
    FlightRecorderDump d;
    d.version = text(member(root, "version"));
    for (const auto& [key, value] : members(member(root, "pg_config"))) {
        FlightRecorderGroup g;
        g.key = key;
        if (is_dict(value)) {
            g.desc = text(member(value, "desc"));
            g.ranks = ranks_of(member(value, "ranks"));
        } else {
            g.ranks = ranks_of(value);  // torch 2.3: pg id -> [ranks]
        }
        d.groups.push_back(std::move(g));
    }
    for (const auto& [key, value] : members(member(root, "pg_status"))) {
        d.status.push_back(
            FlightRecorderStatus{key, int_or(member(value, "last_enqueued_collective"), -1),
                                 int_or(member(value, "last_started_collective"), -1),
                                 int_or(member(value, "last_completed_collective"), -1)});
    }
    for (const auto& e : items(member(root, "entries"))) {
        if (d.entries.size() >= kFlightRecorderMaxEntries)
            return resource_exhausted(
                fmt::format("{}: more than {} entries", name, kFlightRecorderMaxEntries));
        if (!is_dict(e)) {
            ++d.entries_skipped;
            continue;
        }
        d.entries.push_back(entry_of(e));
    }
    return d;
}

Result<FlightRecorderDump> parse_pickle(std::string_view bytes, const std::string& name) {
    PickleLimits limits;
    limits.max_live_bytes = std::uint64_t{4} * kFlightRecorderMaxBytes;
    SafePickleReader reader(limits);
    auto root = reader.read(bytes, name);
    if (!root) return root.status();
    return dump_of<PNode>(root->get(), name);
}

Result<FlightRecorderDump> parse_json(std::string_view bytes, const std::string& name) {
    dom::parser parser;
    const simdjson::padded_string padded(bytes);
    dom::element root;
    if (auto error = parser.parse(padded).get(root); error != simdjson::SUCCESS)
        return corrupt_data(fmt::format("{}: not JSON ({})", name, simdjson::error_message(error)));
    auto d = dump_of<JNode>(JNode(root), name);
    if (d) d->json = true;
    return d;
}

}  // namespace

Result<FlightRecorderDump> parse_flight_recorder(std::string_view bytes, const std::string& name) {
    if (bytes.size() > kFlightRecorderMaxBytes)
        return resource_exhausted(
            fmt::format("{}: larger than a Flight Recorder dump can be", name));
    if (!bytes.empty() && static_cast<unsigned char>(bytes.front()) == 0x80)
        return parse_pickle(bytes, name);
    return parse_json(bytes, name);
}

std::string_view collective_op(std::string_view profiling_name) noexcept {
    const std::size_t colon = profiling_name.find(':');
    return colon == std::string_view::npos ? profiling_name : profiling_name.substr(colon + 1);
}

}  // namespace gpudiag::detail
