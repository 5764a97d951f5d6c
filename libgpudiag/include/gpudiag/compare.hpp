// SPDX-License-Identifier: Apache-2.0
// Comparing two runs: did a change help? Two reports (of any input kind analyze_files reads, a
// saved JSON report, a multi-rank job) in; one verdict out, for time, memory and health, with the
// figures that changed, each judged against the runs' own step-to-step noise, and the reasons the
// two runs cannot be compared where they cannot (another GPU, another software stack, another
// program on the GPU, throttling in one run only, too few steps, other input shapes).
// docs/compare.md has the rules.
#pragma once

#include <gpudiag/export.hpp>
#include <gpudiag/names.hpp>
#include <gpudiag/report.hpp>
#include <gpudiag/status.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace gpudiag {

/// The one word a comparison ends in.
enum class CompareVerdict : std::uint8_t {
    kImprovement = 0,   ///< what decides got better and nothing got worse
    kRegression = 1,    ///< what decides got worse and nothing got better
    kMixed = 2,         ///< some of it better, some worse (time better, memory worse, say)
    kUnchanged = 3,     ///< nothing changed beyond the runs' own noise
    kInconclusive = 4,  ///< a change the comparability reasons can explain, or nothing to compare
};
template <>
GPUDIAG_API EnumNames<CompareVerdict> enum_names<CompareVerdict>() noexcept;
/// "improvement", "regression", "mixed", "unchanged", "inconclusive".
GPUDIAG_API const char* compare_verdict_name(CompareVerdict v) noexcept;

/// What part of a run a compared figure describes (and what a comparability reason can explain).
enum class CompareArea : std::uint8_t {
    kTime = 0,    ///< step time and what it is made of
    kGpu = 1,     ///< GPU busy and idle, idle by cause
    kMemory = 2,  ///< device memory: peaks, fragmentation, growth
    kHealth = 3,  ///< the card: throttling, errors, other processes
};
template <>
GPUDIAG_API EnumNames<CompareArea> enum_names<CompareArea>() noexcept;

/// How one compared figure moved, judged against the noise it was measured with.
enum class DeltaJudgement : std::uint8_t {
    kImproved = 0,       ///< moved the good way by more than the noise
    kRegressed = 1,      ///< moved the bad way by more than the noise
    kWithinNoise = 2,    ///< moved less than the noise: no change
    kNotComparable = 3,  ///< changed, but the noise could not be estimated or a reason explains it
};
template <>
GPUDIAG_API EnumNames<DeltaJudgement> enum_names<DeltaJudgement>() noexcept;

/// What became of a finding between the two runs.
enum class FindingChangeKind : std::uint8_t {
    kAppeared = 0,   ///< in the after run only
    kResolved = 1,   ///< in the before run only (and the after run had the evidence to see it)
    kPersisted = 2,  ///< in both
};
template <>
GPUDIAG_API EnumNames<FindingChangeKind> enum_names<FindingChangeKind>() noexcept;

/// One figure compared. Numbers are in `unit`; a figure one side lacks is not listed (it goes to
/// Comparison::not_compared instead).
struct CompareDelta {
    std::string key;    ///< stable: the report's figure key ("step_time_ns", "peak_reserved_bytes")
    std::string label;  ///< "median step time", "GPU idle: waiting for the next batch"
    Unit unit = Unit::kNumber;
    CompareArea area = CompareArea::kTime;
    std::int32_t rank = -1;  ///< for a job's per-rank figure, the rank; -1 for the run as a whole
    double before = 0;
    double after = 0;
    double change = 0;  ///< after - before
    /// change / before; NaN when before is 0.
    double relative_change = std::numeric_limits<double>::quiet_NaN();
    /// The smallest change that counts, in `unit`: a change within it is noise.
    double noise = 0;
    /// What `noise` comes from, in plain language ("3 x the standard error of the difference of
    /// the median step times, from the step-to-step spread of 6 and 6 steps").
    std::string noise_basis;
    bool lower_is_better = true;
    DeltaJudgement judgement = DeltaJudgement::kWithinNoise;
    /// An outcome the verdict weighs (step time, peak memory, card health); the others are
    /// causes: they explain an outcome's change and never vote on their own.
    bool outcome = false;
    /// One of the few deltas that decided the verdict (the outcomes that moved and the causes
    /// that account for most of their change).
    bool deciding = false;
};

