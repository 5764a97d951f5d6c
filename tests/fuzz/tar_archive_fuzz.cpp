// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the tar reader (jobs shipped as .tar / .tar.gz): any bytes, plain or gzip,
// walked member by member with every member read to its end. Damage must come back as a status,
// member sizes must be honoured (a member yields exactly its size, or less when the archive is
// cut short), and nothing may allocate by a size the archive declares.
#include "importers/archive.hpp"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace gpudiag::detail;
    auto in = content_of(memory_stream(data, size));
    if (!in.is_ok()) return 0;
    TarReader tar(std::move(*in));
    char buf[4096];
    for (int members = 0; members < 64; ++members) {
        auto more = tar.next();
        if (!more.is_ok() || !*more) break;
        std::uint64_t got = 0;
        for (;;) {
            auto n = tar.member().read(buf, sizeof buf);
            if (!n.is_ok() || *n == 0) break;
            got += *n;
        }
        if (got > tar.size()) __builtin_trap();  // a member read past its declared size
    }
    return 0;
}
