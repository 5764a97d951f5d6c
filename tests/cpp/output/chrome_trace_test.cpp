// SPDX-License-Identifier: Apache-2.0
// Chrome/Perfetto export of host-only inputs: a recording a real Session made on this machine (no
// GPU) draws its steps, phases and input waits as tracks of its process, nested as the program
// marked them, with unpaired markers counted; an input with nothing to draw is refused and leaves
// no file behind.
#include <gpudiag/session.hpp>
#include <gpudiag/trace_export.hpp>

#include "api/session_test_support.hpp"
#include "temp_dir.hpp"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace gpudiag {
namespace {

using std::chrono::milliseconds;
using testing::cpu_options;
using testing::make;
using testing::TempDir;

constexpr std::uint64_t kStepsTid = 0xFFFFFFFFu;
constexpr int kSteps = 5;
constexpr double kInputWaitUs = 2000;
constexpr double kPhaseUs = 1000;

struct Slice {
    std::string name, cat;
    std::uint64_t pid = 0, tid = 0;
    double ts = 0, dur = 0;
    std::int64_t step = -1;
    [[nodiscard]] double end() const { return ts + dur; }
    // With a nanosecond's slack: µs are written as decimals, and sums of them round.
    [[nodiscard]] bool inside(const Slice& outer) const {
        return ts >= outer.ts - 1e-3 && end() <= outer.end() + 1e-3;
    }
};

struct Trace {
    std::vector<Slice> slices;
    std::map<std::uint64_t, std::string> thread_names;   // by tid
    std::map<std::uint64_t, std::string> process_names;  // by pid
    std::map<std::string, std::int64_t> markers;         // otherData's "group.count"

