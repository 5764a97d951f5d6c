// SPDX-License-Identifier: Apache-2.0
// HostTracks: the host side of a Chrome trace export, so that an input without GPU activity (a
// session on a CPU, a snapshot's annotations) still draws a timeline. Per host process:
//   "steps"        one slice per step ("step N"), from step markers (Session::step_begin/end)
//   "GPU capture"  the windows GPU capture did not see (paused, or yielded to another tool)
//   one track per thread: its ranges, nested (phases, DataLoader input waits, NVTX and
//   complete ranges, CUDA API calls) and its annotations as markers.
// Begin/end markers pair per thread as the analyses pair them (phase_times.hpp): an end with an
// NVTX range id closes that range, one without closes the innermost. A range opened directly
// inside one of the same name is paired but not drawn: gpudiag.phase() also pushes an NVTX range
// of its name, which would draw every phase twice. Steps have their own track
// because their boundaries need not nest with the phases (an optimizer hook marks a step inside
// the "optimizer" phase). Memory stays bounded whatever the run length: slices are written as they
// close, and what is kept open has the caps below; what went past a cap or never paired is
// counted and written into the trace's otherData.
#pragma once

#include <gpudiag/event.hpp>
#include <gpudiag/string_table.hpp>

#include "output/chrome_trace_writer.hpp"

#include <cstdint>
#include <map>
#include <set>
#include <unordered_map>
#include <vector>

namespace gpudiag::detail {

class HostTracks {
public:
    /// Threads with open ranges at once; ranges of threads past it are counted and not drawn.
    static constexpr std::size_t kMaxThreads = 1024;
    /// Open ranges per thread; deeper ones are counted and not drawn (their ends still pair).
    static constexpr std::size_t kMaxOpen = 64;
    /// Open steps per process (markers of one loop leave one open at a time).
    static constexpr std::size_t kMaxOpenSteps = 16;
    /// Processes and threads named in the trace; later ones keep the viewer's default names.
    static constexpr std::size_t kMaxNamedTracks = 4096;
    /// Track ids of the synthetic tracks: above any thread id an OS hands out, and within the 32
    /// bits trace viewers read a tid as.
    static constexpr std::uint64_t kStepsTid = 0xFFFFFFFFu;
    static constexpr std::uint64_t kCaptureTid = 0xFFFFFFFEu;

    /// What did not pair or went past a cap, summed over the inputs of one export.
    struct Counts {
        std::uint64_t ranges_paired = 0;         ///< begin/end markers that paired
        std::uint64_t range_ends_unpaired = 0;   ///< ends with nothing open on their thread
        std::uint64_t range_begins_unended = 0;  ///< drawn to the input's last event
        std::uint64_t ranges_past_depth_cap = 0;
        std::uint64_t ranges_past_thread_cap = 0;
        std::uint64_t range_repeats = 0;  ///< paired, not drawn: inside a range of the same name
        std::uint64_t steps_paired = 0;
        std::uint64_t step_ends_unpaired = 0;
        std::uint64_t step_begins_unended = 0;  ///< drawn to the input's last event
        std::uint64_t steps_past_open_cap = 0;
    };

    HostTracks(ChromeTraceWriter& writer, Counts& counts) : writer_(writer), counts_(counts) {}

    void begin(std::int32_t rank, const StringTable& strings);
    /// Draws `e` when it is a host event; returns false for events it does not draw.
    bool on_event(const Event& e);
    /// A host process' track id in the trace (each rank's processes apart).
    [[nodiscard]] std::uint64_t pid_of(std::uint32_t process) const;
    /// Remembers the process, so that finish() names it.
    void note_process(std::uint32_t process);
    /// Draws what is still open up to the input's last event, and names the tracks.
    void finish();

private:
    struct Open {
        std::uint64_t start;
        std::uint64_t id;  // NVTX range id (pairs its end), 0 when none
        StringId name;
        RangeCategory category;
        bool repeat;  // directly inside an open range of the same name: not drawn
    };
    struct Thread {
        std::vector<Open> open;            // innermost last
        std::uint32_t ignored_begins = 0;  // begins past kMaxOpen, still to be ended
    };
    struct OpenStep {
        std::uint64_t number;
        std::uint64_t start;
    };
    struct Process {
        std::vector<OpenStep> steps;
        std::uint64_t paused_since = UINT64_MAX;
        StringId pause_reason = kNoString;
        bool drew_steps = false;
        bool drew_capture = false;
        std::vector<std::uint32_t> threads;  // in order of first slice
    };

    void range_begin(const Event& e);
    void range_end(const Event& e);
    void step_begin(const Event& e);
    void step_end(const Event& e);
    void capture(const Event& e);
    void draw_range(std::uint32_t process, std::uint32_t thread, const Open& o, std::uint64_t end,
                    bool ended);
    void draw_step(std::uint32_t process, const OpenStep& s, std::uint64_t end, bool ended);
    void draw_pause(std::uint32_t process, Process& p, std::uint64_t end);
    Thread* thread_of(const Event& e, bool create);
    Process* process_of(std::uint32_t process);
    void note_thread(std::uint32_t process, std::uint32_t thread);
    void name_tracks(std::uint32_t process, const Process& p);

    ChromeTraceWriter& writer_;
    Counts& counts_;
    const StringTable* strings_ = nullptr;
    std::int32_t rank_ = -1;
    std::uint64_t last_ns_ = 0;                          // the latest time of the input so far
    std::unordered_map<std::uint64_t, Thread> threads_;  // (process << 32) | thread
    std::map<std::uint32_t, Process> processes_;
    std::set<std::uint64_t> named_threads_;  // (process << 32) | thread, bounded
};

}  // namespace gpudiag::detail
