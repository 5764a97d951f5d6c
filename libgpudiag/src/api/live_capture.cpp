// SPDX-License-Identifier: Apache-2.0
// Live capture as the API hands it out.
#include "api/live_capture.hpp"

#include "analysis/health/stack_rules.hpp"

#include <utility>

namespace gpudiag::detail {
namespace {

void add_stack_verdict(CaptureStatus& status) noexcept {
    try {
        status.stack_issues = check_stack(status.stack);
    } catch (...) {  // host memory ran out: the status keeps the stack, without its verdict
    }
}

// The live backend, with the verdict on the stack it reports added to each status.
class JudgedCapture final : public CaptureBackend {
public:
    explicit JudgedCapture(std::unique_ptr<CaptureBackend> live) : live_(std::move(live)) {}
    Status start(EventQueue& out, StringTable& strings) noexcept override {
        return live_->start(out, strings);
    }
    void flush() noexcept override { live_->flush(); }
    void stop() noexcept override { live_->stop(); }
    Status pause(std::string_view reason) noexcept override { return live_->pause(reason); }
    Status resume() noexcept override { return live_->resume(); }
    void reduce(const CaptureReduction& reduction) noexcept override { live_->reduce(reduction); }
    [[nodiscard]] CaptureStatus status() const noexcept override {
        CaptureStatus st = live_->status();
        add_stack_verdict(st);
        return st;
    }
    [[nodiscard]] std::vector<DeviceInfo> devices() const noexcept override {
        return live_->devices();
    }

private:
    std::unique_ptr<CaptureBackend> live_;
};

}  // namespace

CaptureOptions capture_options(const SessionOptions& options) {
    CaptureOptions c;
    c.capture_gpu = options.capture_gpu;
    c.deep = options.deep;
    c.nvml_hz = options.nvml_hz;
    c.flush_period_ms = options.flush_period_ms;
    return c;
}

std::unique_ptr<CaptureBackend> make_session_capture(const SessionOptions& options) {
    return std::make_unique<JudgedCapture>(make_capture_backend(capture_options(options)));
}

}  // namespace gpudiag::detail

namespace gpudiag {

CaptureStatus probe_capture() noexcept {
    CaptureStatus st = detail::probe_capture_status();
    detail::add_stack_verdict(st);
    return st;
}

}  // namespace gpudiag
