// SPDX-License-Identifier: Apache-2.0
// CaptureBackend: the live sources of a Session (CUPTI activity, NVTX, NVML) behind one interface,
// so the session and its tests do not care which are available.
#pragma once

#include <gpudiag/capture.hpp>
#include <gpudiag/session.hpp>
#include <gpudiag/status.hpp>
#include <gpudiag/string_table.hpp>

#include "core/event_queue.hpp"

#include <memory>
#include <string_view>
#include <vector>

namespace gpudiag::detail {

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
    [[nodiscard]] virtual CaptureStatus status() const noexcept = 0;
    /// The GPUs sampled (model, UUID, PCI bus id, memory), in CUDA ordinal order; empty when
    /// no source names them.
    [[nodiscard]] virtual std::vector<DeviceInfo> devices() const noexcept { return {}; }
};

/// Builds the backend for `options` (defined in capture/).
std::unique_ptr<CaptureBackend> make_capture_backend(const SessionOptions& options);

}  // namespace gpudiag::detail
