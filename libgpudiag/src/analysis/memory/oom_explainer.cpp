// SPDX-License-Identifier: Apache-2.0
// explain_oom. The decision follows how torch's caching allocator serves a request
// (pytorch-integration.md §2.2-2.3): a free block of the rounded size in the cache serves it;
// otherwise it maps a new segment, first releasing fully free cached segments when the device
// is short. So, in order:
//   a free block ≥ the rounded request existed           → not explained by the books
//   device free + releasable segments ≥ new segment size → the cache held the room (bloated)
//   device free + free inside segments ≥ request         → enough in total, not contiguous
//   ... + memory held outside the framework ≥ request    → outside memory is the difference
//   otherwise                                            → the working set does not fit
#include "analysis/memory/oom_explainer.hpp"

#include "support/format.hpp"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace gpudiag::detail {
namespace {

std::string bytes(std::uint64_t b) { return format_bytes(static_cast<double>(b)); }

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
        std::string name = strings != nullptr && site != kNoString ? std::string(strings->lookup(site))
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

// The books at the failure, for the summaries.
std::string state_text(const OomExplanation& x, const LedgerTotals& t, const DeviceLayout& layout) {
    return "reserved " + bytes(t.reserved) + ", allocated " + bytes(t.allocated_rounded) +
           ", free inside segments " + bytes(layout.free_in_segments) + " (largest block " +
           bytes(layout.largest_free) + ")" +
           (x.device_free_known ? ", free on the device " + bytes(x.device_free_bytes)
                                : std::string()) +
           (t.outside() > 0 ? ", outside the framework " + bytes(t.outside()) : std::string());
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

OomExplanation explain_oom(std::uint64_t request, std::uint16_t device, const MemoryLedger& ledger,
                           const OomContext& ctx) {
    OomExplanation x;
    x.device = device;
    x.requested_bytes = request;
    x.rounded_bytes = torch_round_size(request);
    x.segment_bytes = torch_segment_size(x.rounded_bytes);
    LedgerTotals t = ledger.totals(device);
    DeviceLayout layout = ledger.layout(device);
    x.capacity_bytes = t.capacity;
    x.reserved_bytes = t.reserved;
    x.allocated_bytes = t.allocated_rounded;
    x.free_in_segments_bytes = layout.free_in_segments;
    x.largest_free_block_bytes = layout.largest_free;
    x.releasable_bytes = layout.releasable;
    x.inactive_split_bytes = layout.inactive_split;
    x.pending_free_bytes = t.pending_free;
    x.outside_framework_bytes = t.outside();
    x.expandable_segments = ctx.expandable_segments;
    if (ctx.device_free_known) {
        x.device_free_known = true;
        x.device_free_bytes = ctx.device_free_bytes;
    } else if (t.capacity != 0) {
        // Estimated: capacity minus what the ledger sees held (the CUDA context and other
        // processes are not in it, so this is an upper bound).
        x.device_free_known = true;
        x.device_free_bytes = t.capacity > t.used() ? t.capacity - t.used() : 0;
    }
    x.pinning_sites = pinning_sites(ledger, device, layout, ctx.strings);

    if (request == 0) {
        // A failed call seen without its arguments (CUPTI activity records carry none): every
        // cause below compares the request with free space, so none can be judged.
        x.rounded_bytes = x.segment_bytes = 0;
        x.cause = OomCause::kUnknown;
        x.summary = "An allocation of unknown size failed on device " + std::to_string(device) +
                    " (" + state_text(x, t, layout) + "). Without the request size the cause "
                    "cannot be told apart.";
        x.advice.push_back("Capture with deep mode (SessionOptions::deep, GPUDIAG_DEEP=1) or the "
                           "PyTorch integration, which record the size and call site of each "
                           "allocation.");
        return x;
    }
    const std::uint64_t r = x.rounded_bytes;
    const std::uint64_t dev_free = x.device_free_bytes;
    const std::string head = "A request of " + bytes(request) + " on device " +
                             std::to_string(device) + " ";
    const std::string state = state_text(x, t, layout);

    if (layout.largest_free >= r) {
        x.cause = OomCause::kFreeBlockAvailable;
        x.summary = head + "would fit in a free block of " + bytes(layout.largest_free) +
                    " that the books show (" + state +
                    "). The allocator reuses a cached block only for requests on the same stream "
                    "and pool, so the request likely came from another stream or a private pool "
                    "(CUDA graphs, MemPool), or memory was freed after the failure.";
        x.advice.push_back(
            "Check which stream allocated: blocks freed on one stream are not reused by "
            "another until synchronised; avoid record_stream on long-lived tensors.");
        return x;
    }
    if (x.device_free_known && dev_free + layout.releasable >= x.segment_bytes) {
        x.cause = OomCause::kBloatedCache;
        x.summary = head + "fails although the framework's cache holds " +
                    bytes(layout.releasable) +
                    " in fully free segments that it could return to the driver (" + state +
                    "). The memory is cached, not used: a request from outside the cache "
                    "(another library's cudaMalloc, another allocator) cannot get it.";
        x.advice.push_back("Call torch.cuda.empty_cache() before the code that needs the memory, "
                           "so the " + bytes(layout.releasable) + " of cached free segments go "
                           "back to the driver.");
        x.advice.push_back("Bound the cache: PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.8 "
                           "or torch.cuda.set_per_process_memory_fraction().");
        return x;
    }
    const std::uint64_t free_total = dev_free + layout.free_in_segments;
    if (layout.free_in_segments > 0 && free_total >= r) {
        x.cause = OomCause::kFragmentation;
        x.summary = head + "fails from fragmentation: " + bytes(free_total) +
                    " is free in total but no free block is as large as " + bytes(r) +
                    " and the device cannot map a new " + bytes(x.segment_bytes) + " segment (" +
                    state + "). " + bytes(layout.inactive_split) +
                    " of the free space sits in partly used segments that cannot be released.";
        if (!ctx.expandable_segments) {
            x.advice.push_back(
                "Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (PYTORCH_ALLOC_CONF on "
                "torch >= 2.9): free pages are then unmapped and remapped into one growing "
                "segment per stream, so free space no longer has to be contiguous within a "
                "segment.");
            x.advice.push_back("Or set max_split_size_mb so large cached blocks are not split for "
                               "small requests.");
        } else {
            x.advice.push_back(
                "Expandable segments are already on, so segment boundaries are not the cause: "
                "live blocks pin the free pages between them" +
                (x.pinning_sites.empty() ? std::string(".")
                                         : std::string(" (") + site_list(x.pinning_sites) + ").") +
                " Free those tensors earlier, or allocate long-lived tensors before transient ones.");
        }
        if (!x.pinning_sites.empty() && !ctx.expandable_segments) {
            x.advice.push_back("The partly used segments are held by: " + site_list(x.pinning_sites) +
                               "; allocating these long-lived tensors first (or freeing them "
                               "earlier) keeps large free blocks whole.");
        }
        return x;
    }
    if (x.device_free_known && t.outside() > 0 && free_total + t.outside() >= r) {
        x.cause = OomCause::kOutsideFramework;
        x.summary = head + "would fit if the " + bytes(t.outside()) +
                    " of device memory held outside the framework's allocator were free (" +
                    state + ").";
        x.advice.push_back("Find and shrink the memory held outside the framework: communication "
                           "buffers (NCCL_BUFFSIZE), library workspaces (CUBLAS_WORKSPACE_CONFIG), "
                           "other allocators in the process, or other processes on the GPU.");
        return x;
    }
    if (x.device_free_known) {
        x.cause = OomCause::kTooLittleMemory;
        x.summary = head + "does not fit: live data holds " + bytes(t.allocated_rounded) +
                    " and only " + bytes(free_total) +
                    " is free in total, so no allocator setting would make room (" + state + ").";
        x.advice.push_back("Shrink the working set: a smaller batch or sequence length, activation "
                           "checkpointing, bf16/fp16 weights and activations, or sharding "
                           "parameters and optimizer state (FSDP/ZeRO).");
        if (ctx.expandable_segments) {
            x.advice.push_back("Expandable segments are already on; fragmentation is not the cause.");
        }
        return x;
    }
    x.cause = OomCause::kUnknown;
    x.summary = head + "cannot be judged fully: the device's free memory is unknown (" + state +
                "). " + bytes(layout.free_in_segments) + " is free inside the framework's segments.";
    x.advice.push_back("Record the device capacity or the OOM event (torch records free device "
                       "memory in the trace's oom entry) to get a full explanation.");
    return x;
}

}  // namespace gpudiag::detail
