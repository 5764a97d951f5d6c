// SPDX-License-Identifier: Apache-2.0
// HostActivityLog and the names of each StallActivity, one row each (checked when this compiles:
// see core/enum_check.hpp).
#include "analysis/timeline/host_activity.hpp"

#include "core/enum_check.hpp"
#include "support/format.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <iterator>
#include <map>
#include <utility>

namespace gpudiag::detail {
namespace {

struct Row {
    StallActivity activity;
    const char* key;
    const char* label;
};

constexpr Row kRows[] = {
    {StallActivity::kCompile, "compile", "JIT compilation (inside a compiler's ranges)"},
    {StallActivity::kLibrary, "library_setup",
     "first-call library setup (cuDNN / cuBLAS handles, plans, communicators)"},
    {StallActivity::kAllocator, "allocator_warmup",
     "allocator warm-up (cudaMalloc / cudaFree of a cold caching allocator)"},
    {StallActivity::kModuleLoad, "module_loading",
     "first kernel launches (CUDA context creation and kernel module loading)"},
    {StallActivity::kInput, "data_loading", "loading data (DataLoader)"},
    {StallActivity::kCheckpoint, "checkpoint", "saving or loading a checkpoint"},
    {StallActivity::kUnnamed, "unnamed",
     "host work the trace does not name (Python or framework code between API calls)"},
};
static_assert(one_row_per_enumerator<StallActivity>(kRows, [](const Row& r) { return r.activity; }),
              "kRows needs one row per StallActivity, in value order");
static_assert(std::size(kRows) == kStallActivities, "kStallActivities counts the activities");

const Row& row(StallActivity a) noexcept {
    const auto i = static_cast<std::size_t>(a);
    return i < std::size(kRows) ? kRows[i] : kRows[std::size(kRows) - 1];
}

bool has_ci(std::string_view text, std::string_view needle) noexcept {
    return std::search(text.begin(), text.end(), needle.begin(), needle.end(), [](char a, char b) {
               return std::tolower(static_cast<unsigned char>(a)) ==
                      std::tolower(static_cast<unsigned char>(b));
           }) != text.end();
}

bool has_any(std::string_view text, std::initializer_list<std::string_view> needles) noexcept {
    return std::any_of(needles.begin(), needles.end(),
                       [&](std::string_view n) { return has_ci(text, n); });
}

// What one call or range is, by its name; nullopt-like kUnnamed for none.
StallActivity classify(std::string_view name, bool api) noexcept {
    if (!api && is_compiler_range(name)) return StallActivity::kCompile;
    if (has_any(name, {"cudnn", "cublas", "cufft", "cusparse", "cusolver", "ncclCommInit",
                       "CreateHandle", "Handle"})) {
        return StallActivity::kLibrary;
    }
    if (api && is_allocator_call(name)) return StallActivity::kAllocator;
    if (api && has_any(name, {"LaunchKernel", "cuLaunch", "ModuleLoad", "LibraryLoad",
                              "GetFunction", "LaunchCooperative"})) {
        return StallActivity::kModuleLoad;
    }
    if (has_any(name, {"DataLoader", "dataloader"})) return StallActivity::kInput;
    if (!api && has_any(name, {"checkpoint", "save", "load_state_dict", "torch.load"})) {
        return StallActivity::kCheckpoint;
    }
    return StallActivity::kUnnamed;
}

// Union length of [start, end) spans.
std::uint64_t union_length(std::vector<std::pair<std::uint64_t, std::uint64_t>>& spans) {
    std::sort(spans.begin(), spans.end());
    std::uint64_t total = 0;
    std::uint64_t covered = 0;
    for (const auto& [s, e] : spans) {
        const std::uint64_t lo = std::max(s, covered);
        if (e > lo) {
            total += e - lo;
            covered = e;
        }
    }
    return total;
}

}  // namespace

bool is_compiler_range(std::string_view name) noexcept {
    if (has_any(name, {"nvrtc", "ptxas", "GpuLower", "SegmentCandidateFinder", "compile_fx",
                       "inductor", "TorchDynamo Compile", "_dynamo"})) {
        return true;
    }
    // "compile", but not "compiled": a compiled program running is no compilation.
    static constexpr std::string_view kWord = "compile";
    for (std::size_t i = 0; i + kWord.size() <= name.size(); ++i) {
        if (!has_ci(name.substr(i, kWord.size()), kWord)) continue;
        const std::size_t next = i + kWord.size();
        if (next == name.size() || std::tolower(static_cast<unsigned char>(name[next])) != 'd') {
            return true;
        }
    }
    return false;
}

bool is_allocator_call(std::string_view name) noexcept {
    return has_any(name, {"Malloc", "MemAlloc", "MemCreate", "HostAlloc", "cudaFree", "cuMemFree",
                          "MemMap", "MemRelease"});
}

const char* stall_activity_label(StallActivity a) noexcept {
    return row(a).label;
}

const char* stall_activity_key(StallActivity a) noexcept {
    return row(a).key;
}

void HostActivityLog::insert(Queue& q, const Item& item) {
    q.longest = std::max(q.longest, item.end - item.start);
    if (q.items.empty() || item.start >= q.items.back().start) {
        q.items.push_back(item);
        return;
    }
    auto pos = std::upper_bound(q.items.begin(), q.items.end(), item.start,
                                [](std::uint64_t t, const Item& i) { return t < i.start; });
    q.items.insert(pos, item);
}

void HostActivityLog::add(std::uint64_t start, std::uint64_t end, StringId name, bool api) {
    const Item item{start, std::max(start, end), name, api};
    if (head_.items.size() < kHeadItems && (recent_.items.empty() || start <= head_end_)) {
        insert(head_, item);
        head_end_ = std::max(head_end_, start);
        return;
    }
    insert(recent_, item);
    if (recent_.items.size() > kRecentItems) {
        dropped_before_ = std::max(dropped_before_, recent_.items.front().end);
        recent_.items.pop_front();
    }
}

void HostActivityLog::prune_before(std::uint64_t t) {
    while (!recent_.items.empty() && recent_.items.front().end < t) {
        dropped_before_ = std::max(dropped_before_, recent_.items.front().end);
        recent_.items.pop_front();
    }
}

HostActivity HostActivityLog::describe(std::uint64_t a, std::uint64_t b,
                                       const StringTable& strings) const {
    HostActivity out;
    out.start = a;
    out.end = b;
    if (b <= a) return out;
    out.complete = dropped_before_ <= a;
    std::array<std::vector<std::pair<std::uint64_t, std::uint64_t>>, kStallActivities> spans;
    std::map<std::pair<StringId, bool>, std::pair<std::uint64_t, std::uint64_t>> by_name;
    auto visit = [&](const Queue& q) {
        const std::uint64_t from = a > q.longest ? a - q.longest : 0;
        auto it = std::lower_bound(q.items.begin(), q.items.end(), from,
                                   [](const Item& i, std::uint64_t t) { return i.start < t; });
        for (; it != q.items.end() && it->start < b; ++it) {
            const std::uint64_t lo = std::max(it->start, a);
            const std::uint64_t hi = std::min(it->end, b);
            if (hi <= lo && !(it->api && it->start >= a)) continue;
            const std::string_view name = strings.lookup(it->name);
            const StallActivity act = classify(name, it->api);
            if (hi > lo) spans[static_cast<std::size_t>(act)].emplace_back(lo, hi);
            // A range around the whole stretch says only where it happened, not what filled it.
            const bool encloses = it->start <= a && it->end >= b && !it->api;
            if (encloses && act == StallActivity::kUnnamed) continue;
            auto& [count, ns] = by_name[{it->name, it->api}];
            ++count;
            ns += hi > lo ? hi - lo : 0;
        }
    };
    visit(head_);
    visit(recent_);
    std::size_t top = static_cast<std::size_t>(StallActivity::kUnnamed);
    std::uint64_t top_ns = 0;
    for (std::size_t i = 0; i < kStallActivities; ++i) {
        out.ns[i] = union_length(spans[i]);
        if (i != static_cast<std::size_t>(StallActivity::kUnnamed) && out.ns[i] > top_ns) {
            top = i;
            top_ns = out.ns[i];
        }
    }
    // Named by an activity only when it fills a quarter of the stretch: less leaves most of it
    // to whatever the trace does not name.
    out.top = top_ns * 4 >= b - a ? static_cast<StallActivity>(top) : StallActivity::kUnnamed;
    std::vector<std::pair<std::pair<std::uint64_t, std::uint64_t>, std::pair<StringId, bool>>>
        ranked;
    ranked.reserve(by_name.size());
    for (const auto& [key, cn] : by_name) ranked.emplace_back(cn, key);
    std::sort(ranked.begin(), ranked.end(), [](const auto& x, const auto& y) {
        return x.first.second != y.first.second ? x.first.second > y.first.second
                                                : x.first.first > y.first.first;
    });
    for (std::size_t i = 0; i < ranked.size() && out.named.size() < 6; ++i) {
        const auto& [cn, key] = ranked[i];
        out.named.push_back(fmt::format("{} x{} ({})", strings.lookup(key.first), cn.first,
                                        format_duration_ns(static_cast<double>(cn.second))));
    }
    return out;
}

}  // namespace gpudiag::detail
