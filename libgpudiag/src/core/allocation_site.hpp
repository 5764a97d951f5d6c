// SPDX-License-Identifier: Apache-2.0
// The allocation-site rule: which frame of a call stack names the place an allocation came from.
// The category rule beside it reads the same frames. One owner: the torch-snapshot importer, the
// public allocation_site() and, through it, the Python layer (the pytest plugin's leak sites) all
// name sites with it.
#pragma once

#include <gpudiag/event.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace gpudiag::detail {

/// One frame, innermost first, as torch records them ({filename, name, line}).
struct FrameView {
    std::string_view filename;
    std::string_view name;
    std::int64_t line = 0;
};

/// "dir/file.py:42 fn" for the innermost frame in the program's own Python code; failing that
/// the innermost Python frame outside torch (a library the program called), then the innermost
/// native frame that is not the allocator itself, then the innermost torch Python frame; "" when
/// no frame says anything.
std::string allocation_site(std::span<const FrameView> frames);

/// The code that asked for the memory, libraries included: the innermost Python frame outside
/// torch, whether the program's or an installed package's ("worker/cache_engine.py:83
/// _allocate_kv_cache" where allocation_site names the program line that built the engine);
/// allocation_site's answer when no such frame exists. Names the owner of a private pool.
std::string allocation_owner_site(std::span<const FrameView> frames);

/// A site with the numbers that vary between calls folded into '#', for a session past its cap on
/// distinct sites: "svc.cpp:88 bind request 40213" -> "svc.cpp:88 bind request #". A number
/// right after ':' is a line and is kept, so sites from different lines stay apart.
std::string site_without_numbers(std::string_view site);

/// What the framework's own frames say an allocation holds: made by torch.optim (optimizer
/// state), during the backward pass (gradients), by module setup or loading (parameters), during
/// a module's forward call (activations); kOther when they say nothing.
MemoryCategory allocation_category(std::span<const FrameView> frames);

}  // namespace gpudiag::detail
