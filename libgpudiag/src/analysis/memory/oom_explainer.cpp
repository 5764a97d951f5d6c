// SPDX-License-Identifier: Apache-2.0
// The OOM explainer. The decision follows how torch's caching allocator serves a request
// (pytorch-integration.md §2.2-2.3): a cached free block of the rounded size on the same stream
// serves it; otherwise it maps a new segment, and when the device is short it first releases its
// wholly free cached segments and retries; only then does it fail. So, for a request that failed:
//   a free block ≥ the rounded request existed          → another stream or pool asked
//   wholly free segments (+ device free) ≥ new segment  → the cache held the room: a request from
//                                                          outside the cache (bloated cache)
//   free in total (stranded + releasable + device) ≥ r  → enough, but not in one block
//   ... + memory of other processes / outside ≥ r       → that memory is the difference
//   otherwise                                           → the working set does not fit
// Releasable segments decide first because the allocator itself releases them: whether the
// device's free memory is known does not matter for that verdict.
#include "analysis/memory/oom_explainer.hpp"

#include "support/format.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

namespace gpudiag::detail {
namespace {

std::string bytes(std::uint64_t b) {
    return format_bytes(static_cast<double>(b));
}

// Sites of live blocks in segments that also hold free space, with the free bytes they pin.
std::vector<std::pair<std::string, std::uint64_t>> pinning_sites(const MemoryLedger& ledger,
                                                                 std::uint16_t device,
                                                                 const DeviceLayout& layout,
                                                                 const StringTable* strings) {
    std::vector<LedgerBlock> blocks = ledger.blocks(device);
    std::sort(blocks.begin(), blocks.end(),
              [](const LedgerBlock& a, const LedgerBlock& b) { return a.address < b.address; });
    std::unordered_map<StringId, std::uint64_t> pinned;
    std::size_t bi = 0;
    for (const SegmentLayout& s : layout.segments) {
        std::uint64_t end = s.segment.address + s.segment.size;
        while (bi < blocks.size() && blocks[bi].address < s.segment.address) ++bi;
        std::vector<StringId> sites;
        for (std::size_t k = bi; k < blocks.size() && blocks[k].address < end; ++k) {
            if (std::find(sites.begin(), sites.end(), blocks[k].site) == sites.end()) {
                sites.push_back(blocks[k].site);
            }
        }
        if (s.free_bytes == 0 || sites.empty()) continue;
        for (StringId site : sites) pinned[site] += s.free_bytes;
    }
    std::vector<std::pair<std::string, std::uint64_t>> out;
    for (const auto& [site, free] : pinned) {
        std::string name = strings != nullptr && site != kNoString
                               ? std::string(strings->lookup(site))
                               : std::string();
        out.emplace_back(name.empty() ? "<unknown site>" : name, free);
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
        return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
    if (out.size() > 5) out.resize(5);
    return out;
}

std::string site_list(const std::vector<std::pair<std::string, std::uint64_t>>& sites) {
    std::string out;
    for (std::size_t i = 0; i < sites.size() && i < 3; ++i) {
        if (i > 0) out += "; ";
        out += sites[i].first + " (pins " + bytes(sites[i].second) + ")";
    }
    return out;
}

// The figures every explanation states, in one sentence.
std::string state_text(const AllocatorOomState& s) {
    std::string out = "reserved " + bytes(s.reserved_bytes) + ", allocated " +
                      bytes(s.allocated_bytes) + ", free in partly used segments " +
                      bytes(s.inactive_split_bytes);
    if (s.releasable_known) out += ", in wholly free segments " + bytes(s.releasable_bytes);
    if (s.largest_free_block_known)
        out += ", largest free block " + bytes(s.largest_free_block_bytes);
    if (s.device_free_known) out += ", free on the device " + bytes(s.device_free_bytes);
    if (s.outside_framework_bytes > 0)
        out += ", outside the framework " + bytes(s.outside_framework_bytes);
    if (s.other_processes_bytes > 0) out += ", other processes " + bytes(s.other_processes_bytes);
    return out;
}

void bloated_cache(const AllocatorOomState& s, const std::string& head, OomExplanation& x) {
    x.cause = OomCause::kBloatedCache;
    x.summary = head + "would not fail inside the framework's allocator: it releases the " +
                bytes(s.releasable_bytes) +
                " held in wholly free cached segments and retries, "
                "and that covers the " +
                bytes(x.segment_bytes) + " segment the request needs (" + state_text(s) +
                "). A request that fails here comes from outside that cache "
                "(another library's cudaMalloc, another allocator or process), which cannot use "
                "the cached memory.";
    x.evidence.push_back(
        "wholly free cached segments " + bytes(s.releasable_bytes) +
        (s.device_free_known ? " + free on the device " + bytes(s.device_free_bytes) : "") +
        " >= new segment " + bytes(x.segment_bytes));
    x.advice.push_back(
        "Call torch.cuda.empty_cache() before the code that needs the memory, so "
        "the " +
        bytes(s.releasable_bytes) +
        " of cached free segments go back to "
        "the driver.");
    x.advice.push_back(
        "Bound the cache: torch.cuda.set_per_process_memory_fraction(), with "
        "PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.8 (the threshold acts only "
        "under a memory fraction below 1).");
}

void fragmentation(const AllocatorOomState& s, const std::string& head, std::uint64_t free_total,
                   const std::vector<std::pair<std::string, std::uint64_t>>& pins,
                   OomExplanation& x) {
    x.cause = OomCause::kFragmentation;
    x.summary = head + "fails from fragmentation: " + bytes(free_total) +
                " is free in total but no free block is as large as " + bytes(x.rounded_bytes) +
                " and the device cannot map a new " + bytes(x.segment_bytes) + " segment (" +
                state_text(s) + "). " + bytes(s.inactive_split_bytes) +
                " of the free space sits in partly used segments, which cannot be released.";
    x.evidence.push_back("free in total " + bytes(free_total) + " >= request " +
                         bytes(x.rounded_bytes));
    x.evidence.push_back(s.largest_free_block_known
                             ? "largest free block " + bytes(s.largest_free_block_bytes) +
                                   " < request"
                             : "no cached block served the request (the allocator failed)");
    if (!s.expandable_segments) {
        x.advice.push_back(
            "Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (PYTORCH_ALLOC_CONF on torch >= "
            "2.9): free pages are then unmapped and remapped into one growing segment per "
            "stream, so free space no longer has to be contiguous within a segment.");
        x.advice.push_back(
            "Or set max_split_size_mb so large cached blocks are not split for "
            "small requests.");
        if (!pins.empty()) {
            x.advice.push_back("The partly used segments are held by: " + site_list(pins) +
                               "; allocating these long-lived tensors first (or freeing them "
                               "earlier) keeps large free blocks whole.");
        }
        return;
    }
    x.advice.push_back(
        "Expandable segments are already on, so segment boundaries are not the "
        "cause: live blocks pin the free pages between them" +
        (pins.empty() ? std::string(".") : " (" + site_list(pins) + ").") +
        " Free those tensors earlier, or allocate long-lived tensors before "
        "transient ones.");
}

void held_elsewhere(const AllocatorOomState& s, const std::string& head, bool other_process,
                    OomExplanation& x) {
    if (other_process) {
        x.cause = OomCause::kOtherProcess;
        x.summary = head + "would fit without the " + bytes(s.other_processes_bytes) +
                    " other processes hold on the device (" + state_text(s) + ").";
        x.evidence.push_back("other processes hold " + bytes(s.other_processes_bytes));
        x.advice.push_back(
            "Another process shares this GPU: find it (nvidia-smi, or gpudiag's "
            "foreign_process_memory finding) and move it, or give this program a "
            "GPU of its own.");
        return;
    }
    x.cause = OomCause::kOutsideFramework;
    x.summary = head + "would fit if the " + bytes(s.outside_framework_bytes) +
                " of device memory held outside the framework's allocator were free (" +
                state_text(s) + ").";
    x.evidence.push_back("outside the framework " + bytes(s.outside_framework_bytes));
    x.advice.push_back(
        "Find and shrink the memory held outside the framework: communication "
        "buffers (NCCL_BUFFSIZE), library workspaces (CUBLAS_WORKSPACE_CONFIG), "
        "other allocators in the process.");
}

using Pins = std::vector<std::pair<std::string, std::uint64_t>>;

// The explanation's figures, copied from the state.
OomExplanation figures_of(const AllocatorOomState& s, const Pins& pins) {
    OomExplanation x;
    x.pinning_sites = pins;
    x.device = s.device;
    x.requested_bytes = s.requested_bytes;
    x.rounded_bytes = s.requested_bytes != 0 ? torch_round_size(s.requested_bytes) : 0;
    x.segment_bytes = s.segment_bytes != 0   ? s.segment_bytes
                      : x.rounded_bytes != 0 ? torch_segment_size(x.rounded_bytes)
                                             : 0;
    x.capacity_bytes = s.capacity_bytes;
    x.device_free_known = s.device_free_known;
    x.device_free_bytes = s.device_free_bytes;
    x.reserved_bytes = s.reserved_bytes;
    x.allocated_bytes = s.allocated_bytes;
    x.free_in_segments_bytes = s.inactive_split_bytes + s.releasable_bytes;
    x.largest_free_block_bytes = s.largest_free_block_bytes;
    x.releasable_bytes = s.releasable_bytes;
    x.inactive_split_bytes = s.inactive_split_bytes;
    x.pending_free_bytes = s.pending_free_bytes;
    x.outside_framework_bytes = s.outside_framework_bytes;
    x.other_processes_bytes = s.other_processes_bytes;
    x.expandable_segments = s.expandable_segments;
    return x;
}

void size_unknown(const AllocatorOomState& s, const std::string& head, OomExplanation& x) {
    x.summary = head + "of unknown size failed (" + state_text(s) +
                "). The size decides between "
                "fragmentation and a full device, so the cause is left open.";
    x.evidence.push_back("request size not recorded");
    x.advice.push_back(
        "Record allocation call sites (SessionOptions::deep) or the framework's OOM "
        "event: either carries the request size.");
}

void free_block_available(const AllocatorOomState& s, const std::string& head, OomExplanation& x) {
    x.cause = OomCause::kFreeBlockAvailable;
    x.summary = head + "would fit in a free block of " + bytes(s.largest_free_block_bytes) +
                " that the books show (" + state_text(s) +
                "). The allocator reuses a cached block only for requests on the same stream and "
                "pool, so the request likely came from another stream or a private pool (CUDA "
                "graphs, MemPool), or memory was freed after the failure.";
    x.evidence.push_back("largest free block " + bytes(s.largest_free_block_bytes) +
                         " >= request " + bytes(x.rounded_bytes));
    x.advice.push_back(
        "Check which stream allocated: blocks freed on one stream are not reused by "
        "another until synchronised; avoid record_stream on long-lived tensors.");
}

void device_had_room(const AllocatorOomState& s, const std::string& head, OomExplanation& x) {
    x.summary = head + "had room: the device had " + bytes(s.device_free_bytes) +
                " free, enough for the " + bytes(x.segment_bytes) + " segment it needs (" +
                state_text(s) +
                "). The state "
                "recorded is not the failing one (memory was freed after the failure), or a "
                "per-process memory fraction capped the allocator.";
    x.evidence.push_back("free on the device " + bytes(s.device_free_bytes) + " >= new segment " +
                         bytes(x.segment_bytes));
    x.advice.push_back(
        "Check torch.cuda.set_per_process_memory_fraction() and dump the snapshot at "
        "the failure (gpudiag's oom_snapshot option).");
}

void too_little_memory(const AllocatorOomState& s, const std::string& head,
                       std::uint64_t free_total, OomExplanation& x) {
    x.cause = OomCause::kTooLittleMemory;
    x.summary = head + "does not fit: live data holds " + bytes(s.allocated_bytes) + " and only " +
                bytes(free_total) + " is free in total, so no allocator setting would make room (" +
                state_text(s) + ").";
    x.evidence.push_back("free in total " + bytes(free_total) + " < request " +
                         bytes(x.rounded_bytes));
    x.advice.push_back(
        "Shrink the working set: a smaller batch or sequence length, activation "
        "checkpointing, bf16/fp16 weights and activations, or sharding parameters "
        "and optimizer state (FSDP/ZeRO).");
    if (s.expandable_segments) {
        x.advice.push_back("Expandable segments are already on; fragmentation is not the cause.");
    }
}

void left_open(const AllocatorOomState& s, const std::string& head, std::uint64_t free_total,
               OomExplanation& x) {
    x.summary = head + "cannot be judged fully: the free space in the framework's segments (" +
                bytes(free_total) +
                ") cannot hold it, and the device's free memory and capacity "
                "are unknown (" +
                state_text(s) + ").";
    x.evidence.push_back("free in segments " + bytes(free_total) + " < request " +
                         bytes(x.rounded_bytes) + "; device free memory unknown");
    x.advice.push_back(
        "Record the device capacity or the OOM event (torch records free device "
        "memory in the trace's oom entry) to get a full explanation.");
}

// The decision, in the order of the file comment.
OomExplanation decide(const AllocatorOomState& s, const Pins& pins) {
    OomExplanation x = figures_of(s, pins);
    const std::uint64_t r = x.rounded_bytes;
    const std::uint64_t releasable = s.releasable_known ? s.releasable_bytes : 0;
    const std::uint64_t dev_free = s.device_free_known ? s.device_free_bytes : 0;
    const std::uint64_t free_total = s.inactive_split_bytes + releasable + dev_free;
    const std::string head =
        r != 0 ? fmt::format("A request of {} on device {} ", bytes(s.requested_bytes), s.device)
               : fmt::format("A request on device {} ", s.device);
    const bool other_fits =
        s.other_processes_bytes > 0 && free_total + s.other_processes_bytes >= r;
    const bool outside_fits =
        s.outside_framework_bytes > 0 && free_total + s.outside_framework_bytes >= r;
    if (r == 0) {
        size_unknown(s, head, x);
    } else if (s.largest_free_block_known && s.largest_free_block_bytes >= r) {
        free_block_available(s, head, x);
    } else if (s.releasable_known && releasable > 0 && releasable + dev_free >= x.segment_bytes) {
        bloated_cache(s, head, x);
    } else if (s.device_free_known && dev_free >= x.segment_bytes) {
        device_had_room(s, head, x);
    } else if (s.inactive_split_bytes > 0 && free_total >= r) {
        fragmentation(s, head, free_total, pins, x);
    } else if (other_fits || outside_fits) {
        // When either alone would make room, the larger holder is named.
        held_elsewhere(
            s, head,
            other_fits && (!outside_fits || s.other_processes_bytes >= s.outside_framework_bytes),
            x);
    } else if (s.device_free_known || s.capacity_bytes != 0) {
        too_little_memory(s, head, free_total, x);
    } else {
        left_open(s, head, free_total, x);
    }
    return x;
}

}  // namespace

std::uint64_t torch_round_size(std::uint64_t b) {
    constexpr std::uint64_t kMinBlock = 512;
    if (b < kMinBlock) return kMinBlock;
    return (b + kMinBlock - 1) / kMinBlock * kMinBlock;
}

std::uint64_t torch_segment_size(std::uint64_t rounded) {
    constexpr std::uint64_t kMiB = 1 << 20;
    if (rounded <= kMiB) return 2 * kMiB;
    if (rounded < 10 * kMiB) return 20 * kMiB;
    return (rounded + 2 * kMiB - 1) / (2 * kMiB) * (2 * kMiB);
}

AllocatorOomState oom_state(std::uint64_t request, std::uint16_t device, const MemoryLedger& ledger,
                            const DeviceLayout& layout, const OomContext& ctx) {
    LedgerTotals t = ledger.totals(device);
    AllocatorOomState s;
    s.device = device;
    s.requested_bytes = request;
    s.capacity_bytes = t.capacity;
    s.reserved_bytes = t.reserved;
    s.allocated_bytes = t.allocated_rounded;
    s.pending_free_bytes = t.pending_free;
    s.outside_framework_bytes = t.outside();
    s.other_processes_bytes = t.foreign_used;
    s.expandable_segments = ctx.expandable_segments;
    if (t.segments_seen) {
        s.inactive_split_bytes = layout.inactive_split;
        s.releasable_known = true;
        s.releasable_bytes = layout.releasable;
        s.largest_free_block_known = true;
        s.largest_free_block_bytes = layout.largest_free;
    } else if (t.split_reported) {
        s.inactive_split_bytes = t.inactive_split_reported;
    }
    if (ctx.device_free_known) {
        s.device_free_known = true;
        s.device_free_bytes = ctx.device_free_bytes;
    } else if (t.capacity != 0) {
        // Estimated: capacity minus what the ledger sees held (the CUDA context is not in it, so
        // this is an upper bound), or NVML's own figure for the process when larger.
        std::uint64_t held = std::max(t.used(), t.process_used) + t.foreign_used;
        s.device_free_known = true;
        s.device_free_bytes = t.capacity > held ? t.capacity - held : 0;
    }
    return s;
}

OomExplanation explain_oom(std::uint64_t request, std::uint16_t device, const MemoryLedger& ledger,
                           const OomContext& ctx) {
    DeviceLayout layout = ledger.layout(device);
    OomExplanation x = decide(oom_state(request, device, ledger, layout, ctx),
                              pinning_sites(ledger, device, layout, ctx.strings));
    if (!ctx.expandable_unsupported.empty()) {
        // Never advise a setting this program cannot use: say why instead.
        for (std::string& a : x.advice) {
            if (a.rfind("Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", 0) == 0) {
                a = "expandable_segments:True would let free pages be remapped into one growing "
                    "segment, but it is unsupported for this program: " +
                    ctx.expandable_unsupported + ".";
            }
        }
    }
    return x;
}

}  // namespace gpudiag::detail

namespace gpudiag {

OomExplanation explain_oom_state(const AllocatorOomState& state) noexcept {
    try {
        return detail::decide(state, {});
    } catch (...) {
        OomExplanation x;
        x.device = state.device;
        x.requested_bytes = state.requested_bytes;
        x.summary = "The explanation could not be built (out of host memory).";
        return x;
    }
}

}  // namespace gpudiag
