// SPDX-License-Identifier: Apache-2.0
// The allocation-site rule (see allocation_site.hpp) and its public entry point.
#include "core/allocation_site.hpp"

#include <gpudiag/memory.hpp>

#include <fmt/format.h>

#include <vector>

namespace gpudiag::detail {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
bool contains(std::string_view s, std::string_view part) {
    return s.find(part) != std::string_view::npos;
}
bool starts_with(std::string_view s, std::string_view prefix) {
    return s.rfind(prefix, 0) == 0;
}

// Frames of torch's own Python code (either path separator).
bool is_torch_python(std::string_view file) {
    return contains(file, "/torch/") || contains(file, "\\torch\\") || starts_with(file, "torch/");
}
// Installed packages and the standard library: code the program calls, not the program.
bool is_third_party(std::string_view file) {
    return contains(file, "site-packages") || contains(file, "dist-packages") ||
           contains(file, "<frozen ") || contains(file, "/lib/python");
}
// Native frames that only say "the allocator was called": the unwinder, the allocator itself.
bool is_allocator_internal(std::string_view name, std::string_view file) {
    return starts_with(name, "torch::unwind") || starts_with(name, "torch::CapturedTraceback") ||
           contains(name, "CUDACachingAllocator") || contains(file, "CUDACachingAllocator") ||
           contains(file, "memory_snapshot.cpp") || starts_with(name, "c10::") ||
           contains(name, "empty_strided") || contains(name, "empty_cuda") ||
           contains(name, "empty_generic") || starts_with(name, "at::") ||
           contains(name, "wrap_kernel_functor") || contains(name, "(anonymous namespace)");
}

// "dir/file.py" from a full path of either flavour.
std::string short_path(std::string_view file) {
    std::size_t last = file.find_last_of("/\\");
    if (last == std::string_view::npos) return std::string(file);
    std::size_t prev = last == 0 ? std::string_view::npos : file.find_last_of("/\\", last - 1);
    std::string out(file.substr(prev == std::string_view::npos ? 0 : prev + 1));
    for (char& c : out) {
        if (c == '\\') c = '/';
    }
    return out;
}

std::string format_frame(const FrameView& f) {
    std::string out =
        f.filename.empty() || f.filename == "??" ? std::string() : short_path(f.filename);
    if (!out.empty() && f.line > 0) out += fmt::format(":{}", f.line);
    if (!f.name.empty()) {
        if (!out.empty()) out += ' ';
        out.append(f.name.substr(0, 160));
    }
    return out;
}

}  // namespace

std::string allocation_site(std::span<const FrameView> frames) {
    const FrameView* user = nullptr;
    const FrameView* python = nullptr;
    const FrameView* native = nullptr;
    const FrameView* any_python = nullptr;
    for (const FrameView& f : frames) {
        if (ends_with(f.filename, ".py")) {
            if (any_python == nullptr) any_python = &f;
            if (is_torch_python(f.filename)) continue;
            if (python == nullptr) python = &f;
            if (!is_third_party(f.filename)) {
                user = &f;
                break;
            }
        } else if (native == nullptr && !f.name.empty() &&
                   !is_allocator_internal(f.name, f.filename)) {
            native = &f;
        }
    }
    // Only torch frames: the innermost Python one still says more than nothing.
    const FrameView* pick = user != nullptr     ? user
                            : python != nullptr ? python
                            : native != nullptr ? native
                                                : any_python;
    return pick != nullptr ? format_frame(*pick) : std::string();
}

std::string allocation_owner_site(std::span<const FrameView> frames) {
    for (const FrameView& f : frames) {
        if (ends_with(f.filename, ".py") && !is_torch_python(f.filename)) return format_frame(f);
    }
    return allocation_site(frames);
}

MemoryCategory allocation_category(std::span<const FrameView> frames) {
    // What the framework's own frames say, strongest role first: an optimizer step may run
    // modules, and a backward pass may rerun forward (activation checkpointing).
    bool optimizer = false, backward = false, parameters = false, forward = false;
    for (const FrameView& f : frames) {
        std::string_view file = f.filename;
        std::string_view name = f.name;
        const bool torch = is_torch_python(file);
        if ((torch && (contains(file, "optim/") || contains(file, "optim\\"))) ||
            name.rfind("torch::optim", 0) == 0) {
            optimizer = true;
        } else if (name.rfind("torch::autograd::Engine", 0) == 0 ||
                   contains(name, "torch::autograd::run_backward") ||
                   (torch && name == "backward" &&
                    (ends_with(file, "_tensor.py") || contains(file, "autograd")))) {
            backward = true;
        } else if (torch &&
                   (contains(file, "nn/parameter.py") || contains(file, "nn\\parameter.py") ||
                    contains(file, "nn/init.py") || contains(file, "nn\\init.py") ||
                    name == "reset_parameters" || name == "_load_from_state_dict" ||
                    (ends_with(file, "module.py") &&
                     (name == "_apply" || name == "to" || name == "cuda" || name == "convert")))) {
            parameters = true;
        } else if (torch && ends_with(file, "module.py") &&
                   (name == "_call_impl" || name == "_wrapped_call_impl")) {
            forward = true;
        }
    }
    return optimizer    ? MemoryCategory::kOptimizerState
           : backward   ? MemoryCategory::kGradients
           : parameters ? MemoryCategory::kParameters
           : forward    ? MemoryCategory::kActivations
                        : MemoryCategory::kOther;
}

std::string site_without_numbers(std::string_view site) {
    const auto digit = [&](std::size_t k) {
        return k < site.size() && site[k] >= '0' && site[k] <= '9';
    };
    std::string out;
    out.reserve(site.size());
    for (std::size_t i = 0; i < site.size();) {
        if (!digit(i)) {
            out += site[i++];
            continue;
        }
        const bool line = i > 0 && site[i - 1] == ':';
        std::size_t end = i;
        while (digit(end)) ++end;
        if (line) {
            out.append(site.substr(i, end - i));
        } else {
            out += '#';
        }
        i = end;
    }
    return out;
}

}  // namespace gpudiag::detail

namespace gpudiag {

std::string allocation_site(const std::vector<StackFrame>& frames) noexcept {
    try {
        std::vector<detail::FrameView> views;
        views.reserve(frames.size());
        for (const auto& f : frames) views.push_back({f.filename, f.name, f.line});
        return detail::allocation_site(views);
    } catch (...) {  // only std::bad_alloc can get here
        return {};
    }
}

}  // namespace gpudiag
