// SPDX-License-Identifier: Apache-2.0
// SessionOptions::collective_timeout_s: a collective the session saw enqueued and not completed
// within the timeout writes one window dump (once per group and sequence id), a note says so,
// and the report's collectives_in_flight section lists what is in flight.
#include "session_test_support.hpp"
#include "temp_dir.hpp"

#include <gpudiag/analyze.hpp>

#include <gtest/gtest.h>

#include <string>
#include <thread>

namespace gpudiag {
namespace {

using testing::cpu_options;
using testing::make;
using testing::put;
using testing::TempDir;
using testing::wait_for;

Event collective(Session& s, const char* group, const char* op, std::uint64_t seq,
                 std::uint8_t state) {
    Event e;
    e.kind = EventKind::kCollective;
    e.collective.group = s.intern(group);
    e.collective.op = s.intern(op);
    e.collective.seq = seq;
    e.collective.state = state;
    return e;
}

const Table* in_flight(const Report& r) {
    const Section* s = r.section("collectives_in_flight");
    return s == nullptr || s->tables.empty() ? nullptr : &s->tables.front();
}

TEST(SessionCollectives, OverdueCollectiveDumpsTheWindowOnceAndIsListed) {
    TempDir dir("collectives");
    SessionOptions o = cpu_options(dir.file("run.gpudiag"));
    o.record_window_s = 60;
    o.collective_timeout_s = 0.05;
    auto s = make(o);
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(s->start().is_ok());
    put(*s, collective(*s, "0", "all_reduce", 4, collective_state::kCompleted));
    put(*s, collective(*s, "0", "all_reduce", 5, collective_state::kScheduled));
    put(*s, collective(*s, "0", "all_reduce", 5, collective_state::kScheduled));  // seen again
    auto dumps = [&] { return dir.files("run-dump-", "-collective.gpudiag"); };
    ASSERT_TRUE(wait_for([&] { return !dumps().empty(); })) << "no collective dump";
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // many ticks later: still one
    EXPECT_EQ(dumps().size(), 1u);

    auto r = s->report();
    ASSERT_TRUE(r.is_ok());
    const Table* t = in_flight(*r);
    ASSERT_NE(t, nullptr);
    ASSERT_EQ(t->rows.size(), 1u);
    EXPECT_EQ(std::get<std::string>(t->rows[0][0]), "0");
    EXPECT_EQ(std::get<std::string>(t->rows[0][1]), "all_reduce");
    EXPECT_EQ(std::get<double>(t->rows[0][2]), 5.0);
    EXPECT_GE(std::get<double>(t->rows[0][3]), 0.05);
    bool noted = false;
    for (const auto& n : r->notes) {
        noted |= n.find("process group 0 all_reduce #5") != std::string::npos &&
                 n.find(dumps().front()) != std::string::npos;
    }
    EXPECT_TRUE(noted);

    // Completed: it leaves the table.
    put(*s, collective(*s, "0", "all_reduce", 5, collective_state::kCompleted));
    ASSERT_TRUE(wait_for([&] {
        auto again = s->report();
        return again.is_ok() && in_flight(*again) != nullptr && in_flight(*again)->rows.empty();
    }));
    ASSERT_TRUE(s->stop().is_ok());
    // The dump is a recording like any window dump: it analyses.
    auto analysed = analyze_files({dumps().front()});
    EXPECT_TRUE(analysed.is_ok()) << analysed.status().to_string();
}

TEST(SessionCollectives, WithoutATimeoutNothingIsDumpedAndNoCollectivesNoSection) {
    TempDir dir("collectives-off");
    SessionOptions o = cpu_options(dir.file("run.gpudiag"));
    o.record_window_s = 60;
    auto s = make(o);
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(s->start().is_ok());
    auto quiet = s->report();
    ASSERT_TRUE(quiet.is_ok());
    EXPECT_EQ(in_flight(*quiet), nullptr);  // no collective seen: no section
    put(*s, collective(*s, "0", "broadcast", 1, collective_state::kStarted));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto r = s->report();
    ASSERT_TRUE(r.is_ok());
    ASSERT_NE(in_flight(*r), nullptr);
    EXPECT_EQ(in_flight(*r)->rows.size(), 1u);
    EXPECT_TRUE(dir.files("run-dump-", "-collective.gpudiag").empty());
    ASSERT_TRUE(s->stop().is_ok());

    // After stop() the age is the one at the stop: two reports apart in time agree.
    auto stopped = s->report();
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    auto later = s->report();
    ASSERT_TRUE(stopped.is_ok() && later.is_ok());
    ASSERT_NE(in_flight(*stopped), nullptr);
    ASSERT_NE(in_flight(*later), nullptr);
    ASSERT_EQ(in_flight(*later)->rows.size(), 1u);
    EXPECT_GT(std::get<double>(in_flight(*stopped)->rows[0][3]), 0.0);
    EXPECT_EQ(std::get<double>(in_flight(*stopped)->rows[0][3]),
              std::get<double>(in_flight(*later)->rows[0][3]));
}

TEST(SessionCollectives, ATimeoutWithNoCollectiveSeenSaysSo) {
    SessionOptions o = cpu_options();
    o.collective_timeout_s = 1;
    auto s = make(o);
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(s->start().is_ok());
    auto r = s->report();
    ASSERT_TRUE(r.is_ok());
    EXPECT_EQ(in_flight(*r), nullptr);
    bool said = false;
    for (const auto& n : r->notes) said |= n.find("none was watched") != std::string::npos;
    EXPECT_TRUE(said);
    ASSERT_TRUE(s->stop().is_ok());
}

TEST(SessionCollectives, RefusesANegativeTimeoutAndDumpsThatAreNone) {
    SessionOptions o = cpu_options();
    o.collective_timeout_s = -1;
    EXPECT_EQ(Session::create(o).status().code(), StatusCode::kInvalidArgument);
    auto s = make();
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->record_flight_recorder("{}").code(), StatusCode::kFailedPrecondition);
    ASSERT_TRUE(s->start().is_ok());
    EXPECT_EQ(s->record_flight_recorder("not a dump").code(), StatusCode::kCorruptData);
    ASSERT_TRUE(s->stop().is_ok());
}

}  // namespace
}  // namespace gpudiag
