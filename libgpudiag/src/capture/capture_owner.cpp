// SPDX-License-Identifier: Apache-2.0
// CaptureOwnership. Markers are found with dl_iterate_phdr and dlsym on each loaded object
// (dlsym on an RTLD_LOCAL library's own handle finds its symbols too). A copy inside an
// executable that does not export its dynamic symbols is invisible to the others; it still
// sees theirs, so whichever starts second among two visible ones is refused.
#include "capture/capture_owner.hpp"

#include "capture/platform/dynamic_library.hpp"
#include "capture/platform/platform.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

using OwnerMarker = std::atomic<std::uint64_t>;

/// The marker of this copy: 0 when free, else the id of the copy that claimed it.
extern "C" __attribute__((visibility("default"))) OwnerMarker gpudiag_capture_owner_v1;
OwnerMarker gpudiag_capture_owner_v1{0};

namespace gpudiag::detail {
namespace {

constexpr const char* kMarkerSymbol = "gpudiag_capture_owner_v1";

// This copy's id: the address of an object no other copy can interpose (the exported marker can
// be: a program exporting its own would bind every copy's references to one variable).
const char g_copy_identity = 0;
std::uint64_t my_id() {
    return reinterpret_cast<std::uintptr_t>(&g_copy_identity);
}

std::mutex g_mutex;
std::vector<OwnerMarker*> g_held;  // guarded by g_mutex

void collect(void* handle, std::vector<OwnerMarker*>& out) {
    if (handle == nullptr) return;
    if (void* marker = platform::find_symbol_address(handle, kMarkerSymbol)) {
        out.push_back(static_cast<OwnerMarker*>(marker));
    }
}

// Every marker in the process that this copy can see, its own first, deduplicated, in address
// order (the order every copy claims in).
std::vector<OwnerMarker*> visible_markers() {
    std::vector<OwnerMarker*> markers{&gpudiag_capture_owner_v1};
    collect(platform::program_handle(), markers);  // the program and the global scope
    for (const std::string& path : platform::mapped_libraries("")) {
        void* handle = platform::open_library(path.c_str(), platform::Open::kPeek);
        collect(handle, markers);
        platform::close_library(handle);  // the peek took a reference: give it back
    }
    std::sort(markers.begin(), markers.end());
    markers.erase(std::unique(markers.begin(), markers.end()), markers.end());
    return markers;
}

void release_held() {
    for (OwnerMarker* m : g_held) {
        std::uint64_t mine = my_id();
        m->compare_exchange_strong(mine, 0);
    }
    g_held.clear();
}

std::string owner_name(std::uint64_t owner) {
    std::string path = library_path_of(reinterpret_cast<const void*>(owner));
    return path.empty() ? std::string("unknown file") : path;
}

}  // namespace

Status claim_capture_ownership() noexcept {
    try {
        std::lock_guard<std::mutex> lock(g_mutex);
        for (OwnerMarker* m : visible_markers()) {
            std::uint64_t expected = 0;
            if (m->compare_exchange_strong(expected, my_id()) || expected == my_id()) {
                if (std::find(g_held.begin(), g_held.end(), m) == g_held.end()) g_held.push_back(m);
                continue;
            }
            release_held();
            return failed_precondition("another gpudiag copy in this process owns CUPTI capture (" +
                                       owner_name(expected) +
                                       "); capture through that copy's session, or run only one");
        }
        return Status::ok();
    } catch (...) {
        return internal_error("cupti_activity: out of memory while claiming capture");
    }
}

void release_capture_ownership() noexcept {
    try {
        std::lock_guard<std::mutex> lock(g_mutex);
        release_held();
    } catch (...) {
    }
}

}  // namespace gpudiag::detail
