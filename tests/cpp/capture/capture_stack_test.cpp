// SPDX-License-Identifier: Apache-2.0
// A driver 535 machine (stub libcuda reporting CUDA 12.2, stub NVML with only the old names and
// no power limit) and the real CUPTI 12 libraries of the nvidia-cuda-cupti-cu12 wheels: NVML
// falls back to each older call, and every stack mismatch a user trips on is a finding with its
// fix, in capture_status() and in a live report. What is mapped is process-wide and permanent,
// so the cases that map a CUPTI run in a fresh process each.
#include "analysis/health/stack_rules.hpp"
#include "capture/cupti/cupti_api.hpp"
#include "capture/nvml/nvml_api.hpp"
#include "capture/nvml/nvml_sampler.hpp"
#include "capture/platform/dynamic_library.hpp"
#include "test_event_queue.hpp"

#include <gpudiag/capture.hpp>
#include <gpudiag/session.hpp>

#include <dlfcn.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

extern "C" {
void gpudiag_stub_nvml_set(int gpu, unsigned long long reasons, int temperature, unsigned power_mw,
                           unsigned limit_mw);
void gpudiag_stub_nvml_push_xid(int gpu, unsigned long long xid);
void gpudiag_stub_nvml_set_processes(int gpu, unsigned long long own, unsigned long long foreign,
                                     int include_self);
}

namespace {
const bool kStubsSelected = [] {
    setenv("GPUDIAG_NVML_PATH", GPUDIAG_STUB_NVML_OLD, 1);
    setenv("GPUDIAG_CUDA_PATH", GPUDIAG_STUB_CUDA_R535, 1);
    // No CUPTI unless a case maps one: the toolkit's 13.0 must not meet a stub driver.
    setenv("GPUDIAG_CUPTI_PATH", "/nonexistent/libcupti.so.13", 1);
    unsetenv("CUDA_VISIBLE_DEVICES");
    unsetenv("CUDA_HOME");
    return true;
}();
}  // namespace

namespace gpudiag {
namespace {

std::string cupti12(const char* version) {
    return std::string(GPUDIAG_TEST_CUPTI12_DIR) + "/" + version + "/libcupti.so.12";
}

void require(bool ok, const std::string& what) {
    if (ok) return;
    std::fprintf(stderr, "FAILED: %s\n", what.c_str());
    std::fflush(stderr);
    std::_Exit(1);
}

void* map_like_a_framework(const std::string& path) {
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    const char* error = h == nullptr ? dlerror() : nullptr;
    require(h != nullptr, "dlopen " + path + ": " + (error != nullptr ? error : "?"));
    return h;
}

const StackIssue* issue(const CaptureStatus& st, const std::string& id) {
    for (const StackIssue& i : st.stack_issues) {
        if (i.id == id) return &i;
    }
    return nullptr;
}

std::string ids(const CaptureStatus& st) {
    std::string out;
    for (const StackIssue& i : st.stack_issues) out += i.id + " ";
    return out;
}

FrameworkInfo torch(const char* version, const char* cuda) {
    FrameworkInfo f;
    f.name = "torch";
    f.version = version;
    f.cuda_version = cuda;
    f.cudnn_version = "9.1.0";
    return f;
}

#define IN_A_FRESH_PROCESS(body) \
    EXPECT_EXIT(                 \
        {                        \
            body;                \
            std::_Exit(0);       \
        },                       \
        ::testing::ExitedWithCode(0), "")

class CaptureStackTest : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_TRUE(kStubsSelected);
        GTEST_FLAG_SET(death_test_style, "threadsafe");
    }
    // GTEST_SKIP only leaves this function: callers return when IsSkipped().
    void need_cupti12() {
        if (access(cupti12("12.4.127").c_str(), R_OK) != 0) {
            GTEST_SKIP() << GPUDIAG_TEST_CUPTI12_DIR
                         << " lacks the CUPTI 12 libraries: run "
                            "tools/fetch_cupti_libs.sh";
        }
    }
};

