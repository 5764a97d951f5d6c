// SPDX-License-Identifier: Apache-2.0
// The replay libcupti's parser: cuptiActivityGetNextRecord of the real libcupti 13 (it walks
// buffers without a driver), so the records the replay lays out are read by CUPTI's own code
// in the live path. The stub's parser (built renamed: live_replay.cmake) stands in where the
// real library does not load, and gpudiag_replay_parser() says which one ran.
#include <cupti.h>  // with cuptiActivityGetNextRecord renamed: declares the stub's parser
#include <dlfcn.h>

#undef cuptiActivityGetNextRecord

extern "C" {
CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid,
                                                CUpti_Activity** record);
const char* gpudiag_replay_parser();
}

namespace {

using NextRecord = CUptiResult(CUPTIAPI*)(uint8_t*, size_t, CUpti_Activity**);

struct RealParser {
    NextRecord next = nullptr;
    const char* path = "the stub's parser (the real libcupti did not load)";
};

const RealParser& real_parser() {
    static const RealParser parser = [] {
        RealParser p;
        if (GPUDIAG_REPLAY_REAL_CUPTI[0] == '\0') return p;  // none found at configure time
        void* handle = dlopen(GPUDIAG_REPLAY_REAL_CUPTI, RTLD_NOW | RTLD_LOCAL);
        if (handle != nullptr) {
            p.next = reinterpret_cast<NextRecord>(dlsym(handle, "cuptiActivityGetNextRecord"));
            if (p.next != nullptr) p.path = GPUDIAG_REPLAY_REAL_CUPTI;
        }
        return p;
    }();
    return parser;
}

}  // namespace

extern "C" CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid,
                                                           CUpti_Activity** record) {
    const RealParser& p = real_parser();
    return p.next != nullptr ? p.next(buffer, valid, record)
                             : gpudiag_stub_own_next_record(buffer, valid, record);
}

extern "C" const char* gpudiag_replay_parser() {
    return real_parser().path;
}
