// SPDX-License-Identifier: Apache-2.0
// The EventSource for Flight Recorder dumps: the file read whole (a dump is a ring of at most a
// few thousand calls), parsed, and replayed as kCollective events.
#include "importers/flight_recorder/flight_recorder_source.hpp"

#include "importers/byte_stream.hpp"
#include "importers/job_inputs.hpp"
#include "importers/open_source.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

namespace gpudiag::detail {
namespace {

namespace keys = flight_recorder_keys;

// What the recorder's state says of how far the call got. gloo's recorder never moves an entry
// past "scheduled" (it has no device events to watch): it retires the entry once the work is
// over, so a retired gloo entry is done (completed, or failed: the recorder does not tell).
std::uint8_t state_of(const FlightRecorderEntry& e) {
    if (e.state == "completed") return collective_state::kCompleted;
    if (e.retired && e.profiling_name.rfind("gloo:", 0) == 0) return collective_state::kCompleted;
    if (e.state == "started") return collective_state::kStarted;
    if (e.state == "scheduled") return collective_state::kScheduled;
    return collective_state::kUnknown;
}

std::string stack_of(const FlightRecorderEntry& e) {
    std::string out;
    for (const auto& f : e.frames) {
        if (!out.empty()) out += '\n';
        out += fmt::format("{}:{} in {}", f.file, f.line, f.name);
    }
    return out;
}

std::string sizes_of(const FlightRecorderEntry& e) {
    auto side = [](const std::string& sizes, const std::string& dtypes) {
        return dtypes.empty() ? sizes : sizes + " " + dtypes;
    };
    return side(e.input_sizes, e.input_dtypes) + " -> " + side(e.output_sizes, e.output_dtypes);
}

std::string ranks_text(const std::vector<std::int64_t>& ranks) {
    std::string out;
    for (std::int64_t r : ranks) out += fmt::format("{}{}", out.empty() ? "" : ",", r);
    return out;
}

// The members of each group the entries name. pg_config is keyed by the group's name, but some
// writers key it otherwise (torch 2.3 by pg id; gloo in torch 2.15 by "" while its entries say
// "0"): then the entry of the same description, the only entry there is, or, for the default
// group, the largest one.
const FlightRecorderGroup* config_of(const FlightRecorderDump& d, const std::string& name,
                                     const std::string& desc, std::int64_t pg_id) {
    for (const auto& g : d.groups) {
        if (g.key == name) return &g;
    }
    for (const auto& g : d.groups) {
        if (!desc.empty() && g.desc == desc) return &g;
        if (g.key == fmt::format("{}", pg_id)) return &g;
    }
    if (d.groups.size() == 1) return &d.groups.front();
    if (desc == "default_pg") {
        auto largest = std::max_element(
            d.groups.begin(), d.groups.end(),
            [](const auto& a, const auto& b) { return a.ranks.size() < b.ranks.size(); });
        if (largest != d.groups.end()) return &*largest;
    }
    return nullptr;
}

void describe_groups(const FlightRecorderDump& d, SourceInfo& info) {
    struct Seen {
        std::string desc;
        std::int64_t pg_id = -1;
    };
    std::map<std::string, Seen> groups;
    for (const auto& e : d.entries) groups.emplace(e.group, Seen{e.group_desc, e.pg_id});
    std::size_t world = 0;
    for (const auto& g : d.groups) world = std::max(world, g.ranks.size());
    info.world_size = static_cast<std::int32_t>(world);
    for (const auto& [name, seen] : groups) {
        info.properties.emplace_back(std::string(keys::kGroupDesc) + name, seen.desc);
        if (const FlightRecorderGroup* g = config_of(d, name, seen.desc, seen.pg_id);
            g != nullptr && !g->ranks.empty())
            info.properties.emplace_back(std::string(keys::kGroupRanks) + name,
                                         ranks_text(g->ranks));
        for (const auto& s : d.status) {
            if (s.pg_id != fmt::format("{}", seen.pg_id)) continue;
            info.properties.emplace_back(
                std::string(keys::kGroupStatus) + name,
                fmt::format("{},{},{}", s.last_enqueued, s.last_started, s.last_completed));
        }
    }
}

Event event_of(const FlightRecorderEntry& e, StringTable& strings) {
    Event ev;
    ev.kind = EventKind::kCollective;
    ev.flags = static_cast<std::uint8_t>((e.is_p2p ? kEventFlagP2p : 0) |
                                         (e.retired ? kEventFlagRetired : 0));
    ev.start_ns = e.time_created_ns;
    ev.end_ns = std::max(e.time_created_ns, e.time_completed_ns);
    CollectivePayload& c = ev.collective;
    c.group = strings.intern(e.group);
    c.op = strings.intern(collective_op(e.profiling_name));
    const std::int64_t seq = e.is_p2p ? e.p2p_seq_id : e.collective_seq_id;
    c.seq = seq > 0 ? static_cast<std::uint64_t>(seq) : 0;
    c.sizes = strings.intern(sizes_of(e));
    c.stack = strings.intern(stack_of(e));
    c.state = state_of(e);
    c.record = static_cast<std::uint32_t>(std::max<std::int64_t>(e.record_id, 0));
    return ev;
}

class FlightRecorderSource final : public EventSource {
public:
    explicit FlightRecorderSource(std::string path) : path_(std::move(path)) {}

