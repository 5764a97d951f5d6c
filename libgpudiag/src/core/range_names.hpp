// SPDX-License-Identifier: Apache-2.0
// What a host range's name says it is. Profilers name ranges after what the program does
// (torch's record_function names, NVTX ranges): one owner for the names that mean a step, a wait
// for input or a collective, shared by every importer.
#pragma once

#include <gpudiag/event.hpp>

#include <cstdint>
#include <string_view>

namespace gpudiag::detail {

struct RangeMeaning {
    bool known = false;  ///< false: the name says nothing special
    RangeCategory category = RangeCategory::kGeneric;
    std::int64_t step = 0;  ///< the step number, for kStep
};

/// Names any framework range may carry: "ProfilerStep#12" (a step), torch's DataLoader fetch
/// ("enumerate(DataLoader)#...") and Lightning's "train_dataloader_next" (input waits),
/// collectives ("nccl:all_reduce", "gloo:", "c10d::", "record_param_comms").
RangeMeaning range_meaning(std::string_view name) noexcept;

/// NVTX ranges besides those: "step 12", "Step#12", "iteration 3", "iter_3" (steps, numbered) and
/// the training phases "forward", "backward", "optimizer" / "optimizer.step" / "optimizer_step",
/// "zero_grad" and the inference phases "prefill", "decode" (phases, not steps: one such range
/// may hold a whole generation loop), compared without regard to case.
RangeMeaning nvtx_range_meaning(std::string_view name) noexcept;

/// The NVTX domain gpudiag's own phases use (gpudiag.phase()).
inline constexpr std::string_view kGpudiagNvtxDomain = "gpudiag";

}  // namespace gpudiag::detail
