// SPDX-License-Identifier: Apache-2.0
// Findings and reports: what the analyses conclude, in a form the text, JSON, HTML and Prometheus
// renderers all share.
#pragma once

#include <gpudiag/export.hpp>
#include <gpudiag/names.hpp>
#include <gpudiag/source_info.hpp>
#include <gpudiag/status.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace gpudiag {

enum class Severity : std::uint8_t { kInfo = 0, kWarning = 1, kCritical = 2 };
template <>
GPUDIAG_API EnumNames<Severity> enum_names<Severity>() noexcept;
GPUDIAG_API const char* severity_name(Severity s) noexcept;  ///< "info", "warning", "critical"

/// The units a figure, a table column or a series declares. JSON reports and Python carry the
/// unit's spelling (its name: "bytes", "ns", "bytes/step", ...), and every renderer decides from
/// the unit how to print, plot and export a number, never from the figure's key.
enum class Unit : std::uint8_t {
    kUnknown = 0,          ///< a spelling no unit has (a newer writer's): a number, not exported
    kNumber = 1,           ///< "": a plain number
    kCount = 2,            ///< "count": a number of things
    kBytes = 3,            ///< "bytes"
    kNanoseconds = 4,      ///< "ns"
    kMicroseconds = 5,     ///< "us"
    kMilliseconds = 6,     ///< "ms"
    kSeconds = 7,          ///< "s"
    kFraction = 8,         ///< "fraction": a share, 0..1 (the figure's label says of what)
    kPercent = 9,          ///< "percent": 0..100
    kBytesPerStep = 10,    ///< "bytes/step"
    kBytesPerSecond = 11,  ///< "bytes/s"
    kBytesPerHour = 12,    ///< "bytes/hour"
    kCelsius = 13,         ///< "celsius"
    kWatts = 14,           ///< "W"
    kMegahertz = 15,       ///< "MHz"
    kStep = 16,            ///< "step": a step ordinal (the x axis of per-step series)
    kCode = 17,    ///< "enum": a code; the label lists its meanings ("window: 0 steps, 1 hta")
    kDevice = 18,  ///< "ordinal": a device ordinal, naming the device a section describes
    kRank = 19,    ///< "rank": a distributed rank
};
template <>
GPUDIAG_API EnumNames<Unit> enum_names<Unit>() noexcept;
/// The unit a spelling names; Unit::kUnknown when none does.
GPUDIAG_API Unit unit_from_name(std::string_view spelling) noexcept;

/// What a figure is beyond its unit: how exporters type it and plots draw it.
enum class FigureKind : std::uint8_t {
    kGauge = 0,  ///< a level or a measure of the analysed input (the default)
    kTotal = 1,  ///< an amount accumulated since the start, which only grows while a session runs
    kPeak = 2,   ///< the highest level reached (a watermark: memory plots draw it as a line)
};
template <>
GPUDIAG_API EnumNames<FigureKind> enum_names<FigureKind>() noexcept;

/// The kinds of evidence an input can hold. Each class of problem needs its own: input-bound
/// loops need input waits, idle GPUs need GPU activity, leaks need device memory. A report lists
/// the kinds its input had, so that no finding is never read as no problem where the evidence
/// was missing.
enum class Evidence : std::uint8_t {
    kSteps = 0,         ///< step boundaries (step markers, ProfilerStep ranges)
    kInputWaits = 1,    ///< the loop waiting for its next batch (DataLoader fetches)
    kGpuActivity = 2,   ///< kernels, copies and memsets
    kDeviceMemory = 3,  ///< allocations, allocator figures, snapshot segments, NVML memory samples
    kDeviceHealth = 4,  ///< NVML samples of the card (clocks, temperature, throttling, errors)
};
inline constexpr std::size_t kEvidenceKinds = 5;
template <>
GPUDIAG_API EnumNames<Evidence> enum_names<Evidence>() noexcept;
/// "steps", "input waits", "GPU activity", "device memory", "device health": as sentences say it.
GPUDIAG_API const char* evidence_label(Evidence e) noexcept;

/// A named number with its declared unit and kind.
struct Figure {
    std::string key;  ///< stable snake_case name, e.g. "input_wait_share"
    double value = 0;
    Unit unit = Unit::kNumber;
    std::string label;  ///< human label, e.g. "time waiting for input"
    FigureKind kind = FigureKind::kGauge;
};

