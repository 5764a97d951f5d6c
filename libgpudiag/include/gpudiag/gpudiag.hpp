// SPDX-License-Identifier: Apache-2.0
// Umbrella header: the whole public C++ API of gpudiag. Includes only; declares nothing.
#pragma once

#include <gpudiag/analyze.hpp>
#include <gpudiag/capture.hpp>
#include <gpudiag/compare.hpp>
#include <gpudiag/event.hpp>
#include <gpudiag/job.hpp>
#include <gpudiag/memory.hpp>
#include <gpudiag/names.hpp>
#include <gpudiag/recording.hpp>
#include <gpudiag/report.hpp>
#include <gpudiag/session.hpp>
#include <gpudiag/sink.hpp>
#include <gpudiag/source_info.hpp>
#include <gpudiag/status.hpp>
#include <gpudiag/string_table.hpp>
#include <gpudiag/trace_export.hpp>
#include <gpudiag/version.hpp>
#include <gpudiag/whatif.hpp>
