// SPDX-License-Identifier: Apache-2.0
// The NVTX v3 injection entry point. NVTX_INJECTION64_PATH=/path/libgpudiag.so makes every NVTX
// instance (one per DSO that includes the nvtx3 headers: torch's _C, NCCL, user code) dlopen us
// on its first NVTX call and call this once; returning 0 would make it unload us and go no-op.
#include "capture/nvtx/nvtx_receiver.hpp"

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    const void* get_export_table) noexcept {
    return gpudiag::detail::NvtxReceiver::instance().install(get_export_table);
}
