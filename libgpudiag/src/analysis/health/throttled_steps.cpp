// SPDX-License-Identifier: Apache-2.0
// HealthAnalyzer, throttling weighed per step: the steps a throttled busy sample fell in against
// the steps whose busy samples were all unthrottled. NVML samples a few times a second, so short
// steps are seen only now and then; both groups are the steps a sample fell in, which does not
// favour either. At least kThrottleMinStepsEach steps in each group, else nothing is said. A
// throttled group slower by kThrottleNoiseShare or less is reported as "no slower": below that,
// step-to-step noise decides (the thresholds are in the findings catalog).
#include "analysis/health/health_analyzer.hpp"

#include "analysis/findings/finding_catalog.hpp"
#include "support/format.hpp"
#include "support/statistics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>

namespace gpudiag::detail {

bool HealthAnalyzer::step_slowdown(const DeviceHealth& d, std::uint8_t cause,
                                   StepSlowdown& out) const {
    if (steps_ == nullptr || d.busy_marks.points.empty()) return false;
    const std::vector<StepSpan> steps = steps_->closed_steps();
    if (steps.size() < 2 * kThrottleMinStepsEach) return false;
    // Per step: 0 no busy sample, 1 only unthrottled ones, 2 one throttled for `cause`,
    // 3 throttled for the other cause only (in neither group).
    std::vector<std::uint8_t> seen(steps.size(), 0);
    for (const auto& [t, causes] : d.busy_marks.points) {
        auto it =
            std::upper_bound(steps.begin(), steps.end(), t,
                             [](std::uint64_t v, const StepSpan& s) { return v < s.start_ns; });
        if (it == steps.begin()) continue;
        const auto k = static_cast<std::size_t>(it - steps.begin()) - 1;
        if (t >= steps[k].end_ns) continue;  // between steps
        const std::uint8_t state = (causes & cause) != 0 ? 2 : causes != 0 ? 3 : 1;
        seen[k] = std::max(seen[k], state);
    }
    std::vector<double> throttled, clean;
    for (std::size_t k = 0; k < steps.size(); ++k) {
        const double secs = static_cast<double>(steps[k].end_ns - steps[k].start_ns) / 1e9;
        if (seen[k] == 2) throttled.push_back(secs);
        if (seen[k] == 1) clean.push_back(secs);
    }
    if (throttled.size() < kThrottleMinStepsEach || clean.size() < kThrottleMinStepsEach)
        return false;
    out.throttled = throttled.size();
    out.clean = clean.size();
    out.steps = steps.size();
    out.throttled_median_s = median(std::move(throttled));
    out.clean_median_s = median(std::move(clean));
    return true;
}

// What the throttling cost the steps, on a throttle finding: the two groups' medians, and the
// step time lost over the run (the median difference, times the throttled share of the steps
// seen, times every step).
void HealthAnalyzer::add_step_slowdown(Finding& f, const DeviceHealth& d,
                                       std::uint8_t cause) const {
    StepSlowdown s;
    if (!step_slowdown(d, cause, s) || s.clean_median_s <= 0) return;
    const double slowdown = s.throttled_median_s / s.clean_median_s - 1;
    const double share =
        static_cast<double>(s.throttled) / static_cast<double>(s.throttled + s.clean);
    const std::string seen = fmt::format(
        "Of the {} steps a busy NVML sample fell in, {} ran while throttled: median {} against {} "
        "for the {} that ran unthrottled",
        s.throttled + s.clean, s.throttled, format_duration_ns(s.throttled_median_s * 1e9),
        format_duration_ns(s.clean_median_s * 1e9), s.clean);
    f.figures.push_back({"throttled_step_median_s", s.throttled_median_s, Unit::kSeconds,
                         "median step while throttled"});
    f.figures.push_back(
        {"unthrottled_step_median_s", s.clean_median_s, Unit::kSeconds, "median step unthrottled"});
    if (slowdown <= kThrottleNoiseShare) {
        f.evidence.push_back(seen +
                             ": no slower, so this program's steps are not bound by the "
                             "clock it lost");
        return;
    }
    const double lost =
        (s.throttled_median_s - s.clean_median_s) * share * static_cast<double>(s.steps);
    f.figures.push_back(
        {"throttled_step_slowdown", slowdown, Unit::kFraction, "throttled steps slower by"});
    f.figures.push_back(
        {"step_time_lost_s", lost, Unit::kSeconds, "step time lost to throttling (estimate)"});
    f.evidence.push_back(fmt::format("{} (+{}); about {} lost over the {} steps", seen,
                                     format_percent(slowdown), format_duration_ns(lost * 1e9),
                                     s.steps));
}

}  // namespace gpudiag::detail
