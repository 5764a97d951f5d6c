// SPDX-License-Identifier: Apache-2.0
// HostCause: what the host was doing while the GPU waited for it. One vocabulary for the idle-time
// split (TimelineAnalyzer), the host items and host parts of the critical path (CriticalPath) and
// the host-wait gaps of the Chrome trace; its keys and labels are written once, in host_cause.cpp.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpudiag::detail {

/// The causes, in the order of every table and figure list that names them.
///
/// The critical path once kept "another API call" apart from a launch: both analyses booked it
/// with the launches all the same (the idle split, the path's part, the CUDA-graph what-if), so
/// it is kLaunch here. What does tell launches from other calls, the launch-latency histogram,
/// asks the call's name (TimelineAnalyzer::ApiClass), not its cause.
enum class HostCause : std::uint8_t {
    kInput = 0,   ///< waiting for the next batch (DataLoader __next__ or an input-wait marker)
    kSync = 1,    ///< blocked in (or just back from) a synchronization: the GPU queue drained
    kCopy = 2,    ///< inside a synchronous or pageable memcpy call
    kLaunch = 3,  ///< inside CUDA API calls (launches or any other), or a kernel's launch latency
    kCpu = 4,     ///< outside any API call: Python and framework code on the CPU (never an item)
};
inline constexpr std::size_t kHostCauses = 5;

/// "input", "sync", "copy", "launch", "cpu": stable keys (figure keys, table rows, JSON, metrics).
const char* host_cause_key(HostCause c) noexcept;
/// "waiting for the next batch", ...: what the host was doing, as reports say it.
const char* host_cause_label(HostCause c) noexcept;
/// "idle: host wait (input)", ...: a host-wait gap of this cause in the Chrome trace.
const char* host_cause_gap_name(HostCause c) noexcept;

}  // namespace gpudiag::detail
