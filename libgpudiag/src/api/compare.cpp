// SPDX-License-Identifier: Apache-2.0
// Public comparison API: two reports -> the comparison rules (analysis/compare) -> a Comparison.
#include <gpudiag/compare.hpp>

#include "analysis/compare/report_comparer.hpp"

#include <exception>
#include <new>

namespace gpudiag {

Result<Comparison> compare_reports(const Report& before, const Report& after,
                                   const CompareOptions& options) noexcept {
    try {
        return detail::ReportComparer(before, after, options).run();
    } catch (const std::bad_alloc&) {
        return resource_exhausted("out of host memory while comparing two reports");
    } catch (const std::exception& e) {
        return internal_error(std::string("comparing two reports: ") + e.what());
    } catch (...) {
        return internal_error("unknown failure while comparing two reports");
    }
}

}  // namespace gpudiag
