// SPDX-License-Identifier: Apache-2.0
// The EventSource for Nsight Systems SQLite exports.
#include "importers/nsight/nsight_reader.hpp"
#include "importers/open_source.hpp"

namespace gpudiag::detail {
namespace {

class NsightSource final : public EventSource {
public:
    explicit NsightSource(std::unique_ptr<NsightReader> reader) : reader_(std::move(reader)) {}

    Status run(EventSink& sink, StringTable& strings) override {
        return reader_->read(sink, strings);
    }

private:
    std::unique_ptr<NsightReader> reader_;
};

}  // namespace

Result<std::unique_ptr<EventSource>> open_nsight_source(const std::string& path,
                                                        const AnalysisOptions& options) {
    auto reader = NsightReader::open(path);
    if (!reader) return reader.status();
    if (options.progress) (*reader)->set_progress(options.progress);
    return std::unique_ptr<EventSource>(std::make_unique<NsightSource>(std::move(*reader)));
}

}  // namespace gpudiag::detail
