// SPDX-License-Identifier: Apache-2.0
// NvtxReceiver's handler logic, called directly (the injection path is tested by
// nvtx_inject_app under NVTX_INJECTION64_PATH).
#include "capture/nvtx/nvtx_receiver.hpp"
#include "capture/test_event_queue.hpp"

#include <gtest/gtest.h>

#include <string>
#include <thread>

namespace gpudiag {
namespace {

using detail::NvtxReceiver;

class NvtxReceiverTest : public ::testing::Test {
protected:
    void SetUp() override { ASSERT_TRUE(rx().attach(queue_, strings_)); }
    void TearDown() override { rx().detach(); }
    static NvtxReceiver& rx() { return NvtxReceiver::instance(); }
    test::TestEventQueue queue_;
    StringTable strings_;
};

TEST_F(NvtxReceiverTest, NestedPushPopBecomeMatchedRangeEvents) {
    EXPECT_EQ(rx().push(0, "step"), 0);
    EXPECT_EQ(rx().push(0, "forward"), 1);
    EXPECT_EQ(rx().pop(0), 1);
    EXPECT_EQ(rx().pop(0), 0);
    EXPECT_EQ(rx().pop(0), -1);  // nothing open
    auto begins = queue_.of_kind(EventKind::kRangeBegin);
    auto ends = queue_.of_kind(EventKind::kRangeEnd);
    ASSERT_EQ(begins.size(), 2u);
    ASSERT_EQ(ends.size(), 2u);
    EXPECT_EQ(strings_.lookup(begins[0].range.name), "step");
    EXPECT_EQ(strings_.lookup(begins[1].range.name), "forward");
    EXPECT_EQ(begins[1].range.parent, begins[0].range.id);
    EXPECT_EQ(ends[0].range.id, begins[1].range.id);
    EXPECT_EQ(ends[1].range.id, begins[0].range.id);
    EXPECT_EQ(begins[0].range.category, RangeCategory::kGeneric);
    EXPECT_NE(begins[0].thread, 0u);
    EXPECT_LE(begins[1].start_ns, ends[0].start_ns);
}

TEST_F(NvtxReceiverTest, TextIsInternedByContentNotPointer) {
    char buffer[16] = "alpha";
    rx().push(0, buffer);
    rx().pop(0);
    std::snprintf(buffer, sizeof buffer, "beta");  // torch reuses temporary buffers
    rx().push(0, buffer);
    rx().pop(0);
    auto begins = queue_.of_kind(EventKind::kRangeBegin);
    ASSERT_EQ(begins.size(), 2u);
    EXPECT_EQ(strings_.lookup(begins[0].range.name), "alpha");
    EXPECT_EQ(strings_.lookup(begins[1].range.name), "beta");
}

TEST_F(NvtxReceiverTest, DomainsHaveTheirOwnStacksAndGpudiagMeansPhase) {
    std::uint32_t nccl = rx().create_domain("NCCL");
    std::uint32_t own = rx().create_domain("gpudiag");
    EXPECT_NE(nccl, 0u);
    EXPECT_EQ(rx().create_domain("NCCL"), nccl);  // same name, same handle
    rx().push(own, "forward");
    rx().push(nccl, "allreduce");
    EXPECT_EQ(rx().pop(own), 0);  // pops "forward", not NCCL's range
    EXPECT_EQ(rx().pop(nccl), 0);
    auto begins = queue_.of_kind(EventKind::kRangeBegin);
    auto ends = queue_.of_kind(EventKind::kRangeEnd);
    ASSERT_EQ(begins.size(), 2u);
    ASSERT_EQ(ends.size(), 2u);
    EXPECT_EQ(begins[0].range.category, RangeCategory::kPhase);
    EXPECT_EQ(begins[1].range.category, RangeCategory::kGeneric);
    EXPECT_EQ(ends[0].range.id, begins[0].range.id);
    EXPECT_EQ(strings_.lookup(ends[0].range.name), "forward");
}

TEST_F(NvtxReceiverTest, RegisteredStringsResolve) {
    std::uintptr_t h = rx().register_string("optimizer.step");
    ASSERT_NE(h, 0u);
    EXPECT_EQ(rx().registered_string(h), "optimizer.step");
    EXPECT_EQ(rx().registered_string(0), "");
    EXPECT_EQ(rx().registered_string(999999), "");
}

TEST_F(NvtxReceiverTest, StartEndRangesMayEndOnAnotherThread) {
    std::uint64_t id = rx().start(0, "checkpoint");
    std::thread([&] { rx().end(id); }).join();
    rx().end(id);      // a second end is ignored
    rx().end(123456);  // never started
    auto ranges = queue_.of_kind(EventKind::kRange);
    ASSERT_EQ(ranges.size(), 1u);
    EXPECT_EQ(strings_.lookup(ranges[0].range.name), "checkpoint");
    EXPECT_LE(ranges[0].start_ns, ranges[0].end_ns);
}

TEST_F(NvtxReceiverTest, MarksBecomeAnnotations) {
    rx().mark(0, "epoch 3");
    auto notes = queue_.of_kind(EventKind::kAnnotation);
    ASSERT_EQ(notes.size(), 1u);
    EXPECT_EQ(strings_.lookup(notes[0].annotation.text), "epoch 3");
}

TEST_F(NvtxReceiverTest, ThreadsKeepSeparateStacks) {
    rx().push(0, "main");
    std::thread([] {
        NvtxReceiver::instance().push(0, "worker");
        EXPECT_EQ(NvtxReceiver::instance().pop(0), 0);
        EXPECT_EQ(NvtxReceiver::instance().pop(0), -1);  // main's range is not this thread's
    }).join();
    EXPECT_EQ(rx().pop(0), 0);
    EXPECT_EQ(queue_.of_kind(EventKind::kRangeEnd).size(), 2u);
}

TEST_F(NvtxReceiverTest, DeepNestingIsCountedNotStored) {
    std::uint64_t before = rx().dropped();
    for (int i = 0; i < 70; ++i) rx().push(0, "deep");
    for (int i = 0; i < 70; ++i) rx().pop(0);
    EXPECT_EQ(rx().dropped() - before, 6u);  // 64 tracked per thread and domain
    EXPECT_EQ(queue_.of_kind(EventKind::kRangeEnd).size(), 64u);
}

TEST_F(NvtxReceiverTest, DetachedReceiverOnlyCounts) {
    rx().detach();
    std::uint64_t calls = rx().calls();
    rx().push(0, "unseen");
    EXPECT_EQ(rx().pop(0), 0);
    EXPECT_EQ(rx().calls(), calls + 2);
    EXPECT_TRUE(queue_.events().empty());
    // A range pushed while detached and popped after attaching emits nothing unmatched.
    rx().push(0, "straddles");
    ASSERT_TRUE(rx().attach(queue_, strings_));
    rx().pop(0);
    EXPECT_TRUE(queue_.events().empty());
    test::TestEventQueue other;
    EXPECT_FALSE(rx().attach(other, strings_));  // one session at a time
}

TEST_F(NvtxReceiverTest, ConcurrentProducersAndDetachAreSafe) {
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t) {
        threads.emplace_back([&] {
            while (!stop.load()) {
                NvtxReceiver::instance().push(0, "busy");
                NvtxReceiver::instance().pop(0);
            }
        });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    rx().detach();
    std::size_t after_detach = queue_.events().size();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(queue_.events().size(), after_detach);  // nothing reaches a detached queue
    stop.store(true);
    for (auto& t : threads) t.join();
    EXPECT_GT(after_detach, 0u);
    ASSERT_TRUE(rx().attach(queue_, strings_));
}

}  // namespace
}  // namespace gpudiag
