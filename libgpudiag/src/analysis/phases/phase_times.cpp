// SPDX-License-Identifier: Apache-2.0
#include "analysis/phases/phase_times.hpp"

#include "support/format.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace gpudiag::detail {
namespace {

struct Interval {
    std::uint64_t start;
    std::uint64_t end;
};

// The union of the first `count` steps (by start), as disjoint intervals in time order: steps
// that overlap (a marker and a profiler range of one iteration) count their time once.
std::vector<Interval> merge_steps(const std::vector<StepSpan>& steps, std::size_t count) {
    std::vector<Interval> out;
    for (std::size_t i = 0; i < count && i < steps.size(); ++i) {
        const StepSpan& s = steps[i];
        if (s.end_ns <= s.start_ns) continue;
        if (!out.empty() && s.start_ns <= out.back().end) {
            out.back().end = std::max(out.back().end, s.end_ns);
        } else {
            out.push_back({s.start_ns, s.end_ns});
        }
    }
    return out;
}

std::uint64_t overlap(std::uint64_t a, std::uint64_t b, std::uint64_t s, std::uint64_t e) {
    std::uint64_t lo = std::max(a, s);
    std::uint64_t hi = std::min(b, e);
    return hi > lo ? hi - lo : 0;
}

// The part of [a, b) inside the union.
std::uint64_t overlap(const std::vector<Interval>& merged, std::uint64_t a, std::uint64_t b) {
    auto it = std::upper_bound(merged.begin(), merged.end(), a,
                               [](std::uint64_t t, const Interval& i) { return t < i.end; });
    std::uint64_t in = 0;
    for (; it != merged.end() && it->start < b; ++it) in += overlap(a, b, it->start, it->end);
    return in;
}

bool is_phase(const Event& e) {
    return e.device == kNoDevice && (e.range.category == RangeCategory::kPhase ||
                                     e.range.category == RangeCategory::kUserAnnotation);
}

double d(std::uint64_t v) {
    return static_cast<double>(v);
}

// "1 phase", "3 phases".
std::string count_of(std::uint64_t n, const char* one, const char* many) {
    return fmt::format("{} {}", n, n == 1 ? one : many);
}

}  // namespace

PhaseTimeAnalyzer::PhaseTimeAnalyzer(const AnalysisOptions& options, const StepIndex* steps)
    : options_(options), steps_(steps) {
    options_.progress = nullptr;  // not ours to call
}

void PhaseTimeAnalyzer::begin(const SourceInfo& /*info*/, const StringTable& strings) {
    strings_ = &strings;
}

void PhaseTimeAnalyzer::consume(std::span<const Event> events) {
    for (const Event& e : events) {
        switch (e.kind) {
            case EventKind::kRangeBegin: on_begin(e); break;
            case EventKind::kRangeEnd: on_end(e); break;
            case EventKind::kRange: on_complete(e); break;
            default: break;
        }
    }
}

void PhaseTimeAnalyzer::end(const SourceSummary& /*summary*/) {
    ended_ = true;
    // Complete ranges still open end when they say; marker ranges still open never ended.
    for (auto& [key, t] : threads_) {
        std::uint64_t last = 0;
        for (const Open& o : t.open) {
            if (o.end != kOpenEnd) last = std::max(last, o.end);
        }
        if (last > 0) advance(t, last);
    }
}

std::uint32_t PhaseTimeAnalyzer::phase_slot(const Event& e) {
    // Engines mark iterations with NVTX ranges too (generic ones): only those of them count.
    const bool phase = is_phase(e);
    if (!phase && (e.device != kNoDevice || e.range.category != RangeCategory::kGeneric)) {
        return kNotPhase;
    }
    if (auto it = slots_.find(e.range.name); it != slots_.end()) {
        saw_phases_ = true;
        return it->second;
    }
    if (const std::uint32_t slot = serving_slot(e); slot != kNotPhase) return slot;
    if (!phase) return kNotPhase;
    saw_phases_ = true;
    if (slots_.size() < kMaxNames) {
        const std::uint32_t slot = new_slot(e.range.name);
        slots_.emplace(e.range.name, slot);
        return slot;
    }
    ++past_name_cap_;
    if (other_slot_ == kNotPhase) {
        other_slot_ = static_cast<std::uint32_t>(totals_.size());
        totals_.emplace_back();
    }
    return other_slot_;
}

std::uint32_t PhaseTimeAnalyzer::new_slot(StringId name) {
    auto slot = static_cast<std::uint32_t>(totals_.size());
    totals_.emplace_back();
    totals_.back().name = name;
    return slot;
}

