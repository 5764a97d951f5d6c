// SPDX-License-Identifier: Apache-2.0
// The stack rules. Version facts used here:
// * a CUDA runtime needs a driver of its major version (CUDA 12: R525+, CUDA 13: R580+); within
//   the major version it runs on an older driver through minor-version compatibility, without
//   PTX JIT (NVIDIA, "CUDA Compatibility");
// * a CUPTI needs a driver that supports its CUDA version; on an older one its calls fail with
//   CUPTI_ERROR_NOT_INITIALIZED (CUPTI User's Guide, "Compatibility and Requirements");
// * the drivers released with each toolkit: the table below (CUDA Toolkit release notes).
#include "analysis/health/stack_rules.hpp"

#include "analysis/findings/finding_catalog.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <climits>
#include <cstdlib>

namespace gpudiag::detail {
namespace {

// The driver branch released with each CUDA toolkit (its minimum without minor-version
// compatibility).
struct DriverForCuda {
    int cuda;
    int branch;
};
constexpr DriverForCuda kDrivers[] = {
    {11080, 520}, {12000, 525}, {12010, 530}, {12020, 535}, {12030, 545}, {12040, 550},
    {12050, 555}, {12060, 560}, {12080, 570}, {12090, 575}, {13000, 580}, {13010, 590},
};

int driver_branch_for(int cuda) {
    int branch = 0;
    for (const DriverForCuda& d : kDrivers) {
        if (d.cuda <= cuda) branch = d.branch;
    }
    return branch;
}

std::string cuda_text(int cuda) {
    return fmt::format("{}.{}", cuda / 1000, cuda % 1000 / 10);
}

std::string framework_name(const FrameworkInfo& f) {
    if (f.name.empty()) return "the framework";
    std::string name = f.name == "torch" ? "PyTorch" : f.name;
    return f.version.empty() ? name : name + " " + f.version;
}

// A framework built for a CUDA major version newer than the driver's cannot start CUDA at all;
// one built for a newer minor version runs without PTX JIT.
void check_driver_against_framework(const SoftwareStack& s, std::vector<StackIssue>& out) {
    int built = parse_cuda_version(s.framework.cuda_version);
    int driver = parse_cuda_version(s.driver_cuda);
    if (built == 0 || driver == 0 || built <= driver) return;
    std::string who = framework_name(s.framework);
    std::string drv = s.driver_version.empty() ? "the driver" : "driver " + s.driver_version;
    if (built / 1000 > driver / 1000) {
        std::string build = driver / 1000 >= 12 ? "cu126" : "cu118";
        out.push_back(StackIssue{
            std::string(finding_name(FindingId::kDriverTooOldForFramework)),
            fmt::format("The driver is too old for {}: CUDA {} build, CUDA {} driver", who,
                        cuda_text(built), cuda_text(driver)),
            fmt::format("{} was built for CUDA {}; {} supports CUDA {} at most, so CUDA does not "
                        "start (cudaErrorInsufficientDriver: torch.cuda.is_available() is False)",
                        who, cuda_text(built), drv, cuda_text(driver)),
            fmt::format("Upgrade the NVIDIA driver to R{} or newer, or install a build for CUDA "
                        "{}: pip install torch --index-url https://download.pytorch.org/whl/{}",
                        driver_branch_for(built / 1000 * 1000), driver / 1000, build)});
        return;
    }
    out.push_back(StackIssue{
        std::string(finding_name(FindingId::kDriverOlderThanFramework)),
        fmt::format("{} runs on an older CUDA driver: CUDA {} build, CUDA {} driver", who,
                    cuda_text(built), cuda_text(driver)),
        fmt::format("{} was built for CUDA {}; {} supports CUDA {}: it runs under minor-version "
                    "compatibility, where PTX JIT is unavailable (kernels shipped only as PTX for "
                    "this GPU fail with cudaErrorUnsupportedPtxVersion)",
                    who, cuda_text(built), drv, cuda_text(driver)),
        fmt::format("Upgrade the NVIDIA driver to R{} or newer (CUDA {})", driver_branch_for(built),
                    cuda_text(built))});
}

void check_cupti_against_driver(const SoftwareStack& s, std::vector<StackIssue>& out) {
    int cupti = parse_cuda_version(s.cupti_cuda);
    int driver = parse_cuda_version(s.driver_cuda);
    if (cupti == 0 || driver == 0 || cupti <= driver) return;
    std::string drv = s.driver_version.empty() ? "the driver" : "driver " + s.driver_version;
    out.push_back(StackIssue{
        std::string(finding_name(FindingId::kCuptiNewerThanDriver)),
        fmt::format("CUPTI {} is newer than the driver (CUDA {}): no GPU activity can be traced",
                    cuda_text(cupti), cuda_text(driver)),
        fmt::format("{} at {} needs a driver that supports CUDA {}; {} supports CUDA {}, so CUPTI "
                    "fails with CUPTI_ERROR_NOT_INITIALIZED: neither gpudiag nor torch.profiler "
                    "sees GPU activity",
                    s.cupti, s.cupti_library, cuda_text(cupti), drv, cuda_text(driver)),
        fmt::format("Upgrade the NVIDIA driver to R{} or newer (CUDA {}), or use a framework "
                    "build for CUDA {} or older, whose wheels bring a CUPTI the driver supports",
                    driver_branch_for(cupti), cuda_text(cupti), cuda_text(driver))});
}

void check_second_cupti(const SoftwareStack& s, std::vector<StackIssue>& out) {
    std::vector<std::string> files;
    for (const std::string& path : s.cupti_mapped) {
        char* real = realpath(path.c_str(), nullptr);
        std::string key = real != nullptr ? real : path;
        std::free(real);
        if (std::find(files.begin(), files.end(), key) == files.end()) files.push_back(key);
    }
    if (files.size() < 2) return;
    out.push_back(StackIssue{
        std::string(finding_name(FindingId::kSecondCupti)),
        fmt::format("{} CUPTI libraries in one process", files.size()),
        fmt::format("{} CUPTI libraries are mapped in this process ({}): two CUPTIs attached to "
                    "one driver are undefined (hangs, crashes, lost records); gpudiag uses {}",
                    files.size(), fmt::join(files, ", "),
                    s.cupti_library.empty() ? std::string("neither") : s.cupti_library),
        "Keep one: remove the other from LD_PRELOAD and LD_LIBRARY_PATH, and point "
        "GPUDIAG_CUPTI_PATH at the framework's own (the one its wheels install)"});
}

void check_wheels_without_cupti(const SoftwareStack& s, std::vector<StackIssue>& out) {
    const FrameworkInfo& f = s.framework;
    int built = parse_cuda_version(f.cuda_version);
    if (f.cuda_wheels_dir.empty() || f.cupti_in_wheels || built < 12000) return;
    bool cuda12 = built / 1000 == 12;
    std::string wheel = cuda12 ? "nvidia-cuda-cupti-cu12" : "nvidia-cuda-cupti";
    out.push_back(StackIssue{
        std::string(finding_name(FindingId::kCuptiMissingFromWheels)),
        fmt::format("{} is missing from {}'s CUDA {} wheels", wheel, framework_name(f),
                    cuda_text(built)),
        fmt::format("{} uses pip's CUDA {} libraries in {}, but {} is not installed there: "
                    "torch.profiler records no GPU activity, and gpudiag finds no CUPTI of "
                    "that CUDA",
                    framework_name(f), cuda_text(built), f.cuda_wheels_dir, wheel),
        fmt::format("pip install \"{}=={}.*\"", wheel, cuda_text(built))});
}

}  // namespace

int parse_cuda_version(std::string_view text) noexcept {
    int major = 0;
    int minor = 0;
    std::size_t i = 0;
    auto digits = [&](int& value) {
        std::size_t start = i;
        while (i < text.size() && text[i] >= '0' && text[i] <= '9' && value < 1000) {
            value = value * 10 + (text[i] - '0');
            ++i;
        }
        return i > start;
    };
    if (!digits(major) || i >= text.size() || text[i] != '.') return 0;
    ++i;
    if (!digits(minor) || major == 0 || minor > 99) return 0;
    return major * 1000 + minor * 10;
}

std::vector<StackIssue> check_stack(const SoftwareStack& stack) {
    std::vector<StackIssue> out;
    try {
        check_driver_against_framework(stack, out);
        check_cupti_against_driver(stack, out);
        check_second_cupti(stack, out);
        check_wheels_without_cupti(stack, out);
    } catch (...) {
    }
    return out;
}

void add_stack_properties(const SoftwareStack& s,
                          std::vector<std::pair<std::string, std::string>>& properties) {
    auto put = [&](const char* key, const std::string& value) {
        if (!value.empty()) properties.emplace_back(key, value);
    };
    put("stack.driver", s.driver_version);
    put("stack.driver_cuda", s.driver_cuda);
    put("stack.framework", s.framework.name);
    put("stack.framework_version", s.framework.version);
    put("stack.framework_cuda", s.framework.cuda_version);
    put("stack.cudnn", s.framework.cudnn_version);
    put("stack.cuda_wheels", s.framework.cuda_wheels_dir);
    if (!s.framework.cuda_wheels_dir.empty()) {
        put("stack.cupti_in_wheels", s.framework.cupti_in_wheels ? "true" : "false");
    }
    put("stack.cupti", s.cupti);
    put("stack.cupti_cuda", s.cupti_cuda);
    put("stack.cupti_library", s.cupti_library);
    put("stack.cupti_mapped", fmt::format("{}", fmt::join(s.cupti_mapped, ";")));
}

SoftwareStack stack_from_properties(const SourceInfo& source) {
    SoftwareStack s;
    s.driver_version = source.property("stack.driver");
    s.driver_cuda = source.property("stack.driver_cuda");
    s.framework.name = source.property("stack.framework");
    s.framework.version = source.property("stack.framework_version");
    s.framework.cuda_version = source.property("stack.framework_cuda");
    s.framework.cudnn_version = source.property("stack.cudnn");
    s.framework.cuda_wheels_dir = source.property("stack.cuda_wheels");
    s.framework.cupti_in_wheels = source.property("stack.cupti_in_wheels") == "true";
    s.cupti = source.property("stack.cupti");
    s.cupti_cuda = source.property("stack.cupti_cuda");
    s.cupti_library = source.property("stack.cupti_library");
    std::string mapped = source.property("stack.cupti_mapped");
    std::size_t at = 0;
    while (at < mapped.size()) {
        std::size_t end = mapped.find(';', at);
        if (end == std::string::npos) end = mapped.size();
        if (end > at) s.cupti_mapped.push_back(mapped.substr(at, end - at));
        at = end + 1;
    }
    return s;
}

}  // namespace gpudiag::detail
