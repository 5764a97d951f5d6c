// SPDX-License-Identifier: Apache-2.0
#include <gpudiag/string_table.hpp>

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace gpudiag {
namespace {

TEST(StringTable, InternIsIdempotentAndStable) {
    StringTable t;
    StringId a = t.intern("volta_sgemm_128x64_nn");
    StringId b = t.intern("ncclKernel_AllReduce");
    EXPECT_NE(a, b);
    EXPECT_EQ(t.intern("volta_sgemm_128x64_nn"), a);
    std::string_view view = t.lookup(a);
    for (int i = 0; i < 10000; ++i) t.intern("filler " + std::to_string(i));
    EXPECT_EQ(view, "volta_sgemm_128x64_nn");  // views never move
    EXPECT_EQ(t.lookup(a).data(), view.data());
}

TEST(StringTable, EmptyAndUnknown) {
    StringTable t;
    EXPECT_EQ(t.intern(""), kNoString);
    EXPECT_EQ(t.lookup(kNoString), "");
    EXPECT_EQ(t.lookup(123456), "");
}

TEST(StringTable, CapMapsToOverflowAndCounts) {
    StringTable t(100);
    StringId a = t.intern(std::string(60, 'a'));
    EXPECT_GT(a, StringTable::kOverflowString);
    EXPECT_EQ(t.intern(std::string(60, 'b')), StringTable::kOverflowString);
    EXPECT_EQ(t.overflowed(), 1u);
    EXPECT_EQ(t.lookup(StringTable::kOverflowString), "<strings dropped>");
    EXPECT_LE(t.bytes(), 100u);
}

TEST(StringTable, BindKeepsWriterIds) {
    StringTable t;
    EXPECT_TRUE(t.bind(7, "seven"));
    EXPECT_EQ(t.lookup(7), "seven");
    EXPECT_TRUE(t.bind(7, "seven"));
    EXPECT_FALSE(t.bind(7, "other"));
    EXPECT_EQ(t.intern("seven"), 7u);
    EXPECT_FALSE(t.bind(0xFFFFFFF0u, "absurd"));
}

TEST(StringTable, ConcurrentInterning) {
    StringTable t;
    std::vector<std::thread> threads;
    std::vector<std::vector<StringId>> ids(4);
    for (int k = 0; k < 4; ++k) {
        threads.emplace_back([&, k] {
            for (int i = 0; i < 2000; ++i) ids[k].push_back(t.intern("s" + std::to_string(i)));
        });
    }
    for (auto& th : threads) th.join();
    for (int k = 1; k < 4; ++k) EXPECT_EQ(ids[k], ids[0]);
    EXPECT_EQ(t.size(), 2000u + 2u);
}

}  // namespace
}  // namespace gpudiag
