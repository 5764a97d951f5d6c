// SPDX-License-Identifier: Apache-2.0
#include <gpudiag/status.hpp>
#include <gpudiag/version.hpp>

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace gpudiag {
namespace {

Status fails() {
    return corrupt_data("bad byte at offset 12");
}
Status chains() {
    GPUDIAG_RETURN_IF_ERROR(fails());
    return Status::ok();
}

TEST(Status, OkByDefault) {
    Status s;
    EXPECT_TRUE(s.is_ok());
    EXPECT_EQ(s.to_string(), "ok");
}

TEST(Status, CarriesCodeAndMessage) {
    Status s = chains();
    EXPECT_FALSE(s.is_ok());
    EXPECT_EQ(s.code(), StatusCode::kCorruptData);
    EXPECT_EQ(s.to_string(), "corrupt_data: bad byte at offset 12");
}

TEST(Result, HoldsValueOrError) {
    Result<int> good(7);
    ASSERT_TRUE(good.is_ok());
    EXPECT_EQ(*good, 7);
    Result<int> bad(not_found("x"));
    EXPECT_FALSE(bad.is_ok());
    EXPECT_EQ(bad.status().code(), StatusCode::kNotFound);
    EXPECT_EQ(bad.value(), 0);  // never aborts, gives a default value
}

TEST(Result, OkStatusWithoutValueIsInternalError) {
    Result<std::string> r(Status::ok());
    EXPECT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

TEST(Version, MatchesHeader) {
    EXPECT_STREQ(version(), GPUDIAG_VERSION_STRING);
}

TEST(Status, EveryCodeHasAName) {
    for (int c = 0; c <= static_cast<int>(StatusCode::kInternal); ++c) {
        EXPECT_STRNE(status_code_name(static_cast<StatusCode>(c)), "unknown");
    }
}

}  // namespace
}  // namespace gpudiag