TEST_F(CaptureStackTest, NvmlOfAnOlderDriverFallsBackToTheOlderCalls) {
    std::string why;
    const detail::NvmlApi* nvml = detail::nvml_api(&why);
    ASSERT_NE(nvml, nullptr) << why;
    EXPECT_EQ(nvml->device_get_memory_info_v2, nullptr);
    EXPECT_NE(nvml->device_get_memory_info_v1, nullptr);
    EXPECT_EQ(nvml->device_get_temperature_v, nullptr);
    gpudiag_stub_nvml_set(0, 0x20 /*SW thermal*/, 87, 300000, 700000);
    gpudiag_stub_nvml_set_processes(0, 2ULL << 30, 5ULL << 30, 1);
    detail::NvmlSampler sampler(*nvml);
    test::TestEventQueue queue;
    sampler.sample_once(queue);
    ASSERT_EQ(sampler.devices().size(), 2u);
    auto first = [&](CounterKind kind) {
        auto v = queue.counters(kind);
        return v.empty() ? -1.0 : v[0].counter.value;
    };
    EXPECT_EQ(first(CounterKind::kTemperatureC), 87);       // nvmlDeviceGetTemperature
    EXPECT_EQ(first(CounterKind::kThrottleReasons), 0x20);  // ...ClocksThrottleReasons
    EXPECT_EQ(first(CounterKind::kDeviceMemoryTotalBytes), double(80ULL << 30));  // memory v1
    EXPECT_EQ(first(CounterKind::kDeviceMemoryUsedBytes), double((20ULL << 30) + (1ULL << 29)));
    EXPECT_EQ(first(CounterKind::kForeignProcessMemoryBytes), double(5ULL << 30));  // processes v1
    EXPECT_EQ(first(CounterKind::kProcessMemoryUsedBytes), double(2ULL << 30));
    EXPECT_EQ(first(CounterKind::kPowerWatts), 300.0);
    EXPECT_TRUE(queue.counters(CounterKind::kPowerLimitWatts).empty());  // no such call: no guess
    // What is missing, and why, reaches the status.
    CaptureStatus st = probe_capture();
    EXPECT_EQ(st.driver_version, "535.104.05");
    auto has = [&](const std::string& needle) {
        return std::any_of(st.reasons.begin(), st.reasons.end(), [&](const std::string& r) {
            return r.find(needle) != std::string::npos;
        });
    };
    EXPECT_TRUE(
        has("nvml: power limit unavailable: this driver's NVML has no "
            "nvmlDeviceGetEnforcedPowerLimit"));
    EXPECT_TRUE(has("nvml: memory used includes the driver's reserved memory"));
    EXPECT_FALSE(has("temperature unavailable"));
    // The card's health: what this NVML lacks is said, and the rest still works (Xid events
    // through nvmlEventSetWait, the name before _v2).
    EXPECT_TRUE(has("nvml: PCIe link generation and width unavailable")) << st.reasons.size();
    EXPECT_TRUE(has("nvml: remapped rows unavailable"));
    EXPECT_TRUE(has("nvml: NVLink state and errors unavailable"));
    EXPECT_FALSE(has("Xid events unavailable"));
    EXPECT_TRUE(has("nvml: SM activity, occupancy, tensor and DRAM activity (GPM) unavailable"));
    EXPECT_FALSE(nvml->has_gpm());
    EXPECT_TRUE(queue.counters(CounterKind::kSmActivePercent).empty());
    auto fans = queue.counters(CounterKind::kFanSpeedPercent);  // an old call: every driver has it
    ASSERT_EQ(fans.size(), 1u) << "GPU 0 has no fan";
    EXPECT_EQ(fans[0].device, 1);
    EXPECT_NE(nvml->event_set_wait, nullptr);
    EXPECT_TRUE(queue.counters(CounterKind::kPcieLinkWidth).empty());
    gpudiag_stub_nvml_push_xid(0, 79);
    sampler.sample_once(queue);
    auto xids = queue.counters(CounterKind::kXidError);
    ASSERT_EQ(xids.size(), 1u);
    EXPECT_EQ(xids[0].counter.value, 79);
}