// An engine iteration's row is its kind's: every name of that kind maps to it (the names differ
// by their token counts). Names past kMaxNames are still recognised, just not remembered.
std::uint32_t PhaseTimeAnalyzer::serving_slot(const Event& e) {
    if (strings_ == nullptr) return kNotPhase;
    const ServingStep step = serving_step(strings_->lookup(e.range.name));
    if (!step.known) return kNotPhase;
    saw_phases_ = true;
    std::uint32_t& slot = serving_slots_[static_cast<std::size_t>(step.kind)];
    if (slot == kNotPhase) {
        slot = new_slot(e.range.name);
        totals_[slot].label = fmt::format("{} ({} iterations)", serving_step_kind_name(step.kind),
                                          serving_engine_name(step.engine));
    }
    if (slots_.size() < kMaxNames) slots_.emplace(e.range.name, slot);
    return slot;
}

PhaseTimeAnalyzer::Thread* PhaseTimeAnalyzer::thread_of(const Event& e, bool create) {
    std::uint64_t key = (std::uint64_t{e.process} << 32) | e.thread;
    if (auto it = threads_.find(key); it != threads_.end()) return &it->second;
    if (!create) return nullptr;
    if (threads_.size() >= kMaxThreads) {
        // Threads with nothing open keep nothing worth keeping (a pool's finished workers).
        std::erase_if(threads_, [](const auto& kv) {
            return kv.second.open.empty() && kv.second.ignored_begins == 0;
        });
        if (threads_.size() >= kMaxThreads) return nullptr;
    }
    return &threads_[key];
}

void PhaseTimeAnalyzer::on_begin(const Event& e) {
    if (e.device != kNoDevice) return;
    const std::uint32_t slot = phase_slot(e);
    // Other ranges matter only inside a phase, where their ends must not pop it.
    Thread* t = thread_of(e, slot != kNotPhase);
    if (t == nullptr) {
        past_thread_cap_ += slot != kNotPhase ? 1 : 0;
        return;
    }
    if (t->ignored_begins > 0 || t->open.size() >= kMaxOpen) {
        ++t->ignored_begins;
        past_depth_cap_ += slot != kNotPhase ? 1 : 0;
        return;
    }
    advance(*t, e.start_ns);
    t->open.push_back({e.start_ns, kOpenEnd, e.range.id, slot, repeats(*t, slot)});
}

void PhaseTimeAnalyzer::on_end(const Event& e) {
    if (e.device != kNoDevice) return;
    Thread* t = thread_of(e, false);
    if (t != nullptr && t->ignored_begins > 0) {
        --t->ignored_begins;  // ends the innermost begin, which was past the cap
        return;
    }
    if (t != nullptr) advance(*t, e.start_ns);
    std::size_t k = t != nullptr ? marker_index(*t, e.range.id) : kNone;
    if (k == kNone) {
        unpaired_ends_ += is_phase(e) ? 1 : 0;
        return;
    }
    Open o = t->open[k];
    t->open.erase(t->open.begin() + static_cast<std::ptrdiff_t>(k));
    close(o, std::max(e.start_ns, o.start));
}

// An NVTX end names its range by id; a gpudiag marker (id 0) ends the innermost marker range.
std::size_t PhaseTimeAnalyzer::marker_index(const Thread& t, std::uint64_t id) {
    std::size_t innermost = kNone;
    for (std::size_t k = t.open.size(); k-- > 0;) {
        if (t.open[k].end != kOpenEnd) continue;
        if (t.open[k].id == id) return k;
        if (innermost == kNone) innermost = k;
    }
    return id == 0 ? innermost : kNone;
}

void PhaseTimeAnalyzer::on_complete(const Event& e) {
    const std::uint32_t slot = phase_slot(e);
    if (slot == kNotPhase) return;  // only phases nest by their times
    Thread* t = thread_of(e, true);
    if (t == nullptr) {
        ++past_thread_cap_;
        return;
    }
    if (t->open.size() >= kMaxOpen) {
        ++past_depth_cap_;
        return;
    }
    advance(*t, e.start_ns);
    Open o{e.start_ns, std::max(e.end_ns, e.start_ns), e.range.id, slot, repeats(*t, slot)};
    // Innermost last: after every range that starts earlier, or as early and ends no earlier
    // (a parent listed after its child at the same start still encloses it).
    auto at = t->open.end();
    while (at != t->open.begin()) {
        const Open& p = *std::prev(at);
        if (p.start < o.start || (p.start == o.start && p.end >= o.end)) break;
        --at;
    }
    t->open.insert(at, o);
}

