// SPDX-License-Identifier: Apache-2.0
// An ordinary NVTX v3 program (header-only nvtx3, as torch builds it) run with
// NVTX_INJECTION64_PATH pointing at libgpudiag.so: checks that ranges, domains, registered and
// wide strings, marks and per-thread stacks reach gpudiag, and that every NVTX instance (this
// executable and a second DSO) installs gpudiag's handlers once.
// Usage: nvtx_inject_app            (expects injection)
//        nvtx_inject_app --absent   (NVTX_INJECTION64_PATH unset: expects nothing)
#include "capture/nvtx/nvtx_receiver.hpp"
#include "capture/test_event_queue.hpp"

#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

extern "C" void second_module_ranges();

namespace {

int failures = 0;

void check(bool ok, const char* what) {
    if (!ok) {
        std::fprintf(stderr, "FAILED: %s\n", what);
        ++failures;
    }
}

}  // namespace

int main(int argc, char** argv) {
    using gpudiag::EventKind;
    using gpudiag::RangeCategory;
    bool absent = argc > 1 && std::strcmp(argv[1], "--absent") == 0;
    gpudiag::test::TestEventQueue queue;
    gpudiag::StringTable strings;
    auto& rx = gpudiag::detail::NvtxReceiver::instance();
    check(rx.attach(queue, strings), "attach");

    // The first NVTX call of this executable's instance loads the injection library.
    nvtxRangePushA("outer");
    nvtxDomainHandle_t own = nvtxDomainCreateA("gpudiag");
    nvtxStringHandle_t registered = nvtxDomainRegisterStringA(own, "registered.phase");
    nvtxEventAttributes_t a{};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = registered;
    nvtxDomainRangePushEx(own, &a);
    nvtxDomainRangePop(own);
    nvtxRangePushW(L"wide\u00e9");
    nvtxRangePop();
    nvtxMarkA("a mark");
    nvtxRangeId_t id = nvtxRangeStartA("cross-thread");
    std::thread([&] {
        nvtxRangePushA("worker");
        nvtxRangePop();
        nvtxRangeEnd(id);
    }).join();
    nvtxRangePop();  // outer
    second_module_ranges();
    rx.detach();

    auto begins = queue.of_kind(EventKind::kRangeBegin);
    auto ends = queue.of_kind(EventKind::kRangeEnd);
    if (absent) {
        check(queue.events().empty(), "no events without NVTX_INJECTION64_PATH");
        check(rx.modules() == 0, "no NVTX instance initialised gpudiag");
    } else {
        check(rx.modules() == 2, "both NVTX instances (executable, second DSO) installed handlers");
        check(begins.size() == 5, "five pushed ranges");
        check(ends.size() == 5, "five popped ranges");
        bool outer = false, phase = false, wide = false, worker = false, second = false;
        for (const auto& e : begins) {
            std::string name(strings.lookup(e.range.name));
            outer |= name == "outer";
            phase |= name == "registered.phase" && e.range.category == RangeCategory::kPhase;
            wide |= name == "wide\xc3\xa9";
            worker |= name == "worker" && e.range.parent == 0;
            second |= name == "second.work" && e.range.category == RangeCategory::kGeneric;
        }
        check(outer, "outer range");
        check(phase, "registered string in the gpudiag domain is a phase");
        check(wide, "wide string converted to UTF-8");
        check(worker, "worker thread has its own stack");
        check(second, "second module's domain range");
        auto ranges = queue.of_kind(EventKind::kRange);
        check(ranges.size() == 1 && strings.lookup(ranges[0].range.name) == "cross-thread",
              "start/end range ended on another thread");
        auto marks = queue.of_kind(EventKind::kAnnotation);
        check(marks.size() == 1 && strings.lookup(marks[0].annotation.text) == "a mark", "mark");
    }
    if (failures == 0)
        std::printf("nvtx injection: %zu events, %u modules: OK\n", queue.events().size(),
                    rx.modules());
    return failures == 0 ? 0 : 1;
}
