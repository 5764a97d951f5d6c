// SPDX-License-Identifier: Apache-2.0
// PLACEHOLDER (replaced by the recording reader): refuses every input with a clear message.
#include "core/event_source.hpp"

namespace gpudiag::detail {

Result<std::unique_ptr<EventSource>> open_recording_source(const std::string& path, const AnalysisOptions&) {
    return unsupported(path + ": the recording reader is not built in this version");
}

}  // namespace gpudiag::detail