// A phase inside one of the same name (one phase marked twice, or a recursive call): its time is
// already the outer one's, so it adds no call.
bool PhaseTimeAnalyzer::repeats(const Thread& t, std::uint32_t slot) const {
    if (slot == kNotPhase || slot == other_slot_) return false;
    return std::any_of(t.open.begin(), t.open.end(), [&](const Open& o) { return o.slot == slot; });
}

// Moves the thread's clock to `to`, giving the time to the innermost phase open meanwhile and
// ending the complete ranges that end on the way.
void PhaseTimeAnalyzer::advance(Thread& t, std::uint64_t to) {
    for (;;) {
        std::size_t first = kNone;
        for (std::size_t k = 0; k < t.open.size(); ++k) {
            const Open& o = t.open[k];
            if (o.end != kOpenEnd && o.end <= to && (first == kNone || o.end < t.open[first].end))
                first = k;
        }
        if (first == kNone) break;
        const Open o = t.open[first];
        attribute(t, t.now, o.end);
        t.now = std::max(t.now, o.end);
        t.open.erase(t.open.begin() + static_cast<std::ptrdiff_t>(first));
        close(o, o.end);
    }
    attribute(t, t.now, to);
    t.now = std::max(t.now, to);
}

void PhaseTimeAnalyzer::attribute(const Thread& t, std::uint64_t from, std::uint64_t to) {
    if (to <= from) return;
    auto inner = std::find_if(t.open.rbegin(), t.open.rend(),
                              [](const Open& o) { return o.slot != kNotPhase; });
    if (inner == t.open.rend()) return;
    if (!pieces_.empty() && pieces_.back().slot == inner->slot && pieces_.back().end == from) {
        pieces_.back().end = to;  // the same phase going on
        return;
    }
    pieces_.push_back({from, to, inner->slot});
    if (pieces_.size() >= kMaxPieces) fold_full_buffer();
}

void PhaseTimeAnalyzer::close(const Open& o, std::uint64_t end) {
    if (o.slot == kNotPhase || o.repeat) return;
    Totals& x = totals_[o.slot];
    ++x.calls;
    x.inclusive_ns += end - o.start;
}

// Folds the pieces whose steps are known (those ending by the last closed step's end). Pieces
// after it wait for their step to close, but no more than half the buffer: a step holding more
// pieces than that (or a run without steps) has its oldest ones folded now, counted.
void PhaseTimeAnalyzer::fold_full_buffer() {
    std::vector<StepSpan> steps;
    if (steps_ != nullptr) steps = steps_->closed_steps();
    std::uint64_t horizon = 0;
    for (const StepSpan& s : steps) horizon = std::max(horizon, s.end_ns);
    auto settled_end = std::partition(pieces_.begin(), pieces_.end(),
                                      [&](const Piece& p) { return p.end <= horizon; });
    auto settled = static_cast<std::size_t>(settled_end - pieces_.begin());
    const std::size_t waiting = pieces_.size() - settled;
    if (waiting > kMaxPieces / 2) {
        const std::size_t forced = waiting - kMaxPieces / 2;
        std::nth_element(settled_end, settled_end + static_cast<std::ptrdiff_t>(forced),
                         pieces_.end(),
                         [](const Piece& a, const Piece& b) { return a.end < b.end; });
        for (std::size_t i = settled; i < settled + forced; ++i) {
            forced_first_ = std::min(forced_first_, pieces_[i].start);
            forced_last_ = std::max(forced_last_, pieces_[i].end);
        }
        settled += forced;
    }
    fold(settled, steps);
}

void PhaseTimeAnalyzer::fold(std::size_t count, const std::vector<StepSpan>& steps) {
    const std::vector<Interval> merged = merge_steps(steps, steps.size());
    const StepSpan* latest = steps.empty() ? nullptr : &steps.back();
    if (latest != nullptr && (!has_latest_step_ || latest->start_ns > latest_step_start_)) {
        for (Totals& x : totals_) x.in_latest_ns = 0;
        latest_step_start_ = latest->start_ns;
        has_latest_step_ = true;
    }
    const bool latest_known = latest != nullptr && latest->start_ns == latest_step_start_;
    for (std::size_t i = 0; i < count; ++i) {
        const Piece& p = pieces_[i];
        Totals& x = totals_[p.slot];
        x.self_ns += p.end - p.start;
        x.in_steps_ns += overlap(merged, p.start, p.end);
        if (latest_known)
            x.in_latest_ns += overlap(p.start, p.end, latest->start_ns, latest->end_ns);
    }
    pieces_.erase(pieces_.begin(), pieces_.begin() + static_cast<std::ptrdiff_t>(count));
}

