// SPDX-License-Identifier: Apache-2.0
// A stand-in libcuda for tests: a CUDA 13.0 driver (GPUDIAG_STUB_CUDA_VERSION: another) that has
// not been initialised in this process (cuDeviceGetCount fails, as before cuInit), unless a test
// says otherwise.
#include <cstring>

#ifndef GPUDIAG_STUB_CUDA_VERSION
#    define GPUDIAG_STUB_CUDA_VERSION 13000
#endif

namespace {
int g_initialised = 0;
int g_context_active = 0;
}  // namespace

extern "C" {

int cuDriverGetVersion(int* version) {
    *version = GPUDIAG_STUB_CUDA_VERSION;
    return 0;
}
int cuDeviceGetCount(int* count) {
    if (g_initialised == 0) return 3;  // CUDA_ERROR_NOT_INITIALIZED
    *count = 1;
    return 0;
}
int cuDeviceGet(int* device, int ordinal) {
    if (g_initialised == 0 || ordinal != 0) return 101;  // CUDA_ERROR_INVALID_DEVICE
    *device = 0;
    return 0;
}
// CUDA ordinal 0 is NVML's second GPU (as with CUDA_VISIBLE_DEVICES=1).
int cuDeviceGetUuid_v2(unsigned char* uuid, int device) {
    if (device != 0) return 101;
    std::memset(uuid, 0x01, 16);
    return 0;
}

// The primary context is active once the program used the device (a test says when).
int cuDevicePrimaryCtxGetState(int device, unsigned* flags, int* active) {
    if (g_initialised == 0 || device != 0) return 101;
    *flags = 0;
    *active = g_context_active;
    return 0;
}

void gpudiag_stub_cuda_set_initialised(int initialised) {
    g_initialised = initialised;
}
void gpudiag_stub_cuda_set_context_active(int active) {
    g_context_active = active;
}

}  // extern "C"
