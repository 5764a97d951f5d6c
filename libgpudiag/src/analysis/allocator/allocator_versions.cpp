// SPDX-License-Identifier: Apache-2.0
#include "analysis/allocator/allocator_versions.hpp"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <charconv>

namespace gpudiag::detail {
namespace {

// Each row: what changed, since which release, and where it is stated. Rows the model follows
// for every release it covers say so; rows in no release yet are switches kept off.
constexpr std::array<VersionedRule, 7> kRules{{
    {"expandable_ignores_max_split", "2.3",
     "pytorch/pytorch PR #120022 (c10/cuda/CUDACachingAllocator.cpp, merged 2024-02-16)",
     "should_split() and the release of oversize cached blocks skip expandable segments, so "
     "max_split_size no longer trips the allocator's assert with expandable segments; the model "
     "follows it for every release it covers"},
    {"expandable_oversize_reuse", "",
     "pytorch/pytorch PR #193400 (c10/cuda/CUDACachingAllocator.cpp get_free_block(), open "
     "since 2026-08-13; issue #123548)",
     "get_free_block() would stop applying max_split_size's oversize rules to blocks inside "
     "expandable segments; up to 2.15 they apply, and reserved memory can grow with both "
     "settings on: the model applies them (AllocatorRules::oversize_rules_skip_expandable off)"},
    {"expandable_reserve_per_stream", "2.15",
     "pytorch/pytorch PR #192269 (c10/cuda/CUDACachingAllocator.cpp, reviewed 2026-08-13, after "
     "the 2.14 cut; torch 2.15.0's c10_cuda names expandable_segments_reserve)",
     "expandable_segments_reserve(_by_class) sizes each stream's virtual range; only virtual "
     "address space moves unless a reserve is set below an allocation: not modelled, the "
     "settings are refused"},
    {"expandable_under_cuda_graphs", "2.15",
     "pytorch/pytorch PR #194767 (\"Re-enable expandable segments for CUDA Graph\", merged "
     "2026-08-26, after the 2.14 cut)",
     "before 2.15 expandable segments were turned off for graph capture, so graph pools keep "
     "ordinary segments; private pools are replayed in the default pool either way"},
    {"host_snapshot", "2.13",
     "pytorch/pytorch PR #182407 (torch/csrc/cuda/Module.cpp, merged 2026-05-05)",
     "snapshots carry host_segments and host_traces (pinned host memory): read as host "
     "memory, never device memory"},
    {"trace_overflow_flag", "",
     "pytorch/pytorch PR #179276 (closed 2026-04; torch 2.15.0's _snapshot() lacks the keys)",
     "trace_alloc_overflowed / trace_alloc_max_entries: read where present, the history is "
     "then complete only from its first entry"},
    {"component_accounting", "",
     "pytorch/pytorch PR #182387 (closed; component_bytes.* are memory_stats() keys, not "
     "snapshot keys, and torch 2.15.0 has neither)",
     "no snapshot key to read; gpudiag's own categories (parameters, gradients, optimizer "
     "state, activations) come from the allocation stacks"},
}};

std::string version_text(TorchVersion v) {
    return fmt::format("{}.{}", v.major, v.minor);
}

}  // namespace

TorchVersion parse_torch_version(std::string_view text) {
    if (!text.empty() && (text.front() == 'v' || text.front() == 'V')) text.remove_prefix(1);
    TorchVersion v;
    const char* end = text.data() + text.size();
    auto [p1, e1] = std::from_chars(text.data(), end, v.major);
    if (e1 != std::errc() || p1 == end || *p1 != '.') return TorchVersion{};
    auto [p2, e2] = std::from_chars(p1 + 1, end, v.minor);
    if (e2 != std::errc() || v.major <= 0) return TorchVersion{};
    v.known = true;
    return v;
}

std::span<const VersionedRule> versioned_rules() {
    return kRules;
}

AllocatorRules rules_for(TorchVersion /*v*/) {
    // Every placement change of 2.3-2.15 the model knows holds for all of them (PR #120022,
    // 2.3); PR #193400 is in no release, so its switch stays off whatever the version.
    return AllocatorRules{};
}

ModelledVersion select_version(const SourceInfo& info, const std::string& given) {
    ModelledVersion m;
    if (!given.empty()) {
        m.recorded = parse_torch_version(given);
        m.origin = "given";
        if (!m.recorded.known) m.note = "the version given (" + given + ") is not a torch version";
    } else if (const std::string fw = info.property("stack.framework");
               fw == "torch" || fw == "pytorch" || fw == "PyTorch") {
        m.recorded = parse_torch_version(info.property("stack.framework_version"));
        m.origin = "the recording";
    }
    if (!m.recorded.known) {
        m.modelled = kNewestModelled;
        m.origin = "assumed";
        if (m.note.empty()) {
            const TorchVersion floor =
                parse_torch_version(info.property("snapshot_torch_at_least"));
            m.note = floor.known ? fmt::format(
                                       "the input does not record its torch version (its keys are "
                                       "those of torch {} or later); {} was assumed",
                                       version_text(floor), version_text(kNewestModelled))
                                 : fmt::format(
                                       "the input does not record its torch version; {} was "
                                       "assumed",
                                       version_text(kNewestModelled));
        }
    } else if (!at_least(m.recorded, kOldestModelled.major, kOldestModelled.minor)) {
        m.modelled = kOldestModelled;
        m.note = fmt::format("torch {} is older than the model covers; {}'s allocator was followed",
                             version_text(m.recorded), version_text(kOldestModelled));
    } else if (at_least(m.recorded, kNewestModelled.major, kNewestModelled.minor + 1)) {
        m.modelled = kNewestModelled;
        m.note = fmt::format("torch {} is newer than the model covers; {}'s allocator was followed",
                             version_text(m.recorded), version_text(kNewestModelled));
    } else {
        m.modelled = m.recorded;
    }
    m.text = version_text(m.modelled);
    m.rules = rules_for(m.modelled);
    return m;
}

namespace {

void expandable_cautions(const ProgramFacts& facts, const ModelledVersion& version,
                         std::vector<WhatIfCaution>& out) {
    const std::string change = "expandable_segments:True";
    if (facts.ipc_handle_calls > 0 || !facts.ipc_site.empty()) {
        const std::string seen =
            facts.ipc_handle_calls > 0
                ? fmt::format("{} cudaIpcGetMemHandle calls", facts.ipc_handle_calls)
                : "buffers allocated at " + facts.ipc_site +
                      ", which vLLM's custom all-reduce "
                      "exports that way";
        out.push_back(WhatIfCaution{
            change, true,
            "the program exports device memory with legacy CUDA IPC (" + seen +
                "), which cannot export the driver-mapped memory of expandable segments: the "
                "call fails (vLLM's custom all-reduce crashes at start-up); keep them off "
                "while such buffers are allocated",
            "vllm-project/vllm PR #43923 (custom all-reduce with expandable_segments:True); "
            "pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp in torch 2.15.0 (\"Tensors "
            "allocated with expandable_segments:True cannot be shared between processes\"); "
            "pytorch issue #130330"});
    }
    // Stream captures are CUDA graphs for certain; a snapshot's private pools may also be
    // torch.cuda.MemPools, so they make it a risk to check rather than a refusal.
    const bool captures = facts.graph_captures > 0;
    if ((captures || facts.private_pools > 0) && !at_least(version.modelled, 2, 15)) {
        out.push_back(WhatIfCaution{
            change, captures,
            fmt::format("{}; before torch 2.15 the allocator turned expandable segments off for "
                        "CUDA graph capture, so graph pools keep ordinary segments and gain "
                        "nothing, and graph capture with them on has hung (torchtitan #3306)",
                        captures ? fmt::format("the program captures CUDA graphs ({} stream "
                                               "captures)",
                                               facts.graph_captures)
                                 : fmt::format("the program allocates in {} private pools (CUDA "
                                               "graphs, or torch.cuda.MemPool)",
                                               facts.private_pools)),
            "pytorch/pytorch PR #194767 (re-enabled in 2.15, merged 2026-08-26); "
            "pytorch/torchtitan issue #3306"});
    }
    if (facts.vmm_not_supported > 0 || facts.expandable_ignored) {
        out.push_back(WhatIfCaution{
            change, true,
            facts.expandable_ignored
                ? std::string("the recorded allocator was asked for expandable segments and "
                              "runs without them: this torch build has no driver API for them "
                              "(Windows, some ROCm builds), so the setting is ignored here")
                : fmt::format("the driver refused its virtual memory management calls ({} "
                              "cuMem* calls returned CUDA_ERROR_NOT_SUPPORTED): expandable "
                              "segments cannot map memory on this platform",
                              facts.vmm_not_supported),
            "pytorch/pytorch c10/cuda/CUDAAllocatorConfig.h (without "
            "PYTORCH_C10_DRIVER_API_SUPPORTED: \"expandable_segments not supported on this "
            "platform\", and the setting reads false)"});
    }
}

}  // namespace

std::vector<WhatIfCaution> cautions_for(const AllocatorSettings& settings,
                                        const AllocatorSettings& base, const ProgramFacts& facts,
                                        const ModelledVersion& version) {
    std::vector<WhatIfCaution> out;
    if (settings.expandable_segments && !base.expandable_segments)
        expandable_cautions(facts, version, out);
    if (settings.expandable_segments && settings.max_split_size != kNoSplitLimit &&
        !version.rules.oversize_rules_skip_expandable &&
        (settings.max_split_size != base.max_split_size ||
         settings.expandable_segments != base.expandable_segments)) {
        out.push_back(WhatIfCaution{
            "expandable_segments:True with max_split_size_mb", false,
            fmt::format("in torch {} max_split_size still keeps free blocks of expandable "
                        "segments from serving smaller requests, so reserved memory can keep "
                        "growing (one report: 220 to 14,060 MiB); the replay follows that rule, "
                        "and leaving max_split_size_mb unset avoids it",
                        version.text),
            "pytorch/pytorch issue #123548; PR #193400 (open) in "
            "c10/cuda/CUDACachingAllocator.cpp get_free_block()"});
    }
    if (settings.garbage_collection_threshold > 0 &&
        settings.garbage_collection_threshold != base.garbage_collection_threshold &&
        settings.memory_fraction >= 1.0) {
        out.push_back(WhatIfCaution{
            "garbage_collection_threshold", true,
            "it acts only under a per-process memory fraction below 1 "
            "(torch.cuda.set_per_process_memory_fraction): without one the allocator has no "
            "limit to compare with and never collects",
            "pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp (garbage collection runs only "
            "when set_fraction is set and the threshold is above 0)"});
    }
    return out;
}

std::string expandable_unsupported_reason(const ProgramFacts& facts,
                                          const ModelledVersion& version) {
    AllocatorSettings on;
    on.expandable_segments = true;
    for (const WhatIfCaution& c : cautions_for(on, AllocatorSettings{}, facts, version)) {
        if (c.unsupported) return c.reason + " [" + c.source + "]";
    }
    return {};
}

}  // namespace gpudiag::detail
