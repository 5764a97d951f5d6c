// SPDX-License-Identifier: Apache-2.0
// Opening an input: the format is told by content (magic bytes, gzip peeked), not by extension,
// and each format's reader lives in its own folder here.
#pragma once

#include "core/event_source.hpp"
#include "importers/byte_stream.hpp"

#include <gpudiag/analyze.hpp>
#include <gpudiag/status.hpp>

#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace gpudiag::detail {

/// The format of uncompressed bytes from the start of an input (magic bytes; JSON told apart as
/// a gpudiag report or a trace); kUnknown when none matches. Callers peek through gzip first.
InputFormat classify_content(std::string_view head) noexcept;

/// Opens the right reader for `path`, telling its format first. Defined in
/// importers/open_source.cpp.
Result<std::unique_ptr<EventSource>> open_event_source(const std::string& path,
                                                       const AnalysisOptions& options);
/// Opens the reader of `format` for `path`, whose format is already known.
Result<std::unique_ptr<EventSource>> open_source_as(const std::string& path, InputFormat format,
                                                    const AnalysisOptions& options);

// One opener per format: importers/recording_source.cpp, kineto/, torch_snapshot/, nsight/.
Result<std::unique_ptr<EventSource>> open_recording_source(const std::string& path,
                                                           const AnalysisOptions& options);
Result<std::unique_ptr<EventSource>> open_kineto_source(const std::string& path,
                                                        const AnalysisOptions& options);
Result<std::unique_ptr<EventSource>> open_snapshot_source(const std::string& path,
                                                          const AnalysisOptions& options);
/// Opens the content of an input from its start (an archive member, say).
using StreamOpener = std::function<Result<std::unique_ptr<ByteStream>>()>;
/// A Kineto trace read through `opener` (kineto/kineto_source.cpp); `name` names it in reports.
Result<std::unique_ptr<EventSource>> open_kineto_stream_source(const std::string& name,
                                                               StreamOpener opener,
                                                               const AnalysisOptions& options);
Result<std::unique_ptr<EventSource>> open_nsight_source(const std::string& path,
                                                        const AnalysisOptions& options);
/// A PyTorch Flight Recorder dump, pickle or JSON (flight_recorder/flight_recorder_source.cpp).
Result<std::unique_ptr<EventSource>> open_flight_recorder_source(const std::string& path,
                                                                 const AnalysisOptions& options);

}  // namespace gpudiag::detail
