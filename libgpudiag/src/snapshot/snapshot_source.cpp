// SPDX-License-Identifier: Apache-2.0
// PLACEHOLDER (replaced by the torch snapshot importer): refuses every input with a clear message.
#include "core/event_source.hpp"

namespace gpudiag::detail {

Result<std::unique_ptr<EventSource>> open_snapshot_source(const std::string& path, const AnalysisOptions&) {
    return unsupported(path + ": the torch snapshot importer is not built in this version");
}

}  // namespace gpudiag::detail