/// The keys of a predicted saving's figures (Finding::predicted_saving, Report::fix_all_saving):
/// the analyses write them; Finding::saving_ns(), rank_findings and the renderers read them.
namespace saving_keys {
inline constexpr const char* kSavingNs = "saving_ns";       ///< time saved per step (or window)
inline constexpr const char* kShare = "share";              ///< of the step time (or window)
inline constexpr const char* kStepTimeNs = "step_time_ns";  ///< the step time predicted
}  // namespace saving_keys

/// A place in the program that a finding points at (an allocation site, a kernel, a range).
struct CallSite {
    std::string location;  ///< "train.py:42 forward" or a kernel name
    double value = 0;      ///< bytes, ns or count: the unit is the finding's `site_unit`
    double share = 0;      ///< fraction of the finding's total, 0..1
    std::string detail;
};

/// One diagnosis. `id` is stable across versions ("input_bound", "memory_leak", ...).
struct Finding {
    std::string id;
    Severity severity = Severity::kInfo;
    std::string title;        ///< one line: "Input-bound: 39 % of step time waiting"
    std::string summary;      ///< a paragraph with the numbers
    double confidence = 1.0;  ///< 0..1
    std::vector<Figure> figures;
    Unit site_unit = Unit::kNumber;  ///< unit of CallSite::value
    std::vector<CallSite> sites;
    std::vector<std::string> evidence;  ///< concrete observations backing the verdict
    std::vector<std::string> advice;    ///< what to change, most effective first
    std::int32_t rank = -1;
    std::int32_t device = -1;
    /// What fixing it is worth, where the analysis could replay the program without its cause
    /// (timeline and job findings): "saving_ns" (time saved per step, or over the window without
    /// steps), "share" (of the step time) and "step_time_ns" (the step time predicted). Empty
    /// when not predicted. Reports rank findings by it (see rank_findings).
    std::vector<Figure> predicted_saving{};
    /// The findings (ids) whose predicted savings come from the same time as this one's: fixing
    /// both does not save the sum (the JSON report writes it as predicted_saving.shared_with).
    std::vector<std::string> saving_shared_with{};

    /// The predicted saving in ns (per step), or -1 when none was predicted.
    [[nodiscard]] double saving_ns() const noexcept {
        for (const auto& f : predicted_saving) {
            if (f.key == saving_keys::kSavingNs) return f.value;
        }
        return -1.0;
    }
};

/// Orders findings as a user should act on them: failures first (critical findings with no
/// predicted saving: an out-of-memory error, uncorrected ECC errors), then every finding with a
/// predicted saving, largest saving first, then the rest, most severe first. Stable.
GPUDIAG_API void rank_findings(std::vector<Finding>& findings) noexcept;

using Cell = std::variant<double, std::string>;

/// What a table's rows are.
enum class TableKind : std::uint8_t {
    kRows = 0,  ///< rows of figures (the default)
    /// Each row splits one whole (a step's time, say): the first column names the row, and the
    /// numeric columns after it are parts that add up to the row's whole (plots stack them).
    kPartition = 1,
    /// Data other analyses read (absolute clock values, ids: what the job view joins ranks by):
    /// in JSON only; the text and HTML reports leave it out.
    kData = 2,
};
template <>
GPUDIAG_API EnumNames<TableKind> enum_names<TableKind>() noexcept;

struct Table {
    std::string id;
    std::string title;
    std::vector<std::string> columns;
    std::vector<std::vector<Cell>> rows;
    /// The unit of each column's numbers, parallel to `columns`; empty or shorter when a table
    /// does not declare them (its numbers print as plain numbers).
    std::vector<Unit> units{};
    TableKind kind = TableKind::kRows;
};

/// A bounded series for plots: (x, value) with x in `x_unit` (kSeconds: seconds from the start;
/// kStep: step ordinal).
struct Series {
    std::string id;
    std::string title;
    Unit unit = Unit::kNumber;
    std::vector<std::pair<double, double>> points;
    Unit x_unit = Unit::kSeconds;
};

/// One analysis' figures (memory, timeline, health ...).
struct Section {
    std::string id;
    std::string title;
    std::vector<Figure> figures;
    std::vector<Table> tables;
    std::vector<Series> series;

    [[nodiscard]] const Figure* figure(const std::string& key) const {
        for (const auto& f : figures) {
            if (f.key == key) return &f;
        }
        return nullptr;
    }
};

/// How much of its input a report covers. When not all of it could be read (a file cut short,
/// damaged chunks, a rank without its trace), every renderer says so before anything else, and a
/// report without findings only clears the part that was read.
struct InputCoverage {
    bool complete = true;              ///< all of the input was read
    std::uint64_t events = 0;          ///< events read
    std::uint64_t first_ns = 0;        ///< start of the earliest event read (the input's clock)
    std::uint64_t last_ns = 0;         ///< end of the latest event read
    std::vector<std::string> missing;  ///< what could not be read, in plain language

