// SPDX-License-Identifier: Apache-2.0
// What the names in an LLM serving trace say: which engine ran it, which host ranges are one
// iteration of the engine (a prefill, a decode, or both batched together), and which kernels
// communicate. Serving engines mark their iterations with ranges of their own (vLLM's
// "execute_context_1(888)_generation_0(0)", TensorRT-LLM's "[Executor] _forward_step 12: 0 ctx
// reqs, 32 gen reqs", SGLang's "scheduler.run_batch"), not torch's ProfilerStep; and their
// tensor-parallel all-reduce is often a custom or symmetric-memory kernel, not an NCCL one.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace gpudiag::detail {

enum class ServingEngine : std::uint8_t { kNone, kVllm, kSglang, kTensorRtLlm, kHfGenerate };
inline constexpr std::size_t kServingEngines = 5;

/// What one engine iteration ran: new prompts (prefill), one token for running requests
/// (decode), both in one batch (chunked prefill), or what its range does not say.
enum class ServingStepKind : std::uint8_t { kUnknown, kPrefill, kDecode, kMixed };
inline constexpr std::size_t kServingStepKinds = 4;

/// Kernels that move data between GPUs, by how they do it.
enum class CommKernel : std::uint8_t {
    kNone,             ///< not communication
    kNccl,             ///< NCCL / RCCL / MSCCL++ collectives
    kCustomAllReduce,  ///< vLLM's and SGLang's custom all-reduce over IPC buffers
    kSymmetricMemory,  ///< torch symmetric memory (one-shot / two-shot, multimem)
    kFusedAllReduce,   ///< all-reduce fused with the norm (TensorRT-LLM / FlashInfer)
    kExpertAllToAll,   ///< MoE expert dispatch and combine (DeepEP, pplx)
};
inline constexpr std::size_t kCommKernels = 6;

std::string_view serving_engine_name(ServingEngine e) noexcept;       ///< "vLLM", ...
std::string_view serving_step_kind_name(ServingStepKind k) noexcept;  ///< "prefill", ...
std::string_view comm_kernel_name(CommKernel c) noexcept;  ///< "symmetric-memory all-reduce"

/// A host range that is one iteration of a serving engine.
struct ServingStep {
    bool known = false;
    ServingEngine engine = ServingEngine::kNone;
    ServingStepKind kind = ServingStepKind::kUnknown;
    bool numbered = false;  ///< the range carries the engine's iteration number
    std::int64_t number = 0;
};

/// The range names engines give one iteration each (see the table in the .cpp). A range named
/// only "prefill" or "decode" is not one: a program may wrap a whole generation loop in it.
ServingStep serving_step(std::string_view range_name) noexcept;

/// The engine whose own kernel library a kernel comes from ("vllm::" kernels), kNone when its
/// name says nothing. Weaker than a step range: one engine may run another's kernels.
ServingEngine engine_of_kernel(std::string_view kernel_name) noexcept;

/// What a kernel's name says it does for communication (case-insensitive).
CommKernel comm_kernel(std::string_view kernel_name) noexcept;

/// What a trace showed about serving, gathered while its events flow (bounded: counters and
/// one quoted name).
struct ServingSeen {
    ServingEngine engine = ServingEngine::kNone;
    bool engine_from_steps = false;  ///< else from its kernels' library
    std::array<std::uint64_t, kServingStepKinds> steps_by_kind{};
    std::uint64_t graph_launches = 0;  ///< cudaGraphLaunch calls (eager engines make none)
    std::string step_example;          ///< the first engine-step range's name
    std::string engine_kernel_example;
    std::array<std::string, kCommKernels> comm_examples;  ///< a kernel of each kind seen

    [[nodiscard]] std::uint64_t steps() const noexcept;
    void note_step(const ServingStep& s, std::string_view name);
    void note_kernel(std::string_view kernel_name, CommKernel comm);
    /// "1 vLLM engine iteration (execute_context_…) read as steps: 1 prefill"; empty without.
    [[nodiscard]] std::string steps_description() const;
    /// "symmetric-memory all-reduce (multimem_all_reduce_kernel…), NCCL (…)"; empty without.
    [[nodiscard]] std::string comm_description() const;
};

}  // namespace gpudiag::detail
