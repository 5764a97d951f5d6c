// SPDX-License-Identifier: Apache-2.0
// One CUPTI per process, against stub libcupti files under their real names and a real CUPTI 12:
// a libcupti already mapped (as PyTorch maps its own) is reused whatever the path, a CUDA 12
// one included; a CUPTI gpudiag cannot decode (11.8) is refused, never doubled with a 13; a
// failed load is tried again once the process has loaded more; directories the program names
// are searched first.
//
// What is mapped, and what cupti_api() has loaded, is process-wide and permanent, so each case
// runs in a fresh process (a re-executed death-test child) and reports by its exit status.
#include "capture/cupti/cupti_api.hpp"
#include "capture/platform/dynamic_library.hpp"

#include <gpudiag/capture.hpp>

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace gpudiag {
namespace {

std::string directory_of(const std::string& path) {
    return path.substr(0, path.rfind('/'));
}

void select_stub_driver() {
    setenv("GPUDIAG_CUDA_PATH", GPUDIAG_STUB_CUDA, 1);
    setenv("GPUDIAG_NVML_PATH", GPUDIAG_STUB_NVML, 1);
    unsetenv("CUDA_HOME");
}

// In the child: a failed check prints why and ends the process with status 1.
void require(bool ok, const std::string& what) {
    if (ok) return;
    std::fprintf(stderr, "FAILED: %s\n", what.c_str());
    std::fflush(stderr);
    std::_Exit(1);
}

bool mapped(const std::string& path) {
    for (const std::string& m : detail::platform::mapped_libraries("")) {
        if (m == path) return true;
    }
    return false;
}

void* load_like_a_framework(const char* path) {
    void* h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (h == nullptr) require(false, std::string("dlopen ") + path + ": " + dlerror());
    return h;
}

class CuptiLoadingTest : public ::testing::Test {
protected:
    void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

#define IN_A_FRESH_PROCESS(body) \
    EXPECT_EXIT(                 \
        {                        \
            body;                \
            std::_Exit(0);       \
        },                       \
        ::testing::ExitedWithCode(0), "")

TEST_F(CuptiLoadingTest, ReusesTheLibcuptiAFrameworkAlreadyMapped) {
    IN_A_FRESH_PROCESS({
        select_stub_driver();
        setenv("GPUDIAG_CUPTI_PATH", GPUDIAG_STUB_CUPTI, 1);  // an explicit path loses to reuse
        load_like_a_framework(GPUDIAG_STUB_LIBCUPTI13);
        std::string why;
        const detail::CuptiApi* api = detail::cupti_api(&why);
        require(api != nullptr, "no CUPTI: " + why);
        require(api->path == GPUDIAG_STUB_LIBCUPTI13, "loaded " + api->path);
        require(api->reused, "not marked reused");
        require(!mapped(GPUDIAG_STUB_CUPTI), "a second CUPTI was mapped");
    });
}

TEST_F(CuptiLoadingTest, RefusesToLoadASecondCuptiBesideACupti11) {
    IN_A_FRESH_PROCESS({
        select_stub_driver();
        setenv("GPUDIAG_CUPTI_PATH", GPUDIAG_STUB_CUPTI, 1);  // a usable CUPTI 13 is at hand
        void* cupti11 = load_like_a_framework(GPUDIAG_STUB_LIBCUPTI11);
        std::string why;
        require(detail::cupti_api(&why) == nullptr, "CUPTI accepted beside a CUPTI 11.8");
        require(why.find("libcupti.so.11.8") != std::string::npos, why);
        // API version 18 without the libcupti.so.12 symbols is CUPTI 11.8, not 12.0.
        require(why.find("CUPTI 11.8 (API version 18)") != std::string::npos, why);
        require(why.find("does not load a second CUPTI") != std::string::npos, why);
        require(!mapped(GPUDIAG_STUB_CUPTI), "the CUPTI 13 was loaded anyway");
        auto other_calls =
            reinterpret_cast<int (*)()>(dlsym(cupti11, "gpudiag_stub_cupti11_other_calls"));
        require(other_calls != nullptr && other_calls() == 0, "gpudiag called into the CUPTI 11.8");
        // The reason reaches the capture status.
        CaptureStatus st = probe_capture();
        bool named = false;
        for (const auto& r : st.reasons) named |= r.find("libcupti.so.11.8") != std::string::npos;
        require(named, "probe_capture does not say why");
        require(st.level < CaptureLevel::kCuptiActivity, "probe claims CUPTI activity");
    });
}

TEST_F(CuptiLoadingTest, AdoptsTheCupti12OfACuda12Framework) {
    if (access(GPUDIAG_REAL_LIBCUPTI12, R_OK) != 0) {
        GTEST_SKIP() << GPUDIAG_REAL_LIBCUPTI12 << " absent: run tools/fetch_cupti_libs.sh";
    }
    IN_A_FRESH_PROCESS({
        select_stub_driver();
        setenv("GPUDIAG_CUPTI_PATH", GPUDIAG_STUB_CUPTI, 1);  // loses to the mapped one
        load_like_a_framework(GPUDIAG_REAL_LIBCUPTI12);  // as torch cu124 maps its wheel's copy
        std::string why;
        const detail::CuptiApi* api = detail::cupti_api(&why);
        require(api != nullptr, "the CUPTI 12.4 was refused: " + why);
        require(api->path == GPUDIAG_REAL_LIBCUPTI12 && api->reused, api->path);
        require(api->version == 22 && api->cupti12_abi, std::to_string(api->version));
        require(api->description == "CUPTI 12.4 (API version 22)", api->description);
        // 12.4 has no per-call API enable: gpudiag falls back to the whole runtime kind.
        require(api->enable_runtime_api == nullptr, "12.4 gained cuptiActivityEnableRuntimeApi?");
        require(!mapped(GPUDIAG_STUB_CUPTI), "a second CUPTI was mapped");
    });
}

TEST_F(CuptiLoadingTest, AFailedLoadIsTriedAgainOnceTheProcessLoadsCupti) {
    IN_A_FRESH_PROCESS({
        select_stub_driver();
        setenv("GPUDIAG_CUPTI_PATH", "/nonexistent/libcupti.so.13", 1);
        std::string why;
        require(detail::cupti_api(&why) == nullptr, "loaded a path that does not exist");
        require(why.find("could not be loaded") != std::string::npos, why);
        require(detail::cupti_api(&why) == nullptr, "loaded a path that does not exist");
        // WHEN a framework imported later maps its libcupti
        load_like_a_framework(GPUDIAG_STUB_LIBCUPTI13);
        // THEN the next attempt finds it
        const detail::CuptiApi* api = detail::cupti_api(&why);
        require(api != nullptr, "the failure was kept: " + why);
        require(api->path == GPUDIAG_STUB_LIBCUPTI13 && api->reused, api->path);
    });
}

TEST_F(CuptiLoadingTest, DirectoriesTheProgramNamesAreSearchedBeforeTheSystems) {
    IN_A_FRESH_PROCESS({
        select_stub_driver();
        unsetenv("GPUDIAG_CUPTI_PATH");
        add_library_search_dir(directory_of(GPUDIAG_STUB_LIBCUPTI13));
        std::string why;
        const detail::CuptiApi* api = detail::cupti_api(&why);
        require(api != nullptr, "no CUPTI: " + why);
        require(api->path == GPUDIAG_STUB_LIBCUPTI13, "loaded " + api->path);
        require(!api->reused, "marked reused");
        // A framework loading the same file by path maps no second copy.
        void* again = load_like_a_framework(GPUDIAG_STUB_LIBCUPTI13);
        require(again == api->handle, "a second copy was mapped");
        require(detail::platform::mapped_libraries("libcupti.so").size() == 1,
                "two libcupti mapped");
    });
}

}  // namespace
}  // namespace gpudiag
