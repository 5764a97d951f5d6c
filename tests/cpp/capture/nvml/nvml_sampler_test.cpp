// SPDX-License-Identifier: Apache-2.0
// The NVML sampler's device numbering.
#include "capture/nvml/nvml_sampler.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpudiag {
namespace {

TEST(VisibleDevicesTest, FollowsCudaRules) {
    std::vector<int> idx;
    std::vector<std::string> uuids;
    detail::parse_visible_devices("2, 0", idx, uuids);
    EXPECT_EQ(idx, (std::vector<int>{2, 0}));
    detail::parse_visible_devices("1,-1,3", idx, uuids);
    EXPECT_EQ(idx, (std::vector<int>{1}));  // CUDA stops at the first invalid entry
    detail::parse_visible_devices("GPU-aaaa-bbbb,MIG-1111-2222,0", idx, uuids);
    ASSERT_EQ(idx.size(), 3u);
    EXPECT_EQ(uuids[0], "GPU-aaaa-bbbb");
    EXPECT_EQ(uuids[1], "MIG-1111-2222");  // an instance: found by its UUID, sampled as one
    EXPECT_EQ(idx[2], 0);
    detail::parse_visible_devices("", idx, uuids);
    EXPECT_TRUE(idx.empty());
}

}  // namespace
}  // namespace gpudiag
