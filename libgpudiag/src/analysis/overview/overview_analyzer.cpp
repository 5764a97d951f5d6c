// SPDX-License-Identifier: Apache-2.0
// OverviewAnalyzer. Sets are bounded in practice (devices, streams, threads number in the tens
// or hundreds); they are capped anyway so a hostile input cannot grow them without limit.
#include "analysis/overview/overview_analyzer.hpp"

#include <string>

namespace gpudiag::detail {
namespace {
constexpr std::size_t kMaxDistinct = 4096;

// Adds `key` to a bounded set of distinct keys; events come in runs of one device, stream or
// thread, so a repeat of the last key skips the set search.
template <typename Key>
void note_distinct(std::set<Key>& seen, Key key, Key& last) {
    if (key == last) return;
    last = key;
    if (seen.size() < kMaxDistinct) seen.insert(key);
}
}  // namespace

void OverviewAnalyzer::begin(const SourceInfo& /*info*/, const StringTable& /*strings*/) {}

void OverviewAnalyzer::consume(std::span<const Event> events) {
    for (const Event& e : events) {
        ++counts_[static_cast<std::uint8_t>(e.kind)];
        if (e.start_ns != 0 && e.start_ns < first_ns_) first_ns_ = e.start_ns;
        std::uint64_t end = e.end_ns > e.start_ns ? e.end_ns : e.start_ns;
        if (end > last_ns_) last_ns_ = end;
        if (e.device != kNoDevice) note_distinct(devices_, e.device, last_device_);
        if (is_gpu_activity(e.kind)) {
            note_distinct(streams_, (std::uint64_t{e.device} << 32) | e.stream, last_stream_);
        }
        if (e.thread != 0) {
            note_distinct(threads_, (std::uint64_t{e.process} << 32) | e.thread, last_thread_);
        }
    }
}

void OverviewAnalyzer::contribute(Report& report) {
    Section s;
    s.id = "overview";
    s.title = "Input overview";
    std::uint64_t total = 0;
    for (auto c : counts_) total += c;
    double span = last_ns_ > first_ns_ && first_ns_ != UINT64_MAX
                      ? static_cast<double>(last_ns_ - first_ns_)
                      : 0.0;
    s.figures.push_back({"events", static_cast<double>(total), Unit::kCount, "events"});
    s.figures.push_back({"span_ns", span, Unit::kNanoseconds, "time span"});
    s.figures.push_back(
        {"devices", static_cast<double>(devices_.size()), Unit::kCount, "devices with events"});
    s.figures.push_back({"gpu_streams", static_cast<double>(streams_.size()), Unit::kCount,
                         "GPU streams with activity"});
    s.figures.push_back(
        {"host_threads", static_cast<double>(threads_.size()), Unit::kCount, "host threads"});
    Table t;
    t.id = "event_counts";
    t.title = "Events by kind";
    t.columns = {"kind", "count"};
    t.units = {Unit::kNumber, Unit::kCount};
    for (std::size_t k = 0; k < counts_.size(); ++k) {
        if (counts_[k] == 0) continue;
        t.rows.push_back({std::string(event_kind_name(static_cast<EventKind>(k))),
                          static_cast<double>(counts_[k])});
    }
    s.tables.push_back(std::move(t));
    report.sections.push_back(std::move(s));
}

}  // namespace gpudiag::detail
