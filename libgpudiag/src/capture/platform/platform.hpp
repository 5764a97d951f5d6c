// SPDX-License-Identifier: Apache-2.0
// The platform seam of capture: every facility of the operating system (and of its C++ ABI) that
// capture uses, declared here and nowhere else, each with its contract. One implementation per
// system: platform_linux.cpp. Capture code calls these instead of <dlfcn.h>, <link.h>,
// <execinfo.h>, <cxxabi.h>, getpid or gettid, so that a port is one new file.
//
// Not here, because they are one implementation shared with the rest of the library:
// * clocks: core/clock.hpp (monotonic_now_ns is the session clock, realtime_now_ns CUPTI's base);
// * threads: std::thread (capture's two threads, the NVML sampler and the CUPTI control loop).
//
// Contracts name what is safe inside a CUDA or CUPTI callback ("callback-safe"): no lock, no
// allocation, no loading of libraries.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpudiag::detail::platform {

// ---------------------------------------------------------------- dynamic libraries

/// How open_library treats the library.
enum class Open : std::uint8_t {
    kLoad,      ///< map it if it is not mapped yet; bind every symbol now, keep them private
    kIfMapped,  ///< only a library already mapped (null otherwise); binding as kLoad
    /// Only a library already mapped, lazily bound: to look up one symbol in any mapped object
    /// without binding the rest of it. Give the reference back with close_library.
    kPeek,
};

/// A handle on the library `name_or_path` (a file name searched as the loader searches, or a
/// path), or null with the reason in library_error(). Handles from kLoad and kIfMapped are never
/// closed: other threads may be inside the library. Callback-safe: no.
void* open_library(const char* name_or_path, Open how) noexcept;
/// The program and the libraries of the global scope, as one handle. Callback-safe: no.
void* program_handle() noexcept;
/// Gives back the reference a kPeek open took. Callback-safe: no.
void close_library(void* handle) noexcept;
/// Why the last open_library on this thread failed ("unknown error" when the system says
/// nothing). Callback-safe: no.
std::string library_error();

/// The address of `name` in the library (null when absent or `handle` is null).
/// Callback-safe: no.
void* find_symbol_address(void* handle, const char* name) noexcept;
/// The address of `name` at symbol version `version` ("libcupti.so.12"); a library without
/// symbol versions answers every version. Callback-safe: no.
void* find_versioned_symbol(void* handle, const char* name, const char* version) noexcept;

/// The file the loader mapped for `handle` (a bare SONAME becomes its full path); `fallback`
/// when it cannot tell. Callback-safe: no.
std::string library_file(void* handle, const std::string& fallback);
/// Paths of the libraries mapped into this process whose file name starts with `prefix`, in load
/// order ("" lists them all). Thread-safety: safe. Callback-safe: no (takes the loader lock).
std::vector<std::string> mapped_libraries(const std::string& prefix) noexcept;
/// How many objects this process has ever mapped: it changes whenever the process may have more
/// libraries to offer. Thread-safety: safe. Callback-safe: no.
std::uint64_t objects_ever_mapped() noexcept;

/// What the loader knows about a code or data address.
struct AddressInfo {
    std::string_view file;         ///< the object that holds it ("" when unknown)
    const char* symbol = nullptr;  ///< the nearest exported symbol below it, mangled
    const void* symbol_start = nullptr;
    const void* file_base = nullptr;  ///< where `file` is mapped
};
/// False when no mapped object holds `address`. The views live as long as the object stays
/// mapped. Callback-safe: no.
bool describe_address(const void* address, AddressInfo& out) noexcept;
/// `symbol` demangled ("" when it is not a mangled C++ name). Callback-safe: no (allocates).
std::string demangle(const char* symbol);

// ---------------------------------------------------------------- process and threads

/// This process' id as the system names it here. Callback-safe: yes.
std::uint32_t process_id() noexcept;
/// Every id this process has in the PID namespaces the system shows it: process_id(), then the
/// NSpid line's (outermost first). Inside a container NVML lists processes by their host PID.
/// Callback-safe: no.
std::vector<std::uint32_t> process_ids() noexcept;
/// The Linux form behind process_ids(): the PIDs of the NSpid line of /proc/<pid>/status
/// ("NSpid:\t4242\t17", outermost first); empty when the line is missing. Exposed for tests.
std::vector<std::uint32_t> parse_nspid(const std::string& status);
/// The calling thread's system id (what gdb and /proc show). Callback-safe: yes (read once per
/// thread, then cached).
std::uint32_t thread_id() noexcept;
/// Return addresses of the calling thread's stack, innermost first, into `frames`; how many.
/// Callback-safe: yes once warm_stack_walk() ran (the first walk may load the unwinder).
int stack_frames(void** frames, int capacity) noexcept;
/// Loads the unwinder now, so that stack_frames() inside a callback loads nothing.
void warm_stack_walk() noexcept;

}  // namespace gpudiag::detail::platform
