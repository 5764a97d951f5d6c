// SPDX-License-Identifier: Apache-2.0
// Public entry to the cross-rank analysis, for reports that were made apart (one per rank
// process) and brought together afterwards.
#include <gpudiag/job.hpp>

#include "analysis/job/job_analysis.hpp"

#include <algorithm>
#include <exception>
#include <new>
#include <string>

namespace gpudiag {

Result<Report> analyze_job(std::vector<Report> ranks, const AnalysisOptions& options) noexcept {
    try {
        if (ranks.empty()) return invalid_argument("analyze_job: no rank reports given");
        if (ranks.size() == 1) return std::move(ranks.front());
        Report job;
        job.ranks = std::move(ranks);
        std::stable_sort(job.ranks.begin(), job.ranks.end(),
                         [](const Report& a, const Report& b) { return a.source.rank < b.source.rank; });
        job.source = job.ranks.front().source;
        job.source.description = std::to_string(job.ranks.size()) + " ranks";
        job.source.rank = -1;
        if (job.source.world_size <= 0) {
            job.source.world_size = static_cast<std::int32_t>(job.ranks.size());
        }
        for (const auto& r : job.ranks) {
            job.capture.events += r.capture.events;
            job.capture.dropped += r.capture.dropped;
            job.capture.truncated = job.capture.truncated || r.capture.truncated;
        }
        detail::analyze_job(job, options);
        return job;
    } catch (const std::bad_alloc&) {
        return resource_exhausted("out of host memory while combining rank reports");
    } catch (const std::exception& e) {
        return internal_error(std::string("job analysis failed: ") + e.what());
    } catch (...) {
        return internal_error("job analysis failed with an unknown exception");
    }
}

}  // namespace gpudiag
