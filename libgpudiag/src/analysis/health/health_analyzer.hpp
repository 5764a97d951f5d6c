// SPDX-License-Identifier: Apache-2.0
// HealthAnalyzer: GPU health from sampled NVML counters (kCounter events): thermal and power
// throttling, ECC errors, other processes' memory on the same GPU, the card's health and what the
// SMs did. Findings thermal_throttle, power_throttle, ecc_errors, foreign_process_memory,
// xid_error, ecc_pages_retired, pcie_link_degraded, nvlink_errors, gpu_busy_not_computing,
// gpu_outlier; section "health". Also a note naming the GPUs the input lists that no event names
// (listed without work: not idle, not starved, not analysed).
#pragma once

#include "core/analyzer.hpp"
#include "core/step_index.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace gpudiag::detail {

/// "GPU 3", or "GPU ?" for kNoDevice: how health findings name a device.
std::string device_label(std::uint16_t device);

class HealthAnalyzer final : public Analyzer {
public:
    /// `steps`: the program's steps (the timeline's), to weigh throttling per step; may be null.
    explicit HealthAnalyzer(const StepIndex* steps = nullptr) noexcept : steps_(steps) {}
    void begin(const SourceInfo& info, const StringTable& strings) override;
    void consume(std::span<const Event> events) override;
    void contribute(Report& report) override;

private:
    // Timed values kept in bounded memory however long the run: every stride-th is kept, and
    // when `Capacity` are held every other one is dropped and the stride doubles.
    template <typename Value, std::size_t Capacity>
    struct Thinned {
        std::vector<std::pair<std::uint64_t, Value>> points;
        std::uint64_t stride = 1;
        std::uint64_t seen = 0;
        void add(std::uint64_t t, Value v) {
            if (seen++ % stride != 0) return;
            points.emplace_back(t, v);
            if (points.size() < Capacity) return;
            std::size_t kept = 0;
            for (std::size_t i = 0; i < points.size(); i += 2) points[kept++] = points[i];
            points.resize(kept);
            stride *= 2;
        }
    };
    using Series = Thinned<double, 512>;
    struct Stat {
        double sum = 0;
        double max = 0;
        double last = 0;
        double first = 0;
        std::uint64_t count = 0;
        void add(double v);
        [[nodiscard]] double mean() const {
            return count > 0 ? sum / static_cast<double>(count) : 0;
        }
    };
    // Busy samples marked with what throttled them (kMarkThermal, kMarkPower), to be placed in
    // the steps at the end.
    using BusyMarks = Thinned<std::uint8_t, 8192>;
    static constexpr std::uint8_t kMarkThermal = 1;
    static constexpr std::uint8_t kMarkPower = 2;
    // Steps that ran while throttled against those that ran without, among the steps a busy
    // sample fell in (throttled_steps.cpp).
    struct StepSlowdown {
        std::size_t throttled = 0;  // steps with a sample throttled for the cause
        std::size_t clean = 0;      // steps with busy samples, none throttled at all
        std::size_t steps = 0;      // closed steps
        double throttled_median_s = 0;
        double clean_median_s = 0;
    };
    // What the SMs did (GPM), overall and in readings taken while the GPU looked busy.
    struct Activity {
        Stat sm_active, occupancy, tensor, dram, fan;
        Stat busy_util, busy_sm_active, busy_occupancy, busy_tensor, busy_dram;
        bool reading_busy = false;  // the GPM reading being received was taken while busy
    };
    struct DeviceHealth {
        Stat util, temperature, power, power_limit, sm_clock, sm_clock_max;
        Stat busy_clock;  // the SM clock of samples taken while the GPU was busy
        Stat ecc_corrected, ecc_uncorrected, foreign, total_memory, process_memory;
        std::uint64_t reason_samples = 0;
        std::uint64_t active_samples = 0;  // the GPU was not idle
        std::uint64_t thermal_samples = 0;
        std::uint64_t power_samples = 0;
        std::uint64_t hw_thermal_samples = 0;  // hardware-enforced: clocks halved or worse
        std::uint64_t power_brake_samples = 0;
        std::uint64_t reasons_seen = 0;
        Series temperature_series, power_series, clock_series;
        // The card: PCIe link, retired memory, Xid events.
        Stat pcie_gen, pcie_gen_max, pcie_width, pcie_width_max, pcie_replays;
        Stat retired_single, retired_double, retired_pending;
        Stat rows_correctable, rows_uncorrectable, remap_pending, remap_failed;
        Stat nvlink_active, nvlink_replay, nvlink_recovery, nvlink_crc;
        Stat power_default, persistence, mig;
        std::uint64_t link_samples = 0;               // complete PCIe readings
        std::uint64_t narrow_samples = 0;             // fewer lanes than both ends support
        std::uint64_t busy_link_samples = 0;          // readings while the GPU was busy
        std::uint64_t slow_busy_samples = 0;          // of them, below the highest generation
        std::map<std::uint32_t, std::uint64_t> xids;  // Xid -> events (at most kMaxXidKinds)
        Activity activity;
        BusyMarks busy_marks;
        std::map<std::uint32_t, double> other_processes;  // PID -> most memory seen (<= 64)
        Stat foreign_sm;  // SM time other processes used, per sample (percent)
    };
    void on_counter(const Event& e);
    void note_time(const Event& e) noexcept {  // the first sample's time: series start there
        if (first_ns_ == 0 || (e.start_ns != 0 && e.start_ns < first_ns_)) first_ns_ = e.start_ns;
    }
    void on_card_counter(const Event& e, DeviceHealth& d);
    void add_findings(Report& report, std::uint16_t device, const DeviceHealth& d);
    static std::string largest_others(const DeviceHealth& d);
    // The card's own health (card_health.cpp).
    static bool is_card_counter(CounterKind kind) noexcept;
    void add_card_findings(Report& report, std::uint16_t device, const DeviceHealth& d);
    void add_xid_finding(Report& report, std::uint16_t device, const DeviceHealth& d);
    void add_memory_health_finding(Report& report, std::uint16_t device, const DeviceHealth& d);
    void add_pcie_finding(Report& report, std::uint16_t device, const DeviceHealth& d);
    void add_nvlink_finding(Report& report, std::uint16_t device, const DeviceHealth& d);
    // Throttling weighed per step (throttled_steps.cpp).
    [[nodiscard]] bool step_slowdown(const DeviceHealth& d, std::uint8_t cause,
                                     StepSlowdown& out) const;
    void add_step_slowdown(Finding& f, const DeviceHealth& d, std::uint8_t cause) const;
    // What the SMs did (gpu_activity.cpp).
    static bool is_activity_counter(CounterKind kind) noexcept;
    void on_activity_counter(const Event& e, DeviceHealth& d);
    void add_busy_not_computing_finding(Report& report, std::uint16_t device,
                                        const DeviceHealth& d);
    void add_activity_figures(Section& s) const;
    /// One GPU slower, hotter or more throttled than its peers (gpu_outlier.cpp).
    void add_outlier_findings(Report& report) const;
    void add_mode_figures(Section& s) const;
    /// A note naming the GPUs the input lists that no event mentions (gpu_activity.cpp).
    void add_unused_devices_note(Report& report) const;

    const StepIndex* steps_;
    std::map<std::uint16_t, DeviceHealth> devices_;  // bounded by the device ids seen (<= 65536)
    std::uint64_t first_ns_ = 0;
    std::vector<std::uint16_t> listed_;  // devices the input lists (SourceInfo)
    std::vector<bool> with_events_;      // by ordinal: some event names the device
};

}  // namespace gpudiag::detail
