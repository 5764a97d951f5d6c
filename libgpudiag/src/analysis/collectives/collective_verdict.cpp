// SPDX-License-Identifier: Apache-2.0
#include "analysis/collectives/collective_verdict.hpp"

#include "analysis/collectives/collective_analyzer.hpp"
#include "analysis/findings/finding_catalog.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <set>
#include <string>
#include <variant>
#include <vector>

namespace gpudiag::detail {
namespace {

namespace ck = collective_keys;

struct Call {
    std::string op;
    std::string sizes;
    std::string site;
    [[nodiscard]] std::string signature() const { return op + " " + sizes; }
};

// One rank's view of one process group.
struct RankView {
    bool recorded = false;  // its dump holds calls on the group
    std::uint64_t enqueued = 0;
    std::uint64_t completed = 0;
    std::map<std::uint64_t, Call> calls;  // by sequence id
};

struct GroupView {
    std::string name;
    std::string desc;
    std::set<std::int32_t> listed;  // members as the dumps list them
    std::map<std::int32_t, RankView> ranks;
};

const Table* table_of(const Report& r, const char* id) {
    const Section* s = r.section(ck::kSection);
    if (s == nullptr) return nullptr;
    for (const auto& t : s->tables) {
        if (t.id == id) return &t;
    }
    return nullptr;
}

std::string text_at(const std::vector<Cell>& row, std::size_t i) {
    return i < row.size() && std::holds_alternative<std::string>(row[i])
               ? std::get<std::string>(row[i])
               : std::string();
}
double number_at(const std::vector<Cell>& row, std::size_t i) {
    return i < row.size() && std::holds_alternative<double>(row[i]) ? std::get<double>(row[i])
                                                                    : 0.0;
}

void add_members(const std::string& text, std::set<std::int32_t>& out) {
    std::int32_t v = 0;
    for (std::size_t at = 0; at < text.size();) {
        auto [end, ec] = std::from_chars(text.data() + at, text.data() + text.size(), v);
        if (ec == std::errc()) {
            out.insert(v);
            at = static_cast<std::size_t>(end - text.data());
        } else {
            ++at;
        }
    }
}

// The groups of the ranks' dumps; `dumped` gets the ranks that have one.
std::map<std::string, GroupView> read_groups(Report& job, std::set<std::int32_t>& dumped) {
    std::map<std::string, GroupView> out;
    for (const auto& r : job.ranks) {
        const Table* groups = table_of(r, ck::kGroupsTable);
        if (groups == nullptr) continue;
        if (r.source.rank < 0) {
            job.notes.push_back(fmt::format(
                "{}: a Flight Recorder dump whose rank is unknown (torch names them "
                "<prefix><rank>, e.g. nccl_trace_rank_3) is left out of the collectives' alignment",
                r.source.description));
            continue;
        }
        dumped.insert(r.source.rank);
        for (const auto& row : groups->rows) {
            GroupView& g = out[text_at(row, 0)];
            g.name = text_at(row, 0);
            if (g.desc.empty()) g.desc = text_at(row, 1);
            add_members(text_at(row, 2), g.listed);
            RankView& v = g.ranks[r.source.rank];
            v.recorded = true;
            v.enqueued = static_cast<std::uint64_t>(number_at(row, 3));
            v.completed = static_cast<std::uint64_t>(number_at(row, 4));
        }
        if (const Table* records = table_of(r, ck::kRecordsTable)) {
            for (const auto& row : records->rows) {
                auto g = out.find(text_at(row, 0));
                if (g == out.end()) continue;
                g->second.ranks[r.source.rank]
                    .calls[static_cast<std::uint64_t>(number_at(row, 1))] =
                    Call{text_at(row, 2), text_at(row, 3), text_at(row, 6)};
            }
        }
    }
    return out;
}

// The group's members: as the dumps list them; the default group is the whole world; else the
// ranks that recorded calls on it.
std::set<std::int32_t> members_of(const GroupView& g, std::int32_t world) {
    std::set<std::int32_t> out = g.listed;
    constexpr std::int32_t kMostRanks = 1 << 20;  // a bound on a world size read from a file
    if (out.empty() && g.desc == "default_pg") {
        for (std::int32_t r = 0; r < std::min(world, kMostRanks); ++r) out.insert(r);
    }
    for (const auto& [rank, v] : g.ranks) out.insert(rank);
    return out;
}

std::string group_label(const GroupView& g) {
    return g.desc.empty() || g.desc == g.name
               ? fmt::format("process group {}", g.name)
               : fmt::format("process group {} ({})", g.name, g.desc);
}

// "rank 3", "ranks 0, 1 and 2", "ranks 0, 1, ... and 24 more".
std::string ranks_phrase(const std::vector<std::int32_t>& ranks) {
    if (ranks.size() == 1) return fmt::format("rank {}", ranks.front());
    std::string out = "ranks ";
    const std::size_t named = std::min(ranks.size(), kCollectiveRanksNamed);
    for (std::size_t i = 0; i < named; ++i) {
        if (i > 0) out += (i + 1 == named && named == ranks.size()) ? " and " : ", ";
        out += fmt::format("{}", ranks[i]);
    }
    if (named < ranks.size()) out += fmt::format(" and {} more", ranks.size() - named);
    return out;
}
std::string ranks_list(const std::vector<std::int32_t>& ranks) {
    std::string out;
    for (std::int32_t r : ranks) out += fmt::format("{}{}", out.empty() ? "" : ",", r);
    return out;
}

// A finding's title opens with a capital, as every report's titles do.
std::string capitalized(std::string text) {
    if (!text.empty() && text[0] >= 'a' && text[0] <= 'z')
        text[0] = static_cast<char>(text[0] - 'a' + 'A');
    return text;
}

std::string where(const Call& c) {
    return c.site.empty() ? std::string() : " at " + c.site;
}

// ---- the verdict of one group -------------------------------------------------------------------

struct Verdict {
    std::string kind = "in_step";  // "hang", "desync", "in_step"
    std::uint64_t all_completed = 0;
    std::uint64_t seq = 0;  // the collective the verdict is about
    std::string op;
    std::vector<std::int32_t> waiting, never_arrived, ahead, missing, culprits;
};

// The first sequence id at which the ranks that recorded it disagree, with the ranks of each
// call; 0 when they all agree.
std::uint64_t first_desync(const GroupView& g,
                           std::map<std::string, std::vector<std::int32_t>>& sides) {
    std::set<std::uint64_t> seqs;
    for (const auto& [rank, v] : g.ranks) {
        for (const auto& [seq, c] : v.calls) seqs.insert(seq);
    }
    for (std::uint64_t seq : seqs) {
        sides.clear();
        for (const auto& [rank, v] : g.ranks) {
            auto c = v.calls.find(seq);
            if (c != v.calls.end()) sides[c->second.signature()].push_back(rank);
        }
        if (sides.size() > 1) return seq;
    }
    sides.clear();
    return 0;
}

// True when rank `r`'s call at `seq` differs from its own previous call of the same op.
bool changed_from_its_last(const RankView& v, std::uint64_t seq) {
    auto at = v.calls.find(seq);
    if (at == v.calls.end()) return false;
    for (auto it = std::make_reverse_iterator(at); it != v.calls.rend(); ++it) {
        if (it->second.op == at->second.op) return it->second.sizes != at->second.sizes;
    }
    return false;
}

// The minority; on a tie, the ranks that changed their own call; else every rank.
std::vector<std::int32_t> desync_culprits(
    const GroupView& g, std::uint64_t seq,
    const std::map<std::string, std::vector<std::int32_t>>& sides, std::string& majority,
    bool& decided) {
    std::size_t most = 0, at_most = 0;
    for (const auto& [sig, ranks] : sides) {
        if (ranks.size() > most) {
            most = ranks.size();
            majority = sig;
            at_most = 1;
        } else if (ranks.size() == most) {
            ++at_most;
        }
    }
    std::vector<std::int32_t> out;
    decided = at_most == 1;
    if (decided) {
        for (const auto& [sig, ranks] : sides) {
            if (sig != majority) out.insert(out.end(), ranks.begin(), ranks.end());
        }
    } else {
        std::vector<std::int32_t> all;
        for (const auto& [sig, ranks] : sides) {
            for (std::int32_t r : ranks) {
                all.push_back(r);
                if (changed_from_its_last(g.ranks.at(r), seq)) out.push_back(r);
            }
        }
        decided = !out.empty() && out.size() < all.size();
        if (!decided) out = all;
        // The majority is then the call of the ranks that kept theirs.
        for (const auto& [sig, ranks] : sides) {
            if (decided && std::find(out.begin(), out.end(), ranks.front()) == out.end())
                majority = sig;
        }
    }
    std::sort(out.begin(), out.end());
    return out;
}

Verdict hang_verdict(const GroupView& g, const std::set<std::int32_t>& members) {
    Verdict v;
    bool first = true;
    std::uint64_t furthest = 0;
    for (const auto& [rank, rv] : g.ranks) {
        v.all_completed = first ? rv.completed : std::min(v.all_completed, rv.completed);
        furthest = std::max(furthest, rv.enqueued);
        first = false;
    }
    v.seq = v.all_completed + 1;
    for (std::int32_t m : members) {
        auto it = g.ranks.find(m);
        if (it == g.ranks.end()) {
            v.missing.push_back(m);
            continue;
        }
        const RankView& rv = it->second;
        if (rv.enqueued < v.seq) v.never_arrived.push_back(m);
        if (rv.enqueued >= v.seq && rv.completed < v.seq) v.waiting.push_back(m);
        if (rv.enqueued > v.seq) v.ahead.push_back(m);
    }
    if (v.waiting.empty()) return v;  // nobody is inside an unfinished collective
    v.kind = "hang";
    std::map<std::string, int> ops;
    for (std::int32_t r : v.waiting) {
        auto c = g.ranks.at(r).calls.find(v.seq);
        if (c != g.ranks.at(r).calls.end()) ++ops[c->second.op];
    }
    for (const auto& [op, n] : ops) {
        if (v.op.empty() || n > ops[v.op]) v.op = op;
    }
    if (v.op.empty()) v.op = "collective";
    v.culprits = !v.never_arrived.empty() ? v.never_arrived : v.missing;
    (void)furthest;
    return v;
}

// ---- the findings -------------------------------------------------------------------------------

// The last collective a rank recorded, as the verdict names it.
std::string last_seen(const RankView& v) {
    if (v.calls.empty()) return v.recorded ? "its dump holds no collective of this group" : "";
    const auto& [seq, c] = *v.calls.rbegin();
    return fmt::format("last seen in {} #{}{}", c.op, seq, where(c));
}

std::string culprit_clause(const GroupView& g, const Verdict& v) {
    if (!v.never_arrived.empty()) {
        std::string out = fmt::format("{} never called it", ranks_phrase(v.never_arrived));
        const RankView& first = g.ranks.at(v.never_arrived.front());
        out +=
            fmt::format(" ({} {})",
                        v.never_arrived.size() > 1 ? fmt::format("rank {}", v.never_arrived.front())
                                                   : std::string("it was"),
                        last_seen(first));
        return out;
    }
    if (!v.missing.empty()) {
        return fmt::format(
            "{} left no Flight Recorder dump: {} died, hung or was killed before it could write "
            "one, so {} the likely culprit (its own log says which)",
            ranks_phrase(v.missing), v.missing.size() > 1 ? "each" : "it",
            v.missing.size() > 1 ? "they are" : "it is");
    }
    return "every member rank is in it and none completed it: no rank is missing from it, so the "
           "collective itself does not finish (the network or NCCL, a hung GPU, or a peer "
           "outside this group)";
}

// What the culprit's own inputs beside its dump (its trace or recording) say it was doing: its
// findings, most severe first; "" when it has no other input.
std::string own_diagnosis(const Report& job, std::int32_t rank,
                          std::vector<std::string>& evidence) {
    const Report* own = nullptr;
    for (const auto& r : job.ranks) {
        if (r.source.rank == rank) own = &r;
    }
    if (own == nullptr || own->observed.empty()) return {};
    std::vector<const Finding*> found;
    for (const auto& f : own->findings) {
        if (f.id != finding_name(FindingId::kCollectiveHang) &&
            f.id != finding_name(FindingId::kCollectiveDesync))
            found.push_back(&f);
    }
    if (found.empty()) {
        return fmt::format(" Rank {}'s own inputs show no problem in the window they cover.", rank);
    }
    std::stable_sort(found.begin(), found.end(),
                     [](const Finding* a, const Finding* b) { return a->severity > b->severity; });
    std::string titles;
    for (std::size_t i = 0; i < found.size() && i < kCollectiveRanksNamed; ++i) {
        titles += (i > 0 ? "; " : "") + found[i]->title;
        evidence.push_back(
            fmt::format("rank {}'s own report: {} ({})", rank, found[i]->title, found[i]->id));
    }
    return fmt::format(
        " Rank {}'s own inputs found: {} (over the window they cover, which may end before the "
        "hang).",
        rank, titles);
}

void add_hang(Report& job, const GroupView& g, const Verdict& v) {
    Finding f;
    f.id = finding_name(FindingId::kCollectiveHang);
    f.severity = Severity::kCritical;
    f.rank = v.culprits.empty() ? -1 : v.culprits.front();
    const std::string label = group_label(g);
    f.title = v.culprits.empty()
                  ? fmt::format("{} hangs in {} #{}: every rank is in it", capitalized(label), v.op,
                                v.seq)
                  : fmt::format("{} hangs in {} #{}: {} {}", capitalized(label), v.op, v.seq,
                                ranks_phrase(v.culprits),
                                v.never_arrived.empty() ? "left no dump" : "never arrived");
    f.summary =
        fmt::format("Every rank completed {} up to collective #{}; {} {} in {} #{}, but {}.", label,
                    v.all_completed, ranks_phrase(v.waiting),
                    v.waiting.size() > 1 ? "wait" : "waits", v.op, v.seq, culprit_clause(g, v));
    if (!v.ahead.empty())
        f.summary += fmt::format(" {} already enqueued later collectives.",
                                 capitalized(ranks_phrase(v.ahead)));
    if (!v.never_arrived.empty() && !v.missing.empty()) {
        f.summary +=
            fmt::format(" {} left no dump: where {} was is unknown.",
                        capitalized(ranks_phrase(v.missing)), v.missing.size() > 1 ? "each" : "it");
    }
    if (f.rank >= 0) f.summary += own_diagnosis(job, f.rank, f.evidence);
    f.figures = {
        {"seq_id", static_cast<double>(v.seq), Unit::kCount, "the collective that hangs"},
        {"last_completed_by_all", static_cast<double>(v.all_completed), Unit::kCount,
         "the last collective every rank completed"},
        {"waiting_ranks", static_cast<double>(v.waiting.size()), Unit::kCount, "ranks inside it"},
        {"never_arrived_ranks", static_cast<double>(v.never_arrived.size()), Unit::kCount,
         "ranks that never called it"},
        {"missing_ranks", static_cast<double>(v.missing.size()), Unit::kCount,
         "member ranks without a dump"}};
    if (f.rank >= 0)
        f.figures.push_back({"culprit_rank", static_cast<double>(f.rank), Unit::kRank,
                             "the rank the others wait for"});
    f.site_unit = Unit::kCount;
    for (std::int32_t r : v.culprits) {
        auto it = g.ranks.find(r);
        const std::string detail =
            it == g.ranks.end() ? "no Flight Recorder dump" : last_seen(it->second);
        f.sites.push_back(CallSite{fmt::format("rank {}", r), 1.0,
                                   1.0 / static_cast<double>(v.culprits.size()), detail});
    }
    for (const auto& [rank, rv] : g.ranks) {
        f.evidence.push_back(fmt::format("rank {}: enqueued up to #{}, completed up to #{}; {}",
                                         rank, rv.enqueued, rv.completed, last_seen(rv)));
    }
    for (std::int32_t r : v.missing)
        f.evidence.push_back(fmt::format("rank {}: no Flight Recorder dump among the inputs", r));
    f.advice.push_back(
        "Start with the culprit's own log and stack: what it did after its last collective (a "
        "long host step or data wait, a branch that skips the collective, an exception, a crash).");
    f.advice.push_back(
        "py-spy dump --pid <pid> on the culprit rank shows where its Python is now; every rank "
        "must call the group's collectives in the same order.");
    job.findings.push_back(std::move(f));
}

void add_desync(Report& job, const GroupView& g, std::uint64_t seq,
                const std::map<std::string, std::vector<std::int32_t>>& sides) {
    std::string majority;
    bool decided = false;
    const auto culprits = desync_culprits(g, seq, sides, majority, decided);
    const Call& theirs = g.ranks.at(culprits.front()).calls.at(seq);
    std::vector<std::int32_t> others;
    if (decided) others = sides.at(majority);
    Finding f;
    f.id = finding_name(FindingId::kCollectiveDesync);
    f.severity = Severity::kCritical;
    f.rank = decided ? culprits.front() : -1;
    const std::string label = group_label(g);
    f.title = fmt::format("{} is out of step at collective #{}: {} called {} {}",
                          capitalized(label), seq, ranks_phrase(culprits), theirs.op, theirs.sizes);
    if (decided) {
        f.title += fmt::format(", the others {}", majority);
        f.summary = fmt::format(
            "At collective #{} of {}, {} called {} with {} where {} called {}; {} called it{}. "
            "Every rank must call the group's collectives in the same order with matching sizes: "
            "find why {} took another path or shape there.",
            seq, label, ranks_phrase(culprits), theirs.op, theirs.sizes, ranks_phrase(others),
            majority, ranks_phrase(culprits), where(theirs), ranks_phrase(culprits));
    } else {
        f.summary = fmt::format(
            "At collective #{} of {}, the ranks called different collectives ({} sides) and "
            "none is the majority or changed its own call, so which one is wrong is undecided; "
            "each side's call is listed below.",
            seq, label, sides.size());
    }
    f.figures = {
        {"seq_id", static_cast<double>(seq), Unit::kCount, "the collective out of step"},
        {"sides", static_cast<double>(sides.size()), Unit::kCount, "different calls at that id"}};
    if (f.rank >= 0)
        f.figures.push_back({"culprit_rank", static_cast<double>(f.rank), Unit::kRank,
                             "the rank whose call differs"});
    f.site_unit = Unit::kCount;
    std::size_t callers = 0;
    for (const auto& [sig, ranks] : sides) callers += ranks.size();
    for (const auto& [sig, ranks] : sides) {
        const Call& c = g.ranks.at(ranks.front()).calls.at(seq);
        f.sites.push_back(CallSite{ranks_phrase(ranks), static_cast<double>(ranks.size()),
                                   static_cast<double>(ranks.size()) / static_cast<double>(callers),
                                   fmt::format("{}{}", sig, where(c))});
        f.evidence.push_back(
            fmt::format("#{}: {} called {}{}", seq, ranks_phrase(ranks), sig, where(c)));
    }
    f.advice.push_back(
        "Look for rank-dependent control flow or shapes before that call: a branch on the rank, "
        "uneven batches or sequence lengths, a collective inside a condition.");
    f.advice.push_back(
        "TORCH_DISTRIBUTED_DEBUG=DETAIL checks each collective's op and shapes across ranks as it "
        "is called, and fails at the first mismatch.");
    job.findings.push_back(std::move(f));
}

// ---- the tables
// ----------------------------------------------------------------------------------

std::string rank_state(const RankView* v, const Verdict& verdict, std::int32_t rank) {
    if (v == nullptr) return "no dump";
    auto has = [&](const std::vector<std::int32_t>& list) {
        return std::find(list.begin(), list.end(), rank) != list.end();
    };
    if (verdict.kind != "hang") return "in step";
    if (has(verdict.never_arrived)) return "never arrived";
    if (has(verdict.ahead)) return "ahead";
    if (has(verdict.waiting)) return "waiting";
    return "in step";
}

}  // namespace

std::vector<std::int32_t> add_collective_verdicts(Report& job, Section& section) {
    std::set<std::int32_t> dumped;
    std::set<std::int32_t> absent;
    auto groups = read_groups(job, dumped);
    if (dumped.empty()) return {};
    std::int32_t world = job.source.world_size;
    for (const auto& r : job.ranks) world = std::max(world, r.source.world_size);
    Table verdicts;
    verdicts.id = "collective_verdicts";
    verdicts.title = "Per process group: where the ranks' collectives stand (Flight Recorder)";
    verdicts.columns = {"group",        "description",           "verdict",       "seq",
                        "op",           "last_completed_by_all", "culprit_ranks", "waiting_ranks",
                        "missing_ranks"};
    verdicts.units = {Unit::kNumber, Unit::kNumber, Unit::kNumber, Unit::kCount, Unit::kNumber,
                      Unit::kCount,  Unit::kNumber, Unit::kNumber, Unit::kNumber};
    Table per_rank;
    per_rank.id = "collective_ranks";
    per_rank.title = "Per process group and rank: the last collective enqueued and completed";
    per_rank.columns = {"group", "rank", "state", "last_enqueued", "last_completed", "last_seen"};
    per_rank.units = {Unit::kNumber, Unit::kRank,  Unit::kNumber,
                      Unit::kCount,  Unit::kCount, Unit::kNumber};
    for (auto& [name, g] : groups) {
        const auto members = members_of(g, world);
        // A member whose dump is there but holds nothing of this group never called it (or its
        // ring no longer holds it): it counts as at #0, never as missing.
        for (std::int32_t m : members) {
            if (dumped.count(m) > 0) g.ranks.try_emplace(m);
        }
        Verdict v = hang_verdict(g, members);
        std::map<std::string, std::vector<std::int32_t>> sides;
        if (const std::uint64_t seq = first_desync(g, sides); seq > 0) {
            add_desync(job, g, seq, sides);
            if (v.kind != "hang") {
                v.kind = "desync";
                v.seq = seq;
                std::string majority;
                bool decided = false;
                v.culprits = desync_culprits(g, seq, sides, majority, decided);
                v.op = g.ranks.at(v.culprits.front()).calls.at(seq).op;
            }
        }
        if (v.kind == "hang") add_hang(job, g, v);
        verdicts.rows.push_back({name, g.desc, v.kind,
                                 static_cast<double>(v.kind == "in_step" ? 0 : v.seq), v.op,
                                 static_cast<double>(v.all_completed), ranks_list(v.culprits),
                                 ranks_list(v.waiting), ranks_list(v.missing)});
        absent.insert(v.missing.begin(), v.missing.end());
        for (std::int32_t m : members) {
            auto it = g.ranks.find(m);
            const RankView* rv = it == g.ranks.end() ? nullptr : &it->second;
            per_rank.rows.push_back({name, static_cast<double>(m), rank_state(rv, v, m),
                                     static_cast<double>(rv ? rv->enqueued : 0),
                                     static_cast<double>(rv ? rv->completed : 0),
                                     rv ? last_seen(*rv) : std::string("no Flight Recorder dump")});
        }
    }
    section.tables.push_back(std::move(verdicts));
    section.tables.push_back(std::move(per_rank));
    return {absent.begin(), absent.end()};
}

}  // namespace gpudiag::detail