    [[nodiscard]] std::vector<Slice> named(const std::string& name) const {
        std::vector<Slice> out;
        for (const Slice& s : slices) {
            if (s.name == name) out.push_back(s);
        }
        return out;
    }
};

std::uint64_t uint_of(simdjson::dom::element e, const char* key) {
    std::uint64_t v = 0;
    EXPECT_EQ(e[key].get_uint64().get(v), simdjson::SUCCESS) << key;
    return v;
}

// Every slice, track name and marker count of an exported trace, parsed back.
Trace parse(const std::string& path) {
    Trace t;
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    EXPECT_EQ(parser.load(path).get(doc), simdjson::SUCCESS);
    for (simdjson::dom::element e : doc["traceEvents"].get_array()) {
        std::string_view ph, name, cat, arg;
        EXPECT_EQ(e["ph"].get_string().get(ph), simdjson::SUCCESS);
        EXPECT_EQ(e["name"].get_string().get(name), simdjson::SUCCESS);
        if (ph == "M" && e["args"]["name"].get_string().get(arg) == simdjson::SUCCESS) {
            if (name == "thread_name") t.thread_names[uint_of(e, "tid")] = arg;
            if (name == "process_name") t.process_names[uint_of(e, "pid")] = arg;
        }
        if (ph != "X") continue;
        Slice s;
        s.name = name;
        EXPECT_EQ(e["cat"].get_string().get(cat), simdjson::SUCCESS);
        s.cat = cat;
        s.pid = uint_of(e, "pid");
        s.tid = uint_of(e, "tid");
        EXPECT_EQ(e["ts"].get_double().get(s.ts), simdjson::SUCCESS);
        EXPECT_EQ(e["dur"].get_double().get(s.dur), simdjson::SUCCESS);
        if (e["args"]["step"].get_int64().get(s.step) != simdjson::SUCCESS) s.step = -1;
        t.slices.push_back(s);
    }
    for (const char* group : {"range_markers", "step_markers"}) {
        simdjson::dom::object counts;
        if (doc["otherData"][group].get_object().get(counts) != simdjson::SUCCESS) continue;
        for (auto [key, value] : counts) {
            t.markers[std::string(group) + "." + std::string(key)] = value.get_int64().value();
        }
    }
    return t;
}

std::uint32_t this_tid() {
    return static_cast<std::uint32_t>(::syscall(SYS_gettid));
}

// A loop of kSteps steps: wait for input, then "train" holding "forward" and "backward"; a second
// thread marks its own phases meanwhile. One phase end too many, and one phase never ended.
std::uint32_t record_loop(const std::string& path) {
    auto s = make(cpu_options(path));
    EXPECT_TRUE(s->start().is_ok());
    std::uint32_t worker_tid = 0;
    std::thread worker([&] {
        worker_tid = this_tid();
        for (int i = 0; i < 3; ++i) {
            s->phase_begin("prefetch");
            std::this_thread::sleep_for(milliseconds(1));
            s->phase_end();
        }
    });
    for (int i = 1; i <= kSteps; ++i) {
        s->step_begin(static_cast<std::uint64_t>(i));
        s->input_wait_begin();
        std::this_thread::sleep_for(milliseconds(2));
        s->input_wait_end();
        s->phase_begin("train");
        for (const char* phase : {"forward", "backward"}) {
            s->phase_begin(phase);
            std::this_thread::sleep_for(milliseconds(1));
            s->phase_end();
        }
        s->phase_end();
        s->step_end(static_cast<std::uint64_t>(i));
    }
    worker.join();
    s->phase_end();  // nothing open: counted, not drawn
    s->phase_begin("tail");
    std::this_thread::sleep_for(milliseconds(1));
    s->step_begin(kSteps + 1);  // the last event: "tail" is drawn up to it
    EXPECT_TRUE(s->stop().is_ok());
    return worker_tid;
}

TEST(ChromeTraceHost, ASessionWithoutAGpuDrawsItsStepsPhasesAndInputWaits) {
    TempDir dir("chrome_host");
    const std::string recording = dir.file("run.gpudiag");
    const std::uint32_t worker = record_loop(recording);
    const std::string out = dir.file("run.trace.json");
    Status st = export_chrome_trace({recording}, out);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    const Trace t = parse(out);
    const std::uint64_t pid = static_cast<std::uint64_t>(::getpid());
    const std::uint64_t main_tid = this_tid();

    EXPECT_EQ(t.process_names.at(pid), "host process " + std::to_string(pid));
    EXPECT_EQ(t.thread_names.at(kStepsTid), "steps");
    EXPECT_EQ(t.thread_names.at(worker), "thread " + std::to_string(worker));
    if (main_tid == pid) {
        EXPECT_EQ(t.thread_names.at(main_tid), "main thread");
    }

    // One slice per step on the steps track, in order, back to back, each holding its work.
    std::vector<Slice> steps;
    for (const Slice& s : t.slices) {
        if (s.tid == kStepsTid) steps.push_back(s);
    }
    ASSERT_EQ(steps.size(), std::size_t{kSteps} + 1);
    for (int i = 0; i < kSteps; ++i) {
        EXPECT_EQ(steps[i].name, "step " + std::to_string(i + 1));
        EXPECT_EQ(steps[i].cat, "step");
        EXPECT_EQ(steps[i].step, i + 1);
        EXPECT_EQ(steps[i].pid, pid);
        EXPECT_GE(steps[i].dur, kInputWaitUs + 2 * kPhaseUs);
        if (i > 0) {
            EXPECT_GE(steps[i].ts, steps[i - 1].end() - 1e-3);
        }
    }
    EXPECT_EQ(steps.back().name, "step 6 (no end recorded)");  // begun as the recording stopped
    EXPECT_EQ(steps.back().dur, 0);

    const auto waits = t.named("input wait");
    const auto train = t.named("train");
    const auto forward = t.named("forward");
    const auto backward = t.named("backward");
    ASSERT_EQ(waits.size(), std::size_t{kSteps});
    ASSERT_EQ(train.size(), std::size_t{kSteps});
    ASSERT_EQ(forward.size(), std::size_t{kSteps});
    ASSERT_EQ(backward.size(), std::size_t{kSteps});
    for (int i = 0; i < kSteps; ++i) {
        for (const Slice* s : {&waits[i], &train[i], &forward[i], &backward[i]}) {
            EXPECT_EQ(s->pid, pid) << s->name;
            EXPECT_EQ(s->tid, main_tid) << s->name;
            EXPECT_TRUE(s->inside(steps[i])) << s->name << " of step " << i + 1;
        }
        EXPECT_EQ(waits[i].cat, "input_wait");
        EXPECT_GE(waits[i].dur, kInputWaitUs);
        EXPECT_GE(train[i].ts, waits[i].end() - 1e-3);
        EXPECT_EQ(train[i].cat, "phase");
        EXPECT_TRUE(forward[i].inside(train[i]));
        EXPECT_TRUE(backward[i].inside(train[i]));
        EXPECT_GE(backward[i].ts, forward[i].end() - 1e-3);
        EXPECT_GE(forward[i].dur, kPhaseUs);
    }

    const auto prefetch = t.named("prefetch");
    ASSERT_EQ(prefetch.size(), 3u);
    for (const Slice& s : prefetch) EXPECT_EQ(s.tid, worker);

    // The phase never ended is drawn up to the last event, and says so; nothing starts before
    // the first event.
    const auto tail = t.named("tail (no end recorded)");
    ASSERT_EQ(tail.size(), 1u);
    EXPECT_GE(tail[0].dur, kPhaseUs);
    EXPECT_NEAR(tail[0].end(), steps.back().ts, 1e-3);
    for (const Slice& s : t.slices) {
        EXPECT_GE(s.ts, 0) << s.name;
        EXPECT_LE(s.end(), tail[0].end() + 1e-3) << s.name;
    }

    EXPECT_EQ(t.markers.at("range_markers.paired"), 4 * kSteps + 3);
    EXPECT_EQ(t.markers.at("range_markers.ends_without_begin"), 1);
    EXPECT_EQ(t.markers.at("range_markers.begins_without_end"), 1);
    EXPECT_EQ(t.markers.at("range_markers.past_depth_cap"), 0);
    EXPECT_EQ(t.markers.at("step_markers.paired"), kSteps);
    EXPECT_EQ(t.markers.at("step_markers.begins_without_end"), 1);
    EXPECT_EQ(t.slices.size(), std::size_t{5 * kSteps + 3 + 1 + 1});
}

// Nested past the depth cap: the deeper ranges are counted and not drawn, and their ends pair
// with them, so every drawn range still encloses the next.
TEST(ChromeTraceHost, RangesNestedPastTheCapAreCountedAndTheRestStillPair) {
    constexpr int kDepth = 70;  // the cap is 64
    TempDir dir("chrome_deep");
    const std::string recording = dir.file("deep.gpudiag");
    {
        auto s = make(cpu_options(recording));
        ASSERT_TRUE(s->start().is_ok());
        for (int i = 0; i < kDepth; ++i) s->phase_begin("level " + std::to_string(i));
        for (int i = 0; i < kDepth; ++i) s->phase_end();
        ASSERT_TRUE(s->stop().is_ok());
    }
    const std::string out = dir.file("deep.trace.json");
    ASSERT_TRUE(export_chrome_trace({recording}, out).is_ok());
    const Trace t = parse(out);
    ASSERT_EQ(t.slices.size(), 64u);
    for (int i = 0; i < 64; ++i) {
        const auto level = t.named("level " + std::to_string(i));
        ASSERT_EQ(level.size(), 1u) << i;
        if (i > 0) {
            EXPECT_TRUE(level[0].inside(t.named("level " + std::to_string(i - 1))[0]));
        }
    }
    EXPECT_EQ(t.markers.at("range_markers.paired"), 64);
    EXPECT_EQ(t.markers.at("range_markers.past_depth_cap"), kDepth - 64);
    EXPECT_EQ(t.markers.at("range_markers.ends_without_begin"), 0);
}

// NVTX ranges as the NVTX receiver records them (an id on the begin and its end): an end closes
// the range of its id, not the innermost, and the NVTX range gpudiag.phase() pushes under the
// phase's own name is paired but not drawn a second time.
TEST(ChromeTraceHost, NvtxEndsPairByIdAndAPhaseIsDrawnOnce) {
    TempDir dir("chrome_nvtx");
    const std::string recording = dir.file("nvtx.gpudiag");
    {
        auto s = make(cpu_options(recording));
        ASSERT_TRUE(s->start().is_ok());
        auto nvtx = [&](EventKind kind, const char* name, std::uint64_t id) {
            Event e;
            e.kind = kind;
            e.range.name = kind == EventKind::kRangeBegin ? s->intern(name) : kNoString;
            e.range.category = RangeCategory::kGeneric;
            e.range.id = id;
            testing::put(*s, e);
        };
        nvtx(EventKind::kRangeBegin, "data", 7);
        std::this_thread::sleep_for(milliseconds(1));
        s->phase_begin("forward");
        nvtx(EventKind::kRangeBegin, "forward", 8);  // torch.cuda.nvtx.range_push of the phase
        nvtx(EventKind::kRangeEnd, nullptr, 7);      // "data" ends inside the phase
        std::this_thread::sleep_for(milliseconds(1));
        nvtx(EventKind::kRangeEnd, nullptr, 8);
        s->phase_end();
        ASSERT_TRUE(s->stop().is_ok());
    }
    const std::string out = dir.file("nvtx.trace.json");
    ASSERT_TRUE(export_chrome_trace({recording}, out).is_ok());
    const Trace t = parse(out);
    const auto data = t.named("data");
    const auto forward = t.named("forward");
    ASSERT_EQ(data.size(), 1u);
    ASSERT_EQ(forward.size(), 1u);
    EXPECT_EQ(data[0].cat, "generic");
    EXPECT_EQ(forward[0].cat, "phase");
    EXPECT_GE(data[0].dur, kPhaseUs);
    EXPECT_GE(forward[0].dur, kPhaseUs);
    EXPECT_LT(data[0].ts, forward[0].ts);
    EXPECT_GT(data[0].end(), forward[0].ts);  // it ended inside the phase, not with it
    EXPECT_LT(data[0].end(), forward[0].end());
    EXPECT_EQ(t.markers.at("range_markers.paired"), 3);
    EXPECT_EQ(t.markers.at("range_markers.repeats_not_drawn"), 1);
    EXPECT_EQ(t.markers.at("range_markers.ends_without_begin"), 0);
}

// A session that marked nothing: no empty trace that opens as a blank timeline, but an error
// that says what the input held.
TEST(ChromeTraceHost, AnInputWithNothingToDrawIsRefusedAndLeavesNoFile) {
    TempDir dir("chrome_empty");
    const std::string empty = dir.file("empty.gpudiag");
    const std::string annotated = dir.file("annotated.gpudiag");
    for (const std::string& path : {empty, annotated}) {
        auto s = make(cpu_options(path));
        ASSERT_TRUE(s->start().is_ok());
        if (path == annotated) {
            Event note;
            note.kind = EventKind::kAnnotation;
            note.annotation.text = s->intern("dataloader.num_workers");
            testing::put(*s, note);
        }
        ASSERT_TRUE(s->stop().is_ok());
    }
    const std::string out = dir.file("out.json");

    Status st = export_chrome_trace({empty}, out);
    EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(st.message().find(empty + " holds no events"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("nothing to draw"), std::string::npos) << st.message();
    EXPECT_FALSE(std::filesystem::exists(out));

    st = export_chrome_trace({annotated}, out);
    EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(st.message().find(annotated + " holds 1 event (1 annotation)"), std::string::npos)
        << st.message();
    EXPECT_FALSE(std::filesystem::exists(out));

    // With another input that draws, the one that draws nothing is still named and refused.
    const std::string drawn = dir.file("drawn.gpudiag");
    {
        auto s = make(cpu_options(drawn));
        ASSERT_TRUE(s->start().is_ok());
        s->phase_begin("work");
        s->phase_end();
        ASSERT_TRUE(s->stop().is_ok());
    }
    ASSERT_TRUE(export_chrome_trace({drawn}, out).is_ok());
    st = export_chrome_trace({drawn, empty}, out);
    EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(st.message().find(empty), std::string::npos) << st.message();
    EXPECT_EQ(st.message().find(drawn), std::string::npos) << st.message();
    EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace
}  // namespace gpudiag