TEST_F(CaptureStackTest, ACuda13TorchOnDriver535IsTooOldAndTheLiveReportSaysSo) {
    IN_A_FRESH_PROCESS({
        set_framework_info(torch("2.9.0+cu130", "13.0"));
        CaptureStatus st = probe_capture();
        require(st.stack.driver_version == "535.104.05", st.stack.driver_version);
        require(st.stack.driver_cuda == "12.2", st.stack.driver_cuda);
        require(st.stack.framework.cudnn_version == "9.1.0", "cuDNN not carried");
        const StackIssue* i = issue(st, "driver_too_old_for_framework");
        require(i != nullptr, "no issue: " + ids(st));
        require(i->problem.find("PyTorch 2.9.0+cu130 was built for CUDA 13.0; driver 535.104.05 "
                                "supports CUDA 12.2") != std::string::npos,
                i->problem);
        require(i->fix.find("R580") != std::string::npos, i->fix);
        require(i->fix.find("whl/cu126") != std::string::npos, i->fix);
        // The live report: its source names the stack, and the mismatch is a finding.
        SessionOptions o;
        o.capture_gpu = false;
        o.nvml_hz = 0;
        auto session = Session::create(o);
        require(session.is_ok(), "no session");
        require((*session)->start().is_ok(), "start");
        require((*session)->stop().is_ok(), "stop");
        auto report = (*session)->report();
        require(report.is_ok(), "no report");
        require(report->source.property("stack.driver") == "535.104.05", "source: driver");
        require(report->source.property("stack.driver_cuda") == "12.2", "source: driver CUDA");
        require(report->source.property("stack.framework_cuda") == "13.0", "source: torch CUDA");
        require(report->source.property("stack.cudnn") == "9.1.0", "source: cuDNN");
        const Finding* f = report->finding("driver_too_old_for_framework");
        require(f != nullptr, "no finding");
        require(f->severity == Severity::kCritical, "severity");
        require(!f->advice.empty() && f->advice[0].find("R580") != std::string::npos, "fix");
    });
}

TEST_F(CaptureStackTest, ACuda128TorchOnDriver535RunsWithoutPtxJit) {
    IN_A_FRESH_PROCESS({
        set_framework_info(torch("2.7.1+cu128", "12.8"));
        CaptureStatus st = probe_capture();
        require(issue(st, "driver_too_old_for_framework") == nullptr, ids(st));
        const StackIssue* i = issue(st, "driver_older_than_framework");
        require(i != nullptr, "no issue: " + ids(st));
        require(i->fix.find("R570") != std::string::npos, i->fix);
    });
}

TEST_F(CaptureStackTest, AMatchingStackHasNoIssue) {
    IN_A_FRESH_PROCESS({
        set_framework_info(torch("2.5.1+cu121", "12.1"));
        CaptureStatus st = probe_capture();
        require(st.stack_issues.empty(), ids(st));
    });
}

TEST_F(CaptureStackTest, ACupti128OnDriver535CannotAttach) {
    need_cupti12();
    if (IsSkipped()) return;
    IN_A_FRESH_PROCESS({
        map_like_a_framework(cupti12("12.8.90"));  // as torch cu128 does
        CaptureStatus st = probe_capture();
        require(st.stack.cupti == "CUPTI 12.8 (API version 26)", st.stack.cupti);
        require(st.stack.cupti_library == cupti12("12.8.90"), st.stack.cupti_library);
        const StackIssue* i = issue(st, "cupti_newer_than_driver");
        require(i != nullptr, "no issue: " + ids(st));
        require(i->problem.find("CUPTI_ERROR_NOT_INITIALIZED") != std::string::npos, i->problem);
        require(i->fix.find("R570") != std::string::npos, i->fix);
    });
}

TEST_F(CaptureStackTest, TwoCuptisInOneProcessAreAFinding) {
    need_cupti12();
    if (IsSkipped()) return;
    IN_A_FRESH_PROCESS({
        map_like_a_framework(cupti12("12.4.127"));
        map_like_a_framework(cupti12("12.1.105"));
        CaptureStatus st = probe_capture();
        require(st.stack.cupti_mapped.size() == 2, std::to_string(st.stack.cupti_mapped.size()));
        const StackIssue* i = issue(st, "second_cupti");
        require(i != nullptr, "no issue: " + ids(st));
        require(i->problem.find("12.4.127") != std::string::npos &&
                    i->problem.find("12.1.105") != std::string::npos,
                i->problem);
        require(i->fix.find("GPUDIAG_CUPTI_PATH") != std::string::npos, i->fix);
    });
}

TEST_F(CaptureStackTest, ACuda12WheelSetWithoutCuptiIsAFinding) {
    IN_A_FRESH_PROCESS({
        FrameworkInfo f = torch("2.4.1+cu124", "12.4");
        f.cuda_wheels_dir = "/venv/lib/python3.11/site-packages/nvidia";
        f.cupti_in_wheels = false;
        set_framework_info(f);
        CaptureStatus st = probe_capture();
        const StackIssue* i = issue(st, "cupti_missing_from_wheels");
        require(i != nullptr, "no issue: " + ids(st));
        require(i->fix == "pip install \"nvidia-cuda-cupti-cu12==12.4.*\"", i->fix);
        f.cupti_in_wheels = true;
        set_framework_info(f);
        require(issue(probe_capture(), "cupti_missing_from_wheels") == nullptr, "still reported");
    });
}

}  // namespace
}  // namespace gpudiag
