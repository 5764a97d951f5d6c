// SPDX-License-Identifier: Apache-2.0
// HostActivityLog: what the host was doing over a stretch of time, named by the API calls and host
// ranges inside it. The timeline analysis asks it about one-off stalls (the host time before the
// first GPU work, the longest host wait), which are named by what fills them: compilation,
// first-call library setup, allocator warm-up, module loading, data loading, a checkpoint.
//
// Bounded: the first kHeadItems items are kept for the whole run (the capture's start, where
// first-call stalls are), later ones in a sliding window the analysis prunes as the GPU moves on.
#pragma once

#include <gpudiag/event.hpp>
#include <gpudiag/string_table.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace gpudiag::detail {

/// What a stall's host time was mostly spent on, by the names of the calls and ranges in it.
enum class StallActivity : std::uint8_t {
    kCompile = 0,     ///< inside a compiler's ranges (nvFuser, Inductor/Dynamo, NVRTC, Triton)
    kLibrary = 1,     ///< first-call setup of a CUDA library (cuDNN, cuBLAS, cuFFT, NCCL init)
    kAllocator = 2,   ///< cudaMalloc / cudaFree: a cold caching allocator growing
    kModuleLoad = 3,  ///< inside kernel launch calls: the context and kernel modules loading
    kInput = 4,       ///< loading data (DataLoader)
    kCheckpoint = 5,  ///< saving or loading a checkpoint
    kUnnamed = 6,     ///< none of the above fills it: Python or framework work the trace leaves
                      ///< unnamed
};
inline constexpr std::size_t kStallActivities = 7;

/// A stretch of host time described.
struct HostActivity {
    std::uint64_t start = 0;
    std::uint64_t end = 0;
    std::array<std::uint64_t, kStallActivities> ns{};  ///< time inside each activity (union)
    StallActivity top = StallActivity::kUnnamed;
    std::vector<std::string> named;  ///< "cudaMalloc x168 (34 ms)", largest first, at most 6
    bool complete = true;            ///< false: the log had dropped items of this stretch
};

/// Whether a host range's name is a compiler phase: nvFuser ("FusionKernelRuntime::compile...",
/// "executor_utils::NVRTC"), Dynamo/Inductor ("_compile", "compile_fx", "TorchDynamo Compile"),
/// Triton ("compile"), NVRTC or ptxas. A name saying "compiled" is a compiled program running
/// ("CompiledFunction", "Torch-Compiled Region"), not compilation.
bool is_compiler_range(std::string_view name) noexcept;

/// Whether an API call grows or shrinks the device's memory pool: cudaMalloc, cudaFree,
/// cuMemAlloc, cuMemCreate and kin (a caching allocator calls them while it is cold).
bool is_allocator_call(std::string_view name) noexcept;

/// "JIT compilation (compiler ranges)", ...: what reports say the host was doing.
const char* stall_activity_label(StallActivity a) noexcept;
/// "compile", "library_setup", ...: stable keys (figure keys).
const char* stall_activity_key(StallActivity a) noexcept;

class HostActivityLog {
public:
    static constexpr std::size_t kHeadItems = 1 << 17;
    static constexpr std::size_t kRecentItems = 1 << 17;

    void add(std::uint64_t start, std::uint64_t end, StringId name, bool api);
    /// Drops later items that ended before `t` (the kept head stays).
    void prune_before(std::uint64_t t);
    /// What fills [a, b).
    [[nodiscard]] HostActivity describe(std::uint64_t a, std::uint64_t b,
                                        const StringTable& strings) const;

private:
    struct Item {
        std::uint64_t start;
        std::uint64_t end;
        StringId name;
        bool api;
    };
    struct Queue {
        std::deque<Item> items;  // sorted by start
        std::uint64_t longest = 0;
    };
    static void insert(Queue& q, const Item& item);

    Queue head_;
    Queue recent_;
    std::uint64_t head_end_ = 0;        // latest start in the head: later items go to recent_
    std::uint64_t dropped_before_ = 0;  // recent items that ended before this were dropped
};

}  // namespace gpudiag::detail
