// SPDX-License-Identifier: Apache-2.0
// No NVIDIA library among the NEEDED entries of libgpudiag.so (and of the Python extension
// when it is built): capture dlopens them, so gpudiag loads on machines without CUDA.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

namespace {

std::string run(const std::string& command) {
    std::string out;
    FILE* p = popen(command.c_str(), "r");
    if (p == nullptr) return out;
    char buf[512];
    while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
    pclose(p);
    return out;
}

void expect_no_nvidia_needed(const std::string& path) {
    std::string dynamic = run("readelf -d '" + path + "' 2>&1");
    ASSERT_NE(dynamic.find("(NEEDED)"), std::string::npos) << "readelf output:\n" << dynamic;
    std::regex nvidia(
        R"(\(NEEDED\).*\[(libcuda|libcudart|libcupti|libnvidia-ml|libnvToolsExt)[^\]]*\])");
    std::smatch m;
    EXPECT_FALSE(std::regex_search(dynamic, m, nvidia)) << path << " needs " << m.str();
}

TEST(LinkHygieneTest, LibgpudiagNeedsNoNvidiaLibrary) {
    if (run("command -v readelf").empty()) GTEST_SKIP() << "readelf is not installed";
    expect_no_nvidia_needed(GPUDIAG_SHARED_LIBRARY);
}

TEST(LinkHygieneTest, PythonExtensionNeedsNoNvidiaLibrary) {
    if (run("command -v readelf").empty()) GTEST_SKIP() << "readelf is not installed";
    std::vector<std::string> found;
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(GPUDIAG_BUILD_DIR, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
        std::string name = it->path().filename().string();
        if (it->is_regular_file() &&
            (name.rfind("_core", 0) == 0 || name.rfind("_gpudiag", 0) == 0) &&
            name.find(".so") != std::string::npos) {
            found.push_back(it->path().string());
        }
    }
    if (found.empty()) GTEST_SKIP() << "the Python extension is not built in " << GPUDIAG_BUILD_DIR;
    for (const auto& path : found) expect_no_nvidia_needed(path);
}

TEST(LinkHygieneTest, ExportsTheInjectionEntryPoints) {
    if (run("command -v nm").empty()) GTEST_SKIP() << "nm is not installed";
    std::string symbols = run(std::string("nm -D --defined-only '") + GPUDIAG_SHARED_LIBRARY + "'");
    EXPECT_NE(symbols.find(" T InitializeInjectionNvtx2\n"), std::string::npos);
    EXPECT_NE(symbols.find(" T InitializeInjection\n"), std::string::npos);  // CUDA's entry point
}

// The marker other gpudiag copies in the process look for before capturing (capture_owner.hpp).
TEST(LinkHygieneTest, ExportsTheCaptureOwnershipMarker) {
    if (run("command -v nm").empty()) GTEST_SKIP() << "nm is not installed";
    std::string symbols = run(std::string("nm -D --defined-only '") + GPUDIAG_SHARED_LIBRARY + "'");
    EXPECT_NE(symbols.find(" gpudiag_capture_owner_v1\n"), std::string::npos) << symbols;
}

}  // namespace
