// SPDX-License-Identifier: Apache-2.0
// OwnPidFinder.
#include "capture/nvml/own_pid_finder.hpp"

#include <algorithm>
#include <cstdlib>

namespace gpudiag::detail {
namespace {

// NVML lists a few processes per GPU; a shared GPU under a scheduler, a few dozen.
constexpr std::size_t kMaxListed = 64;
constexpr std::size_t kMaxVoters = 64;
// A match allows the context's growth (lazily loaded modules) and page rounding: 32 MiB, plus a
// sixteenth of the step (library workspaces allocated beside a large step).
constexpr std::int64_t kSlackBytes = std::int64_t{32} << 20;

std::int64_t tolerance(std::int64_t step) {
    return kSlackBytes + std::llabs(step) / 16;
}

const std::uint64_t* bytes_of(const std::vector<std::pair<std::uint32_t, std::uint64_t>>& listed,
                              std::uint32_t pid) {
    auto it =
        std::find_if(listed.begin(), listed.end(), [pid](const auto& p) { return p.first == pid; });
    return it == listed.end() ? nullptr : &it->second;
}

}  // namespace

void OwnPidFinder::observe(std::uint16_t device, const OwnDeviceMemory::Reading& own,
                           std::uint64_t now_ns, const std::vector<nvml::ProcessInfo>& listed) {
    DeviceState& s = devices_[device];
    if (!own.known) return;
    if (own.changes != s.changes) {  // moving: whatever waited may be torn
        s.changes = own.changes;
        s.unchanged_since_ns = now_ns;
        s.has_pending = false;
        return;
    }
    if (s.has_pending && now_ns >= s.pending_ns + kSettledAfterNs) settle(s);
    if (s.has_pending || now_ns < s.unchanged_since_ns + kSettledBeforeNs) return;
    s.pending.own = own.bytes;
    s.pending.listed.clear();
    for (const nvml::ProcessInfo& p : listed) {
        if (p.used_gpu_memory == nvml::kValueNotAvailable) continue;
        if (s.pending.listed.size() == kMaxListed) break;
        s.pending.listed.emplace_back(p.pid, p.used_gpu_memory);
    }
    s.pending_ns = now_ns;
    s.has_pending = true;
}

// A settled reading: judged against the last one if this process' memory took a large step
// since, and the anchor of the next step either way (fresher figures of the other processes).
void OwnPidFinder::settle(DeviceState& s) {
    s.has_pending = false;
    if (s.has_anchor) {
        const std::int64_t step = s.pending.own - s.anchor.own;
        if (step != 0 && std::llabs(step) < kMinStepBytes) return;  // measured from the anchor
        if (step != 0) judge(s.anchor, s.pending);
    }
    s.anchor = s.pending;
    s.has_anchor = true;
}

// The PIDs whose memory moved by this process' step; a PID listed only since then counts when
// this process had no memory then (its context may have come with its first allocations). A
// PID holding less than this process allocated is not this process.
void OwnPidFinder::judge(const Reading& from, const Reading& to) {
    const std::int64_t step = to.own - from.own;
    const std::int64_t tol = tolerance(step);
    std::uint32_t matched = 0;
    std::uint32_t match = 0;
    for (const auto& [pid, bytes] : to.listed) {
        const auto now = static_cast<std::int64_t>(bytes);
        if (now + tol < to.own) continue;
        const std::uint64_t* before = bytes_of(from.listed, pid);
        const bool fits = before != nullptr
                              ? std::llabs(now - static_cast<std::int64_t>(*before) - step) <= tol
                              : from.own == 0;
        if (!fits) continue;
        ++matched;
        match = pid;
    }
    if (matched == 1) count_match(match);
    if (matched > 1) ++ambiguous_;
}

void OwnPidFinder::count_match(std::uint32_t pid) {
    auto it =
        std::find_if(votes_.begin(), votes_.end(), [pid](const auto& v) { return v.first == pid; });
    if (it != votes_.end()) {
        ++it->second;
    } else if (votes_.size() < kMaxVoters) {
        votes_.emplace_back(pid, 1);
    }
}

std::uint32_t OwnPidFinder::pid() const noexcept {
    if (votes_.size() != 1 || votes_[0].second < kMatchesNeeded) return 0;
    return votes_[0].first;
}

std::uint32_t OwnPidFinder::matches() const noexcept {
    std::uint32_t n = 0;
    for (const auto& v : votes_) n += v.second;
    return n;
}

}  // namespace gpudiag::detail
