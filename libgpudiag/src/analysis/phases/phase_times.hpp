// SPDX-License-Identifier: Apache-2.0
// PhaseTimeAnalyzer: how long the program spends in each of the phases it marked, per call and
// per step. Phases are the ranges a program names as parts of its work: gpudiag.phase() (and the
// "gpudiag" NVTX domain, NVTX ranges named "forward", "backward", ...: RangeCategory::kPhase) and
// host-side user annotations (torch's record_function, Kineto's "user_annotation" ranges: the way
// a profiled program names its phases). Other NVTX ranges (kGeneric) are not phases: any library
// in the process pushes them (torch's emit_nvtx marks every operator), and they would take the
// phases' time.
//
// A serving engine's iterations (vLLM's "execute_context_1(888)_generation_0(0)", TensorRT-LLM's
// "_forward_step" NVTX ranges: core/serving_names) are phases by their kind, one row each for
// prefill, decode and mixed batches, whatever the token counts in their names.
//
// Each thread's time goes to its innermost open phase ("self" time), so nested phases never count
// the same time twice and a thread's shares of a step add up to at most the step. Markers
// (kRangeBegin/kRangeEnd) pair per thread as the timeline pairs them; complete ranges (kRange)
// nest by their times.
//
// Steps come from the StepIndex (the timeline's), which the registry feeds every batch before this
// analysis: self time is kept as pieces [start, end) and folded into per-phase totals against the
// steps closed so far whenever the buffer fills, so memory is bounded by the caps below whatever
// the run length.
#pragma once

#include "core/analyzer.hpp"
#include "core/serving_names.hpp"
#include "core/step_index.hpp"

#include <gpudiag/analyze.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace gpudiag::detail {

class PhaseTimeAnalyzer final : public Analyzer {
public:
    /// Distinct phase names broken out; later names are counted together as one row.
    static constexpr std::size_t kMaxNames = 256;
    /// Threads with open phases at once; ranges of threads past it are counted and ignored.
    static constexpr std::size_t kMaxThreads = 1024;
    /// Open ranges per thread; deeper ones are counted and ignored (their ends still pair).
    static constexpr std::size_t kMaxOpen = 64;
    /// Self-time pieces kept before folding them into the totals (24 bytes each).
    static constexpr std::size_t kMaxPieces = std::size_t{1} << 14;
    /// Rows of the table; the rest are summed into one.
    static constexpr std::size_t kTableRows = 40;

    /// `steps`: the steps' owner, fed before this analysis (may be null: no steps).
    PhaseTimeAnalyzer(const AnalysisOptions& options, const StepIndex* steps);
    void begin(const SourceInfo& info, const StringTable& strings) override;
    void consume(std::span<const Event> events) override;
    void end(const SourceSummary& summary) override;
    void contribute(Report& report) override;

private:
    struct Totals {
        StringId name = kNoString;
        std::uint64_t calls = 0;         ///< ranges that closed
        std::uint64_t inclusive_ns = 0;  ///< their durations (nested phases included)
        std::uint64_t self_ns = 0;       ///< folded self time
        std::uint64_t in_steps_ns = 0;   ///< of it, inside the steps closed when it was folded
        std::uint64_t in_latest_ns = 0;  ///< of that, inside the latest of those steps
        std::string label;               ///< the row's name when not `name` (serving kinds)
    };
    static constexpr std::uint32_t kNotPhase = UINT32_MAX;  // a range that only pairs markers
    static constexpr std::uint64_t kOpenEnd = UINT64_MAX;   // a marker range not yet ended
    static constexpr std::size_t kNone = SIZE_MAX;
    struct Open {
        std::uint64_t start;
        std::uint64_t end;  // kOpenEnd for a marker range
        std::uint64_t id;   // NVTX range id (pairs its end), 0 when none
        std::uint32_t slot;
        std::uint32_t repeat;  // inside a phase of the same name: adds no call
    };
    struct Thread {
        std::vector<Open> open;  // by (start, end descending): the innermost phase is last
        std::uint64_t now = 0;   // time attributed up to here
        std::uint32_t ignored_begins = 0;  // markers past kMaxOpen, still to be ended
    };
    struct Piece {
        std::uint64_t start;
        std::uint64_t end;
        std::uint32_t slot;
    };

    void on_begin(const Event& e);
    void on_end(const Event& e);
    void on_complete(const Event& e);
    [[nodiscard]] std::uint32_t phase_slot(const Event& e);
    [[nodiscard]] std::uint32_t new_slot(StringId name);
    [[nodiscard]] std::uint32_t serving_slot(const Event& e);
    Thread* thread_of(const Event& e, bool create);
    [[nodiscard]] static std::size_t marker_index(const Thread& t, std::uint64_t id);
    [[nodiscard]] bool repeats(const Thread& t, std::uint32_t slot) const;
    void advance(Thread& t, std::uint64_t to);
    void attribute(const Thread& t, std::uint64_t from, std::uint64_t to);
    void close(const Open& o, std::uint64_t end);
    void fold_full_buffer();
    void fold(std::size_t count, const std::vector<StepSpan>& steps);
    [[nodiscard]] std::string slot_name(std::uint32_t slot) const;
    [[nodiscard]] std::string open_phases_note() const;
    void add_notes(Report& report, double share_sum, const std::vector<StepSpan>& closed) const;

    AnalysisOptions options_;
    const StepIndex* steps_;
    const StringTable* strings_ = nullptr;
    bool ended_ = false;
    bool saw_phases_ = false;

    std::vector<Totals> totals_;                         // by slot; the last may be kOther's
    std::unordered_map<StringId, std::uint32_t> slots_;  // name -> slot
    std::uint32_t other_slot_ = kNotPhase;               // names past kMaxNames
    std::array<std::uint32_t, kServingStepKinds> serving_slots_{kNotPhase, kNotPhase, kNotPhase,
                                                                kNotPhase};
    std::unordered_map<std::uint64_t, Thread> threads_;  // (process << 32) | thread
    std::vector<Piece> pieces_;
    std::uint64_t latest_step_start_ = 0;  // the step Totals::in_latest_ns is about
    bool has_latest_step_ = false;

    std::uint64_t past_name_cap_ = 0;          // ranges counted under the other slot
    std::uint64_t past_thread_cap_ = 0;        // ranges ignored: too many threads
    std::uint64_t past_depth_cap_ = 0;         // ranges ignored: nested too deep
    std::uint64_t unpaired_ends_ = 0;          // phase ends with nothing open on their thread
    std::uint64_t forced_first_ = UINT64_MAX;  // when the pieces folded before their step
    std::uint64_t forced_last_ = 0;            // was known lie (see fold_full_buffer)
};

}  // namespace gpudiag::detail