    Status run(EventSink& sink, StringTable& strings) override {
        auto bytes = read_all();
        if (!bytes) return bytes.status();
        auto dump = parse_flight_recorder(*bytes, path_);
        if (!dump) return dump.status();
        FlightRecorderEvents out = flight_recorder_events(*dump, path_, strings);
        sink.begin(out.info, strings);
        if (!out.events.empty()) sink.consume(out.events);
        sink.end(out.summary);
        return Status::ok();
    }

private:
    Result<std::string> read_all() const {
        auto in = open_content_stream(path_);
        if (!in) return in.status();
        std::string bytes;
        char buffer[1 << 16];
        for (;;) {
            auto got = (*in)->read(buffer, sizeof buffer);
            if (!got) return got.status();
            if (*got == 0) break;
            bytes.append(buffer, *got);
            if (bytes.size() > kFlightRecorderMaxBytes)
                return resource_exhausted(path_ + ": larger than a Flight Recorder dump can be");
        }
        return bytes;
    }

    std::string path_;
};

}  // namespace

FlightRecorderEvents flight_recorder_events(const FlightRecorderDump& dump, const std::string& name,
                                            StringTable& strings) {
    FlightRecorderEvents out;
    out.info.producer = std::string(keys::kProducer);
    out.info.description = name;
    out.info.rank = rank_from_name(JobInput{name, {}});  // torch names dumps <prefix><rank>
    out.info.properties.emplace_back(std::string(keys::kVersion), dump.version);
    describe_groups(dump, out.info);
    out.events.reserve(dump.entries.size());
    for (const auto& e : dump.entries) out.events.push_back(event_of(e, strings));
    std::stable_sort(out.events.begin(), out.events.end(), [](const Event& a, const Event& b) {
        return a.collective.record < b.collective.record;
    });
    out.summary.events = out.events.size();
    out.summary.damaged = dump.entries_skipped;
    if (dump.entries_skipped > 0)
        out.summary.notes.push_back(fmt::format(
            "{} entries of the dump were not records and were skipped", dump.entries_skipped));
    if (dump.json)
        out.summary.notes.push_back(
            "the JSON form of a Flight Recorder dump holds no stacks: where a rank was is named by "
            "its calls only");
    if (!dump.entries.empty() && dump.entries.front().record_id > 0)
        out.summary.notes.push_back(fmt::format(
            "the recorder's ring had already dropped its {} oldest calls (TORCH_FR_BUFFER_SIZE)",
            dump.entries.front().record_id));
    return out;
}

Result<std::unique_ptr<EventSource>> open_flight_recorder_source(
    const std::string& path, const AnalysisOptions& /*options*/) {
    return std::unique_ptr<EventSource>(std::make_unique<FlightRecorderSource>(path));
}

}  // namespace gpudiag::detail
