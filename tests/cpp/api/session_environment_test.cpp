// SPDX-License-Identifier: Apache-2.0
// SessionOptions from GPUDIAG_* environment variables: every variable of the table is applied,
// unset or empty ones leave the defaults, and a bad value is an error that names the variable.
#include <gpudiag/session.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace gpudiag {
namespace {

// Sets the variables for one test and removes them after it.
class Environment {
public:
    Environment(std::initializer_list<std::pair<const char*, const char*>> vars) {
        for (const auto& [name, value] : vars) {
            ::setenv(name, value, 1);
            names_.emplace_back(name);
        }
    }
    ~Environment() {
        for (const auto& name : names_) ::unsetenv(name.c_str());
    }
    Environment(const Environment&) = delete;
    Environment& operator=(const Environment&) = delete;

private:
    std::vector<std::string> names_;
};

TEST(SessionEnvironment, EveryVariableOfTheTableIsApplied) {
    Environment env({{"GPUDIAG_RECORD", "/tmp/svc.gpudiag"},
                     {"GPUDIAG_RECORD_MAX_MB", "512"},
                     {"GPUDIAG_WINDOW_S", "600"},
                     {"GPUDIAG_WINDOW_MB", "64"},
                     {"GPUDIAG_CAPTURE_GPU", "0"},
                     {"GPUDIAG_DEEP", "yes"},
                     {"GPUDIAG_NVML_HZ", "0.5"},
                     {"GPUDIAG_QUEUE_CAPACITY", "1024"},
                     {"GPUDIAG_HTTP", "127.0.0.1:0"},
                     {"GPUDIAG_HTTP_TOKEN", "t0ken"},
                     {"GPUDIAG_FLUSH_MS", "100"},
                     {"GPUDIAG_COLLECTIVE_TIMEOUT_S", "120"}});
    auto o = session_options_from_environment();
    ASSERT_TRUE(o.is_ok()) << o.status().to_string();
    EXPECT_EQ(o->record_path, "/tmp/svc.gpudiag");
    EXPECT_EQ(o->record_max_bytes, std::uint64_t{512} << 20);
    EXPECT_EQ(o->record_window_s, 600.0);
    EXPECT_EQ(o->record_window_bytes, std::uint64_t{64} << 20);
    EXPECT_FALSE(o->capture_gpu);
    EXPECT_TRUE(o->deep);
    EXPECT_EQ(o->nvml_hz, 0.5);
    EXPECT_EQ(o->queue_capacity, 1024u);
    EXPECT_EQ(o->flush_period_ms, 100u);
    EXPECT_EQ(o->http, "127.0.0.1:0");
    EXPECT_EQ(o->http_token, "t0ken");
    EXPECT_EQ(o->collective_timeout_s, 120.0);
    // Each variable is listed, once, for docs and --help.
    const auto listed = session_environment_variables();
    EXPECT_EQ(listed.size(), 12u);
    EXPECT_EQ(listed.front().first, "GPUDIAG_RECORD");
}

TEST(SessionEnvironment, UnsetAndEmptyVariablesLeaveTheDefaults) {
    Environment env({{"GPUDIAG_NVML_HZ", ""}});
    SessionOptions defaults;
    defaults.record_path = "given.gpudiag";
    defaults.nvml_hz = 7;
    auto o = session_options_from_environment(defaults);
    ASSERT_TRUE(o.is_ok());
    EXPECT_EQ(o->record_path, "given.gpudiag");
    EXPECT_EQ(o->nvml_hz, 7.0);
}

TEST(SessionEnvironment, ABadValueIsAnErrorThatNamesTheVariable) {
    for (const auto& [name, value] : std::initializer_list<std::pair<const char*, const char*>>{
             {"GPUDIAG_WINDOW_S", "ten minutes"},
             {"GPUDIAG_WINDOW_S", "-5"},
             {"GPUDIAG_RECORD_MAX_MB", "1.5"},
             {"GPUDIAG_DEEP", "maybe"},
             {"GPUDIAG_NVML_HZ", "nan"},
             {"GPUDIAG_FLUSH_MS", "0"},
             {"GPUDIAG_QUEUE_CAPACITY", "99999999999999999999"}}) {
        SCOPED_TRACE(name + std::string("=") + value);
        Environment env({{name, value}});
        auto o = session_options_from_environment();
        ASSERT_FALSE(o.is_ok());
        EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument);
        EXPECT_NE(o.status().message().find(name), std::string::npos) << o.status().message();
    }
}

}  // namespace
}  // namespace gpudiag
