// SPDX-License-Identifier: Apache-2.0
// The settings of PyTorch's CUDA caching allocator that change where memory goes, as
// PYTORCH_CUDA_ALLOC_CONF spells them (c10/core/AllocatorConfig.cpp, CUDAAllocatorConfig.cpp),
// plus the per-process memory fraction (torch.cuda.set_per_process_memory_fraction).
#pragma once

#include <gpudiag/source_info.hpp>
#include <gpudiag/status.hpp>

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace gpudiag::detail {

inline constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
inline constexpr std::uint64_t kNoSplitLimit = std::numeric_limits<std::uint64_t>::max();
/// roundup_power2_divisions has one entry per power-of-two size interval from 1 MiB to 64 GiB.
inline constexpr std::size_t kRoundupIntervals = 16;

struct AllocatorSettings {
    bool expandable_segments = false;
    /// Blocks this large or larger are never split ("oversize"); unlimited by default.
    std::uint64_t max_split_size = kNoSplitLimit;
    /// An oversize cached block serves a request only if it is less than this much larger.
    std::uint64_t max_non_split_rounding_size = 20 * kMiB;
    /// Fraction of the allowed memory above which cached blocks are garbage collected; acts only
    /// with a memory fraction below 1 (the allocator has no limit to compare with otherwise).
    double garbage_collection_threshold = 0;
    /// Divisions per power-of-two interval (index 0 = [1 MiB, 2 MiB)); 0 or 1 = plain 512 B.
    std::array<std::uint32_t, kRoundupIntervals> roundup_power2_divisions{};
    /// Segment size for 1-10 MiB requests and page size of large expandable segments.
    std::uint64_t large_segment_size = 20 * kMiB;
    /// torch.cuda.set_per_process_memory_fraction; below 1 it caps reserved memory.
    double memory_fraction = 1.0;

    /// The divisions that apply to a rounded request of `size` bytes.
    [[nodiscard]] std::uint32_t divisions_for(std::uint64_t size) const;
    /// The settings that differ from torch's defaults, in PYTORCH_CUDA_ALLOC_CONF syntax
    /// ("expandable_segments:True,max_split_size_mb:128"); "" for the defaults.
    [[nodiscard]] std::string to_conf() const;
    bool operator==(const AllocatorSettings&) const = default;
};

/// Sets one option. Keys are PYTORCH_CUDA_ALLOC_CONF's (max_split_size_mb, expandable_segments,
/// garbage_collection_threshold, roundup_power2_divisions, max_non_split_rounding_mb,
/// large_segment_size_mb) plus per_process_memory_fraction; values are checked as torch checks
/// them. kInvalidArgument says what is wrong; kUnsupported for options that do not change
/// placement-relevant behaviour the model covers (backend:cudaMallocAsync).
Status set_allocator_option(AllocatorSettings& settings, std::string_view key,
                            std::string_view value);

/// Applies "key:value,key:value" (PYTORCH_CUDA_ALLOC_CONF) or one "key=value"; options that do not
/// affect placement (pinned_*, release_lock_on_cudamalloc) are accepted and ignored.
Status apply_allocator_conf(AllocatorSettings& settings, std::string_view conf);

/// The settings a torch snapshot recorded (its allocator_settings, carried as source
/// properties). `recorded` is set when the snapshot had them; without them torch's defaults
/// stand, with expandable segments if the snapshot's segments were expandable.
Status settings_from_source(const SourceInfo& info, AllocatorSettings& settings, bool& recorded);

}  // namespace gpudiag::detail