    [[nodiscard]] std::uint64_t span_ns() const {
        return last_ns > first_ns ? last_ns - first_ns : 0;
    }
};

struct Report {
    std::uint32_t schema_version = 1;
    SourceInfo source;
    SourceSummary capture;
    /// What part of the input the findings and figures cover.
    InputCoverage input{};
    std::vector<Finding> findings;
    std::vector<Section> sections;
    std::vector<std::string> notes;
    /// What fixing every cause found together is worth: the critical path replayed with all of
    /// them removed at once ("saving_ns", "share", "step_time_ns", as a finding's
    /// predicted_saving). Empty when no finding predicted a saving. The findings' own savings
    /// may overlap; this one is what fixing all of them buys.
    std::vector<Figure> fix_all_saving{};
    /// The kinds of evidence the input had, in enum order (each analysis adds what it saw).
    std::vector<Evidence> observed{};
    /// False for a report read back from JSON written before reports listed their evidence: what
    /// it observed is then unknown, and nothing is claimed about it.
    bool observed_known = true;
    /// For a multi-rank job: one report per rank (findings there carry their rank); the job's
    /// own findings (stragglers, imbalance) stay at the top level.
    std::vector<Report> ranks;

    [[nodiscard]] const Finding* finding(const std::string& id) const {
        for (const auto& f : findings) {
            if (f.id == id) return &f;
        }
        return nullptr;
    }
    [[nodiscard]] const Section* section(const std::string& id) const {
        for (const auto& s : sections) {
            if (s.id == id) return &s;
        }
        return nullptr;
    }
    [[nodiscard]] bool saw(Evidence e) const noexcept {
        for (Evidence o : observed) {
            if (o == e) return true;
        }
        return false;
    }
    /// Adds `e` to `observed` (once, in enum order).
    void observe(Evidence e) {
        auto it = observed.begin();
        while (it != observed.end() && *it < e) ++it;
        if (it == observed.end() || *it != e) observed.insert(it, e);
    }
};

/// The report's first line: what it found, or that it found nothing, and in what. "No problems
/// found." only when the input had every kind of evidence; otherwise "No problems found in steps
/// and input waits; GPU activity, device memory and device health were not observed."; with
/// findings, how many and how bad, and what was not observed; "Nothing was observed" for an
/// input of no events. Every renderer opens with it. Errors: none ("" on OOM).
GPUDIAG_API std::string headline(const Report& report) noexcept;

/// Plain-text rendering for terminals and logs. Errors: none (never throws; returns "" on OOM).
GPUDIAG_API std::string render_text(const Report& report) noexcept;
/// JSON rendering; the schema is documented in docs/api.md ("The JSON report"). `compact`: one line
/// with no spaces (for log lines and services), else indented. Errors: none ("" on OOM).
GPUDIAG_API std::string render_json(const Report& report, bool compact = false) noexcept;
/// The compact JSON report as one log line (ending in a newline) of at most `max_bytes`, the
/// newline included: 16 KiB by default, the line limit of Docker's json-file log driver, within
/// journald's and fluentd's. A report that does not fit is trimmed, never cut or split (each
/// line stays one JSON object a log pipeline can parse alone): section tables and series, ranks,
/// sections, the findings' detail, notes, then the least important findings, in that order, until
/// it fits; it then closes with "truncated": {"full_bytes", "headline" (the full report's),
/// "dropped": [what went], "findings_dropped"}. The full report stays what render_json gives.
/// Errors: none ("" on OOM, or when not even the bare report fits).
GPUDIAG_API std::string render_json_line(const Report& report,
                                         std::size_t max_bytes = 16384) noexcept;
/// Reads a report that render_json wrote (any schema version up to this one; fields a newer
/// writer added are ignored). Errors: kCorruptData for text that is not JSON or not a report
/// (the message says where), kResourceExhausted when out of memory.
/// Thread-safety: safe.
GPUDIAG_API Result<Report> parse_report_json(std::string_view json) noexcept;

