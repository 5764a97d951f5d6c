// SPDX-License-Identifier: Apache-2.0
// The EventSource for .gpudiag recordings: streams the file into the analysis pipeline.
#include <gpudiag/recording.hpp>

#include "importers/open_source.hpp"

namespace gpudiag::detail {
namespace {

class RecordingSource final : public EventSource {
public:
    RecordingSource(std::unique_ptr<RecordingReader> reader, const AnalysisOptions& options)
        : reader_(std::move(reader)) {
        if (options.progress) reader_->set_progress(options.progress);
    }

    Status run(EventSink& sink, StringTable& strings) override {
        return reader_->read(sink, strings);
    }

private:
    std::unique_ptr<RecordingReader> reader_;
};

}  // namespace

Result<std::unique_ptr<EventSource>> open_recording_source(const std::string& path,
                                                           const AnalysisOptions& options) {
    auto reader = std::make_unique<RecordingReader>();
    GPUDIAG_RETURN_IF_ERROR(reader->open(path));
    return std::unique_ptr<EventSource>(
        std::make_unique<RecordingSource>(std::move(reader), options));
}

}  // namespace gpudiag::detail
