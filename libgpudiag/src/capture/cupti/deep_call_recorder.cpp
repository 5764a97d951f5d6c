// SPDX-License-Identifier: Apache-2.0
// DeepCallRecorder. Physical accounting of virtual-memory mappings: a cuMemMap of `size` bytes
// at `offset` into an allocation of H bytes backs min(size, H - offset) physical bytes; a
// cuMemUnmap releases what its mapping backed. (The physical allocation itself is freed at
// cuMemRelease only once unmapped everywhere, so the bytes mapped now are the honest
// "memory in use" figure; an allocation mapped twice is counted twice, which CUDA permits but
// allocators such as PyTorch's expandable segments never do.)
#include "capture/cupti/deep_call_recorder.hpp"

#include "capture/cupti/api_whitelist.hpp"

#include "capture/platform/platform.hpp"

namespace gpudiag::detail {
namespace {
constexpr std::size_t kMaxTracked = 1u << 18;  // 256 Ki handles/mappings = 512 GiB in 2 MiB pages
}  // namespace

DeepCallRecorder::DeepCallRecorder(std::size_t capacity) : capacity_(capacity) {
    ring_.reserve(capacity_);
    draining_.reserve(capacity_);
}

void DeepCallRecorder::record(const DeepCall& call) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ring_.size() >= capacity_) {
        ++dropped_;
        return;
    }
    ring_.push_back(call);  // never reallocates: size < reserved capacity
}

std::uint64_t DeepCallRecorder::dropped() const noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    return dropped_;
}

void DeepCallRecorder::drain(EventQueue& out, StringTable& strings, const NoteSite& note_site,
                             const DeviceOf& device_of) noexcept {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        draining_.swap(ring_);  // both keep their reserved capacity
    }
    for (const DeepCall& c : draining_) {
        try {
            process(c, out, strings, note_site, device_of);
        } catch (...) {
            // Out of memory while symbolizing: this call loses its site, capture goes on.
        }
    }
    draining_.clear();
}

void DeepCallRecorder::process(const DeepCall& c, EventQueue& out, StringTable& strings,
                               const NoteSite& note_site, const DeviceOf& device_of) {
    const WhitelistedApi* api = find_whitelisted_api(c.domain, c.cbid);
    if (api == nullptr) return;
    StringId site = kNoString;
    if (c.frame_count > 0) {
        std::string text = symbolizer_.describe(c.frames.data(), c.frame_count);
        site = strings.intern(text);
    }
    Event e;
    e.process = platform::process_id();
    e.thread = c.thread;
    e.device = device_of ? device_of(c.context) : kNoDevice;
    e.start_ns = e.end_ns = c.time_ns;
    if (api->role == ApiRole::kAlloc) {
        // The decoder emits the memory record (and an out-of-memory marker from the failed
        // call's API record) with this site and size.
        if (note_site) note_site(c.correlation, site, c.size, c.context);
        return;
    }
    if (api->role != ApiRole::kVmm || c.return_code != 0) return;
    switch (c.cbid) {
        case kCbidCuMemCreate:
            note_created(c.handle, c.size,
                         c.location >= 0 && c.location < kNoDevice
                             ? static_cast<std::uint16_t>(c.location)
                             : e.device);
            break;
        case kCbidCuMemRelease:
            if (auto it = handles_.find(c.handle); it != handles_.end()) {
                if (own_memory_ != nullptr) {
                    own_memory_->add(it->second.device,
                                     -static_cast<std::int64_t>(it->second.bytes));
                }
                handles_.erase(it);
            }  // else made before capture started: never counted
            break;
        case kCbidCuMemMap: {
            std::uint64_t physical = c.size;
            if (auto it = handles_.find(c.handle); it != handles_.end()) {
                const std::uint64_t made = it->second.bytes;
                std::uint64_t available = made > c.offset ? made - c.offset : 0;
                physical = c.size < available ? c.size : available;
            }
            if (mappings_.size() >= kMaxTracked) mappings_.clear();
            mappings_[c.address] = Mapping{c.size, physical};
            mapped_physical_ += physical;
            e.kind = EventKind::kVmMap;
            e.flags = static_cast<std::uint8_t>(MemoryKind::kDevice);
            e.memory.address = c.address;
            e.memory.bytes = c.size;
            e.memory.aux = physical;
            e.memory.site = site;
            e.memory.extra = c.correlation;
            (void)out.try_push(e);
            if (note_site) note_site(c.correlation, site, c.size, c.context);
            break;
        }
        case kCbidCuMemUnmap: {
            // One cuMemUnmap may cover several adjacent mappings.
            std::uint64_t physical = 0;
            bool known = false;
            auto it = mappings_.lower_bound(c.address);
            while (it != mappings_.end() && it->first < c.address + c.size) {
                physical += it->second.physical;
                known = true;
                it = mappings_.erase(it);
            }
            if (!known) physical = c.size;  // mapped before capture started
            mapped_physical_ = mapped_physical_ > physical ? mapped_physical_ - physical : 0;
            e.kind = EventKind::kVmUnmap;
            e.flags = static_cast<std::uint8_t>(MemoryKind::kDevice);
            e.memory.address = c.address;
            e.memory.bytes = c.size;
            e.memory.aux = physical;
            e.memory.site = site;
            e.memory.extra = c.correlation;
            (void)out.try_push(e);
            break;
        }
        default: break;
    }
}

// Forgetting the handles (too many) leaves this process' own memory unknown rather than wrong.
void DeepCallRecorder::note_created(std::uint64_t handle, std::uint64_t bytes,
                                    std::uint16_t device) {
    if (handles_.size() >= kMaxTracked) {
        handles_.clear();
        if (own_memory_ != nullptr) own_memory_->forget_all();
    }
    handles_[handle] = Physical{bytes, device};
    if (own_memory_ != nullptr) own_memory_->add(device, static_cast<std::int64_t>(bytes));
}

}  // namespace gpudiag::detail
