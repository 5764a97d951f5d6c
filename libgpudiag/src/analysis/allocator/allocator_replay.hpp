// SPDX-License-Identifier: Apache-2.0
// Replays one device's allocation history through CachingAllocatorModel under given settings,
// and compares a replay with what the recorded allocator did.
#pragma once

#include "analysis/allocator/allocation_history.hpp"
#include "analysis/allocator/allocator_model.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace gpudiag::detail {

enum class ReplayStart : std::uint8_t {
    /// The recorded state before the history: its segments, cache and live blocks.
    kRecordedState,
    /// Only the blocks live before the history, allocated afresh under the replay's settings
    /// (in address order) with an empty cache: settings compared on the history alone.
    kLiveBlocksOnly,
};

struct ReplayConfig {
    AllocatorSettings settings;
    AllocatorRules rules;  ///< the torch release's behaviours (allocator_versions.hpp)
    DeviceLimits limits;
    ReplayStart start = ReplayStart::kRecordedState;
    /// New segments get the addresses the recorded allocator got (the n-th cudaMalloc the n-th
    /// recorded address, when the sizes agree): needed to reproduce its choices exactly, as
    /// ties between equal free blocks go to the lowest address. Otherwise addresses are invented.
    bool recorded_addresses = false;
    /// Stop at the first allocation that fails where the recording's succeeded (the program
    /// would have died there).
    bool stop_at_new_oom = true;
    /// Keep the model's device actions (for compare()).
    bool log_actions = false;
};

struct ReplayOutcome {
    ModelStats stats;
    bool replayed_to_end = true;
    bool new_oom = false;         ///< an allocation the recording made failed here
    std::uint64_t oom_entry = 0;  ///< index of that operation in the history
    std::uint64_t oom_request = 0;
    std::uint64_t recorded_ooms = 0;
    std::uint64_t recorded_ooms_avoided = 0;  ///< recorded failures that fit here
    std::uint64_t allocations = 0;
    std::uint64_t at_recorded_address = 0;  ///< allocations placed where the recording put them
    std::uint64_t unknown_frees = 0;        ///< frees of blocks the replay does not hold
    std::vector<DeviceAction> actions;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> final_segments;
    std::string problem;  ///< why the start state could not be built
};

ReplayOutcome replay(const DeviceHistory& history, const ReplayConfig& config);

/// How a replay with recorded addresses compares with the recording.
struct ReproductionCheck {
    bool checked = false;  ///< the history recorded segments to compare with
    bool exact = false;
    std::uint64_t recorded_actions = 0;
    std::uint64_t modelled_actions = 0;
    std::uint64_t matching_actions = 0;  ///< equal kind, size and address, from the start
    bool peak_matches = false;
    bool final_segments_match = false;
    std::string first_difference;  ///< plain language; "" when exact
};

ReproductionCheck compare(const DeviceHistory& history, const ReplayOutcome& outcome);

}  // namespace gpudiag::detail
