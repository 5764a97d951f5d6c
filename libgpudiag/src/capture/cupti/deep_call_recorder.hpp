// SPDX-License-Identifier: Apache-2.0
// DeepCallRecorder: what deep mode's CUPTI callbacks capture on the application thread
// (allocation call stacks, virtual-memory call arguments), handed to the control thread.
//
// The callback side only copies a fixed-size record into a bounded ring (a full ring drops and
// counts). The control thread drains it: it symbolizes stacks into call sites for the activity
// decoder, and turns cuMemCreate/cuMemMap/cuMemUnmap/cuMemRelease into kVmMap/kVmUnmap events
// with physical bytes — the activity API's records carry no call arguments, so mapping sizes
// (PyTorch's expandable segments) are visible only here.
#pragma once

#include <gpudiag/event.hpp>
#include <gpudiag/string_table.hpp>

#include "capture/cupti/call_site_symbolizer.hpp"
#include "capture/platform/own_device_memory.hpp"
#include "core/event_queue.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace gpudiag::detail {

struct DeepCall {
    static constexpr std::size_t kMaxFrames = 24;
    std::uint64_t time_ns = 0;  ///< session clock, at API exit
    std::uint32_t correlation = 0;
    std::uint32_t cbid = 0;
    ApiDomain domain = ApiDomain::kUnknown;
    std::int32_t return_code = 0;
    std::uint32_t thread = 0;
    std::uint32_t context = 0;   ///< CUPTI's context id (records carry it as contextId)
    std::uint64_t size = 0;      ///< requested / mapped bytes
    std::uint64_t address = 0;   ///< mapped virtual address (cuMemMap/cuMemUnmap)
    std::int32_t location = -1;  ///< the device cuMemCreate placed the memory on, -1 unknown
    std::uint64_t offset = 0;    ///< offset into the physical allocation (cuMemMap)
    std::uint64_t handle = 0;    ///< CUmemGenericAllocationHandle
    std::uint32_t frame_count = 0;
    std::array<void*, kMaxFrames> frames{};
};

class DeepCallRecorder {
public:
    /// Receives (correlation, call site, requested bytes, context id) of each allocation call.
    using NoteSite = std::function<void(std::uint32_t, StringId, std::uint64_t, std::uint32_t)>;
    /// The device of a CUPTI context id, kNoDevice when unknown.
    using DeviceOf = std::function<std::uint16_t(std::uint32_t)>;

    explicit DeepCallRecorder(std::size_t capacity = 4096);

    /// Application thread: keeps `call` if there is room. Callback-safe: yes (short lock, no
    /// allocation: the ring is reserved up front).
    void record(const DeepCall& call) noexcept;

    /// Control thread: processes every recorded call. `note_site` receives allocation call
    /// sites, requested sizes and contexts; VM events go to `out`, on the device `device_of`
    /// gives for the call's context (without it, or unknown, the books cannot place them).
    void drain(EventQueue& out, StringTable& strings, const NoteSite& note_site,
               const DeviceOf& device_of = {}) noexcept;

    /// Keeps `own` at the physical memory cuMemCreate made and cuMemRelease has not released
    /// (CUPTI's memory records do not report it); none by default. Before drain().
    void count_own_memory(OwnDeviceMemory* own) noexcept { own_memory_ = own; }

    [[nodiscard]] std::uint64_t dropped() const noexcept;
    /// Physical bytes mapped through cuMemMap and not yet unmapped.
    [[nodiscard]] std::uint64_t mapped_physical_bytes() const noexcept { return mapped_physical_; }

private:
    void process(const DeepCall& c, EventQueue& out, StringTable& strings,
                 const NoteSite& note_site, const DeviceOf& device_of);
    void note_created(std::uint64_t handle, std::uint64_t bytes, std::uint16_t device);

    struct Mapping {
        std::uint64_t bytes;
        std::uint64_t physical;
    };
    mutable std::mutex mutex_;
    std::vector<DeepCall> ring_;  // capacity reserved up front
    std::vector<DeepCall> draining_;
    std::size_t capacity_;
    std::uint64_t dropped_ = 0;
    // Control thread only.
    CallSiteSymbolizer symbolizer_;
    struct Physical {
        std::uint64_t bytes;
        std::uint16_t device;
    };
    std::unordered_map<std::uint64_t, Physical> handles_;  // cuMemCreate's handle -> its memory
    OwnDeviceMemory* own_memory_ = nullptr;
    std::map<std::uint64_t, Mapping> mappings_;  // address -> mapping (ordered: unmap takes ranges)
    std::uint64_t mapped_physical_ = 0;
};

}  // namespace gpudiag::detail
