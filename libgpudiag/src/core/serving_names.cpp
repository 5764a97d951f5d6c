// SPDX-License-Identifier: Apache-2.0
#include "core/serving_names.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace gpudiag::detail {
namespace {

constexpr std::string_view kEngineNames[kServingEngines] = {
    "no engine", "vLLM", "SGLang", "TensorRT-LLM", "Hugging Face generate"};
constexpr std::string_view kStepKindNames[kServingStepKinds] = {"engine step", "prefill", "decode",
                                                                "mixed prefill+decode"};
constexpr std::string_view kCommNames[kCommKernels] = {"compute",
                                                       "NCCL",
                                                       "custom all-reduce",
                                                       "symmetric-memory all-reduce",
                                                       "fused all-reduce + norm",
                                                       "expert dispatch/combine (all-to-all)"};

// Kernel name fragments (lower case) and what they say, first match wins.
struct CommPattern {
    std::string_view fragment;
    CommKernel kind;
};
constexpr CommPattern kCommPatterns[] = {
    {"nccl", CommKernel::kNccl},  // ncclDevKernel_AllReduce_RING_LL, ncclKernel_...
    {"rccl", CommKernel::kNccl},
    {"mscclpp", CommKernel::kNccl},
    {"cross_device_reduce", CommKernel::kCustomAllReduce},  // vLLM / SGLang custom all-reduce
    {"custom_all_reduce", CommKernel::kCustomAllReduce},
    {"quickreduce", CommKernel::kCustomAllReduce},       // vLLM's QuickReduce on ROCm
    {"oneshotallreduce", CommKernel::kCustomAllReduce},  // TensorRT-LLM's custom all-reduce
    {"twoshotallreduce", CommKernel::kCustomAllReduce},
    {"multimem_", CommKernel::kSymmetricMemory},  // multimem_all_reduce_kernel (NVLS)
    {"one_shot_all_reduce", CommKernel::kSymmetricMemory},
    {"two_shot_all_reduce", CommKernel::kSymmetricMemory},
    {"symmetric_memory", CommKernel::kSymmetricMemory},
    {"allreduce_fusion", CommKernel::kFusedAllReduce},  // FlashInfer / TensorRT-LLM lamport
    {"deep_ep::", CommKernel::kExpertAllToAll},         // deep_ep::intranode::dispatch ...
    {"pplx::", CommKernel::kExpertAllToAll},
    {"a2a_dispatch", CommKernel::kExpertAllToAll},
    {"a2a_combine", CommKernel::kExpertAllToAll},
};

bool starts_with(std::string_view s, std::string_view p) noexcept {
    return s.size() >= p.size() && s.compare(0, p.size(), p) == 0;
}

bool contains_ci(std::string_view text, std::string_view lower_needle) noexcept {
    auto it = std::search(
        text.begin(), text.end(), lower_needle.begin(), lower_needle.end(),
        [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; });
    return it != text.end();
}

// Digits at `at`, within int64; advances `at` past them.
bool read_number(std::string_view s, std::size_t& at, std::int64_t& n) noexcept {
    const std::size_t first = at;
    n = 0;
    while (at < s.size() && s[at] >= '0' && s[at] <= '9' && at - first < 18) {
        n = n * 10 + (s[at] - '0');
        ++at;
    }
    return at > first;
}

// The number that ends right before `suffix` (" ctx reqs").
bool number_before(std::string_view s, std::string_view suffix, std::int64_t& n) noexcept {
    const std::size_t end = s.find(suffix);
    if (end == std::string_view::npos) return false;
    std::size_t start = end;
    while (start > 0 && s[start - 1] >= '0' && s[start - 1] <= '9') --start;
    return start < end && read_number(s, start, n) && start == end;
}

ServingStepKind kind_of(std::int64_t prefill_requests, std::int64_t decode_requests) noexcept {
    if (prefill_requests > 0 && decode_requests > 0) return ServingStepKind::kMixed;
    if (prefill_requests > 0) return ServingStepKind::kPrefill;
    if (decode_requests > 0) return ServingStepKind::kDecode;
    return ServingStepKind::kUnknown;
}

// vLLM v1's GPU model runner, one per execute_model:
// "execute_context_{prefill requests}({tokens})_generation_{decode requests}({tokens})".
bool vllm_step(std::string_view rest, ServingStep& s) noexcept {
    std::size_t at = 0;
    std::int64_t context = 0;
    std::int64_t generation = 0;
    if (!read_number(rest, at, context)) return false;
    const std::size_t g = rest.find("_generation_", at);
    if (g == std::string_view::npos) return false;
    at = g + 12;
    if (!read_number(rest, at, generation)) return false;
    s.kind = kind_of(context, generation);
    return true;
}

// TensorRT-LLM's PyTorch executor:
// "[Executor] _forward_step {iteration}: {n} ctx reqs, {m} gen reqs".
bool trtllm_step(std::string_view rest, ServingStep& s) noexcept {
    std::size_t at = 0;
    std::int64_t context = 0;
    std::int64_t generation = 0;
    if (!read_number(rest, at, s.number)) return false;
    s.numbered = true;
    if (number_before(rest, " ctx reqs", context) && number_before(rest, " gen reqs", generation))
        s.kind = kind_of(context, generation);
    return true;
}

// SGLang's scheduler ("scheduler.run_batch", a record_function under torch.profiler, NVTX with
// SGLANG_ENABLE_NVTX_SCHEDULER): one batch, prefill (extend) or decode, the name does not say.
bool sglang_step(std::string_view rest, ServingStep& /*s*/) noexcept {
    return rest.empty();
}

struct StepPattern {
    std::string_view prefix;
    ServingEngine engine;
    bool (*parse)(std::string_view rest, ServingStep& s) noexcept;
};
constexpr StepPattern kStepPatterns[] = {
    {"execute_context_", ServingEngine::kVllm, vllm_step},
    {"[Executor] _forward_step ", ServingEngine::kTensorRtLlm, trtllm_step},
    {"_forward_step ", ServingEngine::kTensorRtLlm, trtllm_step},
    {"scheduler.run_batch", ServingEngine::kSglang, sglang_step},
};

template <std::size_t N>
std::string_view name_in(const std::string_view (&names)[N], std::size_t i) noexcept {
    return i < N ? names[i] : std::string_view("?");
}

std::string shortened(std::string_view name) {
    constexpr std::size_t kQuoted = 60;
    return name.size() <= kQuoted ? std::string(name) : std::string(name.substr(0, kQuoted)) + "…";
}

}  // namespace

