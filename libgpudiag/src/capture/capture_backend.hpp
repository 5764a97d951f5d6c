// SPDX-License-Identifier: Apache-2.0
// CaptureBackend: the live sources of a Session (CUPTI activity, NVTX, NVML) behind one interface,
// so the session and its tests do not care which are available. Capture knows nothing of the
// session: it gets a CaptureOptions (api/live_capture.cpp builds it from SessionOptions).
#pragma once

#include <gpudiag/capture.hpp>
#include <gpudiag/source_info.hpp>
#include <gpudiag/status.hpp>
#include <gpudiag/string_table.hpp>

#include "capture/capture_levels.hpp"
#include "core/event_queue.hpp"

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace gpudiag::detail {

/// What live capture is asked to do (the defaults are SessionOptions').
struct CaptureOptions {
    bool capture_gpu = true;              ///< CUPTI activity (SessionOptions::capture_gpu)
    bool deep = false;                    ///< also CUPTI's callbacks: allocation call sites
    double nvml_hz = 2.0;                 ///< NVML samples a second; 0 samples nothing
    std::uint32_t flush_period_ms = 250;  ///< how often CUPTI's buffers are flushed; 0: 250
};

class CaptureBackend {
public:
    virtual ~CaptureBackend() = default;
    /// Starts every available source, pushing events into `out` and interning into `strings`
    /// (both outlive the backend). Never fails for a missing GPU: status() says what runs.
    virtual Status start(EventQueue& out, StringTable& strings) noexcept = 0;
    /// Delivers what sources hold in their buffers now (CUPTI FlushAll). Never called with a
    /// session lock held.
    virtual void flush() noexcept = 0;
    virtual void stop() noexcept = 0;
    virtual Status pause(std::string_view reason) noexcept = 0;
    virtual Status resume() noexcept = 0;
    /// The cost budget's rung (SessionOptions::cost_budget): sources stop making events of its
    /// kinds where they can, so the capture itself costs less, and make them again on a later
    /// call without them. The session still sheds the rung's kinds that were already in flight.
    /// Never called with a session lock held. Default: nothing changes at the source.
    virtual void reduce(const CaptureReduction& /*reduction*/) noexcept {}
    [[nodiscard]] virtual CaptureStatus status() const noexcept = 0;
    /// The GPUs sampled (model, UUID, PCI bus id, memory), in CUDA ordinal order; empty when
    /// no source names them.
    [[nodiscard]] virtual std::vector<DeviceInfo> devices() const noexcept { return {}; }
};

/// Builds the live backend for `options`. Its status() reports the software stack it finds
/// (CaptureStatus::stack) without judging it: stack_issues stay empty here.
std::unique_ptr<CaptureBackend> make_capture_backend(const CaptureOptions& options);

/// What capture can do on this machine without starting it (loads libraries, touches no CUDA
/// context); stack_issues empty, as above. Thread-safety: safe.
CaptureStatus probe_capture_status() noexcept;

}  // namespace gpudiag::detail