namespace {

// The steps the per-step figures count: the timeline window's (every closed step; in HTA's
// window all but the last).
struct StepWindow {
    std::size_t steps = 0;
    std::uint64_t time_ns = 0;
    std::vector<Interval> merged;
    bool drops_last = false;
};

StepWindow step_window(const std::vector<StepSpan>& closed, AnalysisWindow window) {
    StepWindow w;
    w.drops_last = window == AnalysisWindow::kHta && closed.size() >= 2;
    w.steps = closed.size() - (w.drops_last ? 1 : 0);
    for (std::size_t i = 0; i < w.steps; ++i) w.time_ns += closed[i].end_ns - closed[i].start_ns;
    w.merged = merge_steps(closed, w.steps);
    return w;
}

struct PhaseRow {
    std::string name;
    std::uint64_t calls = 0;
    std::uint64_t inclusive_ns = 0;
    std::uint64_t self_ns = 0;
    std::uint64_t in_window_ns = 0;

    void add(const PhaseRow& r) {
        calls += r.calls;
        inclusive_ns += r.inclusive_ns;
        self_ns += r.self_ns;
        in_window_ns += r.in_window_ns;
    }
};

std::vector<Cell> cells(const PhaseRow& r, const StepWindow& w) {
    const double mean =
        r.calls > 0 ? d(r.inclusive_ns) / d(r.calls) : std::numeric_limits<double>::quiet_NaN();
    std::vector<Cell> row{r.name, d(r.calls), d(r.inclusive_ns), mean};
    if (w.steps == 0) {
        row.emplace_back(d(r.self_ns));
        return row;
    }
    row.emplace_back(d(r.in_window_ns) / d(w.steps));
    row.emplace_back(w.time_ns > 0 ? d(r.in_window_ns) / d(w.time_ns) : 0.0);
    row.emplace_back(d(r.self_ns - r.in_window_ns));
    return row;
}

Table phase_table(std::vector<PhaseRow> rows, const StepWindow& w, std::size_t max_rows) {
    Table t;
    t.id = "phase_times";
    t.title = "Time per phase";
    t.columns = {"phase", "calls", "total_ns", "mean_per_call_ns"};
    t.units = {Unit::kNumber, Unit::kCount, Unit::kNanoseconds, Unit::kNanoseconds};
    if (w.steps == 0) {
        t.columns.emplace_back("self_ns");
        t.units.emplace_back(Unit::kNanoseconds);
    } else {
        t.columns.insert(t.columns.end(),
                         {"self_per_step_ns", "self_share_of_step", "self_outside_steps_ns"});
        t.units.insert(t.units.end(), {Unit::kNanoseconds, Unit::kFraction, Unit::kNanoseconds});
    }
    if (rows.size() > max_rows) {
        PhaseRow rest;
        for (std::size_t i = max_rows - 1; i < rows.size(); ++i) rest.add(rows[i]);
        rest.name = fmt::format("({} more phases)", rows.size() - max_rows + 1);
        rows.resize(max_rows - 1);
        rows.push_back(std::move(rest));
    }
    for (const PhaseRow& r : rows) t.rows.push_back(cells(r, w));
    return t;
}

}  // namespace

void PhaseTimeAnalyzer::contribute(Report& report) {
    if (!saw_phases_) return;
    const std::vector<StepSpan> closed =
        steps_ != nullptr ? steps_->closed_steps() : std::vector<StepSpan>{};
    const StepWindow w = step_window(closed, options_.window);
    // Pieces folded into the step that turned out to be the last are outside HTA's window.
    const bool drop_latest =
        w.drops_last && has_latest_step_ && latest_step_start_ == closed.back().start_ns;
    std::vector<PhaseRow> rows(totals_.size());
    for (std::size_t i = 0; i < totals_.size(); ++i) {
        const Totals& x = totals_[i];
        PhaseRow& r = rows[i];
        r.name = slot_name(static_cast<std::uint32_t>(i));
        r.calls = x.calls;
        r.inclusive_ns = x.inclusive_ns;
        r.self_ns = x.self_ns;
        r.in_window_ns =
            x.in_steps_ns - (drop_latest ? std::min(x.in_latest_ns, x.in_steps_ns) : 0);
    }
    for (const Piece& p : pieces_) {
        rows[p.slot].self_ns += p.end - p.start;
        rows[p.slot].in_window_ns += overlap(w.merged, p.start, p.end);
    }
    std::erase_if(rows, [](const PhaseRow& r) { return r.calls == 0 && r.self_ns == 0; });
    std::stable_sort(rows.begin(), rows.end(), [&](const PhaseRow& a, const PhaseRow& b) {
        return w.steps > 0 ? a.in_window_ns > b.in_window_ns : a.self_ns > b.self_ns;
    });
    PhaseRow all;
    for (const PhaseRow& r : rows) all.add(r);

    Section sec;
    sec.id = "phases";
    sec.title = "Phases";
    sec.figures.push_back({"phases", d(rows.size()), Unit::kCount, "phases"});
    sec.figures.push_back({"phase_calls", d(all.calls), Unit::kCount, "phase calls"});
    double share_sum = 0;
    if (w.steps > 0) {
        share_sum = w.time_ns > 0 ? d(all.in_window_ns) / d(w.time_ns) : 0.0;
        sec.figures.push_back({"steps", d(w.steps), Unit::kCount, "steps counted"});
        sec.figures.push_back(
            {"phase_share_of_step", share_sum, Unit::kFraction, "step time inside phases"});
        sec.figures.push_back({"self_outside_steps_ns", d(all.self_ns - all.in_window_ns),
                               Unit::kNanoseconds, "phase time outside the counted steps"});
    }
    if (!rows.empty()) sec.tables.push_back(phase_table(std::move(rows), w, kTableRows));
    report.sections.push_back(std::move(sec));
    add_notes(report, share_sum, closed);
}

