// SPDX-License-Identifier: Apache-2.0
// The reconciled ledger on live-like event sequences of a PyTorch job: the Python integration
// polls the allocator's totals while CUPTI reports every cudaMalloc, torch's own included, plus
// NCCL buffers, library workspaces, a stream-ordered pool, pinned host memory and NVML's figure
// for the process. Every line is checked; the same bytes are never counted twice.
#include "analysis/memory/memory_ledger.hpp"
#include "memory_test_events.hpp"

#include <gpudiag/analyze.hpp>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpudiag::detail {
namespace {

using namespace gpudiag::testing;

Event counter(std::uint64_t t, CounterKind kind, std::uint64_t bytes, std::uint16_t device = 0) {
    Event e;
    e.kind = EventKind::kCounter;
    e.device = device;
    e.start_ns = e.end_ns = t;
    e.counter.counter = kind;
    e.counter.value = static_cast<double>(bytes);
    return e;
}

Event pinned(EventKind kind, std::uint64_t t, std::uint64_t address, std::uint64_t bytes) {
    return mem(kind, t, address, bytes, kNoString, 0,
               static_cast<std::uint8_t>(MemoryKind::kPinned));
}

std::uint64_t owner_line(const LedgerTotals& t, MemoryOwner o) {
    return t.outside_by_owner[static_cast<std::size_t>(o)];
}

// What the process holds, as CUPTI and NVML see it: a 500 MiB CUDA context (NVML only), torch's
// 2 GiB then 1 GiB segments, NCCL's three 128 MiB buffers.
constexpr std::uint64_t kContext = 500 * kMiB;
constexpr std::uint64_t kNccl = 3 * 128 * kMiB;

// Live PyTorch with CUPTI outside deep mode: no call sites at all. torch's cudaMalloc calls and
// NCCL's look the same; the allocator's polled reserved bytes are matched against them.
TEST(Reconcile, PolledTotalsAndCuptiWithoutSitesCountOnce) {
    MemoryLedger l;
    std::uint64_t t = 1000;
    l.apply(mem(EventKind::kDeviceAlloc, t += 10, 0x7f0000000000, 2 * kGiB));  // torch segment
    for (std::uint64_t i = 0; i < 3; ++i) {
        l.apply(mem(EventKind::kDeviceAlloc, t += 10, 0x7e0000000000 + i * 128 * kMiB,
                    128 * kMiB));  // NCCL
    }
    l.apply(pinned(EventKind::kDeviceAlloc, t += 10, 0x5000000, 256 * kMiB));  // pin_memory=True
    l.apply(counter(t += 10, CounterKind::kFrameworkReservedBytes, 2 * kGiB));
    l.apply(counter(t += 10, CounterKind::kFrameworkAllocatedBytes, 1536 * kMiB));
    l.apply(counter(t += 10, CounterKind::kFrameworkInactiveSplitBytes, 100 * kMiB));
    LedgerTotals x = l.totals(0);
    EXPECT_EQ(x.reserved, 2 * kGiB);
    EXPECT_EQ(x.allocated_rounded, 1536 * kMiB);
    EXPECT_EQ(x.framework_attributed, 2 * kGiB);
    EXPECT_EQ(x.outside(), kNccl);
    EXPECT_EQ(owner_line(x, MemoryOwner::kNoSite), kNccl);
    EXPECT_EQ(x.used(), 2 * kGiB + kNccl);   // not 4 GiB + NCCL: torch's cudaMalloc counted once
    EXPECT_EQ(l.pinned_host(), 256 * kMiB);  // host memory: its own line, not device memory
    EXPECT_TRUE(l.pinned_host_seen());

    // torch maps another 1 GiB segment before the next poll: the total held is right at once
    // (the driver saw it), and the split settles when the allocator's total catches up.
    l.apply(mem(EventKind::kDeviceAlloc, t += 10, 0x7f0080000000, kGiB));
    x = l.totals(0);
    EXPECT_EQ(x.used(), 3 * kGiB + kNccl);
    l.apply(counter(t += 10, CounterKind::kFrameworkReservedBytes, 3 * kGiB));
    x = l.totals(0);
    EXPECT_EQ(x.reserved, 3 * kGiB);
    EXPECT_EQ(x.outside(), kNccl);
    EXPECT_EQ(x.used(), 3 * kGiB + kNccl);

    // NVML counts the CUDA context too: it is what no event explains.
    l.apply(counter(t += 10, CounterKind::kProcessMemoryUsedBytes, kContext + 3 * kGiB + kNccl));
    x = l.totals(0);
    EXPECT_EQ(x.process_used, kContext + 3 * kGiB + kNccl);
    EXPECT_EQ(x.unattributed(), kContext);

    // A free of torch's segment (empty_cache) moves reserved when the poll says so.
    l.apply(mem(EventKind::kDeviceFree, t += 10, 0x7f0080000000, 0));
    l.apply(counter(t += 10, CounterKind::kFrameworkReservedBytes, 2 * kGiB));
    x = l.totals(0);
    EXPECT_EQ(x.reserved, 2 * kGiB);
    EXPECT_EQ(x.outside(), kNccl);
    l.apply(pinned(EventKind::kDeviceFree, t += 10, 0x5000000, 0));
    EXPECT_EQ(l.pinned_host(), 0u);
    EXPECT_EQ(l.pinned_host_peak(), 256 * kMiB);
    EXPECT_EQ(l.unmatched_frees(), 0u);
}

// The same job in deep mode: every driver allocation has its call site, so each is attributed to
// the library that asked for it.
TEST(Reconcile, CallSitesNameTheOwnerOfEachDriverAllocation) {
    StringTable strings;
    MemoryLedger l;
    l.set_strings(&strings);
    StringId torch = strings.intern(
        "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc+0x1a "
        "(libc10_cuda.so) "
        "< at::native::empty_cuda+0x3c (libtorch_cuda.so)");
    StringId nccl = strings.intern(
        "ncclCommInitRank+0x88 (libnccl.so.2) < c10d::ProcessGroupNCCL::getNCCLComm "
        "(libtorch_cuda.so)");
    StringId cublas =
        strings.intern("cublasLtMatmul+0x120 (libcublasLt.so.12) < mylib::gemm (libmylib.so)");
    StringId cudnn = strings.intern("cudnnConvolutionForward+0x40 (libcudnn_cnn.so.9)");
    StringId other = strings.intern("MyArena::grow+0x10 (libmyarena.so) < main (service)");
    std::uint64_t t = 1000;
    l.apply(mem(EventKind::kDeviceAlloc, t += 10, 0x7f0000000000, 2 * kGiB, torch));
    l.apply(mem(EventKind::kDeviceAlloc, t += 10, 0x7f0080000000, kGiB, torch));
    for (std::uint64_t i = 0; i < 3; ++i) {
        l.apply(mem(EventKind::kDeviceAlloc, t += 10, 0x7e0000000000 + i * 128 * kMiB, 128 * kMiB,
                    nccl));
    }
    l.apply(mem(EventKind::kDeviceAlloc, t += 10, 0x7d0000000000, 32 * kMiB, cublas));
    l.apply(mem(EventKind::kDeviceAlloc, t += 10, 0x7d0010000000, 64 * kMiB, cudnn));
    l.apply(mem(EventKind::kDeviceAlloc, t += 10, 0x7c0000000000, 200 * kMiB, other));
    l.apply(mem(EventKind::kPoolAlloc, t += 10, 0x7b0000000000, 100 * kMiB));  // cudaMallocAsync
    // torch's own figure lags one segment behind: the call sites still say whose the bytes are.
    l.apply(counter(t += 10, CounterKind::kFrameworkReservedBytes, 2 * kGiB));
    LedgerTotals x = l.totals(0);
    EXPECT_EQ(x.reserved, 3 * kGiB);
    EXPECT_EQ(x.framework_attributed, 3 * kGiB);
    EXPECT_EQ(owner_line(x, MemoryOwner::kFramework), 0u);
    EXPECT_EQ(owner_line(x, MemoryOwner::kNccl), kNccl);
    EXPECT_EQ(owner_line(x, MemoryOwner::kCublas), 32 * kMiB);
    EXPECT_EQ(owner_line(x, MemoryOwner::kCudnn), 64 * kMiB);
    EXPECT_EQ(owner_line(x, MemoryOwner::kOther), 200 * kMiB);
    EXPECT_EQ(owner_line(x, MemoryOwner::kStreamPool), 100 * kMiB);
    EXPECT_EQ(owner_line(x, MemoryOwner::kNoSite), 0u);
    EXPECT_EQ(x.outside(), kNccl + 32 * kMiB + 64 * kMiB + 200 * kMiB + 100 * kMiB);
    EXPECT_EQ(x.used(), 3 * kGiB + x.outside());
    // Sites of the outside memory are kept for growth and peak attribution; torch's are not.
    bool nccl_site = false;
    for (const auto& u : l.sites(0)) {
        if (u.driver && u.site == nccl)
            nccl_site = u.live_bytes == static_cast<std::int64_t>(kNccl);
        EXPECT_FALSE(u.driver && u.site == torch && u.live_bytes > 0)
            << "framework bytes are not outside";
    }
    EXPECT_TRUE(nccl_site);
}

// With the allocator's own segment events (a replayed trace), each driver allocation that starts
// where a segment starts is that segment's store, whichever of the two arrives first.
TEST(Reconcile, SegmentEventsMatchTheirDriverAllocationsInEitherOrder) {
    MemoryLedger l;
    std::uint64_t t = 1000;
    l.apply(mem(EventKind::kDeviceAlloc, t += 10, 0x7f0000000000, 2 * kGiB));  // CUPTI first
    l.apply(mem(EventKind::kSegmentAlloc, t += 10, 0x7f0000000000, 2 * kGiB));
    l.apply(mem(EventKind::kSegmentAlloc, t += 10, 0x7f0080000000, kGiB));  // allocator first
    l.apply(mem(EventKind::kDeviceAlloc, t += 10, 0x7f0080000000, kGiB));
    l.apply(mem(EventKind::kDeviceAlloc, t += 10, 0x7e0000000000, kNccl));  // NCCL
    l.apply(mem(EventKind::kBlockAlloc, t += 10, 0x7f0000000000, kGiB));
    // A polled total alongside does not replace the segments' sum.
    l.apply(counter(t += 10, CounterKind::kFrameworkReservedBytes, 2 * kGiB));
    LedgerTotals x = l.totals(0);
    EXPECT_EQ(x.reserved, 3 * kGiB);
    EXPECT_EQ(x.framework_attributed, 0u);
    EXPECT_EQ(x.outside(), kNccl);
    EXPECT_EQ(x.used(), 3 * kGiB + kNccl);
    l.apply(mem(EventKind::kSegmentFree, t += 10, 0x7f0080000000, kGiB));
    l.apply(mem(EventKind::kDeviceFree, t += 10, 0x7f0080000000, 0));
    x = l.totals(0);
    EXPECT_EQ(x.reserved, 2 * kGiB);
    EXPECT_EQ(x.outside(), kNccl);
    EXPECT_EQ(l.unmatched_frees(), 0u);
}

// The whole pipeline on the non-deep sequence with a watch at 4 GiB of device memory in use: the
// job holds 3.4 GiB (plus its context per NVML: 3.9 GiB), so nothing fires, no memory is called
// "outside the framework" beyond NCCL's, and the report's ledger has every line.
TEST(Reconcile, ReportOfALiveLikeJobHasEveryLineAndNoDoubleCount) {
    std::vector<Event> ev;
    std::uint64_t t = 1000;
    ev.push_back(mem(EventKind::kDeviceAlloc, t += 10, 0x7f0000000000, 3 * kGiB));
    ev.push_back(mem(EventKind::kDeviceAlloc, t += 10, 0x7e0000000000, kNccl));
    ev.push_back(pinned(EventKind::kDeviceAlloc, t += 10, 0x5000000, 256 * kMiB));
    for (std::uint64_t s = 0; s < 10; ++s) {
        ev.push_back(step(EventKind::kStepBegin, t += 1000, s));
        ev.push_back(counter(t += 10, CounterKind::kFrameworkReservedBytes, 3 * kGiB));
        ev.push_back(
            counter(t += 10, CounterKind::kFrameworkAllocatedBytes, 2 * kGiB + s % 2 * 256 * kMiB));
        ev.push_back(
            counter(t += 10, CounterKind::kProcessMemoryUsedBytes, kContext + 3 * kGiB + kNccl));
        ev.push_back(step(EventKind::kStepEnd, t += 1000, s));
    }
    SourceInfo info;
    info.devices.push_back(DeviceInfo{0, "sim", 80 * kGiB, ""});
    StringTable strings;
    auto r = analyze_events(ev, info, strings);
    ASSERT_TRUE(r.is_ok());
    EXPECT_EQ(r->finding("memory_outside_framework"), nullptr) << render_text(*r);
    EXPECT_EQ(r->finding("memory_leak"), nullptr) << render_text(*r);
    const Section* s = r->section("memory");
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->figure("outside_framework_bytes")->value, static_cast<double>(kNccl));
    EXPECT_EQ(s->figure("framework_driver_bytes")->value, static_cast<double>(3 * kGiB));
    EXPECT_EQ(s->figure("unattributed_bytes")->value, static_cast<double>(kContext));
    EXPECT_EQ(s->figure("pinned_host_bytes")->value, static_cast<double>(256 * kMiB));
    EXPECT_EQ(s->figure("peak_used_bytes")->value, static_cast<double>(3 * kGiB + kNccl));
    const Table* ledger = nullptr;
    for (const auto& t2 : s->tables) {
        if (t2.id == "ledger") ledger = &t2;
    }
    ASSERT_NE(ledger, nullptr);
    std::vector<std::string> lines;
    for (const auto& row : ledger->rows) lines.push_back(std::get<std::string>(row.front()));
    auto has = [&](const std::string& words) {
        for (const auto& l : lines) {
            if (l.find(words) != std::string::npos) return true;
        }
        return false;
    };
    EXPECT_TRUE(has("framework: allocated"));
    EXPECT_TRUE(has("framework: reserved"));
    EXPECT_TRUE(has("matched to it"));
    EXPECT_TRUE(has("no call site"));
    EXPECT_TRUE(has("NVML: the process"));
    EXPECT_TRUE(has("CUDA context"));
    EXPECT_TRUE(has("pinned host"));

    // The same books with a watch: device used never reaches 4 GiB.
    MemoryLedger l;
    int fired = 0;
    MemoryWatch w;
    w.metric = MemoryMetric::kDeviceUsed;
    w.level_bytes = 4 * kGiB;
    l.add_watch(w, [&](const MemoryWatchCrossing&) { ++fired; });
    l.apply(ev);
    EXPECT_EQ(fired, 0);
}

}  // namespace
}  // namespace gpudiag::detail
