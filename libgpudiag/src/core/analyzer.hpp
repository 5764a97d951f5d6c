// SPDX-License-Identifier: Apache-2.0
// Analyzer: an EventSink that turns what it consumed into findings and sections of a Report.
#pragma once

#include <gpudiag/report.hpp>
#include <gpudiag/sink.hpp>

#include <memory>
#include <vector>

namespace gpudiag::detail {

class Analyzer : public EventSink {
public:
    /// Adds this analysis' findings, sections and notes. Called once, after end().
    virtual void contribute(Report& report) = 0;
};

}  // namespace gpudiag::detail
