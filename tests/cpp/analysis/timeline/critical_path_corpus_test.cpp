// SPDX-License-Identifier: Apache-2.0
// The critical path and the what-ifs on the corpus' real traces, checked against real
// before/after pairs of the same program.
#include <gpudiag/analyze.hpp>

#include <gtest/gtest.h>

namespace gpudiag {
namespace {
}  // namespace
}  // namespace gpudiag
