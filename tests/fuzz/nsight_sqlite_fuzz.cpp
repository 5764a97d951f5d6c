// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the Nsight Systems SQLite importer: any bytes opened as a database image
// (SQLite reports damage; the importer must turn it into a status), the events it reads analysed.
#include "importers/nsight/nsight_reader.hpp"

#include <gpudiag/analyze.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace {

class Collect final : public gpudiag::EventSink {
public:
    void begin(const gpudiag::SourceInfo& source, const gpudiag::StringTable&) override {
        info = source;
    }
    void consume(std::span<const gpudiag::Event> e) override {
        if (events.size() < (1u << 20)) events.insert(events.end(), e.begin(), e.end());
    }
    gpudiag::SourceInfo info;
    std::vector<gpudiag::Event> events;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace gpudiag;
    auto reader = detail::NsightReader::open_image(
        std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    if (!reader.is_ok()) return 0;
    StringTable strings;
    Collect sink;
    (void)(*reader)->read(sink, strings);
    for (auto window : {AnalysisWindow::kSteps, AnalysisWindow::kHta}) {
        AnalysisOptions options;
        options.window = window;
        auto report = analyze_events(sink.events, sink.info, strings, options);
        if (report.is_ok()) (void)render_json(*report);
    }
    return 0;
}