/// Prometheus text exposition (format 0.0.4) of a report and its ranks: one metric per figure,
/// named gpudiag_<section>_<figure>_<base unit> (gpudiag_finding_<id>_<figure>_<base unit> for
/// a finding's), in base units (_bytes, _seconds, _ratio, ...); findings as
/// gpudiag_finding{id,severity} and gpudiag_findings{severity}; capture counts as counters.
/// Labels: the host (see PrometheusOptions), rank (only in a multi-rank job) and, for figures
/// about one GPU, gpu, UUID, pci_bus_id and modelName where the source knows them
/// (dcgm-exporter's labels). Several reports render as one exposition with no duplicate series:
/// a `source` label (each report's description) tells them apart when their other labels do not.
/// Errors: none ("" on OOM). Thread-safety: safe.
GPUDIAG_API std::string render_prometheus(const Report& report) noexcept;
GPUDIAG_API std::string render_prometheus(const std::vector<Report>& reports) noexcept;

/// How the exposition names the host. dcgm-exporter labels its samples `hostname` since 4.8.3
/// and `Hostname` before: by default both are written, so a join works with either exporter.
struct PrometheusOptions {
    bool hostname_label = true;         ///< `hostname`, as dcgm-exporter >= 4.8.3
    bool legacy_hostname_label = true;  ///< `Hostname`, as dcgm-exporter < 4.8.3
};
GPUDIAG_API std::string render_prometheus(const Report& report,
                                          const PrometheusOptions& options) noexcept;
GPUDIAG_API std::string render_prometheus(const std::vector<Report>& reports,
                                          const PrometheusOptions& options) noexcept;

/// A number as reports print it, by its unit: "1.3 GiB" (kBytes), "62.3 ms" (kNanoseconds),
/// "39.4 %" (kFraction), "1234" (kCount), "20 MiB/step", "n/a" for NaN. The one formatter behind
/// the text report, the HTML report and the Python layer. Errors: none ("" on OOM).
GPUDIAG_API std::string format_figure(double value, Unit unit) noexcept;
/// The same by the unit's spelling (the Python layer's form: "ns"); a spelling no unit has prints
/// after the number ("3 furlongs").
GPUDIAG_API std::string format_figure(double value, std::string_view unit) noexcept;

/// A figure as reports list it: its label (its key when it has none) and its value by its unit.
/// An "enum" figure, whose label reads "window: 0 steps, 1 hta, 2 all", lists as the name before
/// the colon and the word its value stands for: ("window", "steps"). Errors: none ({} on OOM).
GPUDIAG_API std::pair<std::string, std::string> figure_row(const Figure& figure) noexcept;

/// A device as reports name it: "NVIDIA H200, 141.0 GiB, GPU-5a1c..., PCI 00000000:18:00.0" (what
/// the input recorded of these); an input that did not record the model says so ("model not
/// recorded in the input"), never a blank. Errors: none ("" on OOM).
GPUDIAG_API std::string describe_device(const DeviceInfo& device) noexcept;

/// A table column's key as reports head it: the words of the key without the one that restates
/// its declared unit ("step_time_ns", kNanoseconds -> "step time"; "wait_ns_per_step" -> "wait per
/// step"; "idle_share" stays "idle share"); a column named by anything but a snake_case key (an
/// allocation site, "other sites") keeps its name as it is. Errors: none ("" on OOM).
GPUDIAG_API std::string column_heading(std::string_view key, Unit unit) noexcept;
/// The same by the unit's spelling (the Python layer's form: "ns").
GPUDIAG_API std::string column_heading(std::string_view key, std::string_view unit) noexcept;

/// What fixing a finding is worth, from its `predicted_saving`, as every report says it: "Fixing
/// this saves about 68.9 ms per step (39.4 %): 174.8 ms -> 105.9 ms", or "Fixing this alone saves
/// nothing per step now: it is off the critical path (615.1 ms either way)"; "" when nothing was
/// predicted. The finding's summary says why, not the number. Errors: none ("" on OOM).
GPUDIAG_API std::string describe_saving(const std::vector<Figure>& predicted_saving) noexcept;

/// The sentence that says a finding's saving overlaps others': "It comes from the same time as
/// gpu_idle's and host_sync_stall's savings: they do not add up."; "" when it shares none.
/// Errors: none ("" on OOM).
GPUDIAG_API std::string describe_shared_saving(
    const std::vector<std::string>& shared_with) noexcept;

/// What fixing every cause found together is worth, from a report's fix_all_saving: "Fixing every
/// cause of lost time above together saves about 37.3 ms per step (31.4 %): 118.8 ms -> 81.5 ms";
/// "" when the report has none. Errors: none ("" on OOM).
GPUDIAG_API std::string describe_fix_all(const std::vector<Figure>& fix_all_saving) noexcept;

}  // namespace gpudiag
