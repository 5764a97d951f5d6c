// SPDX-License-Identifier: Apache-2.0
// The allocation-site rule: frames innermost first, as torch's allocator history records them.
#include <gpudiag/memory.hpp>

#include "core/allocation_site.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace gpudiag {
namespace {

StackFrame py(const char* file, const char* fn, int line) {
    return {file, fn, line};
}
StackFrame native(const char* fn, const char* file = "??") {
    return {file, fn, 0};
}

TEST(AllocationSite, TheProgramsOwnLineBeatsTorchAndLibraries) {
    std::vector<StackFrame> frames = {
        native("torch::unwind::unwind()"),
        native("c10::cuda::CUDACachingAllocator::malloc(...)"),
        py("/usr/lib/python3/site-packages/torch/nn/modules/linear.py", "forward", 125),
        py("/usr/lib/python3/site-packages/transformers/models/opt.py", "forward", 88),
        py("/home/me/project/train/model.py", "forward", 42),
        py("/home/me/project/train/main.py", "<module>", 7),
    };
    EXPECT_EQ(allocation_site(frames), "train/model.py:42 forward");
}

TEST(AllocationSite, WithoutTheProgramALibraryFrameThenNativeThenTorch) {
    EXPECT_EQ(allocation_site({py("/opt/torch/nn/functional.py", "relu", 1),
                               py("/venv/lib/python3.11/site-packages/timm/layers.py", "f", 9)}),
              "timm/layers.py:9 f");
    EXPECT_EQ(allocation_site({native("at::empty_cuda(...)"), native("my_extension::launch()")}),
              "my_extension::launch()");
    EXPECT_EQ(allocation_site({py("/opt/torch/nn/functional.py", "relu", 1)}),
              "nn/functional.py:1 relu");
    EXPECT_EQ(allocation_site({}), "");
}

TEST(AllocationSite, WindowsPathsReadTheSame) {
    EXPECT_EQ(allocation_site({py("C:\\Users\\me\\torch\\nn\\linear.py", "forward", 3),
                               py("C:\\Users\\me\\proj\\train.py", "step", 12)}),
              "proj/train.py:12 step");
}

// Past a session's cap on distinct sites, what varies per call folds; the line stays.
TEST(AllocationSite, NumbersThatVaryFoldButLinesStay) {
    EXPECT_EQ(detail::site_without_numbers("svc.cpp:88 bind request 40213"),
              "svc.cpp:88 bind request #");
    EXPECT_EQ(detail::site_without_numbers("svc.cpp:88 bind request 7"),
              "svc.cpp:88 bind request #");
    EXPECT_NE(detail::site_without_numbers("svc.cpp:88 x"),
              detail::site_without_numbers("svc.cpp:89 x"));
    EXPECT_EQ(detail::site_without_numbers("user 12 slot 3"), "user # slot #");
    EXPECT_EQ(detail::site_without_numbers(""), "");
}

}  // namespace
}  // namespace gpudiag
