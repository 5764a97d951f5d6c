// SPDX-License-Identifier: Apache-2.0
// NvtxReceiver: NVTX v3 ranges and marks, received through gpudiag's own NVTX injection
// (NVTX_INJECTION64_PATH=libgpudiag.so -> InitializeInjectionNvtx2), turned into events without
// CUPTI: torch.cuda.nvtx ranges, NCCL's and cuDNN's domains, the user's own.
//
//   nvtxRangePush/Pop, nvtxDomainRangePush/Pop -> kRangeBegin / kRangeEnd (same range id; one
//                                                 stack per thread and domain)
//   nvtxRangeStart/End (may end on another thread) -> one kRange when it ends
//   nvtxMark                                     -> kAnnotation
// Category kPhase for ranges in gpudiag's own domain ("gpudiag"), kGeneric otherwise.
//
// Hot path: no lock, no allocation after a thread's first calls; names are interned once per
// distinct text per thread (by content: torch passes the buffer of a temporary string, so the
// same pointer carries different texts). Events go to the attached session's queue; with no
// session attached the handlers only count.
#pragma once

#include <gpudiag/event.hpp>
#include <gpudiag/export.hpp>
#include <gpudiag/string_table.hpp>

#include "core/event_queue.hpp"

#include <cstdint>
#include <string_view>

namespace gpudiag::detail {

class GPUDIAG_API NvtxReceiver {
public:
    /// The process-wide receiver (NVTX tables are process-wide function pointers).
    static NvtxReceiver& instance() noexcept;

    /// Sends ranges to `out`, interning into `strings`, until detach(). False when another
    /// session is attached. Thread-safety: safe.
    bool attach(EventQueue& out, StringTable& strings) noexcept;
    /// Stops sending; returns once no handler still uses the queue or the table.
    void detach() noexcept;

    /// Installs the handlers into one NVTX instance (one per DSO using NVTX). Returns 1 on
    /// success, 0 when the export table is unusable (NVTX then unloads us and goes no-op).
    /// Idempotent per instance. Thread-safety: safe.
    int install(const void* get_export_table) noexcept;

    /// NVTX instances (DSOs) that installed our handlers.
    [[nodiscard]] std::uint32_t modules() const noexcept;
    /// Handler calls, and ranges lost here (stack deeper than tracked, tables full); a full
    /// queue counts its own refusals.
    [[nodiscard]] std::uint64_t calls() const noexcept;
    [[nodiscard]] std::uint64_t dropped() const noexcept;

    // The handlers' logic with plain types (the NVTX-typed entry points forward here; tests and
    // benchmarks call these directly). `domain` 0 is NVTX's default domain.
    int push(std::uint32_t domain, std::string_view name) noexcept;
    int pop(std::uint32_t domain) noexcept;
    std::uint64_t start(std::uint32_t domain, std::string_view name) noexcept;
    void end(std::uint64_t id) noexcept;
    void mark(std::uint32_t domain, std::string_view name) noexcept;
    /// Registers a domain by name; returns its handle value (0 on overflow: default domain).
    std::uint32_t create_domain(std::string_view name) noexcept;
    /// Registers a string; returns its handle value (0 on overflow).
    std::uintptr_t register_string(std::string_view text) noexcept;
    /// The text of a registered string handle ("" when unknown).
    [[nodiscard]] std::string_view registered_string(std::uintptr_t handle) const noexcept;

    struct Impl;

private:
    NvtxReceiver();
    Impl* impl_;  // process lifetime: NVTX tables keep pointing at our handlers
};

}  // namespace gpudiag::detail
