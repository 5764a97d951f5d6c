// SPDX-License-Identifier: Apache-2.0
// The what-if on small event streams shaped like a torch snapshot's: settings parsing, the
// history a source's events become, recorded OOMs replayed, and the conclusions drawn.
#include <gpudiag/whatif.hpp>

#include "analysis/allocator/allocation_history.hpp"
#include "analysis/allocator/allocator_settings.hpp"
#include "analysis/allocator/allocator_versions.hpp"
#include "analysis/allocator/allocator_whatif.hpp"
#include "analysis/memory/memory_ledger.hpp"
#include "analysis/memory/oom_explainer.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace gpudiag::detail {
namespace {

constexpr std::uint64_t MiB = kMiB;
constexpr std::uint64_t kA = 0x7f0000000000;
constexpr std::uint64_t kB = 0x7f2000000000;

// ---- settings ----

TEST(AllocatorSettings, ParsesPytorchCudaAllocConf) {
    AllocatorSettings s;
    ASSERT_TRUE(apply_allocator_conf(s, "expandable_segments:True,max_split_size_mb:128").is_ok());
    EXPECT_TRUE(s.expandable_segments);
    EXPECT_EQ(s.max_split_size, 128 * MiB);
    ASSERT_TRUE(apply_allocator_conf(s, "max_split_size_mb=none").is_ok());
    EXPECT_EQ(s.max_split_size, kNoSplitLimit);
    ASSERT_TRUE(apply_allocator_conf(s, "garbage_collection_threshold=0.6").is_ok());
    EXPECT_DOUBLE_EQ(s.garbage_collection_threshold, 0.6);
    EXPECT_EQ(s.to_conf(), "expandable_segments:True,garbage_collection_threshold:0.6");
    // Options that do not move memory are accepted.
    EXPECT_TRUE(apply_allocator_conf(s, "pinned_use_cuda_host_register:True").is_ok());
}

TEST(AllocatorSettings, DivisionsFollowTorchsIntervalRules) {
    AllocatorSettings s;
    ASSERT_TRUE(apply_allocator_conf(s, "roundup_power2_divisions:[256:1,512:2,>:4]").is_ok());
    // The first entry also covers the intervals below it; ">" fills from the last named one
    // (overwriting it, as torch does) to the end.
    EXPECT_EQ(s.roundup_power2_divisions[0], 1u);
    EXPECT_EQ(s.roundup_power2_divisions[8], 1u);
    EXPECT_EQ(s.roundup_power2_divisions[9], 4u);
    EXPECT_EQ(s.roundup_power2_divisions[15], 4u);
    EXPECT_EQ(s.divisions_for(300 * MiB), 1u);
    EXPECT_EQ(s.divisions_for(40 * std::uint64_t{1} << 30), 4u);
}

TEST(AllocatorSettings, RefusesWhatTorchRefuses) {
    AllocatorSettings s;
    EXPECT_EQ(apply_allocator_conf(s, "max_split_size_mb:10").code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(apply_allocator_conf(s, "garbage_collection_threshold:1.5").code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ(apply_allocator_conf(s, "roundup_power2_divisions:3").code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ(apply_allocator_conf(s, "expandable_segments:maybe").code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ(apply_allocator_conf(s, "no_such_option:1").code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(apply_allocator_conf(s, "backend:cudaMallocAsync").code(), StatusCode::kUnsupported);
    EXPECT_EQ(s, AllocatorSettings{});
}

TEST(AllocatorSettings, ReadsWhatASnapshotRecorded) {
    SourceInfo info;
    info.properties = {{"max_split_size", "-1"},
                       {"garbage_collection_threshold", "0"},
                       {"expandable_segments", "true"},
                       {"roundup_power2_divisions",
                        "[1:0,2:0,4:0,8:0,16:0,32:0,64:0,128:0,256:0,512:8,"
                        "1024:8,2048:8,4096:8,8192:8,16384:8,32768:8]"}};
    AllocatorSettings s;
    bool recorded = false;
    ASSERT_TRUE(settings_from_source(info, s, recorded).is_ok());
    EXPECT_TRUE(recorded);
    EXPECT_TRUE(s.expandable_segments);
    EXPECT_EQ(s.max_split_size, kNoSplitLimit);
    EXPECT_EQ(s.roundup_power2_divisions[8], 0u);
    EXPECT_EQ(s.roundup_power2_divisions[9], 8u);
}

// ---- event streams ----

Event memory(EventKind kind, std::uint64_t address, std::uint64_t bytes,
             std::uint8_t extra_flags = 0) {
    static std::uint64_t clock = 0;
    Event e;
    e.kind = kind;
    e.device = 0;
    e.start_ns = e.end_ns = ++clock;
    e.flags =
        static_cast<std::uint8_t>(static_cast<std::uint8_t>(MemoryKind::kDevice) | extra_flags);
    e.memory.address = address;
    e.memory.bytes = bytes;
    e.memory.aux = kind == EventKind::kSegmentAlloc
                       ? (bytes == 2 * MiB ? kSegmentPoolSmall : kSegmentPoolLarge)
                       : bytes;
    return e;
}
Event segment(std::uint64_t address, std::uint64_t bytes) {
    return memory(EventKind::kSegmentAlloc, address, bytes);
}
Event segment_free(std::uint64_t address, std::uint64_t bytes) {
    return memory(EventKind::kSegmentFree, address, bytes);
}
Event alloc(std::uint64_t address, std::uint64_t bytes) {
    return memory(EventKind::kBlockAlloc, address, bytes);
}
// torch records a free as requested, then completed.
void free_block(std::vector<Event>& out, std::uint64_t address, std::uint64_t bytes) {
    out.push_back(memory(EventKind::kBlockFree, address, bytes, kEventFlagPendingFree));
    out.push_back(memory(EventKind::kBlockFree, address, bytes));
}
Event oom(std::uint64_t request, std::uint64_t device_free) {
    Event e;
    e.kind = EventKind::kOutOfMemory;
    e.device = 0;
    e.oom.requested_bytes = request;
    e.oom.free_bytes = device_free;
    return e;
}
Event synthetic(Event e) {
    e.flags |= kEventFlagSynthetic;
    return e;
}

SourceInfo snapshot_info() {
    SourceInfo info;
    info.producer = "torch-snapshot";
    info.description = "test";
    info.properties = {{"max_split_size", "-1"},
                       {"garbage_collection_threshold", "0"},
                       {"expandable_segments", "false"}};
    return info;
}

Result<WhatIfResult> whatif(const std::vector<Event>& events, WhatIfOptions options = {}) {
    StringTable strings;
    return whatif_events(events, snapshot_info(), strings, options);
}

std::unique_ptr<AllocationHistory> history_of(const std::vector<Event>& events) {
    auto h = std::make_unique<AllocationHistory>();
    StringTable strings;
    h->begin(snapshot_info(), strings);
    h->consume(events);
    h->end(SourceSummary{});
    return h;
}

// A program that splits a cached 600 MiB segment with a small request, then needs 600 MiB
// again: torch (defaults) fails, as the split segment cannot be released; with 300 MiB free on
// the device the allocator could reach 900 MiB.
std::vector<Event> split_big_segment_then_oom() {
    std::vector<Event> e;
    e.push_back(segment(kA, 600 * MiB));
    e.push_back(alloc(kA, 600 * MiB));
    free_block(e, kA, 600 * MiB);
    e.push_back(alloc(kA, 12 * MiB));
    e.push_back(oom(600 * MiB, 300 * MiB));
    return e;
}

TEST(AllocationHistory, TurnsEventsIntoOperationsAndRecordedActions) {
    std::vector<Event> e;
    e.push_back(segment(kA, 20 * MiB));
    e.push_back(alloc(kA, 3 * MiB));
    free_block(e, kA, 3 * MiB);
    e.push_back(segment_free(kA, 20 * MiB));  // then a new segment: empty_cache or a retry
    e.push_back(segment(kB, 40 * MiB));
    e.push_back(alloc(kB, 40 * MiB));
    e.push_back(segment_free(kB + 0, 0));  // nothing: ignored by the recorded segments
    const auto h = history_of(e);
    ASSERT_EQ(h->devices().size(), 1u);
    const DeviceHistory& d = h->devices()[0];
    EXPECT_TRUE(d.start.empty());
    ASSERT_EQ(d.ops.size(), 6u);  // alloc, free requested, free, release, alloc, release
    EXPECT_EQ(d.ops[3].kind, HistoryOp::Kind::kReleaseCache);
    EXPECT_EQ(d.cache_releases, 2u);
    EXPECT_EQ(d.releases_before_new_segment, 1u);
    ASSERT_EQ(d.observed.size(), 4u);
    EXPECT_EQ(d.observed[0].kind, DeviceActionKind::kMalloc);
    EXPECT_EQ(d.observed[1].kind, DeviceActionKind::kFree);
    EXPECT_EQ(d.observed_peak_reserved, 40 * MiB);
}

TEST(AllocationHistory, ReleaseBeforeAnOomIsTheAllocatorsOwn) {
    std::vector<Event> e;
    e.push_back(segment(kA, 50 * MiB));
    e.push_back(alloc(kA, 50 * MiB));
    free_block(e, kA, 50 * MiB);
    e.push_back(segment_free(kA, 50 * MiB));
    e.push_back(oom(80 * MiB, 10 * MiB));
    const auto h = history_of(e);
    const DeviceHistory& d = h->devices()[0];
    ASSERT_EQ(d.ops.size(), 4u);
    EXPECT_EQ(d.ops[3].kind, HistoryOp::Kind::kOom);
    EXPECT_EQ(d.ops[3].limit, 10 * MiB);  // nothing held after the release, 10 MiB free
    EXPECT_EQ(d.cache_releases, 0u);
}

TEST(AllocatorWhatIf, ReproducesARecordedOomAndSaysWhenNoSettingHelps) {
    std::vector<Event> e;
    e.push_back(segment(kA, 50 * MiB));
    e.push_back(alloc(kA, 50 * MiB));
    free_block(e, kA, 50 * MiB);
    e.push_back(segment_free(kA, 50 * MiB));
    e.push_back(oom(80 * MiB, 10 * MiB));
    auto r = whatif(e);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_TRUE(r->reproduction.exact) << r->reproduction.first_difference;
    EXPECT_EQ(r->reproduction.matching_segment_actions, 2u);  // the malloc and the release
    EXPECT_EQ(r->capacity_origin, "the recorded OOM");
    for (const WhatIfOutcome& o : r->outcomes) {
        EXPECT_EQ(o.recorded_ooms, 1u) << o.change;
        EXPECT_EQ(o.recorded_ooms_avoided, 0u) << o.change;
    }
    EXPECT_NE(r->advice.find("No allocator setting tried avoids"), std::string::npos) << r->advice;
}

TEST(AllocatorWhatIf, FindsTheSettingThatAvoidsASplitSegmentOom) {
    auto r = whatif(split_big_segment_then_oom());
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_TRUE(r->reproduction.exact) << r->reproduction.first_difference;
    ASSERT_GE(r->outcomes.size(), 3u);
    EXPECT_EQ(r->outcomes[1].label, "baseline");
    EXPECT_EQ(r->outcomes[1].recorded_ooms_avoided, 0u);
    bool oversize_avoids = false;
    for (const WhatIfOutcome& o : r->outcomes) {
        // Any max_split_size below 600 MiB keeps the big segment whole for the big request.
        if (o.change.rfind("max_split_size_mb:", 0) == 0) {
            EXPECT_EQ(o.recorded_ooms_avoided, 1u) << o.change;
            EXPECT_EQ(o.peak_reserved_bytes, 612 * MiB) << o.change;
            oversize_avoids = true;
        }
    }
    EXPECT_TRUE(oversize_avoids);
    EXPECT_EQ(
        r->advice,
        "With max_split_size_mb:128 the out-of-memory failure would not recur: the peak reserved "
        "would be 612 MiB instead of 600 MiB.");
    const AllocatorAdvice advice = allocator_advice(*history_of(split_big_segment_then_oom()));
    EXPECT_TRUE(advice.available);
    EXPECT_TRUE(advice.recorded_oom);
    EXPECT_TRUE(advice.oom_avoided);
    EXPECT_TRUE(advice.reproduction_exact);
    EXPECT_EQ(advice.best_change, "max_split_size_mb:128");
}

TEST(AllocatorWhatIf, ChecksAGivenCapacity) {
    std::vector<Event> e;
    e.push_back(segment(kA, 30 * MiB));
    e.push_back(alloc(kA, 30 * MiB));
    e.push_back(segment(kB, 30 * MiB));
    e.push_back(alloc(kB, 30 * MiB));
    WhatIfOptions options;
    options.capacity_bytes = 50 * MiB;
    options.settings = {"expandable_segments:True"};
    auto r = whatif(e, options);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_TRUE(r->reproduction.exact);  // the reproduction assumes no limit
    ASSERT_GE(r->outcomes.size(), 3u);
    EXPECT_EQ(r->outcomes[2].label, "chosen");
    for (std::size_t i = 1; i < r->outcomes.size(); ++i) {
        const WhatIfOutcome& o = r->outcomes[i];
        EXPECT_TRUE(o.oom) << o.change;
        EXPECT_FALSE(o.replayed_to_end);
        EXPECT_EQ(o.oom_entry, 1u);
        EXPECT_EQ(o.oom_request_bytes, 30 * MiB);
    }
    EXPECT_NE(r->advice.find("avoids"), std::string::npos) << r->advice;
}

TEST(AllocatorWhatIf, ReportsWhereAReplayDepartsFromTheRecording) {
    // A 30 MiB request that got a 40 MiB segment: not what torch's rules do.
    std::vector<Event> e;
    e.push_back(segment(kA, 40 * MiB));
    e.push_back(alloc(kA, 30 * MiB));
    auto r = whatif(e);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_TRUE(r->reproduction.checked);
    EXPECT_FALSE(r->reproduction.exact);
    EXPECT_EQ(r->reproduction.matching_segment_actions, 0u);
    EXPECT_NE(r->reproduction.first_difference.find("segment action 1"), std::string::npos)
        << r->reproduction.first_difference;
    EXPECT_NE(whatif_text(*r).find("NOT exact"), std::string::npos);
}

TEST(AllocatorWhatIf, RebuildsTheStateBeforeALateHistory) {
    // Two segments existed before the trace: a 20 MiB one with a live 5 MiB block and a freed
    // one; the trace frees a block allocated before it and allocates into the cache.
    std::vector<Event> e;
    e.push_back(synthetic(segment(kA, 20 * MiB)));
    e.push_back(synthetic(segment(kB, 20 * MiB)));
    e.push_back(synthetic(alloc(kA, 5 * MiB)));
    e.push_back(synthetic(alloc(kB, 8 * MiB)));
    free_block(e, kB, 8 * MiB);
    e.push_back(alloc(kA + 5 * MiB, 6 * MiB));  // best fit: the 15 MiB tail of A, not B's 20 MiB
    e.push_back(alloc(kB, 10 * MiB));           // A's 9 MiB left are too small
    auto r = whatif(e);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_FALSE(r->history_from_start);
    EXPECT_EQ(r->segments_before_history, 2u);
    EXPECT_EQ(r->live_blocks_before_history, 2u);
    EXPECT_TRUE(r->reproduction.exact) << r->reproduction.first_difference;
    EXPECT_EQ(r->reproduction.allocations_at_recorded_address, 2u);
    EXPECT_EQ(r->outcomes[1].start, WhatIfStart::kLiveBlocks);
}

TEST(AllocatorWhatIf, ReproducesExpandableSegmentsPageByPage) {
    // What torch records under expandable_segments:True for a 30 MiB then a 15 MiB request, both
    // freed, then torch.cuda.empty_cache(): pages mapped as the segment grows, unmapped at once.
    auto page_event = [](EventKind kind, std::uint64_t address, std::uint64_t bytes) {
        return memory(kind, address, bytes, kEventFlagExpandable);
    };
    std::vector<Event> e;
    e.push_back(page_event(EventKind::kSegmentAlloc, kA, 40 * MiB));
    e.push_back(alloc(kA, 30 * MiB));
    e.push_back(page_event(EventKind::kSegmentAlloc, kA + 40 * MiB, 20 * MiB));
    e.push_back(alloc(kA + 30 * MiB, 15 * MiB));
    free_block(e, kA, 30 * MiB);
    free_block(e, kA + 30 * MiB, 15 * MiB);
    e.push_back(page_event(EventKind::kSegmentFree, kA, 60 * MiB));
    SourceInfo info = snapshot_info();
    info.properties[2].second = "true";  // expandable_segments
    StringTable strings;
    auto r = whatif_events(e, info, strings);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_EQ(r->recorded_settings, "expandable_segments:True");
    EXPECT_TRUE(r->reproduction.exact) << r->reproduction.first_difference;
    EXPECT_EQ(r->reproduction.matching_segment_actions, 3u);
    EXPECT_EQ(r->reproduction.modelled_peak_reserved_bytes, 60 * MiB);
    EXPECT_EQ(r->outcomes[0].page_maps, 2u);
    EXPECT_EQ(r->outcomes[0].page_unmaps, 1u);
    EXPECT_EQ(r->outcomes[0].final_reserved_bytes, 0u);
}

TEST(AllocatorWhatIf, RefusesInputsWithoutHistoryAndBadSettings) {
    std::vector<Event> state_only = {synthetic(segment(kA, 20 * MiB)),
                                     synthetic(alloc(kA, 5 * MiB))};
    EXPECT_EQ(whatif(state_only).status().code(), StatusCode::kFailedPrecondition);
    WhatIfOptions bad;
    bad.settings = {"max_split_size_mb:1"};
    EXPECT_EQ(whatif(split_big_segment_then_oom(), bad).status().code(),
              StatusCode::kInvalidArgument);
    WhatIfOptions fraction;
    fraction.settings = {"per_process_memory_fraction:0.5"};
    EXPECT_EQ(whatif(split_big_segment_then_oom(), fraction).status().code(),
              StatusCode::kInvalidArgument);
    fraction.capacity_bytes = 2000 * MiB;
    EXPECT_TRUE(whatif(split_big_segment_then_oom(), fraction).is_ok());
    WhatIfOptions device;
    device.device = 3;
    EXPECT_EQ(whatif(split_big_segment_then_oom(), device).status().code(),
              StatusCode::kInvalidArgument);
}

// ---- torch versions (allocator_versions.hpp) ----

TEST(AllocatorVersions, ParsesAndSelectsTheModelledRelease) {
    EXPECT_EQ(parse_torch_version("2.15.0+cu132").minor, 15);
    EXPECT_TRUE(parse_torch_version("v2.3.1").known);
    EXPECT_FALSE(parse_torch_version("nightly").known);
    SourceInfo session;
    session.properties = {{"stack.framework", "torch"},
                          {"stack.framework_version", "2.11.0+cu128"}};
    ModelledVersion v = select_version(session, "");
    EXPECT_EQ(v.text, "2.11");
    EXPECT_EQ(v.origin, "the recording");
    EXPECT_TRUE(v.note.empty());
    SourceInfo snapshot;
    snapshot.properties = {{"snapshot_torch_at_least", "2.13"}};
    v = select_version(snapshot, "");
    EXPECT_EQ(v.text, "2.15");
    EXPECT_EQ(v.origin, "assumed");
    EXPECT_NE(v.note.find("torch 2.13 or later"), std::string::npos) << v.note;
    EXPECT_EQ(select_version(snapshot, "2.1").text, "2.3");  // below the model: its oldest
    EXPECT_EQ(select_version(snapshot, "2.17").text, "2.15");
    EXPECT_NE(select_version(snapshot, "2.17").note.find("newer than the model"),
              std::string::npos);
    // Every rule names the allocator change it follows.
    for (const VersionedRule& r : versioned_rules()) {
        EXPECT_NE(r.source.find("pytorch/pytorch PR #"), std::string_view::npos) << r.name;
    }
}

TEST(AllocatorWhatIf, NamesTheModelledTorchVersion) {
    auto r = whatif(split_big_segment_then_oom());
    ASSERT_TRUE(r.is_ok());
    EXPECT_EQ(r->torch_version, "2.15");
    EXPECT_EQ(r->torch_version_origin, "assumed");
    EXPECT_NE(whatif_text(*r).find("Allocator modelled: torch 2.15 (assumed"), std::string::npos);
    WhatIfOptions given;
    given.torch_version = "2.12.1";
    r = whatif(split_big_segment_then_oom(), given);
    ASSERT_TRUE(r.is_ok());
    EXPECT_EQ(r->torch_version, "2.12");
    EXPECT_EQ(r->torch_version_origin, "given");
    given.torch_version = "latest";
    EXPECT_EQ(whatif(split_big_segment_then_oom(), given).status().code(),
              StatusCode::kInvalidArgument);
}

// ---- cautions: settings that fit but are unsafe or unsupported here ----

Event api_call(StringTable& strings, const char* name, std::int64_t return_code = 0) {
    Event e;
    e.kind = EventKind::kApiCall;
    e.device = kNoDevice;
    e.api.name = strings.intern(name);
    e.api.return_code = return_code;
    return e;
}

struct Cautioned {
    Result<WhatIfResult> result;
    const WhatIfCaution* find(const std::string& change, std::string_view source) const {
        for (const WhatIfOutcome& o : result->outcomes) {
            for (const WhatIfCaution& c : o.cautions) {
                if (c.change == change && c.source.find(source) != std::string::npos) return &c;
            }
        }
        return nullptr;
    }
};

Cautioned whatif_with_calls(const std::vector<const char*>& calls, WhatIfOptions options = {},
                            std::int64_t return_code = 0, SourceInfo info = snapshot_info()) {
    StringTable strings;
    std::vector<Event> e;
    for (const char* c : calls) e.push_back(api_call(strings, c, return_code));
    for (const Event& ev : split_big_segment_then_oom()) e.push_back(ev);
    return Cautioned{whatif_events(e, info, strings, options)};
}

// Legacy CUDA IPC cannot export expandable segments' memory: vllm-project/vllm PR #43923 (custom
// all-reduce crashes at cudaIpcGetMemHandle); pytorch c10/cuda/CUDACachingAllocator.cpp (torch
// 2.15.0: "Tensors allocated with expandable_segments:True cannot be shared between processes").
TEST(WhatIfCautions, ExpandableSegmentsWithLegacyCudaIpc) {
    const Cautioned r = whatif_with_calls({"cudaIpcGetMemHandle", "cudaIpcGetMemHandle"});
    ASSERT_TRUE(r.result.is_ok()) << r.result.status().to_string();
    const WhatIfCaution* c = r.find("expandable_segments:True", "vllm-project/vllm PR #43923");
    ASSERT_NE(c, nullptr) << whatif_text(*r.result);
    EXPECT_TRUE(c->unsupported);
    EXPECT_NE(c->reason.find("2 cudaIpcGetMemHandle calls"), std::string::npos) << c->reason;
    // Never advised: named, if at all, as unsupported.
    EXPECT_EQ(r.result->advice.find("With expandable_segments:True"), std::string::npos)
        << r.result->advice;
    EXPECT_NE(whatif_text(*r.result).find("is unsupported here"), std::string::npos);
    // Without IPC calls, no such caution.
    const Cautioned plain = whatif_with_calls({});
    EXPECT_EQ(plain.find("expandable_segments:True", "vllm-project/vllm PR #43923"), nullptr);
}

// Expandable segments under CUDA graph capture: re-enabled by pytorch PR #194767 (merged
// 2026-08-26, after the 2.14 branch cut: first in 2.15); before, turned off for capture.
TEST(WhatIfCautions, ExpandableSegmentsWithCudaGraphsBefore215) {
    WhatIfOptions v214;
    v214.torch_version = "2.14";
    const Cautioned old = whatif_with_calls({"cudaStreamBeginCapture"}, v214);
    ASSERT_TRUE(old.result.is_ok());
    const WhatIfCaution* c = old.find("expandable_segments:True", "pytorch/pytorch PR #194767");
    ASSERT_NE(c, nullptr) << whatif_text(*old.result);
    EXPECT_TRUE(c->unsupported);
    WhatIfOptions v215;
    v215.torch_version = "2.15";
    const Cautioned now = whatif_with_calls({"cudaStreamBeginCapture"}, v215);
    EXPECT_EQ(now.find("expandable_segments:True", "pytorch/pytorch PR #194767"), nullptr);
    // A snapshot's private pool (its segment names pool 1) may be a MemPool: a risk, not a
    // refusal.
    std::vector<Event> pooled = split_big_segment_then_oom();
    pooled.front().memory.extra = 1;
    StringTable strings;
    const Cautioned pool{whatif_events(pooled, snapshot_info(), strings, v214)};
    ASSERT_TRUE(pool.result.is_ok());
    c = pool.find("expandable_segments:True", "pytorch/pytorch PR #194767");
    ASSERT_NE(c, nullptr) << whatif_text(*pool.result);
    EXPECT_FALSE(c->unsupported);
    EXPECT_NE(c->reason.find("1 private pools"), std::string::npos) << c->reason;
}

// No VMM: c10/cuda/CUDAAllocatorConfig.h reads expandable_segments as false (with "not supported
// on this platform") in builds without PYTORCH_C10_DRIVER_API_SUPPORTED.
TEST(WhatIfCautions, ExpandableSegmentsWithoutVmm) {
    const Cautioned refused = whatif_with_calls({"cuMemCreate"}, {}, 801);
    const WhatIfCaution* c = refused.find("expandable_segments:True", "CUDAAllocatorConfig.h");
    ASSERT_NE(c, nullptr);
    EXPECT_NE(c->reason.find("CUDA_ERROR_NOT_SUPPORTED"), std::string::npos);
    SourceInfo ignored = snapshot_info();
    ignored.properties.emplace_back("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True");
    const Cautioned off = whatif_with_calls({}, {}, 0, ignored);
    c = off.find("expandable_segments:True", "CUDAAllocatorConfig.h");
    ASSERT_NE(c, nullptr);
    EXPECT_NE(c->reason.find("ignored here"), std::string::npos);
    EXPECT_EQ(whatif_with_calls({}).find("expandable_segments:True", "CUDAAllocatorConfig.h"),
              nullptr);
}

// max_split_size_mb with expandable segments up to 2.15: pytorch issue #123548, PR #193400 (open)
// in c10/cuda/CUDACachingAllocator.cpp get_free_block(). garbage_collection_threshold without a
// memory fraction: CUDACachingAllocator.cpp collects only under set_per_process_memory_fraction.
TEST(WhatIfCautions, MaxSplitWithExpandableAndGcWithoutFraction) {
    WhatIfOptions both;
    both.settings = {"expandable_segments:True,max_split_size_mb:128"};
    const Cautioned r = whatif_with_calls({}, both);
    ASSERT_TRUE(r.result.is_ok());
    const WhatIfCaution* c =
        r.find("expandable_segments:True with max_split_size_mb", "pytorch/pytorch issue #123548");
    ASSERT_NE(c, nullptr);
    EXPECT_FALSE(c->unsupported);  // a risk the replay already shows, not a refusal
    WhatIfOptions gc;
    gc.settings = {"garbage_collection_threshold:0.8"};
    const Cautioned g = whatif_with_calls({}, gc);
    ASSERT_TRUE(g.result.is_ok());
    c = g.find("garbage_collection_threshold", "CUDACachingAllocator.cpp");
    ASSERT_NE(c, nullptr);
    EXPECT_TRUE(c->unsupported);
    EXPECT_NE(whatif_json(*g.result).find("\"cautions\": ["), std::string::npos);
}

// The OOM finding's own advice never proposes expandable segments a program cannot use: the
// reason from the allocation history (here: legacy IPC, vllm-project/vllm PR #43923) replaces it.
TEST(WhatIfCautions, OomAdviceNamesExpandableSegmentsAsUnsupported) {
    std::vector<Event> e = split_big_segment_then_oom();
    e.pop_back();  // the state just before the failure: a split 600 MiB segment
    MemoryLedger ledger;
    ledger.apply(e);
    OomContext ctx;
    ctx.device_free_known = true;
    ctx.device_free_bytes = 100 * MiB;  // 688 MiB free in all, none of it 600 MiB in one piece
    const auto advised = [&] {
        std::string all;
        for (const std::string& a : explain_oom(600 * MiB, 0, ledger, ctx).advice) all += a + "\n";
        return all;
    };
    EXPECT_NE(advised().find("Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"),
              std::string::npos)
        << advised();
    ProgramFacts facts;
    facts.ipc_handle_calls = 4;
    ctx.expandable_unsupported =
        expandable_unsupported_reason(facts, select_version(SourceInfo{}, ""));
    const std::string now = advised();
    EXPECT_EQ(now.find("Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"), std::string::npos);
    EXPECT_NE(now.find("unsupported for this program: the program exports device memory with "
                       "legacy CUDA IPC (4 cudaIpcGetMemHandle calls)"),
              std::string::npos)
        << now;
    EXPECT_NE(now.find("vllm-project/vllm PR #43923"), std::string::npos);
}

// A snapshot whose trace ring overflowed (made for tests by
// tests/data/memory/make_test_pickles.py): the what-if says the history is cut and that its figures
// cannot be exact.
TEST(AllocatorWhatIf, SaysWhenTheHistoryWasCut) {
    auto r = whatif_file(std::string(GPUDIAG_TEST_DATA_DIR) +
                         "/memory/snapshot_2026_keys_made_for_tests.pickle");
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_FALSE(r->history_complete);
    bool noted = false;
    for (const std::string& n : r->notes)
        noted = noted || n.find("complete only from its first entry (time_us 1760000000000000)") !=
                             std::string::npos;
    EXPECT_TRUE(noted);
    EXPECT_NE(whatif_text(*r).find("History cut"), std::string::npos);
    EXPECT_NE(r->torch_version_note.find("torch 2.13 or later"), std::string::npos);
}

// A CUDA graph's private pool (numbered 1 in the events, as the snapshot importer numbers
// segment_pool_id): its cached block does not serve the default pool's request, which got a
// segment of its own, and a later request into the pool takes the pool's block back. The
// replay reproduces that only when it keeps the pools apart (in one pool, the default request
// would have taken the cached block and no second segment would be made).
TEST(AllocatorWhatIf, PrivatePoolsAreReplayedApart) {
    auto in_pool = [](Event e, std::uint32_t pool) {
        e.memory.extra = pool;
        return e;
    };
    std::vector<Event> e;
    e.push_back(in_pool(segment(kA, 20 * MiB), 1));
    e.push_back(alloc(kA, 3 * MiB));
    free_block(e, kA, 3 * MiB);
    e.push_back(segment(kB, 20 * MiB));
    e.push_back(alloc(kB, 3 * MiB));
    e.push_back(alloc(kA, 3 * MiB));
    const auto h = history_of(e);
    const DeviceHistory& d = h->devices()[0];
    ASSERT_EQ(d.ops.size(), 5u);
    EXPECT_EQ(d.ops[0].pool, 1u);
    EXPECT_EQ(d.ops[3].pool, 0u);  // in kB's segment: the default pool
    EXPECT_EQ(d.ops[4].pool, 1u);
    EXPECT_EQ(h->facts().private_pools, 1u);
    auto r = whatif(e);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_TRUE(r->reproduction.exact) << r->reproduction.first_difference;
    EXPECT_EQ(r->reproduction.allocations_at_recorded_address, 3u);
    bool noted = false;
    for (const std::string& n : r->notes)
        noted = noted || n.find("1 private pool (CUDA graphs") != n.npos;
    EXPECT_TRUE(noted);
}

}  // namespace
}  // namespace gpudiag::detail