/// One finding id, before and after.
struct FindingChange {
    std::string id;
    FindingChangeKind change = FindingChangeKind::kPersisted;
    std::int32_t rank = -1;
    /// The severity and title on each side; for a side without it, kInfo and "".
    Severity severity_before = Severity::kInfo;
    Severity severity_after = Severity::kInfo;
    std::string title_before;
    std::string title_after;
    /// Its predicted saving per step (or over the window without steps) on each side, in ns;
    /// -1 where that side predicted none or lacks the finding.
    double saving_before_ns = -1;
    double saving_after_ns = -1;
};

/// Why the two runs cannot be compared one to one.
struct CompareReason {
    /// Stable: "gpu_model", "gpu_count", "driver", "cuda", "framework", "foreign_process",
    /// "throttling", "too_few_steps", "input_shapes", "input_kinds", "different_code",
    /// "analysis_window", "incomplete_input", "simulated", "no_common_evidence".
    std::string id;
    std::string text;                   ///< plain language, with both sides' values
    std::vector<CompareArea> explains;  ///< the areas whose changes this reason can explain
};

/// One side of a comparison, as the comparison describes it.
struct CompareSide {
    std::string description;  ///< the report's source description (file names)
    std::string producer;     ///< "kineto", "torch-snapshot", ...
    std::string headline;     ///< the report's own headline
    std::vector<Evidence> observed;
    bool observed_known = true;
    std::vector<std::string> devices;  ///< describe_device() of each device the input lists
    std::uint64_t steps = 0;           ///< steps the timeline measured (0: none)
    std::int32_t ranks = 0;            ///< ranks of a job report; 0 for a single process
    /// The software stack the input names: ("driver", "535.104"), ("cuda", "12.2"),
    /// ("framework", "torch 2.4.0"); only what the input recorded.
    std::vector<std::pair<std::string, std::string>> software;
};

struct CompareOptions {
    /// A difference counts when it exceeds this many standard errors of the difference (3: a
    /// false alarm well under 1 % of the time for roughly normal step times).
    double noise_multiplier = 3.0;
    /// Fewer steps than this on either side: step-to-step noise cannot be estimated, so time
    /// changes are not judged (a median and spread of 4 numbers is too fragile).
    std::uint32_t min_steps = 5;
    /// A change smaller than this share of the before value is never a change, however steady
    /// the runs (1 %: below what anyone acts on, and below clock and sampling jitter).
    double min_relative_change = 0.01;
};

/// Two runs compared.
struct Comparison {
    CompareVerdict verdict = CompareVerdict::kInconclusive;
    /// False when any reason applies; the verdict is then inconclusive if a reason can explain a
    /// change that was seen.
    bool comparable = true;
    std::vector<CompareReason> reasons;
    /// One sentence: the verdict, what decided it, and why not comparable where it is not.
    std::string headline;
    CompareSide before;
    CompareSide after;
    /// The kinds of evidence both sides had (what was compared), in enum order.
    std::vector<Evidence> compared;
    /// What could not be compared, in plain language ("device memory: only the after run observed
    /// it").
    std::vector<std::string> not_compared;
    std::vector<CompareDelta> deltas;
    std::vector<FindingChange> findings;
    std::vector<std::string> notes;
};

/// Compares two reports. Errors: kResourceExhausted (out of memory); kInternal for an unexpected
/// failure. Two reports that cannot be compared are not an error: the comparison says why.
/// Thread-safety: safe.
GPUDIAG_API Result<Comparison> compare_reports(const Report& before, const Report& after,
                                               const CompareOptions& options = {}) noexcept;

/// Plain-text rendering: the headline, the reasons, the deciding deltas, every delta, the
/// findings that changed, what was not compared. Errors: none ("" on OOM).
GPUDIAG_API std::string render_comparison_text(const Comparison& comparison) noexcept;
/// JSON rendering (docs/compare.md, "The JSON comparison"). `compact`: one line, else indented.
/// Errors: none ("" on OOM).
GPUDIAG_API std::string render_comparison_json(const Comparison& comparison,
                                               bool compact = false) noexcept;

}  // namespace gpudiag
