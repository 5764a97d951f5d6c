// SPDX-License-Identifier: Apache-2.0
// The names of each HostCause, one row each. Checked when this file compiles (GCC and Clang; see
// core/enum_check.hpp): one row per enumerator, in value order, so adding a cause without naming
// it fails the build.
#include "analysis/timeline/host_cause.hpp"

#include "core/enum_check.hpp"

#include <iterator>

namespace gpudiag::detail {
namespace {

struct Row {
    HostCause cause;
    const char* key;
    const char* label;
    const char* gap_name;
};

constexpr Row kRows[] = {
    {HostCause::kInput, "input", "waiting for the next batch", "idle: host wait (input)"},
    {HostCause::kSync, "sync", "blocked in a synchronization", "idle: host wait (sync)"},
    {HostCause::kCopy, "copy", "in a synchronous or pageable copy", "idle: host wait (copy)"},
    {HostCause::kLaunch, "launch", "launching (CUDA API calls and launch latency)",
     "idle: host wait (launch)"},
    {HostCause::kCpu, "cpu", "CPU work between launches", "idle: host wait (CPU work)"},
};
static_assert(one_row_per_enumerator<HostCause>(kRows, [](const Row& r) { return r.cause; }),
              "kRows needs one row per HostCause, in value order");
static_assert(std::size(kRows) == kHostCauses, "kHostCauses counts the causes");

constexpr Row kUnknown{HostCause::kCpu, "unknown", "unknown", "idle: host wait"};

const Row& row(HostCause c) noexcept {
    const auto i = static_cast<std::size_t>(c);
    return i < std::size(kRows) ? kRows[i] : kUnknown;
}

}  // namespace

const char* host_cause_key(HostCause c) noexcept {
    return row(c).key;
}

const char* host_cause_label(HostCause c) noexcept {
    return row(c).label;
}

const char* host_cause_gap_name(HostCause c) noexcept {
    return row(c).gap_name;
}

}  // namespace gpudiag::detail