std::string_view serving_engine_name(ServingEngine e) noexcept {
    return name_in(kEngineNames, static_cast<std::size_t>(e));
}
std::string_view serving_step_kind_name(ServingStepKind k) noexcept {
    return name_in(kStepKindNames, static_cast<std::size_t>(k));
}
std::string_view comm_kernel_name(CommKernel c) noexcept {
    return name_in(kCommNames, static_cast<std::size_t>(c));
}

ServingStep serving_step(std::string_view range_name) noexcept {
    for (const StepPattern& p : kStepPatterns) {
        if (!starts_with(range_name, p.prefix)) continue;
        ServingStep s;
        if (!p.parse(range_name.substr(p.prefix.size()), s)) return ServingStep{};
        s.known = true;
        s.engine = p.engine;
        return s;
    }
    return ServingStep{};
}

ServingEngine engine_of_kernel(std::string_view kernel_name) noexcept {
    // vLLM's csrc kernels live in namespace vllm (vllm::fused_add_rms_norm_kernel ...).
    return kernel_name.find("vllm::") != std::string_view::npos ? ServingEngine::kVllm
                                                                : ServingEngine::kNone;
}

CommKernel comm_kernel(std::string_view kernel_name) noexcept {
    for (const CommPattern& p : kCommPatterns) {
        if (contains_ci(kernel_name, p.fragment)) return p.kind;
    }
    return CommKernel::kNone;
}

std::uint64_t ServingSeen::steps() const noexcept {
    std::uint64_t n = 0;
    for (std::uint64_t k : steps_by_kind) n += k;
    return n;
}

void ServingSeen::note_step(const ServingStep& s, std::string_view name) {
    if (!engine_from_steps) {
        engine = s.engine;
        engine_from_steps = true;
        step_example = shortened(name);
    }
    ++steps_by_kind[static_cast<std::size_t>(s.kind)];
}

void ServingSeen::note_kernel(std::string_view kernel_name, CommKernel comm) {
    auto& example = comm_examples[static_cast<std::size_t>(comm)];
    if (comm != CommKernel::kNone && example.empty()) example = shortened(kernel_name);
    if (engine != ServingEngine::kNone) return;
    engine = engine_of_kernel(kernel_name);
    if (engine != ServingEngine::kNone) engine_kernel_example = shortened(kernel_name);
}

std::string ServingSeen::steps_description() const {
    const std::uint64_t n = steps();
    if (n == 0) return {};
    std::string kinds;
    for (std::size_t k = 0; k < kServingStepKinds; ++k) {
        if (steps_by_kind[k] == 0) continue;
        kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", steps_by_kind[k],
                             serving_step_kind_name(static_cast<ServingStepKind>(k)));
    }
    return fmt::format("{} {} engine {} (\"{}\") read as steps: {}", n, serving_engine_name(engine),
                       n == 1 ? "iteration" : "iterations", step_example, kinds);
}

std::string ServingSeen::comm_description() const {
    std::string out;
    for (std::size_t c = 1; c < kCommKernels; ++c) {
        if (comm_examples[c].empty()) continue;
        out += (out.empty() ? "" : "; ") +
               std::string(comm_kernel_name(static_cast<CommKernel>(c))) + " (" + comm_examples[c] +
               ")";
    }
    return out;
}

}  // namespace gpudiag::detail
