// SPDX-License-Identifier: Apache-2.0
// LaunchTable against std::unordered_map over a random mix of puts, lookups and pruning.
#include "analysis/timeline/launch_table.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <unordered_map>

namespace gpudiag {
namespace {

TEST(LaunchTable, AgreesWithAMapThroughGrowthAndPruning) {
    detail::LaunchTable table;
    std::unordered_map<std::uint32_t, std::uint64_t> reference;
    std::mt19937 rng(5);
    std::uint64_t now = 1000;
    std::uint32_t next_id = 1;
    for (int op = 0; op < 200000; ++op) {
        now += rng() % 7;
        switch (rng() % 10) {
            case 0: {  // an id seen before: replaced
                std::uint32_t id = 1 + rng() % next_id;
                table.put(id, now);
                reference[id] = now;
                break;
            }
            case 1: {  // a scattered id, as from several processes
                std::uint32_t id = static_cast<std::uint32_t>(rng()) | 1u;
                table.put(id, now);
                reference[id] = now;
                break;
            }
            default: {
                std::uint32_t id = next_id++;
                table.put(id, now);
                reference[id] = now;
                break;
            }
        }
        if (op % 50000 == 49999) {
            std::uint64_t cutoff = now - 20000;
            table.drop_older_than(cutoff);
            std::erase_if(reference, [cutoff](const auto& kv) { return kv.second < cutoff; });
            ASSERT_EQ(table.size(), reference.size());
            // Nothing older is left: these keep the table as it is, without a rebuild.
            table.drop_older_than(cutoff);
            table.drop_older_than(0);
            ASSERT_EQ(table.size(), reference.size());
        }
        std::uint32_t probe = 1 + rng() % (next_id + 100);
        std::uint64_t got = 0;
        auto it = reference.find(probe);
        ASSERT_EQ(table.find(probe, got), it != reference.end()) << "id " << probe;
        if (it != reference.end()) {
            ASSERT_EQ(got, it->second);
        }
    }
    ASSERT_EQ(table.size(), reference.size());
    for (const auto& [id, start] : reference) {
        std::uint64_t got = 0;
        ASSERT_TRUE(table.find(id, got));
        ASSERT_EQ(got, start);
    }
}

TEST(LaunchTable, ZeroIsNeverAnId) {
    detail::LaunchTable table;
    std::uint64_t got = 7;
    EXPECT_FALSE(table.find(0, got));
    table.put(0, 5);
    EXPECT_FALSE(table.find(0, got));
    EXPECT_EQ(table.size(), 0u);
    EXPECT_EQ(got, 7u);
}

}  // namespace
}  // namespace gpudiag
