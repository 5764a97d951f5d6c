// SPDX-License-Identifier: Apache-2.0
// Which torch release's caching allocator a what-if follows, the behaviour changes between
// releases (each citing the allocator change that made it), and the settings that would fit but
// are unsafe or unsupported for a program.
//
// Release boundaries come from the merge date of each change and the release branch cuts of
// pytorch's release trackers: 2.12 cut 2026-04-15 (issue #180506), 2.13 the week of 2026-06-08
// (#186934), 2.14 2026-08-11 (#193034), 2.15 2026-10-05 (PR #196028). A change merged between
// two cuts is first in the later release.
#pragma once

#include <gpudiag/source_info.hpp>
#include <gpudiag/whatif.hpp>

#include "analysis/allocator/allocator_settings.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gpudiag::detail {

struct TorchVersion {
    int major = 0;
    int minor = 0;
    bool known = false;
};
/// "2.15.0+cu132", "2.15", "v2.3.1" -> {2, 15}; anything else: not known.
TorchVersion parse_torch_version(std::string_view text);
[[nodiscard]] inline bool at_least(TorchVersion v, int major, int minor) {
    return v.major > major || (v.major == major && v.minor >= minor);
}

/// The model's oldest and newest releases: the allocator sources read (torch 2.3 to 2.15).
inline constexpr TorchVersion kOldestModelled{2, 3, true};
inline constexpr TorchVersion kNewestModelled{2, 15, true};

/// Allocator behaviours that changed, or may change, between releases: switches of the model.
struct AllocatorRules {
    /// get_free_block() lets a free block inside an expandable segment serve any request,
    /// whatever max_split_size says (pytorch PR #193400, open: in no release up to 2.15).
    bool oversize_rules_skip_expandable = false;
    bool operator==(const AllocatorRules&) const = default;
};

/// One behaviour change of the allocator (or its snapshot) from torch 2.3 to 2.15.
struct VersionedRule {
    std::string_view name;
    std::string_view since;   ///< first release holding it; "" = none up to kNewestModelled
    std::string_view source;  ///< the change: repository, file, pull request, merge date
    std::string_view effect;  ///< what it moves, and how the model follows it
};
std::span<const VersionedRule> versioned_rules();

/// The release a what-if follows and where that came from.
struct ModelledVersion {
    TorchVersion recorded;  ///< what the input (or the caller) says; not known when silent
    TorchVersion modelled;
    std::string text;    ///< "2.15"
    std::string origin;  ///< "given", "the recording", "assumed"
    std::string note;    ///< why it was assumed or clamped; "" when taken as recorded
    AllocatorRules rules;
};
/// `given`: the caller's version ("" = from the input: a session's stack.framework_version, a
/// snapshot's keys for a lower bound; else the newest modelled release is assumed).
ModelledVersion select_version(const SourceInfo& info, const std::string& given);
AllocatorRules rules_for(TorchVersion v);

/// What a program's input shows that decides whether a setting is safe for it.
struct ProgramFacts {
    std::uint64_t ipc_handle_calls = 0;   ///< cudaIpcGetMemHandle / cuIpcGetMemHandle calls
    std::string ipc_site;                 ///< code behind legacy IPC (custom all-reduce), if named
    std::uint64_t graph_captures = 0;     ///< stream captures begun (API calls)
    std::uint64_t private_pools = 0;      ///< CUDA graph or MemPool pools holding segments
    std::uint64_t vmm_not_supported = 0;  ///< cuMem* calls that returned CUDA_ERROR_NOT_SUPPORTED
    /// The allocator ignored expandable_segments:True (its conf asked, its setting says off):
    /// torch built without the driver API for it (Windows, some ROCm builds).
    bool expandable_ignored = false;
};

/// The cautions for trying `settings` (a change from `base`) on a program with `facts` under
/// torch `version`: unsafe or unsupported here although it may fit.
std::vector<WhatIfCaution> cautions_for(const AllocatorSettings& settings,
                                        const AllocatorSettings& base, const ProgramFacts& facts,
                                        const ModelledVersion& version);
/// Why expandable_segments:True is unsupported for this program, with its source ("" when
/// nothing says so): what the OOM finding says instead of advising it.
std::string expandable_unsupported_reason(const ProgramFacts& facts,
                                          const ModelledVersion& version);

}  // namespace gpudiag::detail