std::string PhaseTimeAnalyzer::slot_name(std::uint32_t slot) const {
    if (slot == other_slot_) {
        return fmt::format("(other phases: names past the first {})", kMaxNames);
    }
    if (!totals_[slot].label.empty()) return totals_[slot].label;
    std::string_view name = strings_ != nullptr ? strings_->lookup(totals_[slot].name) : "";
    return name.empty() ? std::string("(unnamed)") : std::string(name);
}

// Phases open when the report was made: the input ended inside them, or (a live session) they
// are still running.
std::string PhaseTimeAnalyzer::open_phases_note() const {
    std::uint64_t open = 0;
    std::vector<std::string> names;
    for (const auto& [key, t] : threads_) {
        for (const Open& o : t.open) {
            if (o.slot == kNotPhase || o.repeat) continue;
            ++open;
            std::string name = "\"" + slot_name(o.slot) + "\"";
            if (names.size() < 3 && std::find(names.begin(), names.end(), name) == names.end())
                names.push_back(std::move(name));
        }
    }
    if (open == 0) return {};
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    const std::string phases = count_of(open, "phase", "phases");
    if (!ended_) {
        return "Phases: " + phases + " still running (" + list +
               "): each counts as a call when it ends.";
    }
    return "Phases: " + phases + " never ended before the input did (" + list +
           "): no call is counted, nor the time after the last phase boundary on the thread.";
}

void PhaseTimeAnalyzer::add_notes(Report& report, double share_sum,
                                  const std::vector<StepSpan>& closed) const {
    auto& notes = report.notes;
    if (share_sum > 1.0 + 1e-9) {
        notes.push_back(
            "Phases ran on several threads at once: each thread's innermost phase "
            "counts, so together they fill " +
            format_percent(share_sum) + " of the step time.");
    }
    if (std::string open = open_phases_note(); !open.empty()) notes.push_back(std::move(open));
    if (unpaired_ends_ > 0) {
        notes.push_back("Phases: " + count_of(unpaired_ends_, "phase end", "phase ends") +
                        " had no phase open on the thread (begun before capture started, or "
                        "ended twice): ignored.");
    }
    if (past_name_cap_ > 0) {
        notes.push_back(fmt::format(
            "Phases: more than {} distinct names; {} ranges with later names are counted "
            "together as one row.",
            kMaxNames, past_name_cap_));
    }
    if (past_thread_cap_ + past_depth_cap_ > 0) {
        notes.push_back(fmt::format(
            "Phases: {} not timed: more than {} threads had phases open at once, or phases "
            "nested deeper than {}.",
            count_of(past_thread_cap_ + past_depth_cap_, "phase was", "phases were"), kMaxThreads,
            kMaxOpen));
    }
    const bool forced_in_steps =
        forced_first_ < forced_last_ &&
        std::any_of(closed.begin(), closed.end(), [&](const StepSpan& s) {
            return overlap(forced_first_, forced_last_, s.start_ns, s.end_ns) > 0;
        });
    if (forced_in_steps) {
        notes.push_back(fmt::format(
            "Phases: a step held more phase time pieces than kept at once ({}); the earliest "
            "were counted before the step ended, as outside steps.",
            kMaxPieces / 2));
    }
}

}  // namespace gpudiag::detail
