// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for parse_report_json, which reads reports other processes wrote (saved
// --json files, the reports ranks send each other). Beyond "no crash", a report it accepts must
// survive the round trip: rendered again and re-read, it renders to the same text.
#include <gpudiag/report.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace gpudiag;
    auto report = parse_report_json(std::string_view(reinterpret_cast<const char*>(data), size));
    if (!report.is_ok()) return 0;
    (void)render_text(*report);
    (void)render_prometheus(*report);
    const std::string once = render_json(*report, true);
    auto again = parse_report_json(once);
    if (!again.is_ok() || render_json(*again, true) != once) __builtin_trap();
    return 0;
}
