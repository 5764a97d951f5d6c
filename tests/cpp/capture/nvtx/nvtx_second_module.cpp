// SPDX-License-Identifier: Apache-2.0
// A second DSO with its own NVTX instance (as NCCL or cuDNN next to torch): NVTX initialises it
// separately, calling InitializeInjectionNvtx2 a second time.
#include <nvtx3/nvToolsExt.h>

extern "C" __attribute__((visibility("default"))) void second_module_ranges() {
    nvtxDomainHandle_t domain = nvtxDomainCreateA("second-module");
    nvtxEventAttributes_t a{};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = "second.work";
    nvtxDomainRangePushEx(domain, &a);
    nvtxDomainRangePop(domain);
}
