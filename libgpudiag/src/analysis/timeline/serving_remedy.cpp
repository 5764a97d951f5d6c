// SPDX-License-Identifier: Apache-2.0
#include "analysis/timeline/serving_remedy.hpp"

#include <fmt/format.h>

#include <string>

namespace gpudiag::detail {
namespace {

// Each engine's CUDA-graph remedy: `eager` when no graph was launched at all, `partial` when
// graphs ran for some batches only.
struct EngineRemedy {
    ServingEngine engine;
    const char* eager;
    const char* partial;
};
constexpr EngineRemedy kRemedies[] = {
    {ServingEngine::kVllm,
     "vLLM ran eager: drop --enforce-eager (LLM(..., enforce_eager=False)) so vLLM captures the "
     "forward in CUDA graphs, one launch per step instead of one per kernel; compilation_config "
     "sets how (cudagraph_mode, e.g. FULL_AND_PIECEWISE) and for which batch sizes "
     "(cudagraph_capture_sizes / max_cudagraph_capture_size: cover the batch sizes you serve).",
     "vLLM replays CUDA graphs only for the batch sizes it captured: widen compilation_config's "
     "cudagraph_capture_sizes / max_cudagraph_capture_size to the batch sizes you serve, and use "
     "cudagraph_mode=FULL_AND_PIECEWISE so attention is captured too."},
    {ServingEngine::kSglang,
     "SGLang ran eager: remove --disable-cuda-graph so SGLang replays its forward as CUDA graphs, "
     "and set --cuda-graph-max-bs (cuda_graph_max_bs) to the running batch size; "
     "--enable-torch-compile also fuses small batches' kernels.",
     "SGLang replays CUDA graphs only up to --cuda-graph-max-bs (cuda_graph_max_bs): raise it to "
     "the running batch size (batches above it run eager)."},
    {ServingEngine::kTensorRtLlm,
     "TensorRT-LLM ran eager: enable CUDA graphs with cuda_graph_config "
     "(CudaGraphConfig(max_batch_size=..., enable_padding=True), in the LLM API or "
     "extra_llm_api_options) so each iteration is one graph launch.",
     "TensorRT-LLM replays CUDA graphs only for the batch sizes in cuda_graph_config: raise "
     "max_batch_size (or list batch_sizes) and set enable_padding=True so other sizes use the "
     "next graph up."},
    {ServingEngine::kHfGenerate,
     "generate() ran eager: a static KV cache (generate(..., cache_implementation=\"static\")) "
     "with torch.compile(model.forward, mode=\"reduce-overhead\") captures the decode step in a "
     "CUDA graph.",
     "Keep the KV cache static (cache_implementation=\"static\") so the compiled decode step is "
     "replayed from its CUDA graph instead of recompiled or run eager."},
};

const EngineRemedy* remedy_of(ServingEngine e) {
    for (const EngineRemedy& r : kRemedies) {
        if (r.engine == e) return &r;
    }
    return nullptr;
}

}  // namespace

void add_serving_remedy(const TimelineSummary& s, Finding& f) {
    const ServingSeen& seen = s.serving;
    const EngineRemedy* remedy = remedy_of(seen.engine);
    if (remedy == nullptr) return;
    const std::string engine(serving_engine_name(seen.engine));
    f.evidence.push_back(seen.engine_from_steps
                             ? fmt::format("Serving engine: {}, from its iteration ranges (\"{}\")",
                                           engine, seen.step_example)
                             : fmt::format("Serving engine: {}, from its kernels ({})", engine,
                                           seen.engine_kernel_example));
    // Launch calls seen with no graph among them: the engine ran eager. Without launch calls in
    // the trace the trace cannot say, and the advice names both cases.
    const bool eager = seen.graph_launches == 0 && s.launch_calls > 0;
    if (eager) {
        f.evidence.push_back(fmt::format(
            "No CUDA graph was launched ({} kernel launch calls, no cudaGraphLaunch): every "
            "kernel of the forward was launched from the host one at a time",
            s.launch_calls));
    } else if (seen.graph_launches > 0) {
        f.evidence.push_back(fmt::format(
            "{} CUDA graph launches, {} other launch calls", seen.graph_launches,
            s.launch_calls > seen.graph_launches ? s.launch_calls - seen.graph_launches : 0));
    }
    f.advice.insert(f.advice.begin(), seen.graph_launches > 0 ? remedy->partial : remedy->eager);
}

}  // namespace gpudiag::detail
